"""The whole forward pass of the served model for one token of a prompt, stage by stage, as the
explorer's flow view draws it: every vector the instrumented forward records at that position
(:mod:`light_llm.interventions` names them), each stage with its formula (TeX, typeset by the
page itself) and the ``light-llm explain`` example that derives it.

    tokens      E[x_t]                               the token's row of the embedding table
    positions   P[t] (learned, sinusoidal), or the rotation angles t·θ_i of RoPE
    per layer   LN_1, Q/K/V per head, A_t (the token's attention row per head), each head's
                output size, the attention output, the residual, LN_2, the MLP's hidden
                units and output, the residual after the block
    the end     LN_f, logits z = W_U LN_f(x), softcap, P = softmax(z) (the top tokens), and
                the filters as /api/next-token applies them

An encoder's stages are the same (post-LN: the norms come after each sum), over its input with
[CLS] and [SEP], ending in the masked-LM head. The stages adapt to the config: LayerNorm or
RMSNorm, GELU, ReLU² or SwiGLU, tied or untied head, soft-capped logits or not.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from light_llm.errors import InspectError
from light_llm.inspect import Inspector
from light_llm.inspect.lens import top_tokens
from light_llm.reference.softmax import softmax_forward
from light_llm.serve.session import ExplorerModel, NotForThisModel, RequestError

FLOW_TOP_K = 10
DECIMALS = 5

NORM_FORMULAS = {
    "layernorm": r"\mathrm{LN}(x) = \gamma \odot \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}}"
    r" + \beta",
    "rmsnorm": r"\mathrm{RMS}(x) = \gamma \odot \frac{x}{\sqrt{\mathrm{mean}(x^2) + \epsilon}}",
}
ACTIVATION_FORMULAS = {
    "gelu": r"h = \mathrm{GELU}(x W_1 + b_1)",
    "gelu_tanh": r"h = \mathrm{GELU_{tanh}}(x W_1 + b_1)",
    "relu": r"h = \max(0, x W_1 + b_1)",
    "relu2": r"h = \max(0, x W_1)^2",
    "swiglu": r"h = \mathrm{Swish}(x W_1) \odot (x V)",
}

# the attention row's formula and its explain example, by whether the attention is linear
# (seed 002 §11.3, eq. 48: the weights its running sums average the values with)
PATTERN = {
    False: (r"A_t = \mathrm{softmax}\left(\frac{q_t K^\top}{\sqrt{d_k}}\right)", "cat-sat"),
    True: (
        r"A_{t j} = \frac{\phi(q_t) \cdot \phi(k_j)}{\sum_{i \le t} \phi(q_t) \cdot \phi(k_i)},"
        r"\; \phi = \mathrm{elu} + 1",
        "linear-attention",
    ),
}


def vector(values: np.ndarray) -> list:
    return np.round(np.asarray(values, dtype=np.float64), DECIMALS).tolist()


def stage(key: str, title: str, formula: str, example: str | None, **values: Any) -> dict:
    return {"key": key, "title": title, "formula": formula, "example": example, "values": values}


def layer_stages(acts: dict[str, np.ndarray], t: int, config, norm: str) -> list[dict]:
    """One layer's stages at position ``t``; ``acts``: its recorded sites by bare name."""
    pre = config.block_order == "pre"
    linear = config.attention == "linear"
    skip = getattr(config, "embedding_skip", False)
    qk = (
        r"q = x W_Q,\; k = x W_K,\; v = x W_V"
        + (r"\; (v \leftarrow a v + b\, E_v[\mathrm{token}])" if config.value_embeddings else "")
        + (r"\; (q, k \leftarrow \mathrm{RMS}(q), \mathrm{RMS}(k))" if config.qk_norm else "")
    )
    mid = (
        r"x \leftarrow x + \mathrm{attn}(\mathrm{LN}_1(x))"
        if pre
        else r"x \leftarrow \mathrm{LN}_1(x + \mathrm{attn}(x))"
    )
    post = (
        r"x \leftarrow x + \mathrm{mlp}(\mathrm{LN}_2(x))"
        if pre
        else r"x \leftarrow \mathrm{LN}_2(x + \mathrm{mlp}(x))"
    )
    activation = ACTIVATION_FORMULAS.get(config.activation, r"h = \sigma(x W_1 + b_1)")
    vectors = [  # (site, title, formula, explain example): stages of one vector each
        (
            "resid_pre",
            "residual stream in" + (" (the embedding mixed in)" if skip else ""),
            r"x \leftarrow \lambda x + \mu x_0" if skip else "x",
            "gradient-flow",
        ),
        ("ln1", "norm before attention", norm, "norms"),
        ("qkv", "queries, keys and values of each head", qk, "multi-head"),
        ("pattern", "attention of this token over the prompt, per head", *PATTERN[linear]),
        (
            "attn_out",
            "heads' outputs through W_O, summed",
            r"\mathrm{attn}(x) = \sum_h A_h V_h W_O^{(h)} + b_O",
            "multi-head",
        ),
        (
            "resid_mid",
            "residual after attention" + ("" if pre else " (then normed)"),
            mid,
            "tiny-transformer",
        ),
        ("ln2", "norm before the MLP", norm, "norms"),
        (
            "mlp_hidden",
            f"MLP hidden units ({config.activation})",
            activation,
            "swiglu" if config.activation == "swiglu" else "ffn",
        ),
        ("mlp_out", "MLP output", r"\mathrm{mlp}(x) = h W_2 + b_2", "mlp-backprop"),
        ("resid_post", "residual after the block", post, "tiny-transformer"),
    ]
    stages = []
    for site, title, formula, example in vectors:
        if site == "qkv":
            values = {name: vector(acts[name][:, t]) for name in "qkv"}  # (nh, hs) each
        elif site == "pattern":
            values = {"rows": vector(acts["pattern"][:, t])}  # (nh, T)
        elif site == "attn_out":
            head_norms = np.linalg.norm(acts["head_out"][t], axis=-1)  # ‖head_out[h]‖: (nh,)
            values = {"head_norms": vector(head_norms), "vector": vector(acts["attn_out"][t])}
        elif site in acts:
            values = {"vector": vector(acts[site][t])}
        else:  # a post-LN block has no ln1, ln2
            continue
        stages.append(stage(site, title, formula, example, **values))
    return stages


def flow(explorer: ExplorerModel, prompt: str, position: int | None) -> dict[str, Any]:
    """The flow view's stages for the token at ``position`` of ``prompt`` (default: the last);
    RequestError naming ``position`` when it is outside the prompt."""
    ids = explorer.prompt_ids(prompt)
    T = len(ids)
    if position is None:
        position = T - 1
    if not -T <= position < T:
        message = f"the prompt has {T} tokens, so position is 0 to {T - 1} (or -{T} to -1 from "
        raise RequestError("position", message + "the end).")
    t = position % T
    with explorer.forward_lock:
        try:
            inspector = Inspector(explorer.model)
        except InspectError as exc:
            raise NotForThisModel(str(exc)) from None
        trace = inspector.run(np.asarray([ids]), record=True)
        final = inspector.final_norm(
            trace.activations[f"resid_post.{inspector.config.n_layer - 1}"][0, t]
        )
    config, acts = inspector.config, {k: v[0] for k, v in trace.activations.items()}
    pre = config.block_order == "pre"
    norm = NORM_FORMULAS[config.norm]
    stages = [
        stage(
            "embed",
            "token embedding",
            r"e_t = E[x_t]",
            "tiny-transformer",
            vector=vector(acts["embed"][t]),
        )
    ]
    if "pos_embed" in acts:
        stages.append(
            stage(
                "pos_embed",
                f"{config.positions} position",
                r"x_0 = E[x_t] + P[t]",
                "sinusoidal",
                vector=vector(acts["pos_embed"][t]),
            )
        )
    if "smear" in acts:  # the look-back term g_t x_0[t-1], added to x_0 (nn/smear.py)
        stages.append(
            stage(
                "smear",
                "smear: a look-back at the previous token",
                r"x_0 \leftarrow x_0 + \lambda\,\sigma(w \cdot x_0[:k])\, x_0[t-1]",
                None,
                vector=vector(acts["smear"][t]),
            )
        )
    if "pos_embed" not in acts and config.positions == "rotary":
        hs = config.head_dim
        frequencies = config.position_base ** (-np.arange(0, hs, 2) / hs)  # θ_i
        stages.append(
            stage(
                "rotary",
                "rotary positions: q and k rotated by t·θ_i",
                r"\theta_i = b^{-2i/d_k},\quad (q_{2i}, q_{2i+1}) \mapsto"
                r" R(t \theta_i)\,(q_{2i}, q_{2i+1})",
                "rope",
                angles=vector(t * frequencies),
            )
        )
    for layer in range(config.n_layer):
        block = layer_stages(
            {k[: -len(f".{layer}")]: v for k, v in acts.items() if k.endswith(f".{layer}")},
            t,
            config,
            norm,
        )
        stages.append({"key": "layer", "title": f"layer {layer}", "layer": layer, "stages": block})
    logits = inspector.unembed(final).astype(np.float64)  # the lens, its norm taken once
    probs, _ = softmax_forward(logits)
    top = top_tokens(probs, min(FLOW_TOP_K, config.vocab_size))
    if pre:
        stages.append(stage("final_norm", "final norm", norm, "norms", vector=vector(final)))
    head = (
        "the masked-LM head"
        if inspector.encoder
        else (
            "the output head (tied: the embedding table)"
            if config.tie_embeddings
            else "the output head"
        )
    )
    formula = r"z = W_U\, \mathrm{LN}_f(x)" + (
        rf",\quad z \leftarrow c \tanh(z / c),\; c = {config.logit_softcap:g}"
        if getattr(config, "logit_softcap", None)
        else ""
    )
    stages.append(
        stage(
            "logits",
            f"logits: {head}",
            formula,
            "weight-tying" if config.tie_embeddings else "logit-lens",
            ids=top.tolist(),
            tokens=explorer.tokenizer.tokens(top.tolist()),
            logits=vector(logits[top]),
        )
    )
    stages.append(
        stage(
            "softmax",
            "probabilities; then temperature, top-k, top-p (the next-token panel)",
            r"P(x_{t+1} = i) = \frac{e^{z_i}}{\sum_j e^{z_j}}",
            "sampling",
            ids=top.tolist(),
            tokens=explorer.tokenizer.tokens(top.tolist()),
            probs=vector(probs[top]),
        )
    )
    return {
        "tokens": explorer.tokenizer.tokens(ids),
        "ids": ids,
        "position": t,
        "kind": explorer.kind,
        "config": {
            "norm": config.norm,
            "activation": config.activation,
            "positions": config.positions,
            "block_order": config.block_order,
            "tied": config.tie_embeddings,
            "qk_norm": getattr(config, "qk_norm", False),
            "softcap": getattr(config, "logit_softcap", None),
        },
        "stages": stages,
    }
