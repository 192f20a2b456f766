"""Direct logit attribution: a token's logit split into what each part of the model wrote into
the residual stream (Elhage et al., "A Mathematical Framework for Transformer Circuits", 2021).

In a pre-LN GPT the last residual is a sum (seed 000 §6, the residual connections):

    x_L = embed + pos_embed + Σ_l (Σ_h head_out_l,h + b_O,l) + Σ_l mlp_out_l

(with the smear, + smear: its look-back term g_t X_0[t-1], a component of its own)

and the final norm is affine in x once its scale s = 1/σ(x_L) is held at the value the forward
computed (TransformerLens does the same: "the final norm's scale frozen"). For LayerNorm,
LN_f(x) = γ ⊙ (x - mean(x)) s + β, and mean is linear, so the logit of token v is

    z_v = Σ_c  (γ ⊙ (c - mean(c)) s) · W_U[v]  +  β · W_U[v]

one term per component c (for RMSNorm: γ ⊙ c s, and no β). The terms add up to z_v exactly.
With soft-capped logits, z_v is the logit before the cap (the model outputs cap · tanh(z_v/cap),
not a sum). A logit difference z_a - z_b splits the same way along W_U[a] - W_U[b].

With the embedding skip (block l reads λ_l x + μ_l x_0, x_0 = embed + pos_embed), the last
residual is still a sum, each part weighted by what the later layers' λ make of it:
(with the smear, x_0 = embed + pos_embed + smear, its look-back term g_t x_0[t-1] a part of
its own, weighted as the embedding)

    x_L = c_emb x_0 + Σ_l c_l (Σ_h head_out_l,h + b_O,l + mlp_out_l),
    c_l = Π_{k>l} λ_k,    c_emb = Π_k λ_k + Σ_l μ_l c_l
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from light_llm.errors import InspectError
from light_llm.inspect.inspector import Inspector
from light_llm.inspect.text import check_position, check_token, prompt_ids
from light_llm.interventions import site_names


@dataclass
class Attribution:
    """``names`` of the components ("embed", "pos_embed", "smear", "L0H1", "L0 attn bias", "L0MLP",
    "final norm bias") and their ``values`` (the logit each writes, float64), which add up to
    ``total``; ``logit`` is the model's own (pre-cap) logit or logit difference, computed
    directly, and ``output_logit`` what the model outputs (after the soft-cap, if any).
    ``heads`` (L, nh) and ``mlps`` (L,) are the same numbers as tables."""

    names: list[str]
    values: np.ndarray
    total: float
    logit: float
    output_logit: float
    heads: np.ndarray
    mlps: np.ndarray
    token: int
    versus: int | None
    position: int


def direct_logit_attribution(
    model, ids, token: int, *, versus: int | None = None, position: int = -1
) -> Attribution:
    """The logit of ``token`` (minus that of ``versus`` when given) at ``position`` of the
    prompt ``ids`` (default: the last, the next-token prediction), split into the direct
    contributions of the embeddings, every head, every attention bias, every MLP and the
    final norm's bias. Pre-LN models only (a post-LN model normalises after every sublayer,
    so its residual stream is no sum of them)."""
    inspector = Inspector(model)
    config = inspector.config
    inspector.require_gpt(
        "direct logit attribution",
        "an encoder's masked-LM head (dense, GELU, LayerNorm) is not linear, so its logits do "
        "not split into the parts of the residual.",
    )
    if config.block_order != "pre":
        raise InspectError(
            "direct logit attribution needs a pre-LN model; this one normalises after each "
            "sublayer (block_order post), so its last residual is not a sum of their outputs."
        )
    ids = prompt_ids(ids, config)
    token = check_token("token", token, config)
    if versus is not None:
        versus = check_token("token to compare with", versus, config)
        if versus == token:
            raise InspectError(
                "the token to compare with must differ from the token: the logit difference "
                "would be 0, and so would every part of it."
            )
    t = check_position(position, len(ids))
    last = f"resid_post.{config.n_layer - 1}"
    record = {"embed", "pos_embed", "smear", "final_scale", last} & set(site_names(config))
    for layer in range(config.n_layer):
        record |= {f"head_out.{layer}", f"mlp_out.{layer}"}
    trace = inspector.run(ids[None], record=record)
    acts = {name: np.asarray(value[0, t], np.float64) for name, value in trace.activations.items()}
    params = {
        name: np.asarray(value, np.float64)
        for name, value in inspector.params.items()
        if name.startswith("transformer.ln_f") or name.endswith("c_proj.bias")
    }
    unembed = np.asarray(inspector.unembedding, np.float64)
    direction = unembed[token] - (unembed[versus] if versus is not None else 0.0)  # (d,)
    scale = float(acts["final_scale"][0])
    gain = params["transformer.ln_f.weight"]
    layernorm = config.norm == "layernorm"

    weights, embedding_weight = skip_weights(inspector.params, config.n_layer)

    def through_final_norm(component: np.ndarray, weight: float = 1.0) -> float:
        centered = component - component.mean(-1, keepdims=True) if layernorm else component
        return weight * float(((centered * scale * gain) * direction).sum(-1))

    names, values = [], []
    heads = np.zeros((config.n_layer, config.n_head))
    mlps = np.zeros(config.n_layer)
    for name in ("embed", "pos_embed", "smear"):
        if name in acts:
            names.append(name)
            values.append(through_final_norm(acts[name], embedding_weight))
    for layer in range(config.n_layer):
        weight = weights[layer]
        for head in range(config.n_head):
            heads[layer, head] = through_final_norm(acts[f"head_out.{layer}"][head], weight)
            names.append(f"L{layer}H{head}")
            values.append(heads[layer, head])
        bias = params.get(f"transformer.h.{layer}.attn.c_proj.bias")
        if bias is not None:
            names.append(f"L{layer} attn bias")
            values.append(through_final_norm(bias, weight))
        mlps[layer] = through_final_norm(acts[f"mlp_out.{layer}"], weight)
        names.append(f"L{layer}MLP")
        values.append(mlps[layer])
    if "transformer.ln_f.bias" in params:
        names.append("final norm bias")
        values.append(float(params["transformer.ln_f.bias"] @ direction))
    values = np.array(values)
    logit = float(inspector.final_norm(acts[last]) @ direction)  # the pre-cap logit itself
    output = np.asarray(trace.logits[0, t], np.float64)
    output_logit = float(output[token] - (output[versus] if versus is not None else 0.0))
    return Attribution(
        names, values, float(values.sum()), logit, output_logit, heads, mlps, token, versus, t
    )


def skip_weights(params, n_layer: int) -> tuple[np.ndarray, float]:
    """The weights c_l (L,) of what layer l writes, and c_emb of the embedding, in the last
    residual (module docstring): all 1 without the embedding skip."""
    if "transformer.h.0.x0_gains" not in params:
        return np.ones(n_layer), 1.0
    gains = np.array([np.asarray(params[f"transformer.h.{k}.x0_gains"], np.float64)
                      for k in range(n_layer)])  # fmt: skip
    keep, skip = gains[:, 0], gains[:, 1]  # λ_k, μ_k
    later = np.array([np.prod(keep[layer + 1 :]) for layer in range(n_layer)])  # c_l
    return later, float(np.prod(keep) + (skip * later).sum())
