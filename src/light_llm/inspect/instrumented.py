"""The PyTorch GPT's forward pass written once more, as the residual stream, recording what is
asked for and applying interventions (the names and :class:`~light_llm.interventions.Patch`
are in :mod:`light_llm.interventions`; the NumPy engine's twin is
:mod:`light_llm.reference.instrumented`).

It calls the model's own modules (its norms, its fused Q/K/V projection, its MLP) in the order
of ``GPT.forward`` and ``Block.forward``, and opens up only what must be seen: the attention of
a layer is split into heads (each head's output through its slice of W_O) only when that layer's
heads or pattern are recorded or patched; otherwise it is the model's own fused attention, so
that a forward with nothing asked costs what the plain one does. Dropout is off (the model as
it is evaluated).
"""

from __future__ import annotations

import copy

import numpy as np
import torch
import torch.nn.functional as F

from light_llm.errors import InspectError
from light_llm.interventions import (
    Sites,
    Trace,
)
from light_llm.models.bert import BertEncoder
from light_llm.models.gpt import GPT, check_token_ids
from light_llm.models.quantize import is_quantized
from light_llm.nn.attention import (
    attention_explicit,
    attention_mask,
    causal_linear_attention_weights,
)
from light_llm.nn.lora import lora_layers, merge_lora
from light_llm.nn.softcap import soft_cap


def check_inspectable(model: object) -> None:
    """InspectError unless ``model`` is a PyTorch GPT or an encoder with its masked-LM head."""
    if isinstance(model, BertEncoder) and model.mlm_head is None:
        raise InspectError(
            "this encoder has no masked-LM head (a sentence-embedding model), so it "
            "predicts no token to look inside of."
        )
    if not isinstance(model, (GPT, BertEncoder)):
        raise InspectError(
            "looking inside works on a GPT of either engine (light_llm.models.GPT or "
            "light_llm.reference.NumpyGPT) or an encoder with its masked-LM head, not a "
            f"{type(model).__name__}."
        )


def seen_model(model) -> tuple[GPT | BertEncoder, dict[str, np.ndarray], bool]:
    """What the Inspector looks inside of for a PyTorch ``model``: the model in evaluation
    mode (a LoRA model merged on a copy, an int8 one as its float weights q s on a copy, one in
    training mode on a copy: the caller's stays in its mode), its weights as arrays by name,
    whether it is an encoder; InspectError for anything else."""
    check_inspectable(model)
    if lora_layers(model):
        model = merge_lora(copy.deepcopy(model))
    elif isinstance(model, GPT) and is_quantized(model):
        model = dequantized(model)
    elif model.training:
        model = copy.deepcopy(model)
    model.eval()
    params = {name: as_array(tensor) for name, tensor in model.state_dict().items()}
    return model, params, isinstance(model, BertEncoder)


def dequantized(model: GPT) -> GPT:
    """A float copy of an int8 GPT (:mod:`light_llm.models.quantize`) holding its weights
    W_hat = q s, as ``load(..., dequantize=True)`` gives an int8 checkpoint: the analyses
    read the weights (W_O by head, W_U) as floats."""
    from light_llm.checkpoints.gpt import dequantize_tensors, load_weights_into, weights_to_save

    floats = GPT(model.config)
    tensors = dequantize_tensors(weights_to_save(model), model.config)
    load_weights_into(floats, tensors, "the int8 model")
    return floats.to(device=model.device, dtype=model.dtype)


def as_array(tensor: torch.Tensor) -> np.ndarray:
    """A CPU NumPy copy of ``tensor`` (float32 at least: NumPy has no bfloat16)."""
    if tensor.dtype.is_floating_point and tensor.element_size() < 4:
        tensor = tensor.float()
    return tensor.detach().cpu().numpy()


def run_on_arrays(model, ids: np.ndarray, *, record, patches, targets, start) -> Trace:
    """:func:`run_instrumented` with NumPy arrays in and out (the Inspector's view). A start's
    residual comes back in the model's dtype (a 16-bit model's are recorded as float32)."""
    device = model.device
    target_tensor = None if targets is None else torch.as_tensor(targets, device=device)
    if start is not None:
        dtype = next(model.parameters()).dtype  # an encoder has no .dtype of its own
        start = (start[0], torch.as_tensor(start[1], device=device, dtype=dtype))
    trace = run_instrumented(
        model,
        torch.as_tensor(ids, device=device),
        record=record,
        patches=patches,
        targets=target_tensor,
        start=start,
    )
    return Trace(
        as_array(trace.logits),
        None if trace.token_losses is None else as_array(trace.token_losses),
        {name: as_array(value) for name, value in trace.activations.items()},
    )


def as_tensor_like(value, like: torch.Tensor) -> torch.Tensor:
    """A patch's value (an array, or a tensor of any dtype and device: a value recorded by
    :func:`run_instrumented`, 16-bit or on a GPU) as a tensor of ``like``'s dtype and device."""
    if isinstance(value, torch.Tensor):
        return value.to(dtype=like.dtype, device=like.device)
    return torch.as_tensor(np.asarray(value), dtype=like.dtype, device=like.device)


def run_instrumented(
    model: GPT | BertEncoder,
    idx: torch.Tensor,
    *,
    record=(),
    patches=(),
    targets: torch.Tensor | None = None,
    start: tuple[int, torch.Tensor] | None = None,
) -> Trace:
    """The forward of ``model`` (a GPT, or a BERT-style encoder with its masked-LM head) on
    ``idx`` (B, T), recording the sites named in ``record`` (an iterable of names, or True for
    all) and applying ``patches`` (a list of Patch). Gives the same logits as ``model(idx)``
    when nothing is patched. ``targets``: next tokens (a GPT) or masked-LM labels (an
    encoder), -1 where nothing is scored. ``start`` = (layer l, resid_pre.l recorded before)
    begins at layer l with that residual, skipping the work before it (an intervention at
    layer l changes nothing earlier)."""
    check_inspectable(model)
    encoder = isinstance(model, BertEncoder)
    config = model.config
    check_token_ids(idx, config.vocab_size)
    B, T = idx.shape
    sites = Sites.for_forward(config, T, record, patches, torch.clone, as_tensor_like, encoder)
    blocks = model.h if encoder else model.transformer.h
    final_norm = model.ln_f if encoder else getattr(model.transformer, "ln_f", None)
    with torch.no_grad():
        positions = torch.arange(T, device=idx.device)  # (T,)
        first, x = start if start is not None else (0, None)
        if start is None:
            x = embed(model, idx, positions, sites)
        rope = model.rope(positions) if model.rope is not None else None  # cos, sin
        values = None if encoder or "wve" not in model.transformer else model.transformer.wve(idx)
        skip = getattr(config, "embedding_skip", False)
        x0 = None  # X_0, which the embedding skip mixes into every layer's input
        if skip:
            x0 = x if start is None else embed(model, idx, positions, unseen_sites())
        for layer in range(first, config.n_layer):
            if skip and (start is None or layer > first):  # a start's residual is mixed
                x = blocks[layer].x0_gains[0] * x + blocks[layer].x0_gains[1] * x0
            x = block_forward(blocks[layer], layer, x, rope, sites, values)
        if final_norm is not None:
            sites.visit("final_scale", final_norm_scale(x, final_norm, config.norm))
            x = final_norm(x)
        if encoder:
            logits = model.mlm_head(x)  # (B, T, V)
        else:
            logits = model.lm_head(x)  # (B, T, V)
            if config.logit_softcap is not None:
                logits = soft_cap(logits, config.logit_softcap)
        token_losses = None
        if targets is not None:
            check_token_ids(targets, config.vocab_size, "target", idx.shape, ignore_index=-1)
            token_losses = F.cross_entropy(
                logits.to(torch.promote_types(logits.dtype, torch.float32)).transpose(1, 2),
                targets,
                ignore_index=-1,
                reduction="none",
            ).masked_fill(targets == -1, float("nan"))  # (B, T)
    return Trace(logits, token_losses, sites.activations)


def unseen_sites() -> Sites:
    """Sites that record and patch nothing: a part of the forward computed again, unseen."""
    return Sites(frozenset(), [], torch.clone, as_tensor_like)


def embed(model, idx: torch.Tensor, positions: torch.Tensor, sites: Sites) -> torch.Tensor:
    """The residual stream's start: E[tokens] + P[positions] (a GPT, seed 000 §2), with the
    smear's term g_t X_0[t-1] added (``smear``, a site of its own), or an
    encoder's embedding layer LN(E[tokens] + P[positions] + S[types]), all types 0."""
    if isinstance(model, BertEncoder):
        return sites.visit("embed", model.embeddings(idx, torch.zeros_like(idx)))
    layers = model.transformer
    x = sites.visit("embed", layers.wte(idx))  # E[tokens]: (B, T, d)
    if "wpe" in layers:
        x = x + sites.visit("pos_embed", layers.wpe(positions).expand_as(x))  # + P[positions]
    if "smear" in layers:  # + g_t X_0[t-1], the look-back term, recorded as a part of its own
        x = x + sites.visit("smear", layers.smear(x))
    return x


def final_norm_scale(x: torch.Tensor, norm: torch.nn.Module, kind: str) -> torch.Tensor:
    """The factor the final norm divides by, as a multiplier: 1 / sqrt(Var(x) + ε) for
    LayerNorm, 1 / sqrt(mean(x²) + ε) for RMSNorm (seed 000 §5; seed 001): (B, T, 1)."""
    spread = x.var(-1, unbiased=False, keepdim=True) if kind == "layernorm" else x.square()
    if kind != "layernorm":
        spread = spread.mean(-1, keepdim=True)
    return torch.rsqrt(spread + norm.eps)


def block_forward(
    block, layer: int, x: torch.Tensor, rope, sites: Sites, values: torch.Tensor | None = None
) -> torch.Tensor:
    """One block (``nn/blocks.py``), pre-LN or post-LN, its sites visited in order;
    ``values``: the value embedding E_v[tokens] (B, T, d) of a model that has them."""
    name = f".{layer}"
    x = sites.visit("resid_pre" + name, x)
    if block.pre_norm:
        normed = sites.visit("ln1" + name, block.ln_1(x))
        x = sites.visit(
            "resid_mid" + name, x + attention_forward(block, layer, normed, rope, sites, values)
        )
        hidden = sites.visit(
            "mlp_hidden" + name, block.mlp.hidden(sites.visit("ln2" + name, block.ln_2(x)))
        )
        x = x + sites.visit("mlp_out" + name, block.mlp.c_proj(hidden))
        return sites.visit("resid_post" + name, x)
    x = sites.visit(
        "resid_mid" + name,
        block.ln_1(x + attention_forward(block, layer, x, rope, sites, values)),
    )
    hidden = sites.visit("mlp_hidden" + name, block.mlp.hidden(x))
    x = block.ln_2(x + sites.visit("mlp_out" + name, block.mlp.c_proj(hidden)))
    return sites.visit("resid_post" + name, x)


def attention_forward(
    block, layer: int, x: torch.Tensor, rope, sites: Sites, values: torch.Tensor | None = None
) -> torch.Tensor:
    """The attention sub-layer's output (B, T, d). Split into heads when they are asked for:

        head_out[h] = head_h W_O[:, h hs:(h+1) hs]^T,   attn_out = Σ_h head_out[h] + b_O

    (seed 000 §3: Concat(head_1, ..., head_h) W^O, written as a sum over the heads' slices)."""
    attn = block.attn
    split = ("pattern", "head_out", "q", "k", "v")
    if not sites.wanted(*(f"{site}.{layer}" for site in split)):
        return sites.visit(f"attn_out.{layer}", attn(x, rope=rope, value_embedding=values))
    B, T, d = x.shape
    q, k, v = attn.queries_keys_values(x, rope, values)  # (B, nh, T, hs) each
    q, k, v = (
        sites.visit(f"{site}.{layer}", value) for site, value in zip("qkv", (q, k, v), strict=True)
    )
    if attn.linear:
        weights = causal_linear_attention_weights(q, k)
        heads = weights @ v
    else:
        allowed = attention_mask(T, T, 0, attn.causal, None, x.device)
        heads, weights = attention_explicit(q, k, v, allowed)  # (B, nh, T, hs), (B, nh, T, T)
    sites.visit(f"pattern.{layer}", weights)
    w_o = attn.c_proj.weight.view(d, attn.n_head, d // attn.n_head)  # (d, nh, hs)
    head_out = sites.visit(f"head_out.{layer}", torch.einsum("bhte,dhe->bthd", heads, w_o))
    out = head_out.sum(2)  # (B, T, d)
    if attn.c_proj.bias is not None:
        out = out + attn.c_proj.bias
    return sites.visit(f"attn_out.{layer}", out)
