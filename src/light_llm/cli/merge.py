"""``light-llm merge``: fold a LoRA run's adapters into its base's weights, W' = W + (α/r) B A
(:func:`light_llm.nn.lora.merge_lora`), and write a plain checkpoint."""

from __future__ import annotations

import argparse

from light_llm.cli.model_flags import folder_to_folder_parser

DESCRIPTION = """\
Fold the LoRA adapters of a fine-tuning run into the weights of the model they adapt,
W' = W + (alpha/r) B A for every adapted layer (Hu et al. 2021), and write the result as a
plain light-llm checkpoint: as fast as the base, loadable without it, exportable with
light-llm export. The base must still be the one the adapters were trained on (its
checksum is checked).
"""

EXAMPLES = """\
examples:
  light-llm train --init-from out-light-llm --data hamlet.txt --lora-rank 8 --out out-lora
  light-llm merge --checkpoint out-lora --out hamlet-merged
  light-llm generate --checkpoint hamlet-merged --prompt "HAMLET:"
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = folder_to_folder_parser(
        subparsers,
        "merge",
        "fold a LoRA run's adapters into the weights: a plain checkpoint",
        DESCRIPTION,
        EXAMPLES,
        "a LoRA run's checkpoint or training output folder",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from light_llm.checkpoints import inspect_folder, load, load_tokenizer, save
    from light_llm.checkpoints.folder import check_replaceable
    from light_llm.checkpoints.lora import read_lora_config
    from light_llm.errors import CheckpointError
    from light_llm.nn.lora import merge_lora

    folder = inspect_folder(args.checkpoint)
    if not folder.holds_adapters:
        raise CheckpointError(
            f"{folder.path} holds no LoRA adapters, so there is nothing to merge: it is a "
            "plain model already."
        )
    _, base = read_lora_config(folder)
    check_replaceable(args.out, folder.path, base.path)
    model = merge_lora(load(folder.path))
    save(model, args.out, tokenizer=load_tokenizer(folder.path))
    print(
        f"wrote {args.out}: the weights of {base.path} with the adapters of {folder.path} "
        "folded in (W + (α/r) B A); both folders are unchanged"
    )
    return 0
