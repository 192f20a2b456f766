"""``light-llm export``: write a light-llm GPT in another library's format (HuggingFace
GPT-2, :func:`light_llm.checkpoints.hf_gpt2.export_hf_gpt2`)."""

from __future__ import annotations

import argparse

FORMATS = ("hf",)

DESCRIPTION = """\
Write a GPT as a HuggingFace GPT-2 folder (config.json and model.safetensors, the projection
weights transposed to GPT-2's Conv1D layout) that transformers.GPT2LMHeadModel.from_pretrained
loads. Any GPT-2-shaped model exports: learned positions, LayerNorm, GELU (or ReLU), pre-LN,
softmax attention, biases, no QK-norm, no logit cap; a LoRA run's adapters are merged first.
A model with a tokenizer other than GPT-2's keeps it as light_tokenizer.json beside.
"""

EXAMPLES = """\
examples:
  light-llm export --checkpoint out-ft --format hf --out hf-model
  light-llm export --checkpoint out-lora --format hf --out hf-model   # adapters merged
  python -c "import transformers; transformers.GPT2LMHeadModel.from_pretrained('hf-model')"
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "export",
        help="write a GPT as a HuggingFace GPT-2 folder",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--checkpoint",
        required=True,
        metavar="DIR",
        help="light-llm checkpoint, training output folder (LoRA runs too), or GPT-2 folder",
    )
    parser.add_argument(
        "--format", required=True, choices=FORMATS, help="hf: a HuggingFace GPT-2 folder"
    )
    parser.add_argument("--out", required=True, metavar="DIR", help="the folder to write")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from light_llm.checkpoints import inspect_folder, load, load_config, load_tokenizer
    from light_llm.checkpoints.folder import check_replaceable
    from light_llm.checkpoints.hf_gpt2 import export_hf_gpt2
    from light_llm.checkpoints.hf_gpt2_config import check_exportable
    from light_llm.nn.lora import merge_lora

    folder = inspect_folder(args.checkpoint)
    check_exportable(load_config(folder.path))  # before any weight is read
    check_replaceable(args.out, folder.path)
    model = merge_lora(load(folder.path))
    tokenizer = load_tokenizer(folder.path)
    # a GPT-2 folder implies GPT-2's tokenizer; any other is written beside
    export_hf_gpt2(model, args.out, None if tokenizer.name == "gpt2" else tokenizer)
    merged = " (its LoRA adapters merged)" if folder.holds_adapters else ""
    print(f"exported {folder.path}{merged} as a HuggingFace GPT-2 folder: {args.out}")
    return 0
