"""Seed 002 §10: per-token cross-entropy, perplexity and weight tying of the small GPT the
example trains, against plain NumPy on the model's own logits."""

from __future__ import annotations

import math

import numpy as np
import torch

from light_llm import explain
from light_llm.explain import language_model_examples as lm


def values(name: str) -> dict[str, np.ndarray]:
    return {s.title: np.asarray(s.value, dtype=np.float64) for s in explain.run(name)}


def log_softmax(x):
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def test_cross_entropy_and_perplexity_from_the_logits():
    got = values("perplexity")
    trained = lm.trained_model()
    ids = trained.tokenizer.encode(lm.EVAL_TEXT)
    with torch.no_grad():
        logits = trained.model(torch.tensor([ids[:-1]]))[0][0].double().numpy()
    nll = -log_softmax(logits)[np.arange(len(ids) - 1), ids[1:]]
    shown = lm.SHOWN_POSITIONS
    np.testing.assert_allclose(
        got["Cross-entropy of each next token: -log p(x_t | x_<t)"], nll[:shown], rtol=1e-6
    )
    np.testing.assert_allclose(
        got["p(x_t | x_<t) of each next character"], np.exp(-nll[:shown]), rtol=1e-6
    )
    assert math.isclose(got["Mean cross-entropy (the training loss)"], nll.mean(), rel_tol=1e-5)
    assert math.isclose(
        got["Perplexity exp(mean cross-entropy)"], math.exp(nll.mean()), rel_tol=1e-5
    )
    untrained, uniform, ppl = got["Perplexity: untrained model, uniform guess, trained model"]
    assert uniform == trained.tokenizer.vocab_size
    assert abs(untrained - uniform) / uniform < 0.1  # an untrained model guesses nearly uniformly
    assert ppl < uniform / 2  # training helped
    before, after = got["Training: loss at the first and the last steps"]
    assert after < before


def test_tied_head_shares_storage_and_scores_by_the_embedding_table():
    got = values("weight-tying")
    model = lm.trained_model().model
    assert model.lm_head.weight is model.transformer.wte.weight
    same, vocab, width = got["The head and the embedding table: one tensor"]
    assert same == 1 and (vocab, width) == tuple(model.transformer.wte.weight.shape)
    tied, untied, saved = got["Parameters with and without tying"]
    assert tied == sum(p.numel() for p in model.parameters())
    assert saved == vocab * width and untied == tied + saved
    ids = lm.trained_model().tokenizer.encode(lm.TIED_CONTEXT)
    with torch.no_grad():
        logits = model(torch.tensor([ids]))[0][0, -1].double().numpy()
    probabilities = np.exp(log_softmax(logits))
    np.testing.assert_allclose(
        got["softmax(E h): the next-token distribution"],
        np.sort(probabilities)[::-1][:5],
        rtol=1e-5,
    )
    norms = got["Gradient of the shared table: input use + output use"]
    assert norms[3] < 1e-6 * norms[0]
