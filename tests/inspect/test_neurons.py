"""Neurons: the strongest activations of a unit, found position by position from the model's
own MLP (a hook on W_2's input)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from light_llm.errors import InspectError
from light_llm.inspect import top_activations
from tests.conftest import VARIANTS
from tests.inspect.conftest import numpy_twin, prompt, shaken_gpt, unit_values

TEXT = prompt(41, seed=6)


@pytest.mark.parametrize("variant", ["seed", "swiglu", "relu2"])
def test_the_top_contexts_are_the_units_largest_values(variant):
    model = shaken_gpt(torch.float64, **VARIANTS[variant])
    # one per token of the text, its last too: the windows of the text and a placeholder after
    values = unit_values(model, 1, 9, np.append(TEXT, 0))
    assert len(values) == len(TEXT)
    result = top_activations(model, TEXT, 1, 9, k=4, context=3)
    order = np.argsort(-values, kind="stable")[:4]
    assert list(result.positions) == list(order)
    np.testing.assert_allclose(result.activations, values[order], atol=1e-12)
    assert result.max == pytest.approx(values.max()) and result.mean == pytest.approx(values.mean())
    for position, context in zip(result.positions, result.contexts, strict=True):
        assert list(context) == list(TEXT[max(0, position - 3) : position + 1])
    twin = top_activations(numpy_twin(model), TEXT, 1, 9, k=4, context=3)
    assert list(twin.positions) == list(result.positions)


@pytest.mark.parametrize("length", [2, 5, 16])
def test_every_token_of_a_prompt_is_looked_at(length):
    model = shaken_gpt(torch.float64)
    ids = prompt(length, seed=2)
    captured = []
    projection = model.transformer.h[0].mlp.c_proj
    handle = projection.register_forward_pre_hook(lambda _, args: captured.append(args[0]))
    with torch.no_grad():
        model(torch.as_tensor(ids[None]))  # the whole prompt, one forward
    handle.remove()
    values = captured[0][0, :, 3].numpy()  # unit 3 of layer 0 at every position
    result = top_activations(model, ids, 0, 3, k=length)
    assert sorted(result.positions) == list(range(length))
    np.testing.assert_allclose(result.activations, values[result.positions], atol=1e-12)
    assert result.mean == pytest.approx(values.mean()) and result.max == pytest.approx(values.max())


@pytest.mark.parametrize(
    ("layer", "neuron", "options", "message"),
    [
        (2, 0, {}, "layer 2 is out of range"),
        (0, 64, {}, "neuron 64 is out of range: this model's MLP units run from 0 to 63"),
        (0, 0, {"k": 0}, "k must be an integer from 1"),
    ],
)
def test_bad_input_is_one_sentence(layer, neuron, options, message):
    with pytest.raises(InspectError, match=message):
        top_activations(shaken_gpt(), TEXT, layer, neuron, **options)


def test_numpy_integers_are_counts_too():
    model = shaken_gpt()
    counted = top_activations(
        model, TEXT, np.int64(1), np.int32(2), k=np.int64(3), context=np.int64(2)
    )
    plain = top_activations(model, TEXT, 1, 2, k=3, context=2)
    assert (counted.layer, counted.neuron) == (1, 2)  # plain ints: a tensor(2) was kept
    assert type(counted.layer) is int and type(counted.neuron) is int
    assert list(counted.positions) == list(plain.positions)
    assert [list(c) for c in counted.contexts] == [list(c) for c in plain.contexts]
