"""score_checkpoint, the library side of ``light-llm eval``: a whole-split score against the
mean cross-entropy of the same windows computed here by hand, and the units derived from it."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from light_llm.data import split_train_val
from light_llm.train.score import score_checkpoint
from tests.conftest import CHAR_CORPUS, save_char_checkpoint


def test_a_whole_split_score_is_the_mean_loss_over_consecutive_windows(tmp_path):
    folder, model, tokenizer = save_char_checkpoint(tmp_path / "ck", block_size=16, n_layer=1)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(CHAR_CORPUS * 20, encoding="utf-8")
    score = score_checkpoint(folder, corpus, batch_size=4, device="cpu")

    _, val_text = split_train_val(corpus.read_text(encoding="utf-8"))
    ids = torch.tensor(tokenizer.encode(val_text))
    block, total, count = 16, 0.0, 0

    def loss_sum(start: int, first_target: int) -> float:
        """Summed cross-entropy of the window at ``start`` over its targets from position
        ``first_target`` of the window on."""
        with torch.no_grad():
            logits, _ = model(ids[start : start + block][None])
        targets = ids[start + 1 : start + block + 1]
        return F.cross_entropy(logits[0, first_target:], targets[first_target:], reduction="sum")

    start = 0
    while start + block + 1 <= len(ids):  # whole windows, consecutive
        total, count, start = total + loss_sum(start, 0).item(), count + block, start + block
    if count < len(ids) - 1:  # the rest: the split's last window, its new targets only
        last = len(ids) - 1 - block
        total += loss_sum(last, count - last).item()
        count = len(ids) - 1
    assert score.tokens_scored == count == len(ids) - 1
    assert score.val_loss == pytest.approx(total / count, rel=1e-5)
    assert score.perplexity == pytest.approx(math.exp(score.val_loss))
    n_bytes = len(val_text.encode("utf-8"))
    expected_bpb = score.val_loss * count / (math.log(2) * n_bytes)
    assert score.bits_per_byte == pytest.approx(expected_bpb, rel=1e-12)
    assert score.nats_per_char == pytest.approx(score.val_loss * count / len(val_text))
    assert score.unigram_baseline is not None and np.isfinite(score.unigram_baseline)
