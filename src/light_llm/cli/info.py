"""``light-llm info``: parameters, FLOPs per token and memory of a model, from its config alone.

The counts come from :func:`light_llm.config.count_parameters` and
:func:`light_llm.config.model_counts`, the one home of those formulas; this command lays
them out with human units and the seed section each formula comes from.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from light_llm.cli.model_flags import add_model_flags, given_model_fields
from light_llm.config import PRESETS, ModelConfig, preset
from light_llm.errors import ConfigError

if TYPE_CHECKING:  # the command's imports stay light until it runs
    from light_llm.checkpoints.folder import ModelFolder

DESCRIPTION = """\
Count a model's parameters (with and without the embeddings, per layer), its FLOPs per token
(forward and training) and the memory one sequence needs at a given context (KV cache,
attention matrices, activations), from its config: seed 000 §9, seed 002 §8.1 and §11.
No weights are read and nothing is computed on tensors. A light-llm encoder checkpoint (light-llm
train --model bert) is counted too: its embeddings with token types, bidirectional attention
and masked-LM head (seed 003 §4, §29).
"""

EXAMPLES = """\
examples:
  light-llm info                                   # the seed's model (preset seed-30m)
  light-llm info --preset gpt2-124m --context 256 --dtype bfloat16
  light-llm info --checkpoint out/                 # a light-llm or HuggingFace GPT-2 folder
  light-llm info --checkpoint out-bert/            # an encoder: its masked-LM head too
  light-llm info --preset seed-30m --n-layer 12 --positions rotary --json
"""

BYTES_PER_VALUE = {"float32": 4, "bfloat16": 2, "float16": 2}
# bytes a value of each safetensors dtype a checkpoint may hold


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "info",
        help="parameters, FLOPs per token and memory of a model (seed 000 §9, seed 002 §8.1, §11)",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--preset", choices=list(PRESETS), help="a named model shape (default: seed-30m)"
    )
    source.add_argument(
        "--checkpoint",
        metavar="DIR",
        help=(
            "read the config of this checkpoint (a light-llm GPT or encoder, a training "
            "output, or a HuggingFace GPT-2, Llama or Qwen3 folder)"
        ),
    )
    parser.add_argument(
        "--context",
        type=int,
        metavar="T",
        help="sequence length for FLOPs and memory (default: the model's block size)",
    )
    parser.add_argument(
        "--dtype",
        choices=list(BYTES_PER_VALUE),
        default="float32",
        help="number format for the memory figures (default float32)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    overrides = parser.add_argument_group("overrides (applied on top of the preset/checkpoint)")
    add_model_flags(overrides)
    overrides.add_argument(
        "--vocab-size", dest="vocab_size", type=int, metavar="V", help="vocabulary size V"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    config, name, folder = chosen_config(args)
    context = config.block_size if args.context is None else args.context
    if context > config.block_size:
        raise ConfigError(
            f"--context {context} is longer than the model's block size {config.block_size}; "
            "raise --block-size to count a longer context."
        )
    if folder is not None and folder.holds_encoder:
        report, draw = build_encoder_report(config, context, args.dtype), render_encoder
    else:
        report, draw = build_report(config, context, args.dtype), render
    if folder is not None and draw is render and not model_changes(args):
        # (the checkpoint's own adapters and stored weights: not those of a model it is not)
        adapters = lora_report(folder, config)
        if adapters:
            report["lora"] = adapters
        stored = int8_report(folder, config)
        if stored:
            report["stored_weights"] = stored
    if args.json:
        print(json.dumps({"model": name, **report}, indent=2))
    else:
        print(draw(name, config, report))
    return 0


def model_changes(args: argparse.Namespace) -> dict:
    """The model fields the command line sets on top of the preset or checkpoint."""
    changes = given_model_fields(args)
    if args.vocab_size is not None:
        changes["vocab_size"] = args.vocab_size
    return changes


def chosen_config(args: argparse.Namespace) -> tuple[ModelConfig, str, ModelFolder | None]:
    """The preset's or checkpoint's config with the command-line overrides applied, and the
    checkpoint's folder, inspected once (None for a preset): a BERT-style encoder's config is
    an EncoderConfig."""
    folder = None
    if args.checkpoint is not None:
        from light_llm.checkpoints import inspect_folder, load_config

        folder = inspect_folder(args.checkpoint)
        encoder = folder.holds_encoder
        if encoder and not folder.is_light_llm:
            raise ConfigError(
                f"{args.checkpoint} is a HuggingFace BERT folder; light-llm info counts a "
                "light-llm encoder from its config (whether a HuggingFace head is tied shows "
                "only in its weights): fill-mask, embed and attention read this one."
            )
        config = load_config(folder, architecture="bert" if encoder else "gpt")
        name = str(args.checkpoint)
    else:
        name = args.preset or "seed-30m"
        config = preset(name)
    changes = model_changes(args)
    if changes:
        name += " with " + ", ".join(f"{field}={value}" for field, value in changes.items())
    return config.replace(**changes), name, folder


def build_report(config: ModelConfig, context: int, dtype: str) -> dict:
    """Every figure ``info`` shows, as plain numbers (the --json output)."""
    from light_llm.config import count_parameters, model_counts

    bytes_per_value = BYTES_PER_VALUE[dtype]
    parts = count_parameters(config)
    counts = model_counts(config, context=context, bytes_per_value=bytes_per_value)
    return {
        "config": config.to_dict(),
        "context": counts.context,
        "dtype": dtype,
        "bytes_per_value": bytes_per_value,
        "parameters": {
            "total": counts.params,
            "embedding": counts.params_embedding,
            "non_embedding": counts.params_non_embedding,
            **parts,
        },
        "flops_per_token": {
            "forward": counts.flops_forward_per_token,
            "training": counts.flops_train_per_token,
        },
        "memory_bytes_per_sequence": {
            "weights": counts.params * bytes_per_value,
            "kv_cache": counts.kv_cache_bytes,
            "attention_matrix_per_layer": counts.attention_matrix_bytes,
            "attention_matrices_all_layers": counts.attention_matrix_bytes * config.n_layer,
            "activations": counts.activation_bytes,
        },
    }


def build_encoder_report(config: ModelConfig, context: int, dtype: str) -> dict:
    """Every figure ``info`` shows of a BERT-style encoder (the --json output):
    :func:`light_llm.models.bert.encoder_counts`."""
    from light_llm.models.bert import encoder_counts

    bytes_per_value = BYTES_PER_VALUE[dtype]
    counts = encoder_counts(config, context, bytes_per_value)
    return {
        "config": config.to_dict(),
        "architecture": "bert",
        "dtype": dtype,
        "bytes_per_value": bytes_per_value,
        **counts,
    }


def lora_report(checkpoint: str | ModelFolder, config: ModelConfig) -> dict | None:
    """For a LoRA run's checkpoint: its adapters' settings, the trainable (A, B) and frozen
    (base) parameter counts of the adapted model (built without storage, nothing read) and
    the state of its base ("unchanged", or why it cannot be used). None for other folders."""
    import torch

    from light_llm.checkpoints import inspect_folder
    from light_llm.checkpoints.lora import read_lora_config
    from light_llm.errors import CheckpointError
    from light_llm.models.gpt import GPT

    folder = inspect_folder(checkpoint)
    if not folder.holds_adapters:
        return None
    settings, base = read_lora_config(folder)
    with torch.device("meta"):
        model = GPT(config)
        layers = settings.apply(model)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    frozen = sum(p.numel() for p in model.parameters() if not p.requires_grad)
    try:
        base.check(folder.path)
        state = "unchanged"
    except CheckpointError as exc:
        state = str(exc)
    return {
        **settings.to_dict(),
        "adapted_layers": len(layers),
        "trainable": trainable,
        "frozen": frozen,
        "base": {**base.to_dict(), "state": state},
    }


def int8_report(folder: ModelFolder, config: ModelConfig) -> dict | None:
    """For an int8 checkpoint (``light-llm quantize``): the bytes its weights file holds, from
    the safetensors header and the scales (no weight loaded): the int8 codes q, one byte each,
    and the float values beside them (the per-row scales s of W_hat = q s, and the tensors kept
    as float). The header is checked against ``config`` and the scales for finite positive
    values first, as loading would (CheckpointError for a damaged folder). None for other
    folders."""
    from light_llm.checkpoints.header import check_gpt_weights, stored_tensors

    if folder.quantization is None:
        return None
    check_gpt_weights(folder, config)  # int8 codes, float scales and weights, their shapes
    int8_values = other_bytes = 0
    for tensor in stored_tensors(folder.path).values():
        count = math.prod(tensor.shape)
        if tensor.dtype == "int8":
            int8_values += count
        else:
            bits = int(re.search(r"\d+", tensor.dtype).group())  # float32, bfloat16, float8_e5m2
            other_bytes += count * bits // 8
    return {
        "quantization": folder.quantization,
        "int8_values": int8_values,
        "other_bytes": other_bytes,
        "bytes": int8_values + other_bytes,
    }


# --------------------------------------------------------------------------- human units
def human_count(n: int) -> str:
    """30339456 -> '30.3M'."""
    for factor, suffix in ((10**9, "B"), (10**6, "M"), (10**3, "K")):
        if abs(n) >= factor:
            return f"{n / factor:.1f}{suffix}"
    return str(n)


def human_flops(n: int) -> str:
    """64549632 -> '64.5 MFLOP'."""
    for factor, prefix in ((10**12, "T"), (10**9, "G"), (10**6, "M"), (10**3, "K")):
        if abs(n) >= factor:
            return f"{n / factor:.1f} {prefix}FLOP"
    return f"{n} FLOP"


def human_bytes(n: int) -> str:
    """18874368 -> '18.0 MiB' (binary units)."""
    for factor, suffix in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if abs(n) >= factor:
            return f"{n / factor:.1f} {suffix}"
    return f"{n} B"


# --------------------------------------------------------------------------- text layout
def formulas(config: ModelConfig) -> dict[str, str]:
    """The formula behind each parameter line, in the seeds' notation, for this variant."""
    biases = config.bias
    norm_size = "2d" if config.norm == "layernorm" and biases else "d"
    ffn = "3 d d_ff" if config.activation == "swiglu" else "2 d d_ff"
    if biases:
        ffn += " + 2 d_ff + d" if config.activation == "swiglu" else " + d_ff + d"
    return {
        "attention": "W^QKV, W^O: 4d²"
        + (" + 4d biases" if biases else "")
        + (" + a, b (value embeddings)" if config.value_embeddings else ""),
        "ffn": f"W_1, W_2{', V' if config.activation == 'swiglu' else ''}: {ffn}",
        "norms": f"2 norms x {norm_size}",
        "token": "E: V x d",
        "position": "P: T_max x d" if config.positions == "learned" else "no table",
    }


def layer_rows(row: Callable[..., None], params: dict, text: dict[str, str], L: int) -> None:
    """The rows of one block's parameters, a GPT's or an encoder's: attention, FFN, norms."""
    per_layer = params["layers"] // L
    row("  per layer", human_count(per_layer), f"{per_layer:,} x {L} layers", "seed 000 §6")
    row(
        "    attention",
        human_count(params["attention_per_layer"]),
        text["attention"],
        "seed 002 §8.1",
    )
    row("    FFN", human_count(params["ffn_per_layer"]), text["ffn"], "seed 000 §4")
    row("    norms", human_count(params["norms_per_layer"]), text["norms"], "seed 000 §5")


def attention_and_activation_rows(
    row: Callable[..., None], memory: dict, L: int, matrix: str, aside: str, source: str
) -> None:
    """The last memory rows of a GPT's or an encoder's report: the attention matrix (its
    ``matrix`` formula per layer, all layers' bytes, then ``aside``) and the activations."""
    every = human_bytes(memory["attention_matrices_all_layers"])
    per_layer = human_bytes(memory["attention_matrix_per_layer"])
    detail = f"{matrix} per layer; {every} for {L} layers{aside}"
    row("  attention matrix", per_layer, detail, source)
    row("  activations", human_bytes(memory["activations"]), "L T d", "seed 000 §9")


class Rows(list):
    """A report's lines: (label, human figure, exact figure or formula, source) rows, which
    :func:`layout` aligns, and plain lines printed as they are."""

    def row(self, label: str, figure: str, detail: str = "", source: str = "") -> None:
        self.append((label, figure, detail, source))


def report_parts(config: ModelConfig, report: dict) -> tuple:
    """What both layouts read: the parameters, FLOPs and memory figures, the formulas of
    :func:`formulas`, and L, T and the dtype."""
    figures = (
        report[key] for key in ("parameters", "flops_per_token", "memory_bytes_per_sequence")
    )
    return (*figures, formulas(config), config.n_layer, report["context"], report["dtype"])


def render(name: str, config: ModelConfig, report: dict) -> str:
    """The report as aligned lines: label, human figure, exact figure or formula, source."""
    params, flops, memory, text, L, T, dtype = report_parts(config, report)
    rows = Rows()
    row = rows.row
    rows.append(
        f"{name}: {L} layers, {config.n_head} heads, d_model {config.n_embd}, "
        f"d_ff {config.ffn_hidden}, vocabulary {config.vocab_size}, block size {config.block_size}"
    )
    rows.append(
        f"  {config.positions} positions, {config.norm}, {config.activation}, "
        f"{config.block_order}-LN, {config.attention} attention, "
        f"{'tied' if config.tie_embeddings else 'untied'} embeddings"
        + ("" if config.bias else ", no biases")
        + (", QK-norm" if config.qk_norm else "")
        + ("" if config.logit_softcap is None else f", logits capped at {config.logit_softcap}")
        + (f", multi-token prediction (weight {config.mtp_weight:g})" if config.multi_token else "")
        + (", value embeddings" if config.value_embeddings else "")
        + (", embedding skip" if config.embedding_skip else "")
        + (", smear" if config.smear else "")
    )
    rows.append("")
    rows.append("Parameters")
    row("  total", human_count(params["total"]), f"{params['total']:,}", "seed 000 §9")
    row(
        "  embedding",
        human_count(params["embedding"]),
        f"{text['token']} = {params['token_embedding']:,}; "
        f"{text['position']} = {params['position_embedding']:,}"
        + (f"; E_v = {params['value_embedding']:,}" if params["value_embedding"] else ""),
        "seed 000 §2",
    )
    row("  non-embedding", human_count(params["non_embedding"]), f"{params['non_embedding']:,}")
    layer_rows(row, params, text, L)
    if params["skip_per_layer"]:
        row("    embedding skip", human_count(params["skip_per_layer"]), "λ_l, μ_l")
    row("  final norm", human_count(params["final_norm"]), "pre-LN only", "seed 002 §9.1")
    if params["lm_head_untied"]:
        row("  untied LM head", human_count(params["lm_head_untied"]), "V x d", "seed 002 §10.2")
    if params["value_embedding"]:
        table = human_count(params["value_embedding"])
        row("  value embedding", table, "E_v: V x d (its gains a, b: in attention)")
    if params["smear"]:
        row("  smear", human_count(params["smear"]), "gate w: k = min(12, d), gain λ")
    if params["mtp_head"]:
        row("  multi-token head", human_count(params["mtp_head"]), "W_mtp: d x d (training only)")
    rows.append("")
    rows.append(f"FLOPs per token at context {T}")
    attention_flops = "2 L T d" if config.attention == "softmax" else "4 L d d_k"
    row(
        "  forward",
        human_flops(flops["forward"]),
        f"2 x matrix weights + {attention_flops} (attention)",
        "seed 000 §9",
    )
    training = "3 x (forward + the token after next's head)" if config.multi_token else None
    row("  training", human_flops(flops["training"]), training or "3 x forward", "seed 000 §9")
    rows.append("")
    rows.append(f"Memory per sequence at {T} tokens, {dtype}")
    row("  weights", human_bytes(memory["weights"]), "N x bytes", "seed 000 §9")
    stored = report.get("stored_weights")
    if stored:
        row(
            "    as stored, int8",
            human_bytes(stored["bytes"]),
            f"{stored['int8_values']:,} int8 codes q + {human_bytes(stored['other_bytes'])} "
            "float (scales s, W_hat = q s; the rest)",
        )
    row("  KV cache", human_bytes(memory["kv_cache"]), "2 L T d", "seed 002 §11.2")
    matrix = "n_h T²" if config.attention == "softmax" else "n_h d_k² (linear attention state)"
    attention_and_activation_rows(row, memory, L, matrix, "", "seed 000 §9, seed 002 §11.1")
    lora = report.get("lora")
    if lora:
        rows.append("")
        rows.append(
            f"LoRA adapters: rank {lora['rank']}, alpha {lora['alpha']:g}, dropout "
            f"{lora['dropout']:g} on {', '.join(lora['targets'])}"
        )
        total = lora["trainable"] + lora["frozen"]
        row(
            "  trainable",
            human_count(lora["trainable"]),
            f"{lora['trainable']:,} ({100 * lora['trainable'] / total:.2f}%): A, B = "
            f"r (d_in + d_out) in each of {lora['adapted_layers']} layers",
            "Hu et al. 2021",
        )
        row("  frozen", human_count(lora["frozen"]), f"{lora['frozen']:,}: the base")
        rows.append(f"  base {lora['base']['path']}: {lora['base']['state']}")
    return layout(rows)


def render_encoder(name: str, config: ModelConfig, report: dict) -> str:
    """An encoder's report as aligned lines (:func:`render`'s layout)."""
    params, flops, memory, text, L, T, dtype = report_parts(config, report)
    rows = Rows(
        [
            f"{name}: a BERT-style encoder, {L} layers, {config.n_head} heads, d_model "
            f"{config.n_embd}, d_ff {config.ffn_hidden}, vocabulary {config.vocab_size}, block "
            f"size {config.block_size}",
            f"  {config.positions} positions, {config.norm}, {config.activation}, "
            f"{config.block_order}-LN, bidirectional attention, "
            + ("a masked-LM head" if config.mlm_head else "no masked-LM head (embeddings only)"),
            "",
            "Parameters",
        ]
    )
    row = rows.row
    row("  total", human_count(params["total"]), f"{params['total']:,}", "seed 000 §9")
    row(
        "  embedding",
        human_count(params["embedding"]),
        f"{text['token']} = {params['token_embedding']:,}; {text['position']} = "
        f"{params['position_embedding']:,}; S: types x d = {params['type_embedding']:,}",
        "seed 003 §4",
    )
    row("  embedding norm", human_count(params["embedding_norm"]), "LN(E + P + S)")
    layer_rows(row, params, text, L)
    if params["final_norm"]:
        row("  final norm", human_count(params["final_norm"]), "pre-LN only")
    if config.mlm_head:
        head = (
            params["transform"]
            + params["head_norm"]
            + params["output_bias"]
            + params["decoder_untied"]
        )
        tied = "E^T shared with the embedding" if config.tie_embeddings else "its own V x d"
        row(
            "  masked-LM head",
            human_count(head),
            f"W_t d x d + b_t, a norm, output bias b (V); decoder {tied}",
            "seed 003 §29",
        )
    rows.append("")
    rows.append(f"FLOPs per token at context {T}, every token through the head")
    row(
        "  forward",
        human_flops(flops["forward"]),
        "2 x matrix weights + 4 L T d (attention over all T keys, no causal mask)",
        "seed 000 §9",
    )
    row("  training", human_flops(flops["training"]), "3 x forward (the trainer: 15% via the head)")
    rows.append("")
    rows.append(f"Memory per sequence at {T} tokens, {dtype}")
    row("  weights", human_bytes(memory["weights"]), "N x bytes", "seed 000 §9")
    aside = " (no KV cache: an encoder reads the whole text at once)"
    attention_and_activation_rows(row, memory, L, "n_h T²", aside, "seed 002 §11.1")
    return layout(rows)


def layout(rows: list) -> str:
    """Align the columns of the 4-tuples; plain strings are printed as they are."""
    table = [r for r in rows if isinstance(r, tuple)]
    widths = [max(len(r[i]) for r in table) for i in range(3)]
    lines = []
    for r in rows:
        if isinstance(r, str):
            lines.append(r)
            continue
        label, figure, detail, source = r
        line = f"{label:<{widths[0]}}  {figure:>{widths[1]}}  {detail:<{widths[2]}}"
        lines.append(f"{line}  [{source}]" if source else line.rstrip())
    return "\n".join(lines)
