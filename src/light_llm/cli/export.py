"""``light-llm export``: write a light-llm model in another library's format: the HuggingFace
architecture that computes exactly what it computes
(:func:`light_llm.checkpoints.hf_architectures.hf_architecture`): for a GPT, GPT-2
(:func:`~light_llm.checkpoints.hf_gpt2.export_hf_gpt2`), Llama or Qwen3
(:func:`~light_llm.checkpoints.hf_llama.export_hf_llama`); for an encoder, BERT or RoFormer
(:func:`~light_llm.checkpoints.hf_encoder_export.export_hf_encoder`)."""

from __future__ import annotations

import argparse

from light_llm.cli.model_flags import folder_to_folder_parser

FORMATS = ("hf",)

DESCRIPTION = """\
Write a model as the HuggingFace folder (config.json, model.safetensors, the tokenizer) of
the architecture that computes exactly what it computes. A GPT, which
transformers.AutoModelForCausalLM.from_pretrained loads:
  GPT-2  learned positions, LayerNorm, GELU (or ReLU), biases, pre-LN, no QK-norm, no logit cap
  Llama  rotary positions, RMSNorm, SwiGLU, no biases, pre-norm, no logit cap
  Qwen3  the same with QK-norm
A masked-LM encoder (light-llm train --model bert), which AutoModelForMaskedLM loads:
  BERT      learned positions, post-LN LayerNorm, GELU (or ReLU), biases
  RoFormer  the same with rotary positions (base 10000)
A LoRA run's adapters are merged first. The tokenizer is kept as light_tokenizer.json and,
for a bpe, gpt2 or char tokenizer, written as tokenizer.json for transformers.AutoTokenizer. Any
other model is refused, naming the switch that blocks it and the architecture it is nearest.
"""

EXAMPLES = """\
examples:
  light-llm export --checkpoint out-ft --format hf --out hf-model
  light-llm export --checkpoint out-lora --format hf --out hf-model   # adapters merged
  python -c "import transformers; transformers.AutoModelForCausalLM.from_pretrained('hf-model')"
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = folder_to_folder_parser(
        subparsers,
        "export",
        "write a model as a HuggingFace GPT-2, Llama, Qwen3, BERT or RoFormer folder",
        DESCRIPTION,
        EXAMPLES,
        "light-llm checkpoint, training output folder (LoRA runs too), or HuggingFace folder",
    )
    parser.add_argument(
        "--format",
        required=True,
        choices=FORMATS,
        help="hf: a HuggingFace GPT-2, Llama, Qwen3, BERT or RoFormer folder",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from light_llm.checkpoints import inspect_folder, load, load_config, load_tokenizer
    from light_llm.checkpoints.folder import check_replaceable
    from light_llm.checkpoints.hf_architectures import CLASS_NAMES, GPT2, hf_architecture
    from light_llm.checkpoints.hf_gpt2 import export_hf_gpt2
    from light_llm.checkpoints.hf_llama import export_hf_llama
    from light_llm.checkpoints.hf_tokenizer import hf_engine
    from light_llm.checkpoints.lora import folders_read
    from light_llm.nn.lora import merge_lora

    folder = inspect_folder(args.checkpoint)
    if folder.holds_encoder:
        return export_encoder(folder, args)
    architecture = hf_architecture(load_config(folder.path))  # before any weight is read
    check_replaceable(args.out, *folders_read(folder))  # a LoRA run's base too
    tokenizer = load_tokenizer(folder.path, check_model=True)
    model = merge_lora(load(folder.path, dequantize=True))  # an int8 one as q s
    if architecture == GPT2:  # a GPT-2 folder implies GPT-2's tokenizer; any other is written
        export_hf_gpt2(model, args.out, None if tokenizer.name == "gpt2" else tokenizer)
    else:
        export_hf_llama(model, args.out, tokenizer)
    merged = " (its LoRA adapters merged)" if folder.holds_adapters else ""
    print(
        f"exported {folder.path}{merged} as a HuggingFace {architecture} folder "
        f"({CLASS_NAMES[architecture]}): {args.out}"
    )
    if model.config.multi_token:
        print(
            "note: its multi-token head (W_mtp, which only training uses) is left out; the "
            "folder computes the same next-token logits."
        )
    if tokenizer.name == "char":
        print(
            f"note: its character tokenizer knows {tokenizer.vocab_size} characters; "
            "transformers' AutoTokenizer drops any other from a text without a word, where "
            "light-llm refuses it (docs/finetuning.md)."
        )
    if hf_engine(tokenizer) is None:
        print(
            f"note: its {tokenizer.name} tokenizer is written only as light_tokenizer.json; "
            "transformers' AutoTokenizer cannot load it."
        )
    return 0


def export_encoder(folder, args: argparse.Namespace) -> int:
    """A light-llm encoder as a HuggingFace BERT or RoFormer masked-LM folder."""
    from light_llm.checkpoints import load, load_config, load_tokenizer
    from light_llm.checkpoints.folder import check_replaceable
    from light_llm.checkpoints.hf_encoder_export import (
        ENCODER_CLASS_NAMES,
        encoder_hf_architecture,
        export_hf_encoder,
    )

    encoder_hf_architecture(load_config(folder.path, architecture="bert"))  # before the weights
    check_replaceable(args.out, folder.path)
    tokenizer = load_tokenizer(folder.path, check_model=True)
    architecture = export_hf_encoder(load(folder.path, architecture="bert"), args.out, tokenizer)
    print(
        f"exported {folder.path} as a HuggingFace {architecture} folder "
        f"({ENCODER_CLASS_NAMES[architecture]}): {args.out}"
    )
    return 0
