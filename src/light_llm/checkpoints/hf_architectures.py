"""Which HuggingFace architecture computes exactly what a light-llm GPT config computes, and
which switches stop the others; no tensor library needed.

    GPT-2   learned positions, LayerNorm, GELU (or ReLU) MLP, biases, pre-LN, softmax
            attention, no QK-norm, no logit cap                          (GPT2LMHeadModel)
    Llama   rotary positions, RMSNorm, SwiGLU, no biases, pre-norm, softmax attention,
            no logit cap                                                  (LlamaForCausalLM)
    Qwen3   Llama with per-head RMS normalisation of q and k (light-llm's QK-norm is Qwen3's
            with unit gains)                                              (Qwen3ForCausalLM)

A config that none of them expresses is refused in one sentence naming the switches that block
the nearest architecture (the one with fewest) and the values under which it would export.
"""

from __future__ import annotations

from dataclasses import dataclass

from light_llm.checkpoints.hf_gpt2_config import ACTIVATIONS_TO_HF
from light_llm.config import ModelConfig
from light_llm.errors import ConfigError

GPT2 = "GPT-2"
LLAMA = "Llama"
QWEN3 = "Qwen3"
CLASS_NAMES = {GPT2: "GPT2LMHeadModel", LLAMA: "LlamaForCausalLM", QWEN3: "Qwen3ForCausalLM"}
LLAMA_MODEL_TYPES = {"llama": LLAMA, "qwen3": QWEN3}  # config.json's model_type -> architecture
GPT2_ACTIVATIONS = tuple(ACTIVATIONS_TO_HF)  # the MLPs GPT-2's activation_function names


@dataclass(frozen=True)
class Blocker:
    """A switch of a config that an architecture cannot express: its ``field``, a value the
    architecture does express (``exportable``), and why."""

    field: str
    exportable: object
    why: str


def gpt2_blockers(config: ModelConfig) -> list[Blocker]:
    """Every setting of ``config`` that GPT-2 cannot express, in the order of the config."""
    rules = [
        ("positions", config.positions != "learned", "learned", "GPT-2 has learned positions only"),
        ("norm", config.norm != "layernorm", "layernorm", "GPT-2 has LayerNorm only"),
        (
            "activation",
            config.activation not in GPT2_ACTIVATIONS,
            "gelu_tanh",
            f"GPT-2's MLP knows only {', '.join(GPT2_ACTIVATIONS)}",
        ),
        ("block_order", config.block_order != "pre", "pre", "GPT-2 is pre-LN only"),
        ("attention", config.attention != "softmax", "softmax", "GPT-2 has softmax attention only"),
        ("qk_norm", config.qk_norm, False, "GPT-2 has no normalisation of queries and keys"),
        ("logit_softcap", config.logit_softcap is not None, None, "GPT-2 does not cap its logits"),
        ("value_embeddings", config.value_embeddings, False, "GPT-2 has no value embeddings"),
        ("embedding_skip", config.embedding_skip, False, "GPT-2's blocks read the residual only"),
        ("smear", config.smear, False, "GPT-2's embedding has no look-back to the previous token"),
    ]
    return [Blocker(field, value, why) for field, refused, value, why in rules if refused]


def llama_family(config: ModelConfig) -> str:
    """Qwen3 for a config with QK-norm, else Llama: the member of the family it would be."""
    return QWEN3 if config.qk_norm else LLAMA


def llama_blockers(config: ModelConfig) -> list[Blocker]:
    """Every setting of ``config`` that Llama and Qwen3 cannot express (QK-norm only decides
    which of the two it is)."""
    name = llama_family(config)
    gate = "ReLU² has no gate, and " if config.activation == "relu2" else ""
    rules = [
        ("positions", config.positions != "rotary", "rotary", f"{name} has rotary positions only"),
        ("norm", config.norm != "rmsnorm", "rmsnorm", f"{name} has RMSNorm only"),
        ("activation", config.activation != "swiglu", "swiglu", f"{gate}{name}'s MLP is SwiGLU"),
        ("block_order", config.block_order != "pre", "pre", f"{name} is pre-norm only"),
        ("attention", config.attention != "softmax", "softmax", f"{name} has softmax attention"),
        ("bias", config.bias, False, f"{name} has no biases"),
        (
            "logit_softcap",
            config.logit_softcap is not None,
            None,
            f"{name} does not cap its logits, and Gemma 2, which does, has a layout of its own",
        ),
        ("value_embeddings", config.value_embeddings, False, f"{name} has no value embeddings"),
        (
            "embedding_skip",
            config.embedding_skip,
            False,
            f"{name}'s blocks read the residual stream only",
        ),
        (
            "smear",
            config.smear,
            False,
            f"{name}'s embedding has no look-back to the previous token",
        ),
    ]
    return [Blocker(field, value, why) for field, refused, value, why in rules if refused]


def check_exportable(config: ModelConfig, architecture: str) -> None:
    """ConfigError naming the first setting of ``config`` that ``architecture`` (GPT-2, or
    Llama and Qwen3) cannot express."""
    blockers = gpt2_blockers(config) if architecture == GPT2 else llama_blockers(config)
    if blockers:
        first = blockers[0]
        raise ConfigError(
            f"cannot export {first.field}={getattr(config, first.field)!r} to {architecture} "
            f"format: {first.why}."
        )


def hf_architecture(config: ModelConfig) -> str:
    """The architecture (GPT2, LLAMA or QWEN3) that computes exactly what ``config`` computes;
    ConfigError, in one sentence, when none does: the switches that block the nearest one and
    the values under which the config would export to it."""
    candidates = [(llama_family(config), llama_blockers(config)), (GPT2, gpt2_blockers(config))]
    for architecture, blockers in candidates:
        if not blockers:
            return architecture
    nearest, blockers = min(candidates, key=lambda candidate: len(candidate[1]))
    settings = [f"{b.field}={getattr(config, b.field)!r} ({b.why})" for b in blockers]
    fixes = [f"{b.field}={b.exportable!r}" for b in blockers]
    raise ConfigError(
        f"no HuggingFace architecture computes what this model computes: {and_list(settings)} "
        f"{'blocks' if len(blockers) == 1 else 'block'} the nearest, {nearest}; with "
        f"{and_list(fixes)} it would export as {nearest} ({CLASS_NAMES[nearest]})."
    )


def and_list(items: list[str]) -> str:
    """ "a", "a and b", "a, b and c"."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"
