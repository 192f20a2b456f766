"""The logit lens: after the last sublayer it is the model's own output, in both engines."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from light_llm.errors import InspectError
from light_llm.inspect import logit_lens
from tests.conftest import VARIANTS
from tests.inspect.conftest import numpy_twin, prompt, shaken_gpt


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_the_lens_after_the_last_layer_is_the_models_own_distribution(variant):
    model = shaken_gpt(torch.float64, **VARIANTS[variant])
    ids = prompt()
    lens = logit_lens(model, ids, keep_log_probs=True)
    own = torch.log_softmax(model(torch.as_tensor(ids[None]))[0][0], -1).detach().numpy()
    np.testing.assert_allclose(lens.log_probs[-1], own, atol=1e-10)
    assert lens.stages == ["embed", "L0 attn", "L0 mlp", "L1 attn", "L1 mlp"]
    assert np.abs(lens.log_probs[0] - own).max() > 1e-3  # the embeddings alone predict otherwise


def test_top_tokens_ranks_and_probabilities_agree_with_the_full_distribution():
    model = shaken_gpt(torch.float64, **VARIANTS["recipe"])
    ids = prompt(9)
    lens = logit_lens(model, ids, top_k=4, keep_log_probs=True)
    probs = np.exp(lens.log_probs)  # (S, T, V)
    for s in range(len(lens.stages)):
        for t in range(len(ids)):
            order = sorted(range(probs.shape[-1]), key=lambda v: -probs[s, t, v])
            assert list(lens.top_ids[s, t]) == order[:4]
            np.testing.assert_allclose(lens.top_probs[s, t], probs[s, t, order[:4]])
            if t + 1 < len(ids):
                target = ids[t + 1]
                assert lens.target_ranks[s, t] == order.index(target)
                assert lens.target_probs[s, t] == pytest.approx(probs[s, t, target])
    assert lens.target_ranks[0, -1] == -1 and np.isnan(lens.target_probs[0, -1])


def test_a_chosen_target_is_followed_at_every_position():
    model = shaken_gpt(torch.float64)
    lens = logit_lens(model, prompt(6), target=5, keep_log_probs=True)
    np.testing.assert_allclose(lens.target_probs, np.exp(lens.log_probs[..., 5]))
    assert (lens.target_ids == 5).all()


@pytest.mark.parametrize("variant", ["seed", "recipe", "post-ln"])
def test_both_engines_give_the_same_lens(variant):
    model = shaken_gpt(torch.float64, **VARIANTS[variant])
    ours = logit_lens(model, prompt(), keep_log_probs=True)
    twin = logit_lens(numpy_twin(model), prompt(), keep_log_probs=True)
    np.testing.assert_allclose(ours.log_probs, twin.log_probs, atol=1e-9)
    assert (ours.top_ids == twin.top_ids).all()


@pytest.mark.parametrize(
    ("ids", "options", "message"),
    [
        ([], {}, "the prompt is empty"),
        (list(range(17)), {}, "17 tokens long, more than the model's context of 16"),
        ([1, 2], {"top_k": 0}, "top_k must be an integer from 1 to 37"),
        ([1, 2], {"target": 37}, "outside the model's vocabulary"),
        ([1, 99], {}, "token id 99 of the prompt is outside"),
        ([1, 2], {"keep_log_probs": "no"}, "keep_log_probs must be true or false, got 'no'"),
    ],
)
def test_bad_input_is_one_sentence(ids, options, message):
    with pytest.raises(InspectError, match=message):
        logit_lens(shaken_gpt(), ids, **options)


@pytest.mark.parametrize("variant", ["seed", "recipe"])
def test_the_lens_over_a_text_ends_at_the_models_accuracy_and_loss(variant):
    from light_llm.inspect import ablate_text, lens_over_text
    from light_llm.inspect.text import text_windows

    model = shaken_gpt(torch.float64, **VARIANTS[variant])
    text = prompt(40, seed=9)
    result = lens_over_text(model, text)
    hits, count = 0, 0
    for inputs, targets, _ in text_windows(text, 16, 1000):
        logits = model(torch.as_tensor(inputs))[0].detach().numpy()
        hits += int((logits.argmax(-1) == targets).sum())
        count += targets.size
    assert result.n_tokens == count == 39
    assert result.top1[-1] == pytest.approx(hits / count)
    loss = ablate_text(model, text, ["L0H0"]).loss  # the text's plain loss
    assert result.mean_log_prob[-1] == pytest.approx(-loss, abs=1e-10)


def test_a_numpy_integer_is_a_count_too():
    model, ids = shaken_gpt(), prompt()
    counted = logit_lens(model, ids, top_k=np.int64(3))
    np.testing.assert_array_equal(counted.top_ids, logit_lens(model, ids, top_k=3).top_ids)
