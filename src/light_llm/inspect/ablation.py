"""Ablation: take a part of the model out and measure what is lost.

    zero ablation:  the part's output replaced by 0
    mean ablation:  replaced by its mean over a text (the part still adds its average, only
                    what depends on the input is removed; Wang et al. 2022, "Interpretability
                    in the Wild")

    Δloss = L(text | part ablated) - L(text),    L the mean next-token loss (seed 000 §7)
    Δp    = p(token | prompt, part ablated) - p(token | prompt)

A part is a head (``L1H2``: its output through its slice of W_O), an MLP (``L1MLP``), a whole
attention layer (``L1ATTN``) or one MLP unit (``L1N37``); see :mod:`components`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from light_llm.errors import InspectError
from light_llm.inspect.components import component_name, component_patch
from light_llm.inspect.inspector import Inspector
from light_llm.inspect.text import (
    batch_tokens,
    check_position,
    check_scored,
    check_token,
    prompt_ids,
    scoring_batches,
    text_loss,
    text_windows,
    token_array,
)
from light_llm.interventions import Patch, patch_index
from light_llm.limits import check_flag
from light_llm.reference.softmax import softmax_forward

METHODS = ("zero", "mean")


def check_method(method: object) -> str:
    if method not in METHODS:
        raise InspectError(f"the ablation method is zero or mean, not {method!r}.")
    return method


def site_of(patch: Patch) -> str:
    return f"{patch.site}.{patch.layer}"


def mean_values(
    inspector: Inspector,
    ids: np.ndarray,
    patches: list[Patch],
    tokenizer=None,
    every_position: bool = False,
) -> list[Patch]:
    """``patches`` with each value set to the mean of the part it replaces over the text
    ``ids``, mean = (1/N) Σ_t part(t): (d,) for a head or an MLP, () for a unit. The positions
    t are the inputs of the windows the text is scored in (every token but the last, for a
    GPT; masked windows, for an encoder), or with ``every_position`` every token of ``ids`` as
    given (a prompt: its last token too; an encoder's [CLS] ... [SEP], its [MASK] kept)."""
    sites = sorted({site_of(patch) for patch in patches})
    sums = {site: 0.0 for site in sites}
    count = 0
    config = inspector.config
    per_token = config.n_layer * (config.n_head + 2) * config.n_embd + config.ffn_hidden
    if every_position:  # windows of ids itself, a placeholder after it (a target, never read)
        tokens = batch_tokens(config, per_token)
        batches = text_windows(np.append(ids, 0), config.block_size, tokens)
    else:
        batches = scoring_batches(inspector, ids, tokenizer, per_token)
    for inputs, _, _ in batches:
        trace = inspector.run(inputs, record=sites)
        for site in sites:
            value = trace.activations[site]
            sums[site] = sums[site] + value.reshape(-1, *value.shape[2:]).sum(0, dtype=np.float64)
        count += inputs.size
    means = []
    for patch in patches:
        mean = sums[site_of(patch)] / count  # the site's mean per position: (nh, d), (d,)...
        part = np.asarray(mean[patch_index(patch, mean.ndim + 2)[2:]])  # a head or a unit: ()
        means.append(dataclasses.replace(patch, value=part))
    return means


def ablation_patches(
    inspector: Inspector,
    components,
    method: str,
    mean_over: np.ndarray | None,
    tokenizer=None,
    every_position: bool = False,
) -> list[Patch]:
    """The patches that ablate ``components`` (names, e.g. ["L0H1", "L2MLP"]): zeros, or the
    means over ``mean_over`` (token ids; :func:`mean_values`)."""
    check_method(method)
    if isinstance(components, str):
        components = [components]
    try:
        if isinstance(components, (bytes, bytearray)):  # else each byte would be a name
            raise TypeError
        components = list(components)
    except TypeError:
        raise InspectError(
            f"the parts to ablate are a list of names such as ['L0H1', 'L2MLP'], not "
            f"{components!r}."
        ) from None
    patches = [component_patch(name, inspector.config) for name in components]
    if not patches:
        raise InspectError("name at least one part to ablate (e.g. L0H1, L1MLP, L0N5).")
    check_parts_apart(patches)
    if method == "mean":
        if mean_over is None:
            raise InspectError("mean ablation needs a text to take the means over.")
        patches = mean_values(inspector, mean_over, patches, tokenizer, every_position)
    return patches


def check_parts_apart(patches) -> None:
    """InspectError when the parts to ablate name one part twice, or a part inside another
    that is removed whole (a head of an ATTN, a unit of an MLP): each is removed once, and a
    report naming it twice would count it twice."""
    names = [component_name(patch) for patch in patches]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise InspectError(
            f"{', '.join(twice)} named twice in the parts to ablate: name each once."
        )
    whole = {(patch.layer, patch.site): name for patch, name in zip(patches, names, strict=True)
             if patch.site in ("attn_out", "mlp_out")}  # fmt: skip
    inside = {"head_out": "attn_out", "mlp_hidden": "mlp_out"}
    for patch, name in zip(patches, names, strict=True):
        outer = whole.get((patch.layer, inside.get(patch.site)))
        if outer is not None:
            raise InspectError(
                f"{name} lies inside {outer}, which is ablated whole: name one of them."
            )


def next_token_probs(logits: np.ndarray) -> np.ndarray:
    """softmax(z) in float64 (seed 002 §2.3, eq. 1; the NumPy engine's softmax)."""
    return softmax_forward(np.asarray(logits, np.float64))[0]


@dataclass
class PromptAblation:
    """The next-token distribution at the prompt's last position before (``probs``) and after
    (``ablated_probs``) the ablation, both (V,); ``token`` (the given one, or the model's top
    guess before) and its probabilities ``p`` / ``ablated_p``, ``delta_p`` = their difference."""

    components: list[str]
    method: str
    probs: np.ndarray
    ablated_probs: np.ndarray
    token: int
    p: float
    ablated_p: float
    delta_p: float


def ablate_prompt(
    model,
    ids,
    components,
    *,
    method: str = "zero",
    mean_over=None,
    token: int | None = None,
    position: int | None = None,
) -> PromptAblation:
    """Δp of the next token for the prompt ``ids`` with ``components`` ablated (zero, or mean
    over the text ``mean_over``, the prompt itself when None): the distribution at
    ``position`` (a GPT's last by default; an encoder's must be given: its [MASK]'s, which
    ``light-llm inspect ablate`` finds). The means are over every position of that text, its
    last token too (a prompt of one token has one)."""
    inspector = Inspector(model)
    config = inspector.config
    ids = prompt_ids(ids, config)
    if position is None and inspector.encoder:  # -1 would be its [SEP]
        raise InspectError(
            "an encoder predicts at its [MASK]: give position=, the [MASK]'s index in the "
            "prompt's ids."
        )
    t = check_position(-1 if position is None else position, len(ids))
    if mean_over is not None and check_method(method) != "mean":
        raise InspectError(
            "mean_over is the text of a mean ablation: give method='mean' with it, or leave it out."
        )
    text = ids if mean_over is None else token_array(mean_over, config, "text", 1)
    patches = ablation_patches(inspector, components, method, text, every_position=True)
    probs = next_token_probs(inspector.run(ids[None]).logits[0, t])
    ablated = next_token_probs(inspector.run(ids[None], patches=patches).logits[0, t])
    token = int(probs.argmax()) if token is None else check_token("token", token, config)
    names = [component_name(patch) for patch in patches]
    p, ablated_p = float(probs[token]), float(ablated[token])
    return PromptAblation(names, method, probs, ablated, int(token), p, ablated_p, ablated_p - p)


@dataclass
class TextAblation:
    """Mean next-token loss over ``n_tokens`` tokens of a text before (``loss``) and after
    (``ablated_loss``) the ablation, and ``delta_loss``."""

    components: list[str]
    method: str
    loss: float
    ablated_loss: float
    delta_loss: float
    n_tokens: int


def ablate_text(model, ids, components, *, method: str = "zero", tokenizer=None) -> TextAblation:
    """Δloss over the text ``ids`` (a GPT: every token but the first, in consecutive windows
    of the context; an encoder: its masked-LM loss over masked windows, which needs its
    ``tokenizer``) with ``components`` ablated; mean ablation takes the means over the text."""
    inspector = Inspector(model)
    ids = token_array(ids, inspector.config)
    patches = ablation_patches(inspector, components, method, ids, tokenizer)
    loss, count = text_loss(inspector, ids, tokenizer=tokenizer)
    ablated, _ = text_loss(inspector, ids, patches, tokenizer)
    names = [component_name(patch) for patch in patches]
    return TextAblation(names, method, loss, ablated, ablated - loss, count)


@dataclass
class ImportanceTable:
    """Δloss over a text when each head (``heads``, (L, nh)) or each MLP (``mlps``, (L,)) is
    ablated alone; ``loss`` is the text's loss with nothing ablated."""

    method: str
    loss: float
    heads: np.ndarray
    mlps: np.ndarray
    n_tokens: int


def layer_heads_ablated(inspector, inputs, targets, resid, clean, heads, patches) -> np.ndarray:
    """The token losses (n, B, T) with each of the heads ``patches[heads]`` (all of one layer)
    ablated alone, in one forward over n copies of the batch: copy j has head_out of that layer
    replaced by its clean value with head j's slice set to the ablation's value (the layer's
    input is the clean one, so its other heads' outputs are the clean ones)."""
    layer = patches[heads[0]].layer
    n, B = len(heads), inputs.shape[0]
    value = np.tile(clean.activations[f"head_out.{layer}"], (n, 1, 1, 1))  # (n B, T, nh, d)
    for j, index in enumerate(heads):
        value[j * B : (j + 1) * B, :, patches[index].head] = patches[index].value
    trace = inspector.run(
        np.tile(inputs, (n, 1)),
        patches=[Patch("head_out", layer, value=value)],
        targets=np.tile(targets, (n, 1)),
        start=(layer, np.tile(resid, (n, 1, 1))),
    )
    return trace.token_losses.reshape(n, B, -1)


def head_importance(
    model, ids, *, method: str = "zero", mlps: bool = True, tokenizer=None
) -> ImportanceTable:
    """The Δloss of ablating every head alone (and every MLP, unless ``mlps`` is False) over
    the text ``ids``: which parts the model's predictions lean on (an encoder: its masked-LM
    loss, with its ``tokenizer``)."""
    check_flag("mlps", mlps, InspectError)  # "no" is true: it would ablate them
    inspector = Inspector(model)
    config = inspector.config
    ids = token_array(ids, config)
    check_method(method)
    names = [f"L{l}H{h}" for l in range(config.n_layer) for h in range(config.n_head)]
    if mlps:
        names += [f"L{l}MLP" for l in range(config.n_layer)]
    patches = ablation_patches(inspector, names, method, ids, tokenizer)
    clean_total, ablated_totals, count = 0.0, np.zeros(len(patches)), 0
    L = config.n_layer
    recorded = [f"resid_pre.{layer}" for layer in range(L)] + [f"head_out.{l}" for l in range(L)]
    # each batch is run once per layer with its heads ablated side by side: n_head copies
    per_token = (config.vocab_size + 2 * L * config.n_embd) * config.n_head
    for inputs, targets, _ in scoring_batches(inspector, ids, tokenizer, per_token):
        clean = inspector.run(inputs, record=recorded, targets=targets)
        scored = targets != -1
        clean_total += float(clean.token_losses[scored].sum(dtype=np.float64))
        count += int(scored.sum())
        for layer in range(L):  # from its own layer: nothing before it changes
            resid = clean.activations[f"resid_pre.{layer}"]
            heads = [i for i, p in enumerate(patches) if p.layer == layer and p.site == "head_out"]
            if heads:  # every head of the layer in one forward, one copy of the batch each
                losses = layer_heads_ablated(
                    inspector, inputs, targets, resid, clean, heads, patches
                )
                for index, loss in zip(heads, losses, strict=True):
                    ablated_totals[index] += float(loss[scored].sum(dtype=np.float64))
            for index, patch in enumerate(patches):
                if patch.layer == layer and patch.site != "head_out":
                    trace = inspector.run(
                        inputs, patches=[patch], targets=targets, start=(layer, resid)
                    )
                    ablated_totals[index] += float(trace.token_losses[scored].sum(dtype=np.float64))
    loss = clean_total / check_scored(count, ids)
    deltas = ablated_totals / count - loss
    n_heads = config.n_layer * config.n_head
    heads = deltas[:n_heads].reshape(config.n_layer, config.n_head)
    mlp_deltas = deltas[n_heads:] if mlps else np.full(config.n_layer, np.nan)
    return ImportanceTable(method, loss, heads, mlp_deltas, count)
