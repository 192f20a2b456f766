"""HuggingFace GPT-2's ``config.json`` and tensor names, mapped to light-llm's and back; no
tensor library needed (the loaders in :mod:`light_llm.checkpoints.hf_gpt2` and
:mod:`light_llm.checkpoints.numpy_gpt` use it).

light-llm's GPT already uses GPT-2's module names (``transformer.h.0.attn.c_attn`` ...), so the
mapping is name for name, with one twist: GPT-2 computes its projections with ``Conv1D``,
y = x W + b with W stored (in, out), while light-llm uses ``nn.Linear``, y = x W^T + b with W
stored (out, in). The four projection weights (attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj)
are therefore transposed on the way in and on the way out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from light_llm.config import ModelConfig
from light_llm.errors import ConfigError
from light_llm.limits import check_flag

# GPT-2's activation_function names -> light-llm's, and back
ACTIVATIONS_FROM_HF = {
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu": "gelu",
    "relu": "relu",
}
ACTIVATIONS_TO_HF = {"gelu_tanh": "gelu_new", "gelu": "gelu", "relu": "relu"}


def special_token_ids(eos_id: int | None, vocab_size: int) -> dict[str, int | None]:
    """The special-token ids of an exported config.json: ``eos_id`` (the tokenizer's
    end-of-text) as bos and eos, as GPT-2 names its <|endoftext|>, and no padding; only an
    id the vocabulary of ``vocab_size`` holds. None is written out as null, because
    transformers' configs default to ids of their own (GPT-2's 50256, Llama's 1 and 2) that
    a smaller vocabulary does not hold."""
    if eos_id is not None and not 0 <= eos_id < vocab_size:
        eos_id = None
    return {"bos_token_id": eos_id, "eos_token_id": eos_id, "pad_token_id": None}


# GPT-2 options that change the function the model computes, with the value light-llm assumes
UNSUPPORTED_OPTIONS = {
    "scale_attn_by_inverse_layer_idx": False,  # scores also divided by the layer number
    "scale_attn_weights": True,  # scores divided by sqrt(d_k) (seed 000 §3)
    "add_cross_attention": False,  # encoder-decoder cross-attention layers
}

CONV1D_WEIGHTS = (
    ".attn.c_attn.weight",
    ".attn.c_proj.weight",
    ".mlp.c_fc.weight",
    ".mlp.c_proj.weight",
)
IGNORED_BUFFERS = (".attn.bias", ".attn.masked_bias")  # causal-mask buffers older versions saved
GPT2_END_OF_TEXT_ID = 50256
GPT2_VOCAB_SIZE = 50257


def config_from_hf(hf_config: dict[str, Any]) -> ModelConfig:
    """The :class:`ModelConfig` of a HuggingFace GPT-2 ``config.json`` (n_positions ->
    block_size, n_embd, n_layer, n_head, vocab_size, n_inner, activation_function,
    layer_norm_epsilon, resid_pdrop, tie_word_embeddings). ConfigError names any option that
    makes the model compute something light-llm does not."""
    for option, supported in UNSUPPORTED_OPTIONS.items():
        if option in hf_config and check_flag(option, hf_config[option]) != supported:
            raise ConfigError(
                f"the GPT-2 option {option}={hf_config[option]!r} is not supported by light-llm."
            )
    activation = hf_config.get("activation_function", "gelu_new")
    if not isinstance(activation, str) or activation not in ACTIVATIONS_FROM_HF:
        raise ConfigError(
            f"the GPT-2 activation_function {activation!r} is not supported; light-llm knows "
            f"{', '.join(ACTIVATIONS_FROM_HF)}."
        )
    block_size = hf_config.get("n_positions", hf_config.get("n_ctx"))
    shape = {
        "vocab_size": hf_config.get("vocab_size"),
        "block_size": block_size,
        "n_layer": hf_config.get("n_layer"),
        "n_head": hf_config.get("n_head"),
        "n_embd": hf_config.get("n_embd"),
    }
    absent = [name for name, value in shape.items() if value is None]
    if absent:
        names = ["n_positions" if name == "block_size" else name for name in absent]
        raise ConfigError(f"the GPT-2 config lacks {', '.join(names)}.")
    return ModelConfig(
        **shape,
        dropout=hf_config.get("resid_pdrop", 0.1),
        bias=True,
        tie_embeddings=hf_config.get("tie_word_embeddings", True),
        positions="learned",
        norm="layernorm",
        norm_eps=hf_config.get("layer_norm_epsilon", 1e-5),
        activation=ACTIVATIONS_FROM_HF[activation],
        block_order="pre",
        attention="softmax",
        n_inner=hf_config.get("n_inner"),
    )


def is_conv1d_weight(name: str) -> bool:
    return name.endswith(CONV1D_WEIGHTS)


def tensors_from_hf(hf_tensors: dict, tied: bool, transpose: Callable) -> dict:
    """GPT-2's tensors renamed and laid out as light-llm's: the ``transformer.`` prefix added
    where a bare ``GPT2Model`` saved without it, Conv1D weights (in, out) transposed to
    (out, in) by ``transpose`` (the engine's contiguous transpose; tensors may be PyTorch's or
    NumPy's), mask buffers dropped, and a tied lm_head.weight dropped (it is wte)."""
    tensors = {}
    for name, tensor in hf_tensors.items():
        if name.endswith(IGNORED_BUFFERS) or (tied and name == "lm_head.weight"):
            continue
        if not name.startswith(("transformer.", "lm_head.")):
            name = f"transformer.{name}"
        tensors[name] = transpose(tensor) if is_conv1d_weight(name) else tensor
    return tensors


def hf_config_from(config: ModelConfig, eos_id: int | None) -> dict[str, Any]:
    """The HuggingFace GPT-2 ``config.json`` of ``config`` (the inverse of config_from_hf),
    naming ``eos_id`` as its bos and eos token, or no special token at all when None."""
    hf_config: dict[str, Any] = {
        "architectures": ["GPT2LMHeadModel"],
        "model_type": "gpt2",
        "vocab_size": config.vocab_size,
        "n_positions": config.block_size,
        "n_embd": config.n_embd,
        "n_layer": config.n_layer,
        "n_head": config.n_head,
        "n_inner": config.n_inner,
        "activation_function": ACTIVATIONS_TO_HF[config.activation],
        "layer_norm_epsilon": config.norm_eps,
        "resid_pdrop": config.dropout,
        "embd_pdrop": config.dropout,
        "attn_pdrop": config.dropout,
        "initializer_range": 0.02,
        "scale_attn_weights": True,
        "scale_attn_by_inverse_layer_idx": False,
        "reorder_and_upcast_attn": False,
        "tie_word_embeddings": config.tie_embeddings,
        "use_cache": True,
    }
    hf_config.update(special_token_ids(eos_id, config.vocab_size))
    return hf_config
