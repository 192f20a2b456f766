"""The logit lens (nostalgebraist, "interpreting GPT: the logit lens", 2020): what the model
would predict if it stopped after each sublayer.

    logits_s = cap(LN_f(resid_s) W_U^T)      s = the embeddings, then after each attention
                                             and each MLP; the last s is the model's output

The final norm LN_f takes its statistics from resid_s itself (as TransformerLens's
``accumulated_resid(apply_ln=True)`` does), so the lens after the last sublayer is the
model's own logits (to float32's rounding; a 16-bit or int8 model's to its kernels' rounding:
the note on precision in :mod:`light_llm.inspect.inspector`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from light_llm.errors import InspectError
from light_llm.inspect.inspector import Inspector
from light_llm.inspect.text import (
    check_scored,
    check_token,
    is_whole,
    prompt_ids,
    scoring_batches,
    token_array,
)
from light_llm.limits import check_flag
from light_llm.reference.softmax import log_softmax_forward


@dataclass
class LensResult:
    """``stages`` (S names: "embed", "L0 attn", "L0 mlp", ...), the prompt's ``ids`` (T,),
    per stage and position: ``top_ids`` / ``top_probs`` (S, T, k) the k most likely next
    tokens, ``target_ids`` (T,) the token followed (-1 where there is none), its
    ``target_probs`` and ``target_ranks`` (S, T) (rank 0 = the top; NaN / -1 where no
    target), and ``log_probs`` (S, T, V) when asked for."""

    stages: list[str]
    ids: np.ndarray
    top_ids: np.ndarray
    top_probs: np.ndarray
    target_ids: np.ndarray
    target_probs: np.ndarray
    target_ranks: np.ndarray
    log_probs: np.ndarray | None = None


def residual_stages(config) -> list[tuple[str, str]]:
    """(stage label, site name) of the residual stream after each sublayer: the embeddings
    (resid_pre.0), then each layer's resid_mid (after attention) and resid_post (after the MLP)."""
    stages = [("embed", "resid_pre.0")]
    for layer in range(config.n_layer):
        stages += [
            (f"L{layer} attn", f"resid_mid.{layer}"),
            (f"L{layer} mlp", f"resid_post.{layer}"),
        ]
    return stages


def top_tokens(scores: np.ndarray, k: int) -> np.ndarray:
    """The ids of the ``k`` largest scores along the last axis, largest first (ties: the
    smaller id first): a partition, then a sort of only those k."""
    if k < scores.shape[-1]:
        candidates = np.argpartition(-scores, k - 1, axis=-1)[..., :k]
    else:
        candidates = np.broadcast_to(np.arange(scores.shape[-1]), scores.shape).copy()
    chosen = np.take_along_axis(scores, candidates, -1)
    order = np.lexsort((candidates, -chosen), axis=-1)
    return np.take_along_axis(candidates, order, -1)


def logit_lens(
    model,
    ids,
    *,
    target: int | None = None,
    top_k: int = 5,
    keep_log_probs: bool = False,
) -> LensResult:
    """The logit lens of ``model`` on the prompt ``ids`` (1-D token ids): at every stage and
    position, the ``top_k`` tokens and the probability and rank of ``target`` (a token id), or
    of the actual next token of the prompt when ``target`` is None (the last position then has
    none). For an encoder the lens reads each residual through the masked-LM head, and the
    token followed by default is the one at the position itself."""
    check_flag("keep_log_probs", keep_log_probs, InspectError)
    inspector = Inspector(model)
    config = inspector.config
    ids = prompt_ids(ids, config)
    if not is_whole(top_k) or not 1 <= top_k <= config.vocab_size:
        raise InspectError(
            f"top_k must be an integer from 1 to {config.vocab_size}, got {top_k!r}."
        )
    top_k = int(top_k)
    if target is not None:
        target = check_token("target token", target, config)
    stages = residual_stages(config)
    trace = inspector.run(ids[None], record=[site for _, site in stages])
    resid = np.stack([trace.activations[site][0] for _, site in stages])  # (S, T, d)
    log_probs, _ = log_softmax_forward(inspector.lens(resid).astype(np.float64))  # (S, T, V)
    T = len(ids)
    if target is None and inspector.encoder:
        target_ids = ids.copy()  # a masked-LM head predicts the token at its own position
    elif target is None:
        target_ids = np.append(ids[1:], -1)
    else:
        target_ids = np.full(T, int(target))
    top_ids = top_tokens(log_probs, top_k)  # (S, T, k)
    top_probs = np.exp(np.take_along_axis(log_probs, top_ids, -1))
    has_target = target_ids >= 0
    picked = np.take_along_axis(log_probs, np.maximum(target_ids, 0)[None, :, None], -1)[..., 0]
    target_probs = np.where(has_target, np.exp(picked), np.nan)
    ranks = (log_probs > picked[..., None]).sum(-1)  # tokens strictly more likely
    target_ranks = np.where(has_target, ranks, -1)
    return LensResult(
        [label for label, _ in stages],
        ids,
        top_ids,
        top_probs,
        target_ids,
        target_probs,
        target_ranks,
        log_probs if keep_log_probs else None,
    )


@dataclass
class LensOverText:
    """Over every scored token of a text: per stage, how often the lens's top token is the
    token followed (``top1``) and the mean log-probability it gives that token
    (``mean_log_prob``); ``n_tokens`` scored."""

    stages: list[str]
    top1: np.ndarray
    mean_log_prob: np.ndarray
    n_tokens: int


def lens_over_text(model, ids, tokenizer=None) -> LensOverText:
    """The logit lens over the text ``ids`` in its scoring windows (a GPT: each next token; an
    encoder: each masked token, which needs its ``tokenizer``): at which stage the model's
    prediction forms."""
    inspector = Inspector(model)
    config = inspector.config
    ids = token_array(ids, config)
    stages = residual_stages(config)
    hits, log_probs, count = np.zeros(len(stages)), np.zeros(len(stages)), 0
    per_token = config.vocab_size * (len(stages) + 1) + len(stages) * config.n_embd
    for inputs, targets, _ in scoring_batches(inspector, ids, tokenizer, per_token):
        trace = inspector.run(inputs, record=[site for _, site in stages])
        scored = targets != -1
        wanted = targets[scored]  # (N,)
        for index, (_, site) in enumerate(stages):
            stage_log_probs, _ = log_softmax_forward(
                inspector.lens(trace.activations[site][scored]).astype(np.float64)
            )  # (N, V)
            hits[index] += float((stage_log_probs.argmax(-1) == wanted).sum())
            log_probs[index] += float(stage_log_probs[np.arange(len(wanted)), wanted].sum())
        count += len(wanted)
    check_scored(count, ids)
    return LensOverText([label for label, _ in stages], hits / count, log_probs / count, count)
