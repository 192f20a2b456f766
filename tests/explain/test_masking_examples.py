"""Seed 003 §29: BERT's masking rule on a sentence, replayed here with the same generator."""

from __future__ import annotations

import numpy as np

from light_llm import explain
from light_llm.explain import masking_examples as mlm
from light_llm.tokenizers import BertTokenizer


def steps() -> dict:
    return {s.title: np.asarray(s.value) for s in explain.run("bert-masking")}


def test_masking_replayed_from_the_same_draws():
    got = steps()
    tokenizer = BertTokenizer.packaged()
    ids = np.array(tokenizer.encode_plus(mlm.SENTENCE)["input_ids"])
    shape = (mlm.DRAWS, len(ids))
    rng = np.random.default_rng(mlm.SEED)
    eligible = np.broadcast_to((ids != tokenizer.cls_id) & (ids != tokenizer.sep_id), shape)
    chosen = eligible & (rng.random(shape) < 0.15)
    action = rng.random(shape)
    random_ids = np.minimum((rng.random(shape) * tokenizer.vocab_size).astype(int), 30521)
    inputs = np.where(chosen & (action < 0.8), tokenizer.mask_id, np.broadcast_to(ids, shape))
    inputs = np.where(chosen & (action >= 0.8) & (action < 0.9), random_ids, inputs)
    np.testing.assert_array_equal(got["Chosen positions (1 = chosen), four masked copies"], chosen)
    np.testing.assert_array_equal(got["Inputs after masking (ids)"], inputs)
    labels = np.where(chosen, ids, -1)
    np.testing.assert_array_equal(got["Labels: the original id where chosen, -1 elsewhere"], labels)
    outcome = got["What a chosen token becomes: 1 [MASK], 2 random token, 3 unchanged"]
    assert set(np.unique(outcome)) == {0, 1, 2, 3}  # the fixed seed shows every case
    np.testing.assert_array_equal(outcome == 1, chosen & (action < 0.8))


def test_measured_shares_follow_the_rule():
    measured, rule = steps()[f"Shares over {mlm.COUNT_DRAWS} masked copies against the rule"]
    np.testing.assert_allclose(rule, [0.15, 0.8, 0.1, 0.1], rtol=1e-12)
    real_tokens = mlm.COUNT_DRAWS * 25
    assert abs(measured[0] - 0.15) < 4 * np.sqrt(0.15 * 0.85 / real_tokens)
    chosen = measured[0] * real_tokens
    for share, expected in zip(measured[1:], rule[1:], strict=True):
        assert abs(share - expected) < 4 * np.sqrt(expected * (1 - expected) / chosen)
    assert abs(measured[1:].sum() - 1) < 1e-12
