"""Sampling in the NumPy engine against the PyTorch engine's rules (seed 000 §8)."""

import numpy as np
import pytest
import torch

from light_llm.errors import SamplingError
from light_llm.generate import filter_logits as torch_filter_logits
from light_llm.reference.model import NumpyGPT
from light_llm.reference.sampling import filter_logits, generate_text, sample_next
from light_llm.tokenizers import CharTokenizer
from tests.conftest import tiny_config

OPTIONS = [
    dict(temperature=1.0),
    dict(temperature=0.7, top_k=5),
    dict(temperature=1.3, top_p=0.8),
    dict(temperature=0.5, top_k=12, top_p=0.6),
    dict(temperature=1.0, top_k=1),
    dict(temperature=1.0, top_p=1e-6),
]


@pytest.mark.parametrize("options", OPTIONS)
def test_filter_logits_keeps_what_the_pytorch_engine_keeps(options):
    logits = np.random.default_rng(0).standard_normal((4, 40)) * 3
    ours = filter_logits(logits, **options)
    theirs = torch_filter_logits(torch.from_numpy(logits), **options).double().numpy()
    assert np.array_equal(np.isinf(ours), np.isinf(theirs))
    kept = np.isfinite(ours)
    assert np.allclose(ours[kept], theirs[kept], rtol=1e-6)
    assert kept.sum(axis=1).min() >= 1


@pytest.mark.parametrize("top_p", [0.3, 0.5, 0.7, 0.9])
def test_ties_at_the_nucleus_boundary_keep_the_same_tokens_in_both_engines(top_p):
    """Logits rounded to integers tie often: both engines order ties by id (a stable sort),
    so the nucleus keeps the same tokens (PyTorch's default sort, not stable, kept others)."""
    logits = np.round(np.random.default_rng(1).standard_normal((300, 40)) * 1.5)
    ours = filter_logits(logits, top_p=top_p)
    theirs = torch_filter_logits(torch.from_numpy(logits), top_p=top_p).double().numpy()
    assert np.array_equal(np.isinf(ours), np.isinf(theirs))


@pytest.mark.parametrize("temperature", [0.0, 1.0])
@pytest.mark.parametrize(
    "poison", [[np.nan, 1.0, 0.0], [np.inf, 1.0, 0.0], [-np.inf, -np.inf, -np.inf]]
)
def test_no_distribution_is_refused_alike_by_both_engines(poison, temperature):
    """NaN, +inf, or a row of -inf alone: both engines raise the same sentence (greedy picked
    the NaN's id in PyTorch, and NumPy drew id 0 from a row of -inf)."""
    from light_llm.generate import sample_next as torch_sample_next

    logits = np.array([[0.0, 1.0, 2.0], poison])
    with pytest.raises(SamplingError, match="no distribution") as ours:
        sample_next(logits, temperature, rng=np.random.default_rng(0))
    with pytest.raises(SamplingError, match="no distribution") as theirs:
        torch_sample_next(torch.from_numpy(logits), temperature)
    assert str(ours.value) == str(theirs.value)


def test_generate_refuses_ids_of_another_shape_by_their_shape():
    from light_llm.reference.sampling import generate

    model = NumpyGPT(tiny_config())
    with pytest.raises(SamplingError, match=r"shape \(B, T\), got \(2,\)"):
        generate(model, np.array([1, 2]), 3)


def test_sample_next_draws_each_token_with_its_probability():
    logits = np.log(np.array([[0.5, 0.3, 0.15, 0.05]]))
    rng = np.random.default_rng(0)
    draws = np.array([sample_next(logits, 1.0, rng=rng)[0] for _ in range(20000)])
    frequencies = np.bincount(draws, minlength=4) / draws.size
    assert np.allclose(frequencies, [0.5, 0.3, 0.15, 0.05], atol=0.015)
    top2 = np.array([sample_next(logits, 1.0, top_k=2, rng=rng)[0] for _ in range(5000)])
    assert set(top2) == {0, 1}
    assert abs((top2 == 0).mean() - 0.5 / 0.8) < 0.03


def test_temperature_zero_is_argmax():
    logits = np.random.default_rng(1).standard_normal((5, 30))
    assert np.array_equal(sample_next(logits, 0.0), logits.argmax(axis=1))


@pytest.mark.parametrize(
    "options", [dict(temperature=-1.0), dict(top_k=0), dict(top_p=0.0), dict(top_p=1.2)]
)
def test_bad_options_are_refused(options):
    with pytest.raises(SamplingError):
        filter_logits(np.zeros((1, 4)), **{"temperature": 1.0, **options})


def test_generate_text_streams_what_it_returns():
    tokenizer = CharTokenizer.from_text("abcdefgh ijkl\n")
    model = NumpyGPT(tiny_config(vocab_size=tokenizer.vocab_size), seed=2)
    pieces = []
    text = generate_text(model, tokenizer, "abc", 30, seed=3, on_text=pieces.append)
    assert len(text) == 30 and "".join(pieces) == text
    assert text == generate_text(model, tokenizer, "abc", 30, seed=3, use_cache=False)
    with pytest.raises(SamplingError):
        generate_text(model, tokenizer, "", 5)
