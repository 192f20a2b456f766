"""Activation patching: each cell is the corrupted run with that one activation taken from the
clean run, and the cells that must restore everything (or nothing) do."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from light_llm.errors import InspectError
from light_llm.inspect import activation_patching
from light_llm.inspect.instrumented import run_instrumented
from light_llm.interventions import Patch
from tests.conftest import VARIANTS
from tests.inspect.conftest import numpy_twin, prompt, shaken_gpt

CLEAN = prompt(8, seed=4)
CORRUPT = CLEAN.copy()
CORRUPT[2] = (CLEAN[2] + 5) % 37  # one token differs: position 2


def metric(model, ids, patches=()) -> float:
    logits = run_instrumented(model, torch.as_tensor(ids[None]), patches=patches).logits
    return (logits[0, -1, 3] - logits[0, -1, 11]).item()


@pytest.mark.parametrize("variant", ["seed", "recipe", "post-ln"])
def test_each_cell_is_one_activation_taken_from_the_clean_run(variant):
    model = shaken_gpt(torch.float64, **VARIANTS[variant])
    result = activation_patching(model, CLEAN, CORRUPT, 3, 11)
    assert result.clean_metric == pytest.approx(metric(model, CLEAN))
    assert result.corrupt_metric == pytest.approx(metric(model, CORRUPT))
    span = result.clean_metric - result.corrupt_metric
    clean = run_instrumented(model, torch.as_tensor(CLEAN[None]), record=True).activations
    for layer, position in [(0, 2), (1, 5), (1, 2)]:
        value = clean[f"resid_pre.{layer}"][:, position]
        patched = metric(model, CORRUPT, [Patch("resid_pre", layer, value, position=position)])
        assert result.resid[layer, position] == pytest.approx(
            (patched - result.corrupt_metric) / span
        )
    value = clean["head_out.1"][:, :, 0]
    patched = metric(model, CORRUPT, [Patch("head_out", 1, value, head=0)])
    assert result.heads[1, 0] == pytest.approx((patched - result.corrupt_metric) / span)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_16_bit_model_is_patched_as_its_own_forward_patched(dtype):
    model = shaken_gpt(dtype)
    result = activation_patching(model, CLEAN, CORRUPT, 3, 11)
    clean = run_instrumented(model, torch.as_tensor(CLEAN[None]), record=True).activations
    for layer, position in [(0, 2), (1, 5)]:
        value = clean[f"resid_pre.{layer}"][:, position]
        patched = metric(model, CORRUPT, [Patch("resid_pre", layer, value, position=position)])
        assert result.resid_metrics[layer, position] == pytest.approx(patched, abs=0.02)
    value = clean["head_out.1"][:, :, 0]
    patched = metric(model, CORRUPT, [Patch("head_out", 1, value, head=0)])
    assert result.head_metrics[1, 0] == pytest.approx(patched, abs=0.02)


def test_what_must_restore_everything_or_nothing_does():
    model = shaken_gpt(torch.float64)
    result = activation_patching(model, CLEAN, CORRUPT, 3, 11)
    assert result.resid_labels == ["L0 in", "L1 in", "L1 out"]
    assert result.resid[0, 2] == pytest.approx(1.0)  # the differing token's embedding
    np.testing.assert_allclose(np.delete(result.resid[0], 2), 0.0, atol=1e-12)  # same tokens
    assert result.resid[-1, -1] == pytest.approx(1.0)  # the last residual is the prediction
    np.testing.assert_allclose(result.resid[-1, :-1], 0.0, atol=1e-12)
    np.testing.assert_allclose(result.resid[1, :2], 0.0, atol=1e-12)  # before the change


def test_both_engines_patch_alike():
    model = shaken_gpt(torch.float64, **VARIANTS["rotary"])
    ours = activation_patching(model, CLEAN, CORRUPT, 3, 11)
    twin = activation_patching(numpy_twin(model), CLEAN, CORRUPT, 3, 11)
    np.testing.assert_allclose(ours.resid, twin.resid, atol=1e-8)
    np.testing.assert_allclose(ours.heads, twin.heads, atol=1e-8)


def test_prompts_whose_metrics_do_not_differ_restore_nothing_measurable():
    """A model with every weight 0 gives every prompt the same logits: two different prompts,
    one metric, no fraction of it to restore (NaN, not a division by zero's inf)."""
    model = shaken_gpt()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.zero_()
    result = activation_patching(model, CLEAN, CORRUPT, 3, 11)
    assert result.clean_metric == result.corrupt_metric
    assert np.isnan(result.resid).all() and np.isnan(result.heads).all()


@pytest.mark.parametrize(
    ("corrupt", "answer", "message"),
    [
        (CLEAN[:-1], 3, "the clean one has 8 and the corrupted one 7"),
        (CORRUPT, 37, "the answer token 37 is out of range"),
        (np.array([], dtype=np.int64), 3, "the prompt is empty"),
        (CORRUPT, 11, "the wrong token must differ from the answer"),
        (CLEAN, 3, "the clean and the corrupted prompt are the same tokens"),
    ],
)
def test_bad_input_is_one_sentence(corrupt, answer, message):
    with pytest.raises(InspectError, match=message):
        activation_patching(shaken_gpt(), CLEAN, corrupt, answer, 11)
