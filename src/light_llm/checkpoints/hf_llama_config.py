"""HuggingFace Llama and Qwen3 ``config.json`` and tensor names, mapped to light-llm's and back;
no tensor library needed (the PyTorch and NumPy loaders pass their own ``concatenate``).

    light-llm (layer i: transformer.h.i.)  Llama / Qwen3 (model.layers.i.)
    ln_1.weight                            input_layernorm.weight
    attn.c_attn.weight [W^Q; W^K; W^V]     self_attn.{q,k,v}_proj.weight (q, k rows permuted)
    attn.c_proj.weight                     self_attn.o_proj.weight
    ln_2.weight                            post_attention_layernorm.weight
    mlp.c_fc.weight    (Swish gate W_1)    mlp.gate_proj.weight
    mlp.c_v.weight     (linear value V)    mlp.up_proj.weight
    mlp.c_proj.weight  (W_2)               mlp.down_proj.weight
    -                                      self_attn.{q,k}_norm.weight (Qwen3 only: ones)
    transformer.wte.weight                 model.embed_tokens.weight
    transformer.ln_f.weight                model.norm.weight
    lm_head.weight                         lm_head.weight (left out when tied)

The one twist is the pairing of RoPE's dimensions. light-llm rotates the consecutive pairs
(x_2i, x_2i+1) of each head by m θ_i (:func:`light_llm.nn.positions.apply_rotary`);
Llama's ``rotate_half`` rotates (x_i, x_i+d/2) by the same angle. Both are the same rotation
once a head's dimensions are reordered, light-llm's 2i -> i and 2i+1 -> i + d/2, and a score
q · k is unchanged when q and k are reordered alike (so is the RMS of QK-norm). So the rows
of W^Q and W^K are permuted per head on the way out and back on the way in, and the two
models compute the same logits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from light_llm.checkpoints.hf_architectures import (
    CLASS_NAMES,
    LLAMA,
    LLAMA_MODEL_TYPES,
    QWEN3,
    llama_family,
)
from light_llm.checkpoints.hf_gpt2_config import special_token_ids
from light_llm.config import ModelConfig
from light_llm.errors import CheckpointError, ConfigError
from light_llm.limits import check_flag

# per-layer tensors that map one to one (light-llm's name -> HuggingFace's)
LAYER_NAMES = {
    "ln_1.weight": "input_layernorm.weight",
    "attn.c_proj.weight": "self_attn.o_proj.weight",
    "ln_2.weight": "post_attention_layernorm.weight",
    "mlp.c_fc.weight": "mlp.gate_proj.weight",
    "mlp.c_v.weight": "mlp.up_proj.weight",
    "mlp.c_proj.weight": "mlp.down_proj.weight",
}
MODEL_NAMES = {
    "transformer.wte.weight": "model.embed_tokens.weight",
    "transformer.ln_f.weight": "model.norm.weight",
    "lm_head.weight": "lm_head.weight",
}
QKV = ("q_proj", "k_proj", "v_proj")
QK_NORMS = ("q_norm", "k_norm")


def rotate_half_rows(n_head: int, head_dim: int) -> list[int]:
    """The row of light-llm's W^Q (or W^K) that each row of Llama's comes from (module
    docstring): within head h, Llama's dimension j < d/2 is light-llm's 2j, and j >= d/2 is
    light-llm's 2(j - d/2) + 1."""
    half = head_dim // 2
    order = [2 * j for j in range(half)] + [2 * j + 1 for j in range(half)]
    return [h * head_dim + j for h in range(n_head) for j in order]


def interleaved_rows(n_head: int, head_dim: int) -> list[int]:
    """The inverse of :func:`rotate_half_rows`: the row of Llama's W^Q that each row of
    light-llm's comes from."""
    inverse = [0] * (n_head * head_dim)
    for hf_row, light_row in enumerate(rotate_half_rows(n_head, head_dim)):
        inverse[light_row] = hf_row
    return inverse


def rope_theta(hf_config: dict[str, Any]) -> float:
    """θ's base from rope_parameters (transformers 5) or a top-level rope_theta (earlier
    folders); ConfigError for any RoPE scaling, which light-llm does not compute."""
    parameters = hf_config.get("rope_parameters") or hf_config.get("rope_scaling") or {}
    if not isinstance(parameters, dict):
        raise ConfigError(f"rope_parameters must be an object, not {parameters!r}.")
    rope_type = parameters.get("rope_type", parameters.get("type", "default"))
    if rope_type != "default":
        raise ConfigError(f"RoPE scaling of type {rope_type!r} is not supported by light-llm.")
    return parameters.get("rope_theta", hf_config.get("rope_theta", 10000.0))


def config_from_hf_llama(hf_config: dict[str, Any]) -> ModelConfig:
    """The :class:`ModelConfig` of a HuggingFace Llama or Qwen3 ``config.json``: rotary
    positions (base rope_theta), RMSNorm (rms_norm_eps, also QK-norm's epsilon for Qwen3),
    SwiGLU (intermediate_size), no biases, and QK-norm for Qwen3. ConfigError names any
    option that makes the model compute something light-llm does not."""
    model_type = hf_config.get("model_type")
    name = LLAMA_MODEL_TYPES[model_type]
    shape = {
        "vocab_size": hf_config.get("vocab_size"),
        "block_size": hf_config.get("max_position_embeddings"),
        "n_layer": hf_config.get("num_hidden_layers"),
        "n_head": hf_config.get("num_attention_heads"),
        "n_embd": hf_config.get("hidden_size"),
        "n_inner": hf_config.get("intermediate_size"),
    }
    absent = [key for key, value in shape.items() if value is None]
    if absent:
        names = {
            "block_size": "max_position_embeddings",
            "n_layer": "num_hidden_layers",
            "n_head": "num_attention_heads",
            "n_embd": "hidden_size",
            "n_inner": "intermediate_size",
        }
        raise ConfigError(f"the {name} config lacks {', '.join(names.get(a, a) for a in absent)}.")
    n_head, n_embd = shape["n_head"], shape["n_embd"]
    head_dim = n_embd // n_head if isinstance(n_embd, int) and isinstance(n_head, int) else None
    supported = {
        "num_key_value_heads": (n_head, "light-llm gives every query head its own keys"),
        "head_dim": (head_dim, "light-llm's heads are hidden_size / num_attention_heads wide"),
        "hidden_act": ("silu", "light-llm's gated MLP is SwiGLU"),
        "attention_bias": (False, "light-llm's Llama-shaped models have no biases"),
        "mlp_bias": (False, "light-llm's Llama-shaped models have no biases"),
        "pretraining_tp": (1, "it changes the arithmetic of the projections"),
        "use_sliding_window": (False, "light-llm attends to every earlier token"),
    }
    for option, (value, why) in supported.items():
        if hf_config.get(option) is not None and hf_config[option] != value:
            raise ConfigError(
                f"the {name} option {option}={hf_config[option]!r} is not supported: {why}."
            )
    tied = check_flag("tie_word_embeddings", hf_config.get("tie_word_embeddings", False))
    config = ModelConfig(
        **{**shape, "n_inner": None},
        dropout=hf_config.get("attention_dropout", 0.0),
        bias=False,
        tie_embeddings=tied,
        positions="rotary",
        position_base=rope_theta(hf_config),
        norm="rmsnorm",
        norm_eps=hf_config.get("rms_norm_eps", 1e-6),
        activation="swiglu",
        qk_norm=name == QWEN3,
    )
    if shape["n_inner"] != config.ffn_hidden:  # light-llm's default width is left implicit
        config = config.replace(n_inner=shape["n_inner"])
    return config


def hf_llama_config_from(config: ModelConfig, eos_id: int | None) -> dict[str, Any]:
    """The Llama (or, with QK-norm, Qwen3) ``config.json`` of ``config``, as transformers 5
    writes it, with rope_theta also at the top level for readers of earlier folders (the
    inverse of :func:`config_from_hf_llama`)."""
    name = llama_family(config)
    model_type = {value: key for key, value in LLAMA_MODEL_TYPES.items()}[name]
    hf_config: dict[str, Any] = {
        "architectures": [CLASS_NAMES[name]],
        "model_type": model_type,
        "vocab_size": config.vocab_size,
        "max_position_embeddings": config.block_size,
        "hidden_size": config.n_embd,
        "intermediate_size": config.ffn_hidden,
        "num_hidden_layers": config.n_layer,
        "num_attention_heads": config.n_head,
        "num_key_value_heads": config.n_head,
        "head_dim": config.head_dim,
        "hidden_act": "silu",
        "rms_norm_eps": config.norm_eps,
        "rope_parameters": {"rope_type": "default", "rope_theta": config.position_base},
        "rope_theta": config.position_base,
        "attention_bias": False,
        "attention_dropout": config.dropout,
        "tie_word_embeddings": config.tie_embeddings,
        "initializer_range": 0.02,
        "use_cache": True,
    }
    if name == LLAMA:
        hf_config.update({"mlp_bias": False, "pretraining_tp": 1})
    else:
        hf_config.update(
            {
                "use_sliding_window": False,
                "sliding_window": None,
                "max_window_layers": config.n_layer,
                "layer_types": ["full_attention"] * config.n_layer,
            }
        )
    hf_config.update(special_token_ids(eos_id, config.vocab_size))
    return hf_config


def hf_llama_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor of a Llama (or Qwen3) folder of ``config``, by HuggingFace's name, with
    its shape (lm_head.weight too, which a tied folder may leave out)."""
    d, d_ff, V, hs = config.n_embd, config.ffn_hidden, config.vocab_size, config.head_dim
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (V, d)}
    layer_shapes = {
        "input_layernorm.weight": (d,),
        **{f"self_attn.{name}.weight": (d, d) for name in QKV},
        "self_attn.o_proj.weight": (d, d),
        "post_attention_layernorm.weight": (d,),
        "mlp.gate_proj.weight": (d_ff, d),
        "mlp.up_proj.weight": (d_ff, d),
        "mlp.down_proj.weight": (d, d_ff),
    }
    if config.qk_norm:
        layer_shapes.update({f"self_attn.{name}.weight": (hs,) for name in QK_NORMS})
    for i in range(config.n_layer):
        shapes.update({f"model.layers.{i}.{name}": shape for name, shape in layer_shapes.items()})
    shapes.update({"model.norm.weight": (d,), "lm_head.weight": (V, d)})
    return shapes


def tensors_from_hf_llama(
    hf_tensors: dict, config: ModelConfig, concatenate: Callable, source
) -> dict:
    """A Llama (or Qwen3) folder's tensors, already checked against :func:`hf_llama_shapes`,
    renamed and laid out as light-llm's: W^Q, W^K (their rows back in light-llm's RoPE order)
    and W^V stacked into c_attn by ``concatenate`` (the engine's, along rows), a tied
    lm_head.weight dropped. CheckpointError when a Qwen3 q_norm or k_norm gain is not 1:
    light-llm's QK-norm has none."""
    rows = interleaved_rows(config.n_head, config.head_dim)
    tensors = {
        name: hf_tensors[hf_name]
        for name, hf_name in MODEL_NAMES.items()
        if not (config.tie_embeddings and name == "lm_head.weight")
    }
    for i in range(config.n_layer):
        hf_layer, layer = f"model.layers.{i}.", f"transformer.h.{i}."
        for name, hf_name in LAYER_NAMES.items():
            tensors[layer + name] = hf_tensors[hf_layer + hf_name]
        q, k, v = (hf_tensors[f"{hf_layer}self_attn.{name}.weight"] for name in QKV)
        tensors[layer + "attn.c_attn.weight"] = concatenate([q[rows], k[rows], v])
        for name in QK_NORMS if config.qk_norm else ():
            gain = f"{hf_layer}self_attn.{name}.weight"
            if not bool((hf_tensors[gain] == 1).all()):
                raise CheckpointError(
                    f"{source}: tensor {gain} is not all ones, and light-llm's QK-norm has no "
                    "gain, so it cannot compute this model."
                )
    return tensors


def tensors_to_hf_llama(tensors: dict, config: ModelConfig, unit_gain: Callable) -> dict:
    """light-llm's tensors (a state dict, a tied lm_head.weight left out) as a Llama (or
    Qwen3) folder's: c_attn split into W^Q, W^K (rows in Llama's RoPE order) and W^V, and,
    for Qwen3, a new ``unit_gain()`` (ones of the head size) as each q_norm and k_norm."""
    rows = rotate_half_rows(config.n_head, config.head_dim)
    d = config.n_embd
    hf_tensors = {
        hf_name: tensors[name] for name, hf_name in MODEL_NAMES.items() if name in tensors
    }
    for i in range(config.n_layer):
        hf_layer, layer = f"model.layers.{i}.", f"transformer.h.{i}."
        for name, hf_name in LAYER_NAMES.items():
            hf_tensors[hf_layer + hf_name] = tensors[layer + name]
        c_attn = tensors[layer + "attn.c_attn.weight"]
        q, k, v = c_attn[:d], c_attn[d : 2 * d], c_attn[2 * d :]
        for name, weight in zip(QKV, (q[rows], k[rows], v), strict=True):
            hf_tensors[f"{hf_layer}self_attn.{name}.weight"] = weight
        for name in QK_NORMS if config.qk_norm else ():
            hf_tensors[f"{hf_layer}self_attn.{name}.weight"] = unit_gain()
    return hf_tensors
