"""The instrumented forward: the model's own logits, both engines' activations equal, and each
intervention equal to changing the weights that produce what it replaces."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from light_llm.errors import ConfigError, InspectError, SamplingError
from light_llm.inspect import Inspector
from light_llm.inspect.instrumented import run_instrumented
from light_llm.interventions import Patch, patch_index, site_names
from light_llm.reference.instrumented import run_instrumented as run_numpy
from tests.conftest import VARIANTS
from tests.inspect.conftest import numpy_twin, prompt, shaken_gpt


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_gives_the_models_own_logits_with_or_without_recording(variant):
    model = shaken_gpt(torch.float32, **VARIANTS[variant])
    idx = torch.as_tensor(np.stack([prompt(12, 1), prompt(12, 2)]))
    expected, _ = model(idx)
    assert torch.equal(run_instrumented(model, idx).logits, expected)
    recorded = run_instrumented(model, idx, record=True)
    assert torch.allclose(recorded.logits, expected, atol=1e-5)
    assert set(recorded.activations) == set(site_names(model.config))


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_both_engines_record_the_same_numbers_in_float64(variant):
    model = shaken_gpt(torch.float64, **VARIANTS[variant])
    idx = np.stack([prompt(12, 1), prompt(12, 2)])
    targets = np.roll(idx, -1, axis=1)
    targets[0, 3] = -1
    patches = [Patch("head_out", 0, 0.0, head=1), Patch("mlp_hidden", 1, 0.0, neuron=3)]
    ours = run_instrumented(
        model, torch.as_tensor(idx), record=True, patches=patches, targets=torch.as_tensor(targets)
    )
    twin = run_numpy(numpy_twin(model), idx, record=True, patches=patches, targets=targets)
    np.testing.assert_allclose(ours.logits.numpy(), twin.logits, atol=1e-6, rtol=0)
    np.testing.assert_allclose(ours.token_losses.numpy(), twin.token_losses, atol=1e-6, rtol=0)
    assert np.isnan(twin.token_losses[0, 3])
    for name, value in ours.activations.items():
        np.testing.assert_allclose(value.numpy(), twin.activations[name], atol=1e-6, rtol=0)


def test_the_residual_stream_adds_up():
    model = shaken_gpt(torch.float64)
    trace = run_instrumented(model, torch.as_tensor(prompt()[None]), record=True)
    acts = trace.activations
    assert torch.allclose(acts["resid_pre.0"], acts["embed"] + acts["pos_embed"])
    for layer in range(model.config.n_layer):
        bias = model.transformer.h[layer].attn.c_proj.bias
        summed = acts[f"head_out.{layer}"].sum(2) + bias
        assert torch.allclose(acts[f"attn_out.{layer}"], summed)
        mid = acts[f"resid_pre.{layer}"] + acts[f"attn_out.{layer}"]
        assert torch.allclose(acts[f"resid_mid.{layer}"], mid)
        post = acts[f"resid_mid.{layer}"] + acts[f"mlp_out.{layer}"]
        assert torch.allclose(acts[f"resid_post.{layer}"], post)


def zeroed(model, weights: dict[str, tuple]):
    """A copy of the NumPy ``model`` with the given slices of weights set to zero."""
    twin = numpy_twin(model)
    for name, index in weights.items():
        if name in twin.params:  # a bias only where the config has biases
            twin.params[name][index] = 0.0
    return twin


ABLATIONS = {
    # patch, the weights whose zeroing removes exactly that part
    "head": (
        Patch("head_out", 1, 0.0, head=1),
        {"transformer.h.1.attn.c_proj.weight": np.s_[:, 8:16]},
    ),
    "mlp": (
        Patch("mlp_out", 0, 0.0),
        {
            "transformer.h.0.mlp.c_proj.weight": np.s_[:],
            "transformer.h.0.mlp.c_proj.bias": np.s_[:],
        },
    ),
    "neuron": (
        Patch("mlp_hidden", 1, 0.0, neuron=5),
        {"transformer.h.1.mlp.c_proj.weight": np.s_[:, 5]},
    ),
}


@pytest.mark.parametrize("part", sorted(ABLATIONS))
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_zero_ablation_equals_the_weights_zeroed_in_the_numpy_engine(part, variant):
    model = shaken_gpt(torch.float64, **VARIANTS[variant])
    patch, weights = ABLATIONS[part]
    idx = prompt()[None]
    ablated = run_numpy(numpy_twin(model), idx, patches=[patch]).logits
    recomputed, _, _ = zeroed(model, weights).forward(idx)
    np.testing.assert_allclose(ablated, recomputed, atol=1e-12)
    plain = run_numpy(numpy_twin(model), idx, record=[f"{patch.site}.{patch.layer}"])
    part = plain.activations[f"{patch.site}.{patch.layer}"][
        patch_index(patch, 3 + (part == "head"))
    ]
    if np.abs(part).max() > 0:  # a ReLU unit may be silent on this prompt: then nothing changes
        assert np.abs(ablated - plain.logits).max() > 1e-6  # the part mattered


# value embeddings and the embedding skip bring the tokens into every layer beside the
# residual stream (tested below)
SIDE_PATHS = {"value-embeddings", "embedding-skip"}
RESIDUAL_IS_THE_STATE = sorted(set(VARIANTS) - SIDE_PATHS)


@pytest.mark.parametrize("variant", RESIDUAL_IS_THE_STATE)
def test_patching_a_whole_residual_from_another_run_gives_that_runs_logits(variant):
    model = shaken_gpt(torch.float64, **VARIANTS[variant])
    clean, corrupt = torch.as_tensor(prompt(10, 1)[None]), torch.as_tensor(prompt(10, 2)[None])
    for layer in range(model.config.n_layer):
        site = f"resid_pre.{layer}"
        recorded = run_instrumented(model, clean, record=[site]).activations[site]
        patched = run_instrumented(model, corrupt, patches=[Patch("resid_pre", layer, recorded)])
        assert torch.allclose(patched.logits, model(clean)[0], atol=1e-12)


@pytest.mark.parametrize("variant", sorted(SIDE_PATHS))
def test_with_a_side_path_the_residual_is_not_the_whole_state(variant):
    """With value embeddings (E_v[tokens] in every layer's values) or the embedding skip
    (μ_l X_0 in every layer's input) the tokens reach every layer beside the residual: the
    clean run's residual patched into another prompt's run before layer 1 does not give the
    clean logits (that prompt's side path still counts), and does once the side path is shut
    (the value table zero; every μ zero). Three layers: layer 2 mixes X_0 in again."""
    model = shaken_gpt(torch.float64, **VARIANTS[variant], n_layer=3)
    clean, corrupt = torch.as_tensor(prompt(10, 1)[None]), torch.as_tensor(prompt(10, 2)[None])
    recorded = run_instrumented(model, clean, record=["resid_pre.1"]).activations["resid_pre.1"]
    patched = run_instrumented(model, corrupt, patches=[Patch("resid_pre", 1, recorded)])
    assert (patched.logits - model(clean)[0]).abs().max() > 1e-3
    with torch.no_grad():
        if variant == "value-embeddings":
            model.transformer.wve.weight.zero_()
        else:
            for block in model.transformer.h:
                block.x0_gains[1] = 0.0
    recorded = run_instrumented(model, clean, record=["resid_pre.1"]).activations["resid_pre.1"]
    patched = run_instrumented(model, corrupt, patches=[Patch("resid_pre", 1, recorded)])
    assert torch.allclose(patched.logits, model(clean)[0], atol=1e-12)


def test_a_patch_at_one_position_changes_only_that_position_and_later():
    model = shaken_gpt(torch.float64)
    idx = torch.as_tensor(prompt(10)[None])
    plain = run_instrumented(model, idx).logits
    patched = run_instrumented(model, idx, patches=[Patch("resid_mid", 0, 0.0, position=6)]).logits
    assert torch.equal(patched[:, :6], plain[:, :6])
    assert (patched[:, 6:] - plain[:, 6:]).abs().amax(-1).min() > 1e-6


BAD_PATCHES = {
    "layer out of range": (
        Patch("mlp_out", 2),
        "layer 2 is out of range: this model's layers run from 0 to 1",
    ),
    "head out of range": (Patch("head_out", 0, head=5), "head 5 is out of range"),
    "neuron out of range": (Patch("mlp_hidden", 0, neuron=64), "run from 0 to 63"),
    "position out of range": (Patch("resid_pre", 0, position=10), "run from 0 to 9"),
    "head of an MLP": (Patch("mlp_out", 0, head=0), "only in head_out"),
    "unknown site": (Patch("pattern", 0), "cannot be patched"),
    "wrong shape": (Patch("mlp_out", 0, np.zeros(5)), "does not fit its shape (1, 10, 16)"),
    "text for a value": (Patch("mlp_out", 0, "zero"), "the value patched into mlp_out.0 is 'zero'"),
    "no value": (Patch("resid_pre", 1, None), "the value patched into resid_pre.1 is None"),
    "a long text for a value": (  # shown cut short, as reprlib.repr cuts it
        Patch("mlp_out", 0, ["word"] * 10_000),
        "is ['word', 'word', 'word', 'word', 'word', 'word', ...]; it must be a number",
    ),
    "a bool for a value": (Patch("mlp_out", 0, True), "mlp_out.0 is True; it must be a number"),
    "no layer": (Patch("resid_pre"), "give the layer (this model's layers run from 0 to 1)"),
    "a float layer": (Patch("resid_pre", 1.0), "the layer must be an integer, got 1.0"),
    "a float position": (Patch("resid_pre", 0, position=2.0), "position must be an integer"),
}


@pytest.mark.parametrize("case", sorted(BAD_PATCHES))
@pytest.mark.parametrize("engine", ["torch", "numpy"])
def test_a_patch_that_does_not_fit_is_one_sentence(case, engine):
    model = shaken_gpt(torch.float64)
    patch, message = BAD_PATCHES[case]
    with pytest.raises(InspectError, match=re.escape(message)):
        if engine == "torch":
            run_instrumented(model, torch.as_tensor(prompt(10)[None]), patches=[patch])
        else:
            run_numpy(numpy_twin(model), prompt(10)[None], patches=[patch])


BAD_IDS = {
    "an empty prompt": (np.zeros((1, 0), dtype=np.int64), "at least one token, got shape (1, 0)"),
    "no sequence": (np.zeros((0, 4), dtype=np.int64), "at least one token, got shape (0, 4)"),
    "one dimension": (np.arange(4), "the batch must be a (B, T) array of integer token ids"),
    "float ids": (np.array([[1.0, 2.0]]), "the batch must be a (B, T) array of integer token"),
    "booleans": (np.array([[True, False]]), "the batch must be a (B, T) array of integer token"),
    "an id past the vocabulary": (np.array([[1, 37]]), "token id 37 of the batch is outside"),
    "a negative id": (np.array([[-1, 2]]), "token id -1 of the batch is outside"),
    "ragged lists": ([[1, 2], [3]], "the batch must be a list of token ids"),
}


@pytest.mark.parametrize("case", sorted(BAD_IDS))
@pytest.mark.parametrize("engine", ["torch", "numpy"])
def test_the_inspectors_forward_refuses_what_is_no_batch_of_token_ids(case, engine):
    """Inspector.run, the API's first call: one sentence (InspectError) for every engine, not
    the library's own error from deep inside the forward."""
    model = shaken_gpt(torch.float64)
    ids, message = BAD_IDS[case]
    inspector = Inspector(model if engine == "torch" else numpy_twin(model))
    with pytest.raises(InspectError, match=re.escape(message)):
        inspector.run(ids)


BAD_TARGETS_AND_STARTS = {  # (keyword arguments to Inspector.run on a (1, 4) batch, message)
    "a negative target": (
        {"targets": np.array([[-5, 1, 2, 3]])},
        "token id -5 of the targets (-1: not scored) is outside",
    ),
    "a target past the vocabulary": (
        {"targets": np.array([[37, 1, 2, 3]])},
        "token id 37 of the targets",
    ),
    "targets of another shape": (
        {"targets": np.array([[1, 2]])},
        "the targets must have the batch's shape (1, 4), got (1, 2)",
    ),
    "a start past the layers": (
        {"start": (7, np.zeros((1, 4, 16)))},
        "start's layer must be from 0 to 2 (the model's 2 layers; 2: the head alone), got 7",
    ),
    "a negative start": (
        {"start": (-1, np.zeros((1, 4, 16)))},
        "start's layer must be from 0 to 2 (the model's 2 layers; 2: the head alone), got -1",
    ),
    "a start residual of text": (
        {"start": (0, np.full((1, 4, 16), "a"))},
        "start's residual must be an array of numbers, got <U1",
    ),
    "a name list of lists to record": (
        {"record": [["resid_pre.0"]]},
        "record names activations by str (such as 'resid_pre.0')",
    ),
    "a number to record": ({"record": 5}, "record is True (every activation) or a list"),
    "one Patch, not a list": (
        {"patches": Patch("resid_pre", 0)},
        "patches is a list of Patch, got Patch(",
    ),
    "a start residual of another shape": (
        {"start": (1, np.zeros((1, 3, 16)))},
        "start's residual must have the batch's shape (B, T, d) = (1, 4, 16), got (1, 3, 16)",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_TARGETS_AND_STARTS))
@pytest.mark.parametrize("engine", ["torch", "numpy"])
def test_targets_and_a_start_that_do_not_fit_are_one_sentence(case, engine):
    """The NumPy engine read a negative target as id 0 and ran a start past the last layer as
    no layer at all (the torch engine, some other layer for -1): both engines now refuse."""
    model = shaken_gpt(torch.float64)
    inspector = Inspector(model if engine == "torch" else numpy_twin(model))
    arguments, message = BAD_TARGETS_AND_STARTS[case]
    with pytest.raises(InspectError, match=re.escape(message)):
        inspector.run(prompt(4)[None], **arguments)


def test_either_engines_values_patch_and_start_the_other_engine_alike():
    """A value recorded by the torch engine (16-bit, needing its gradient) patched into the
    NumPy engine, and a start residual given as nested lists or a tensor, are the same numbers
    in both engines (they were a TypeError or an AttributeError in the NumPy engine, and an
    integer residual gave float64 logits there)."""
    model = shaken_gpt(torch.float32)
    ids = prompt(4)[None]
    value = torch.linspace(-1, 1, 16).to(torch.bfloat16)
    resid = Inspector(model).run(ids, record=["resid_pre.1"]).activations["resid_pre.1"]
    runs = []
    for inspected in (model, numpy_twin(model)):
        inspector = Inspector(inspected)
        runs.append(
            [
                inspector.run(ids, patches=[Patch("resid_pre", 0, value)]).logits,
                inspector.run(
                    ids, patches=[Patch("resid_pre", 0, value.float().requires_grad_())]
                ).logits,
                inspector.run(ids, start=(1, resid.tolist())).logits,
                inspector.run(ids, start=(1, torch.as_tensor(resid))).logits,
                inspector.run(ids, start=(1, np.ones((1, 4, 16), dtype=np.int64))).logits,
            ]
        )
    for by_torch, by_numpy in zip(*runs, strict=True):
        assert by_numpy.dtype == by_torch.dtype == np.float32
        np.testing.assert_allclose(by_numpy, by_torch, atol=1e-5)
    np.testing.assert_allclose(runs[0][2], Inspector(model).run(ids).logits, atol=1e-6)


def test_a_model_in_training_mode_stays_in_it():
    """seen_model put the caller's model in eval mode and left it there."""
    model = shaken_gpt(torch.float64).train()
    before = Inspector(model.eval()).run(prompt()[None]).logits
    model.train()
    assert np.array_equal(Inspector(model).run(prompt()[None]).logits, before)
    assert model.training


def test_each_engines_forward_refuses_the_other_engines_model_and_bad_ids():
    """The NumPy twin read a negative id from the table's end, scored a negative target as id
    0 and raised an IndexError past the vocabulary; each forward given the other engine's
    model raised an AttributeError."""
    model = shaken_gpt(torch.float64)
    twin = numpy_twin(model)
    cases = [
        (np.array([[-1, 2]]), None, "token id -1 is outside the model's vocabulary"),
        (np.array([[37, 2]]), None, "token id 37 is outside the model's vocabulary"),
        (np.array([[1, 2]]), np.array([[-5, 1]]), "target -5 is outside the model's vocabulary"),
        (np.array([[1.0, 2.0]]), None, "token ids must be integers, got float64"),
    ]
    for ids, targets, message in cases:
        with pytest.raises(SamplingError, match=re.escape(message)):
            run_numpy(twin, ids, targets=targets)
    with pytest.raises(ConfigError, match="model must be a NumpyGPT, got GPT"):
        run_numpy(model, prompt()[None])
    with pytest.raises(InspectError, match="not a NumpyGPT"):
        run_instrumented(twin, torch.as_tensor(prompt()[None]))


def test_targets_of_minus_one_are_not_scored_in_either_engine():
    """-1 is the one value besides the ids that a target may take: no loss there."""
    model = shaken_gpt(torch.float64)
    ids, targets = prompt(4)[None], np.array([[1, -1, 2, -1]])
    for inspected in (model, numpy_twin(model)):
        losses = Inspector(inspected).run(ids, targets=targets).token_losses
        assert np.isnan(losses[0, [1, 3]]).all() and np.isfinite(losses[0, [0, 2]]).all()


def test_an_unknown_name_to_record_is_one_sentence():
    with pytest.raises(InspectError, match="'resid_pre.9' is not an activation of this model"):
        run_instrumented(shaken_gpt(), torch.as_tensor(prompt()[None]), record=["resid_pre.9"])


def test_a_lora_run_is_seen_merged():
    from light_llm.inspect import Inspector
    from light_llm.nn.lora import add_lora, lora_layers, merge_lora

    model = shaken_gpt(torch.float64)
    add_lora(model, ["c_attn", "c_proj"], rank=2)
    with torch.no_grad():
        for layer in lora_layers(model).values():
            layer.lora_B.normal_(0.0, 0.5)  # adapters that change the outputs
    idx = prompt()[None]
    expected, _ = model(torch.as_tensor(idx))
    trace = Inspector(model).run(idx, record=["head_out.1"])
    np.testing.assert_allclose(trace.logits, expected.detach().numpy(), atol=1e-10)
    merged = merge_lora(__import__("copy").deepcopy(model))
    assert not torch.allclose(
        merged(torch.as_tensor(idx))[0], shaken_gpt(torch.float64)(torch.as_tensor(idx))[0]
    )
    assert lora_layers(model)  # the learner's model is left as it was


@pytest.mark.parametrize("tied", [True, False])
def test_an_int8_model_is_seen_as_its_float_weights(tied):
    """An int8 GPT (light_llm.models.quantize) is looked inside of as W_hat = q s: the
    instrumented forward with its heads split, the logit lens's last stage and the attribution
    give the model's own logits (22 rows, which it multiplies by q s in float32)."""
    from light_llm.inspect import Inspector
    from light_llm.inspect.attribution import direct_logit_attribution
    from light_llm.inspect.lens import logit_lens
    from light_llm.models.quantize import quantize_gpt

    model = quantize_gpt(shaken_gpt(torch.float32, tie_embeddings=tied, smear=True))
    idx = np.stack([prompt(), prompt(seed=2)])
    with torch.no_grad():
        expected = model(torch.as_tensor(idx))[0].numpy()
    trace = Inspector(model).run(idx, record=["head_out.0", "head_out.1"])
    np.testing.assert_allclose(trace.logits, expected, atol=1e-5)
    lens = logit_lens(model, idx[0], keep_log_probs=True)
    z = expected[0, -1].astype(np.float64)
    log_probs = z - z.max() - np.log(np.exp(z - z.max()).sum())
    np.testing.assert_allclose(lens.log_probs[-1, -1], log_probs, atol=1e-5)
    attribution = direct_logit_attribution(model, idx[0], 3, versus=7)
    assert attribution.total == pytest.approx(z[3] - z[7], abs=1e-4)
