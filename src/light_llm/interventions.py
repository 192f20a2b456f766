"""What the instrumented forward of both engines records and replaces, without torch: the
names of the activation sites, :class:`Patch` (an intervention) and the checks of both.

A GPT's forward pass, written as the residual stream it is (seed 000 §6; seed 002 §9.1), pre-LN:

    resid_pre.0  = embed + pos_embed            E[tokens] + P[positions]
                   (+ smear)                    with the smear: g_t X_0[t-1], its look-back
                                                term, X_0 = embed + pos_embed (nn/smear.py)
    ln1.l        = LN_1(resid_pre.l)            the attention's input (pre-LN only)
    q.l, k.l, v.l                               split(ln1.l W^QKV) per head; q, k after
                                                QK-norm and the rotation (RoPE) if any
    pattern.l    = softmax(q k^T / sqrt(d_k))   causal
    attn_out.l   = Σ_h head_out.l[h] + b_O      head h's output through its slice of W_O
    resid_mid.l  = resid_pre.l + attn_out.l
    ln2.l        = LN_2(resid_mid.l)            the MLP's input (pre-LN only)
    mlp_hidden.l = σ(ln2.l W_1 + b_1)
    mlp_out.l    = mlp_hidden.l W_2 + b_2
    resid_post.l = resid_mid.l + mlp_out.l      = resid_pre.(l+1)
    logits       = LN_f(resid_post.(L-1)) W_U   final_scale: the 1/σ (or 1/RMS) of LN_f

Every name below is one tensor of the forward pass; ``pattern.l`` is layer l's attention
weights A = softmax(Q K^T / sqrt(d_k)) of every head. A post-LN block (``block_order
"post"``) records the same names at the same places (its resid_mid and resid_post are the
normalised sums).

A :class:`Patch` replaces one site's value (all of it, or one head, one neuron, one position
of it) by zero, by a given array (a mean over a text, or the value recorded on another prompt)
before the forward goes on.
"""

from __future__ import annotations

import reprlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from light_llm.errors import ConfigError, InspectError
from light_llm.limits import is_real

# sites inside layer l, named f"{site}.{l}", with their shapes (B batch, T positions,
# nh heads, d width, d_ff hidden units)
LAYER_SITES = {
    "resid_pre": "(B, T, d)",
    "ln1": "(B, T, d)",
    "q": "(B, nh, T, hs)",
    "k": "(B, nh, T, hs)",
    "v": "(B, nh, T, hs)",
    "pattern": "(B, nh, T, T)",
    "head_out": "(B, T, nh, d)",
    "attn_out": "(B, T, d)",
    "resid_mid": "(B, T, d)",
    "ln2": "(B, T, d)",
    "mlp_hidden": "(B, T, d_ff)",
    "mlp_out": "(B, T, d)",
    "resid_post": "(B, T, d)",
}
MODEL_SITES = {
    "embed": "(B, T, d)",
    "pos_embed": "(B, T, d)",
    "smear": "(B, T, d)",
    "final_scale": "(B, T, 1)",
}
PATCHABLE = (
    "embed",
    "resid_pre",
    "head_out",
    "attn_out",
    "resid_mid",
    "mlp_hidden",
    "mlp_out",
    "resid_post",
)


def site_names(config: Any, encoder: bool = False) -> list[str]:
    """Every name the instrumented forward of a model of ``config`` can record, in the order
    the forward computes them (``pos_embed`` only with learned or sinusoidal positions,
    ``smear`` only with the smear, ``final_scale`` only with a final norm). An ``encoder``'s
    ``embed`` is its embedding layer's output, LN(E[tokens] + P[positions] + S[types]): no
    ``pos_embed`` of its own."""
    names = ["embed"]
    if config.positions in ("learned", "sinusoidal") and not encoder:
        names.append("pos_embed")
    if getattr(config, "smear", False) and not encoder:
        names.append("smear")
    pre_norm_only = () if config.block_order == "pre" else ("ln1", "ln2")
    for layer in range(config.n_layer):
        names.extend(f"{site}.{layer}" for site in LAYER_SITES if site not in pre_norm_only)
    if config.block_order == "pre":
        names.append("final_scale")
    return names


def check_record(config: Any, record: Any, encoder: bool = False) -> frozenset[str]:
    """The set of names to record: ``record`` is an iterable of site names, or True for all of
    them. InspectError naming the first unknown name and the forms that exist."""
    if record is True:
        return frozenset(site_names(config, encoder))
    if record is None or record is False:
        return frozenset()
    if isinstance(record, str):
        record = (record,)
    if not isinstance(record, Iterable):
        raise InspectError(
            f"record is True (every activation) or a list of activation names, got "
            f"{reprlib.repr(record)}."
        )
    record = list(record)
    if not all(isinstance(name, str) for name in record):
        raise InspectError(
            f"record names activations by str (such as 'resid_pre.0'), got {reprlib.repr(record)}."
        )
    known = set(site_names(config, encoder))
    names = frozenset(record)
    for name in sorted(names):
        if name not in known:
            raise InspectError(
                f"{name!r} is not an activation of this model; the names are embed"
                f"{', pos_embed' if 'pos_embed' in known else ''}"
                f"{', smear' if 'smear' in known else ''}, "
                f"{'|'.join(LAYER_SITES)}.L for L in 0..{config.n_layer - 1}"
                f"{', final_scale' if 'final_scale' in known else ''}."
            )
    return names


def check_index(name: str, value: object, count: int, what: str) -> int:
    """``value`` as an int if it is an integer (a NumPy one too) in [0, count), else
    InspectError: a missing or non-integer value said as such, else naming the range."""
    if value is None:
        raise InspectError(f"give the {name} (this model's {what} run from 0 to {count - 1}).")
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise InspectError(f"the {name} must be an integer, got {value!r}.")
    if not 0 <= value < count:
        raise InspectError(
            f"{name} {value!r} is out of range: this model's {what} run from 0 to {count - 1}."
        )
    return int(value)


@dataclass(frozen=True)
class Patch:
    """Replace a site's value before the forward goes on (an intervention).

    ``site``: one of :data:`PATCHABLE`; ``layer``: its layer (None for ``embed``);
    ``head``: only that head of ``head_out``; ``neuron``: only that unit of ``mlp_hidden``;
    ``position``: only that position (None: every position). ``value``: a number (0.0: zero
    ablation), or an array that broadcasts to the selected part, whose shape is the site's with the
    chosen head / neuron / position axes removed: (d,) for a mean over a text, (B, T, d) or
    (B, d) for the value recorded on another prompt, (B, T) or () for one neuron."""

    site: str
    layer: int | None = None
    value: Any = 0.0
    head: int | None = None
    neuron: int | None = None
    position: int | None = None

    def where(self) -> str:
        """A short name for messages and tables: ``head_out.2[h=1]``, ``resid_pre.0[t=4]``."""
        name = self.site if self.layer is None else f"{self.site}.{self.layer}"
        parts = [f"h={self.head}"] * (self.head is not None)
        parts += [f"n={self.neuron}"] * (self.neuron is not None)
        parts += [f"t={self.position}"] * (self.position is not None)
        return name + (f"[{', '.join(parts)}]" if parts else "")


def check_patch(config: Any, patch: object, n_positions: int) -> Patch:
    """``patch`` if it fits a model of ``config`` run on ``n_positions`` tokens, else
    InspectError naming what is out of range (and the range)."""
    if not isinstance(patch, Patch):
        raise InspectError(f"an intervention is a Patch, not {type(patch).__name__}.")
    if patch.site not in PATCHABLE:
        raise InspectError(
            f"{patch.site!r} cannot be patched; the sites that can are {', '.join(PATCHABLE)}."
        )
    if patch.site == "embed":
        if patch.layer is not None:
            raise InspectError("the embedding comes before every layer: give it no layer.")
    else:
        check_index("layer", patch.layer, config.n_layer, "layers")
    if patch.head is not None:
        if patch.site != "head_out":
            raise InspectError(f"a head can be chosen only in head_out, not in {patch.site}.")
        check_index("head", patch.head, config.n_head, "heads")
    if patch.neuron is not None:
        if patch.site != "mlp_hidden":
            raise InspectError(f"a neuron can be chosen only in mlp_hidden, not in {patch.site}.")
        check_index("neuron", patch.neuron, config.ffn_hidden, "MLP units")
    if patch.position is not None:
        check_index("position", patch.position, n_positions, "positions (this prompt's tokens)")
    check_value(patch)
    return patch


def check_value(patch: Patch) -> None:
    """InspectError unless ``patch.value`` is a number, a tensor, or an array (or nested lists)
    of numbers; its shape is checked where the site's is known (:func:`check_broadcasts`)."""
    value = patch.value
    if is_real(value):
        return
    if isinstance(value, (bool, np.bool_)):  # True is 1 to Python, never a value to a user
        raise InspectError(
            f"the value patched into {patch.where()} is {value!r}; it must be a number or an "
            "array of numbers."
        )
    if hasattr(value, "shape") and not isinstance(value, np.ndarray):
        return  # a tensor (torch's, of any dtype and device)
    try:
        kind = np.asarray(value).dtype.kind
    except (TypeError, ValueError):
        kind = None
    if kind is None or kind not in "iuf":
        raise InspectError(
            f"the value patched into {patch.where()} is {reprlib.repr(value)}; it must be a "
            "number or an array of numbers."
        )


def patch_index(patch: Patch, ndim: int) -> tuple:
    """The part of a site's array that ``patch`` replaces, as an index: axis 1 is the
    position, axis 2 the head (``head_out``) or the unit (``mlp_hidden``)."""
    index: list = [slice(None)] * ndim
    if patch.position is not None:
        index[1] = patch.position
    if patch.head is not None:
        index[2] = patch.head
    if patch.neuron is not None:
        index[2] = patch.neuron
    return tuple(index)


def check_broadcasts(patch: Patch, value_shape: tuple, target_shape: tuple) -> None:
    """InspectError unless an array of ``value_shape`` broadcasts to ``target_shape`` (the
    selected part of the site), naming both."""
    trailing = target_shape[len(target_shape) - len(value_shape) :]
    fits = len(value_shape) <= len(target_shape) and all(
        have in (1, want) for have, want in zip(value_shape, trailing, strict=True)
    )
    if not fits:
        raise InspectError(
            f"the value patched into {patch.where()} has shape {tuple(value_shape)}, which does "
            f"not fit its shape {tuple(target_shape)}."
        )


@dataclass
class Trace:
    """One instrumented forward, in either engine's arrays: the logits (B, T, V), each token's
    loss (B, T) when targets were given (NaN where a target is -1), and the recorded
    activations by name."""

    logits: Any
    token_losses: Any
    activations: dict[str, Any]


class Sites:
    """The record and the patches of one instrumented forward, in either engine:
    ``visit(name, value)`` applies the patches of ``name`` in the order given and keeps the
    result when ``name`` is recorded. ``copy(array)`` and ``convert(value, like)`` are the
    engine's (a copy of an array; a patch's value as an array of ``like``'s dtype and
    device)."""

    def __init__(
        self,
        record: frozenset[str],
        patches: list[Patch],
        copy: Callable[[Any], Any],
        convert: Callable[[Any, Any], Any],
    ) -> None:
        self.record = record
        self.copy, self.convert = copy, convert
        self.patches: dict[str, list[Patch]] = {}
        for patch in patches:
            name = patch.site if patch.layer is None else f"{patch.site}.{patch.layer}"
            self.patches.setdefault(name, []).append(patch)
        self.activations: dict[str, Any] = {}

    @classmethod
    def for_forward(
        cls, config: Any, n_positions: int, record, patches, copy, convert, encoder=False
    ) -> Sites:
        """The Sites of a forward over ``n_positions`` tokens, its record and patches checked
        against ``config`` (ConfigError for a sequence longer than the context); ``encoder``
        for a BERT-style encoder's forward."""
        if n_positions > config.block_size:
            raise ConfigError(
                f"sequence of {n_positions} tokens is longer than the context of "
                f"{config.block_size} (block_size)."
            )
        if patches is None:
            patches = ()
        if not isinstance(patches, Iterable):  # one Patch, say, which is not a list of them
            raise InspectError(
                f"patches is a list of Patch, got {reprlib.repr(patches)}"
                f"{': write [patch]' if isinstance(patches, Patch) else ''}."
            )
        checked = [check_patch(config, patch, n_positions) for patch in patches]
        return cls(check_record(config, record, encoder), checked, copy, convert)

    def wanted(self, *names: str) -> bool:
        """Whether any of ``names`` is recorded or patched."""
        return any(name in self.record or name in self.patches for name in names)

    def visit(self, name: str, value: Any) -> Any:
        for patch in self.patches.get(name, ()):
            value = self.patched(value, patch)
        if name in self.record:
            self.activations[name] = value
        return value

    def patched(self, value: Any, patch: Patch) -> Any:
        """A copy of ``value`` with the part ``patch`` selects replaced by its value."""
        index = patch_index(patch, value.ndim)
        out = self.copy(value)
        if is_real(patch.value):
            out[index] = float(patch.value)
            return out
        replacement = self.convert(patch.value, value)
        check_broadcasts(patch, tuple(replacement.shape), tuple(out[index].shape))
        out[index] = replacement
        return out
