"""Neurons: the contexts of a text that make one MLP unit fire most.

    a_t = mlp_hidden_l[t, n] = σ(LN_2(x_t) W_1 + b_1)[n]     (seed 000 §4: the unit's value
                                                            after the non-linearity)

The k positions of the text with the largest a_t, each with the tokens before it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from light_llm.errors import InspectError
from light_llm.inspect.inspector import Inspector
from light_llm.inspect.text import batch_tokens, is_whole, text_windows, token_array
from light_llm.interventions import check_index


@dataclass
class NeuronExamples:
    """The ``k`` strongest ``activations`` of unit ``neuron`` of layer ``layer`` over a text,
    their ``positions`` in the text, and ``contexts``: for each, the ids of the text from
    ``context`` tokens before up to and including the position (the token the unit fired on
    last). ``mean`` and ``max`` summarise the unit over the whole text."""

    layer: int
    neuron: int
    activations: np.ndarray
    positions: np.ndarray
    contexts: list[np.ndarray]
    mean: float
    max: float


def top_activations(
    model, ids, layer: int, neuron: int, *, k: int = 10, context: int = 12, tokenizer=None
) -> NeuronExamples:
    """The ``k`` positions of the text ``ids`` where unit ``neuron`` of layer ``layer``'s MLP
    is most active: every token of it, its last too, each seen in its window of the context
    (the consecutive windows of scoring; for an encoder, ``[CLS] window [SEP]`` of
    ``block_size`` - 2 ids, unmasked, which needs its ``tokenizer``)."""
    inspector = Inspector(model)
    config = inspector.config
    ids = token_array(ids, config, "text", 2)
    layer = check_index("layer", layer, config.n_layer, "layers")
    neuron = check_index("neuron", neuron, config.ffn_hidden, "MLP units")
    for name, value, low in (("k", k, 1), ("context", context, 0)):
        if not is_whole(value) or not low <= value <= 10_000:
            raise InspectError(f"{name} must be an integer from {low} to 10000, got {value!r}.")
    k, context = int(k), int(context)
    site = f"mlp_hidden.{layer}"
    values = np.empty(len(ids))
    if inspector.encoder:
        for start, window in encoder_windows(ids, config.block_size, tokenizer):
            hidden = inspector.run(window[None], record=[site]).activations[site]
            values[start : start + len(window) - 2] = hidden[0, 1:-1, neuron]  # not [CLS], [SEP]
    else:
        tokens = batch_tokens(config, config.vocab_size + config.ffn_hidden)
        inputs_of_every_token = np.append(ids, 0)  # a placeholder after the text: a target only
        for inputs, _, starts in text_windows(inputs_of_every_token, config.block_size, tokens):
            hidden = inspector.run(inputs, record=[site]).activations[site][..., neuron]  # (B, T)
            for row, start in enumerate(starts):
                values[start : start + inputs.shape[1]] = hidden[row]
    order = np.argsort(-values, kind="stable")[:k]
    contexts = [ids[max(0, int(p) - context) : int(p) + 1] for p in order]
    return NeuronExamples(
        layer, neuron, values[order], order, contexts, float(values.mean()), float(values.max())
    )


def encoder_windows(ids: np.ndarray, block_size: int, tokenizer):
    """(start, ``[CLS] ids[start : start + n] [SEP]``) for consecutive windows of n =
    ``block_size`` - 2 ids: the text as an encoder reads it, nothing masked."""
    if getattr(tokenizer, "cls_id", None) is None:
        raise InspectError(
            "an encoder's units are read on [CLS] text [SEP]: this needs the encoder's WordPiece "
            "tokenizer."
        )
    n = block_size - 2
    cls, sep = [tokenizer.cls_id], [tokenizer.sep_id]
    for start in range(0, len(ids), n):
        yield start, np.concatenate([cls, ids[start : start + n], sep])
