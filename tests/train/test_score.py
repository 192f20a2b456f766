"""score_checkpoint, the library side of ``light-llm eval``: a whole-split score against the
mean cross-entropy of the same windows computed here by hand, and the units derived from it."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from light_llm.checkpoints import load, load_tokenizer
from light_llm.data import split_train_val
from light_llm.train import TrainConfig, train
from light_llm.train.score import score_checkpoint
from tests.conftest import CHAR_CORPUS, save_char_checkpoint
from tests.train.helpers import TINY, write_corpus


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
    covered = val_text[1:]  # a character tokenizer: the first token is the first character
    n_bytes = len(covered.encode("utf-8"))
    expected_bpb = score.val_loss * count / (math.log(2) * n_bytes)
    assert score.bits_per_byte == pytest.approx(expected_bpb, rel=1e-12)
    assert score.nats_per_char == pytest.approx(score.val_loss * count / len(covered))
    assert score.unigram_baseline is not None and np.isfinite(score.unigram_baseline)


def test_nats_per_character_are_the_predicted_tokens_nats_over_the_characters_they_cover(
    tmp_path,
):
    """On a tiny split of GPT-2 tokens (the first spans several characters): the predicted
    tokens' nats summed here window by window, over the characters of the text those tokens
    decode to, are what ``light-llm eval`` reports; and the trainer turns its loss into bits
    per character by the same count, (N - 1) tokens over those characters."""
    corpus = write_corpus(tmp_path / "corpus.txt", n_lines=120, seed=3)
    out = tmp_path / "run"
    config = {**TINY, "data": str(corpus), "out": str(out), "tokenizer": "gpt2"}
    train(TrainConfig(**{**config, "max_iters": 1, "eval_interval": 1}))
    score = score_checkpoint(out / "checkpoint", corpus, batch_size=4, device="cpu")

    model, tokenizer = load(out), load_tokenizer(out / "checkpoint")
    _, val_text = split_train_val(corpus.read_text(encoding="utf-8"))
    ids = torch.tensor(tokenizer.encode(val_text))
    block, targets, total = model.config.block_size, 1, 0.0
    with torch.no_grad():
        while targets < len(ids):  # windows ending at each target block, the last at the end
            end = min(targets + block, len(ids))
            start = max(0, end - 1 - block)
            logits, _ = model(ids[start : end - 1][None])
            new = end - targets  # the targets this window adds
            total += F.cross_entropy(logits[0, -new:].double(), ids[targets:end], reduction="sum")
            targets = end
    chars = len(tokenizer.decode(ids[1:].tolist()))  # the text the predicted tokens cover
    assert len(tokenizer.decode(ids[:1].tolist())) > 1 and chars < len(val_text)
    assert score.tokens_scored == len(ids) - 1
    assert score.nats_per_char == pytest.approx(total.item() / chars, rel=1e-5)
    lines = (out / "metrics.jsonl").read_text().splitlines()
    record = [json.loads(line) for line in lines if '"eval"' in line][-1]
    per_loss = (len(ids) - 1) / (math.log(2) * chars)
    assert record["val_bpc"] / record["val_loss"] == pytest.approx(per_loss, rel=1e-12)
    assert score.bits_per_char / score.val_loss == pytest.approx(per_loss, rel=1e-12)
