"""``light-llm quantize``: write a checkpoint's weights as int8 with one scale per output
channel (weight-only, :mod:`light_llm.models.quantize`), or an int8 checkpoint's back as float
weights; and the ``--quantize`` flag the commands that run a GPT share."""

from __future__ import annotations

import argparse

from light_llm.cli.model_flags import folder_to_folder_parser

DESCRIPTION = """\
Round a GPT's weights to 8-bit integers, one float scale per output channel (row) i:
s_i = max_j |W_ij| / 127, q_ij = round(W_ij / s_i) in [-127, 127], and write them as a
light-llm checkpoint (int8 weights and float32 scales in model.safetensors, "quantization":
"int8" in config.json) a quarter the size of float32. Every block's linear layers and the
output head are quantised, the token table with them (a tied head is the token table);
norms, biases and learned positions stay float. generate, eval, inspect and serve load it;
training needs the float weights: --dequantize writes them back as W_hat = q s (the
rounding, at most s_i / 2 per weight, cannot be undone).
"""

EXAMPLES = """\
examples:
  light-llm quantize --checkpoint out-light-llm --out out-int8
  light-llm generate --checkpoint out-int8 --prompt "ROMEO:" --stats
  light-llm eval --checkpoint out-light-llm --quantize int8
  light-llm quantize --checkpoint out-int8 --out out-float --dequantize
"""


def add_quantize_flag(parser: argparse.ArgumentParser) -> None:
    """``--quantize NAME`` on a command that runs a GPT."""
    parser.add_argument(
        "--quantize",
        metavar="NAME",
        help="round the weights to int8 on loading (per-output-channel scales, as light-llm "
        "quantize writes them); int8 is the one kind",
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = folder_to_folder_parser(
        subparsers,
        "quantize",
        "write a GPT checkpoint with int8 weights (or an int8 one back as float)",
        DESCRIPTION,
        EXAMPLES,
        "a light-llm checkpoint, training output folder, or HuggingFace GPT-2, Llama or Qwen3 "
        "folder",
    )
    parser.add_argument(
        "--method", default="int8", metavar="NAME", help="the quantization (int8, the default)"
    )
    parser.add_argument(
        "--dequantize",
        action="store_true",
        help="write an int8 checkpoint's weights back as float32 W_hat = q s (to train from)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from light_llm.checkpoints import inspect_folder, load, load_tokenizer, save
    from light_llm.checkpoints.folder import check_replaceable
    from light_llm.checkpoints.lora import folders_read
    from light_llm.errors import CheckpointError
    from light_llm.models.quantize import quantize_gpt
    from light_llm.reference.quantize import check_quantizable, check_quantization

    check_quantization(args.method)
    folder = inspect_folder(args.checkpoint)
    check_quantizable(folder, "light-llm quantize")
    check_replaceable(args.out, *folders_read(folder))  # a LoRA run's base too
    if args.dequantize:
        if folder.quantization is None:
            raise CheckpointError(
                f"{folder.path} holds float weights already: there is nothing to dequantize."
            )
        model = load(folder, dequantize=True)
        done = "wrote its float32 weights W_hat = q s"
    else:
        if folder.quantization is not None:
            raise CheckpointError(
                f"{folder.path} is an int8 checkpoint already; quantize the float checkpoint "
                "it was made from."
            )
        model = quantize_gpt(load(folder))
        done = "wrote its weights as int8 with per-row scales"
    tokenizer = load_tokenizer(folder, check_model=True)
    save(model, args.out, tokenizer=tokenizer)
    print(f"{folder.path}: {done} to {args.out}")
    return 0


def quantize_if_asked(model, name: str | None):
    """``model`` in int8 when ``name`` is "int8" (:func:`light_llm.models.quantize.quantize_gpt`),
    as it is when None; ConfigError for any other name."""
    if name is None:
        return model
    from light_llm.models.quantize import quantize_gpt
    from light_llm.reference.quantize import check_quantization

    check_quantization(name)
    return quantize_gpt(model)
