"""Head roles, checked entry by entry against the attention maps the model draws itself
(``GPT.attention_maps``, the explicit formula)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from light_llm.errors import InspectError
from light_llm.inspect import head_roles
from tests.conftest import VARIANTS
from tests.inspect.conftest import numpy_twin, prompt, shaken_gpt


def maps(model, ids: np.ndarray) -> np.ndarray:
    """(L, B, nh, T, T) attention weights from the model's own explicit attention."""
    return np.stack([m.numpy() for m in model.attention_maps(torch.as_tensor(ids))])


@pytest.mark.parametrize("variant", ["seed", "rotary", "recipe"])
def test_scores_are_the_means_of_the_attention_entries_they_name(variant):
    model = shaken_gpt(torch.float64, **VARIANTS[variant])
    text = prompt(14, seed=5)
    roles = head_roles(model, text, length=6, n_sequences=3, seed=2)
    weights = maps(model, text[None])[:, 0]  # (L, nh, T, T)
    T = len(text)
    previous = np.mean([weights[..., t, t - 1] for t in range(1, T)], axis=0)
    first = np.mean([weights[..., t, 0] for t in range(1, T)], axis=0)
    np.testing.assert_allclose(roles.previous_token, previous, atol=1e-12)
    np.testing.assert_allclose(roles.first_token, first, atol=1e-12)
    sequence = np.random.default_rng(2).integers(0, 37, size=(3, 6))
    repeated = np.concatenate([sequence, sequence], 1)[:, :-1]
    weights = maps(model, repeated)  # (L, B, nh, 11, 11)
    induction = np.mean([weights[..., t, t - 5] for t in range(6, 11)], axis=(0, 2))
    np.testing.assert_allclose(roles.induction, induction, atol=1e-12)
    logits = model(torch.as_tensor(repeated))[0]
    losses = (
        torch.nn.functional.cross_entropy(
            logits.transpose(1, 2),
            torch.as_tensor(np.concatenate([sequence, sequence], 1)[:, 1:]),
            reduction="none",
        )
        .detach()
        .numpy()
    )
    assert roles.loss_second_copy == pytest.approx(losses[:, 6:].mean())
    assert roles.loss_first_copy == pytest.approx(losses[:, :5].mean())


def test_the_text_windows_read_are_reported_and_are_those_scored():
    """A text shorter than n_sequences windows of the context is read as the windows it
    holds: the count and length reported are those whose attention the scores average."""
    model = shaken_gpt(torch.float64, **VARIANTS["rotary"])
    T = model.config.block_size
    for n_tokens, windows, width in ((14, 1, 14), (2 * T + 5, 2, T)):
        text = prompt(n_tokens, seed=3)
        roles = head_roles(model, text, length=6, n_sequences=8, seed=2)
        assert (roles.text_windows, roles.text_window_length) == (windows, width)
        weights = maps(model, text[: windows * width].reshape(windows, width))
        first = weights[..., 1:, 0].mean(axis=(1, 3))  # (L, nh) over every window read
        np.testing.assert_allclose(roles.first_token, first, atol=1e-12)
    assert head_roles(model, length=6, n_sequences=2).text_windows == 0  # no text


def test_both_engines_score_alike():
    model = shaken_gpt(torch.float64, **VARIANTS["linear-attention"])
    ours = head_roles(model, length=5, n_sequences=2)
    twin = head_roles(numpy_twin(model), length=5, n_sequences=2)
    np.testing.assert_allclose(ours.induction, twin.induction, atol=1e-10)
    np.testing.assert_allclose(ours.previous_token, twin.previous_token, atol=1e-10)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"length": 9}, "an integer from 2 to 8"),
        ({"n_sequences": 0}, "n_sequences must be an integer from 1 to 1024"),
        ({"seed": -1}, "seed"),
        ({"ids": [4]}, "the text is 1 token long; it needs at least 2 tokens"),
    ],
)
def test_bad_input_is_one_sentence(options, message):
    with pytest.raises(InspectError, match=message):
        head_roles(shaken_gpt(), **options)


def test_an_encoder_has_no_induction_heads():
    from light_llm.models.bert import BertEncoder, EncoderConfig

    encoder = BertEncoder(
        EncoderConfig(vocab_size=40, block_size=16, n_layer=1, n_head=2, n_embd=16)
    )
    with pytest.raises(InspectError, match="encoder"):
        head_roles(encoder)


def test_numpy_integers_are_counts_too():
    model = shaken_gpt()
    counted = head_roles(model, length=np.int64(4), n_sequences=np.int32(2), seed=np.int64(3))
    plain = head_roles(model, length=4, n_sequences=2, seed=3)
    assert counted.length == 4 and type(counted.length) is int and counted.n_sequences == 2
    np.testing.assert_array_equal(counted.induction, plain.induction)
