"""Naming the parts of a model that an ablation removes: ``L1H2`` (layer 1's head 2), ``L1MLP``
(layer 1's MLP), ``L1ATTN`` (layer 1's whole attention), ``L1N37`` (unit 37 of layer 1's
MLP), layers and heads counted from 0, as TransformerLens writes them."""

from __future__ import annotations

import re

from light_llm.errors import InspectError
from light_llm.interventions import Patch, check_patch

# ASCII digits only (\d takes any script's: "L٠H١" would read as L0H1)
COMPONENT = re.compile(r"^L([0-9]+)(?:H([0-9]+)|N([0-9]+)|(MLP)|(ATTN))$", re.IGNORECASE)


def component_patch(name: object, config, value=0.0) -> Patch:
    """The Patch that replaces component ``name`` (``L1H2``, ``L1MLP``, ``L1ATTN``,
    ``L1N37``) by ``value`` (0.0: zero ablation). InspectError for a name of no such form, or
    a layer, head or neuron out of range (naming the range)."""
    match = COMPONENT.match(name.strip()) if isinstance(name, str) else None
    if match is None:
        raise InspectError(
            f"{name!r} names no part of a model; write L<layer>H<head> for a head, "
            "L<layer>MLP for an MLP, L<layer>ATTN for a whole attention layer or "
            "L<layer>N<unit> for one MLP unit, counting from 0 (e.g. L0H1, L2MLP, L1N37)."
        )
    layer, head, neuron, mlp, _ = match.groups()
    if head is not None:
        patch = Patch("head_out", int(layer), value, head=int(head))
    elif neuron is not None:
        patch = Patch("mlp_hidden", int(layer), value, neuron=int(neuron))
    else:
        patch = Patch("mlp_out" if mlp else "attn_out", int(layer), value)
    return check_patch(config, patch, config.block_size)


def component_name(patch: Patch) -> str:
    """The name :func:`component_patch` reads, for a head, MLP, attention or neuron patch."""
    if patch.site == "head_out" and patch.head is not None:
        return f"L{patch.layer}H{patch.head}"
    if patch.site == "mlp_hidden" and patch.neuron is not None:
        return f"L{patch.layer}N{patch.neuron}"
    return f"L{patch.layer}{'MLP' if patch.site == 'mlp_out' else 'ATTN'}"
