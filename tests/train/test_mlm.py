"""Masked-LM: BERT's 15% / 80-10-10 rule on a large sample, batches from a corpus, a tiny
encoder that learns a batch by heart, and the trainer driving the encoder (its first loss
rebuilt by hand, learning; exact resume is tested with the GPT's in test_trainer.py)."""

import collections
import json
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from light_llm.checkpoints import load, load_config
from light_llm.checkpoints.run import read_trainer_state
from light_llm.cli import main
from light_llm.errors import ConfigError, TokenizerError, TrainingError
from light_llm.models.bert import (
    IGNORE_INDEX,
    BertEncoder,
    EncoderConfig,
    predict_masked,
)
from light_llm.tokenizers import BertTokenizer, CharTokenizer, load_tokenizer
from light_llm.train import TrainConfig, train
from light_llm.train.batches import micro_batch_rng
from light_llm.train.evaluate import unigram_log_probabilities
from light_llm.train.mlm import MaskedLMDataset, mask_tokens, mlm_datasets
from light_llm.train.trainer import Trainer, train_mlm
from tests.train.helpers import TINY

VOCAB = 1000
MASK_ID, CLS_ID, SEP_ID, PAD_ID = 3, 1, 2, 0
SPECIAL = frozenset({PAD_ID, CLS_ID, SEP_ID, MASK_ID})


def within_binomial(count: int, trials: int, p: float, sigmas: float = 5.0) -> bool:
    """|count - n p| <= 5 sqrt(n p (1 - p)): a miss has probability below 1e-6."""
    return abs(count - trials * p) <= sigmas * math.sqrt(trials * p * (1 - p))


def test_masking_proportions_on_a_large_sample():
    generator = np.random.default_rng(0)
    ids = torch.from_numpy(generator.integers(4, VOCAB, size=(400, 512)))
    ids[:, 0], ids[:, -1] = CLS_ID, SEP_ID
    attention_mask = torch.ones_like(ids)
    attention_mask[::2, 400:] = 0  # half the rows padded from position 400
    ids[attention_mask == 0] = PAD_ID
    inputs, labels = mask_tokens(
        ids,
        mask_id=MASK_ID,
        vocab_size=VOCAB,
        special_ids=SPECIAL,
        generator=np.random.default_rng(1),
        attention_mask=attention_mask,
    )
    eligible = (attention_mask == 1) & ~torch.isin(ids, torch.tensor(sorted(SPECIAL)))
    chosen = labels != IGNORE_INDEX
    assert not torch.any(chosen & ~eligible)  # specials and padding are never chosen
    assert torch.equal(labels[chosen], ids[chosen])  # labels hold the original tokens
    assert torch.equal(inputs[~chosen], ids[~chosen])  # nothing else changes
    n_eligible, n_chosen = int(eligible.sum()), int(chosen.sum())
    assert within_binomial(n_chosen, n_eligible, 0.15)

    # of the chosen: 80% [MASK]; 10% a uniform random token (which is the original token
    # again with probability 1/V); 10% unchanged
    masked = int((inputs[chosen] == MASK_ID).sum())
    unchanged = int((inputs[chosen] == ids[chosen]).sum())
    p_random_mask = 0.1 / VOCAB  # a random draw that happens to be the [MASK] id
    assert within_binomial(masked, n_chosen, 0.8 + p_random_mask)
    assert within_binomial(unchanged, n_chosen, 0.1 + 0.1 / VOCAB)
    assert within_binomial(n_chosen - masked - unchanged, n_chosen, 0.1 - 0.2 / VOCAB)


def test_random_replacements_are_uniform_over_the_vocabulary():
    small_vocab = 8
    ids = torch.full((2000, 500), 5)
    inputs, labels = mask_tokens(
        ids,
        mask_id=MASK_ID,
        vocab_size=small_vocab,
        special_ids=frozenset({MASK_ID}),
        generator=torch.Generator().manual_seed(3),
    )
    chosen = labels != IGNORE_INDEX
    replaced = inputs[chosen & (inputs != MASK_ID) & (inputs != 5)]  # random, not 3 or 5
    counts = torch.bincount(replaced, minlength=small_vocab)
    n = int(counts.sum())
    for value in range(small_vocab):
        if value in (MASK_ID, 5):
            assert counts[value] == 0
        else:
            assert within_binomial(int(counts[value]), n, 1 / (small_vocab - 2))


def test_masking_is_a_function_of_the_generator_state():
    ids = torch.randint(4, VOCAB, (4, 64))
    kwargs = dict(mask_id=MASK_ID, vocab_size=VOCAB, special_ids=SPECIAL)
    first = mask_tokens(ids, generator=np.random.default_rng(7), **kwargs)
    again = mask_tokens(ids, generator=np.random.default_rng(7), **kwargs)
    other = mask_tokens(ids, generator=np.random.default_rng(8), **kwargs)
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert not torch.equal(first[1], other[1])
    with pytest.raises(ConfigError, match="mask_probability"):
        mask_tokens(ids, generator=np.random.default_rng(0), mask_probability=1.5, **kwargs)


@pytest.fixture(scope="module")
def corpus_datasets(tmp_path_factory):
    question = "To be, or not to be, that is the question:\n"
    whether = "Whether 'tis nobler in the mind to suffer the slings and arrows of fortune.\n"
    text = question * 40 + whether * 10
    tokenizer = BertTokenizer.packaged()
    train, val = mlm_datasets(text, tokenizer, tmp_path_factory.mktemp("cache"), block_size=16)
    return tokenizer, train, val


def test_batches_are_masked_windows_of_the_corpus(corpus_datasets):
    tokenizer, train, val = corpus_datasets
    inputs, labels = train.get_batch(8, np.random.default_rng(0))
    assert inputs.shape == labels.shape == (8, 16) and train.block_size == 16
    assert torch.all(inputs[:, 0] == tokenizer.cls_id) and torch.all(
        inputs[:, -1] == tokenizer.sep_id
    )
    original = torch.where(labels != IGNORE_INDEX, labels, inputs)[:, 1:-1].numpy()  # (8, 14)
    windows = np.lib.stride_tricks.sliding_window_view(np.asarray(train.tokens.tokens), 14)
    for row in original:
        assert np.any(np.all(windows == row, axis=1))  # a window of the token file
    replay = train.get_batch(8, np.random.default_rng(0))
    assert torch.equal(replay[0], inputs) and torch.equal(replay[1], labels)
    assert len(val) > 0 and val.get_batch(2, torch.Generator().manual_seed(0))[0].shape == (2, 16)


def test_masked_lm_needs_the_bert_tokenizer(corpus_datasets, tmp_path):
    _, train, _ = corpus_datasets
    with pytest.raises(TokenizerError, match="bert tokenizer"):
        MaskedLMDataset(train.tokens, CharTokenizer.from_text("abc"))
    with pytest.raises(ConfigError, match="block needs"):
        mlm_datasets("abc", BertTokenizer.packaged(), tmp_path / "cache", block_size=2)
    assert not (tmp_path / "cache").exists()  # refused before the corpus is encoded


def test_a_tiny_encoder_overfits_one_batch():
    vocab = 50
    config = EncoderConfig(
        vocab_size=vocab, block_size=12, n_layer=2, n_head=2, n_embd=32, dropout=0.0
    )
    model = BertEncoder(config)
    ids = torch.randint(4, vocab, (8, 12))
    inputs, labels = mask_tokens(
        ids,
        mask_id=MASK_ID,
        vocab_size=vocab,
        special_ids=SPECIAL,
        generator=torch.Generator().manual_seed(0),
        mask_probability=0.3,
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
    _, first_loss = model(inputs, labels)
    for _ in range(60):
        _, loss = model(inputs, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert first_loss.item() > math.log(vocab) - 1.0  # starts near chance
    assert loss.item() < 0.05
    model.eval()
    logits, _ = model(inputs, labels)
    assert torch.equal(logits.argmax(-1), labels[labels != IGNORE_INDEX])


# ---------------------------------------------------------------------- the trainer
SENTENCES = (
    "to be or not to be that is the question",
    "the king is dead long live the king",
    "my lord i pray you speak no more",
)


@pytest.fixture(scope="module")
def patterned_corpus(tmp_path_factory):
    """Three sentences repeated in a fixed order: every masked word follows from its context."""
    path = tmp_path_factory.mktemp("patterned") / "corpus.txt"
    path.write_text("\n".join(SENTENCES * 120) + "\n", encoding="utf-8")
    return path


def tiny_bert_run(corpus, out, **overrides):
    settings = {**TINY, "model": "bert", "data": str(corpus), "out": str(out)}
    return TrainConfig(**{**settings, **overrides})


def metric_lines(out):
    """The evaluation lines of metrics.jsonl."""
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [line for line in lines if line["kind"] == "eval"]


def test_unigram_log_probabilities_are_smoothed_frequencies():
    tokens = np.array([3, 3, 3, 1, 0, 3, 1], dtype=np.uint16)
    for alpha in (1.0, 0.01):
        log_p = unigram_log_probabilities(tokens, vocab_size=5, pseudo_count=alpha)
        counts = [sum(1 for t in tokens.tolist() if t == v) for v in range(5)]
        expected = [math.log((c + alpha) / (len(tokens) + 5 * alpha)) for c in counts]
        assert log_p.tolist() == pytest.approx(expected, rel=1e-6)
        assert math.fsum(math.exp(value) for value in log_p.tolist()) == pytest.approx(1.0)


def test_sequential_batches_cover_the_split_with_masks_independent_of_the_batch_size(
    corpus_datasets,
):
    tokenizer, _, val = corpus_datasets
    n = val.block_size - 2
    by_three = list(val.sequential_batches(3))
    by_seven = list(val.sequential_batches(7))
    inputs3, labels3 = (torch.cat(parts) for parts in zip(*by_three, strict=True))
    inputs7, labels7 = (torch.cat(parts) for parts in zip(*by_seven, strict=True))
    assert torch.equal(inputs3, inputs7) and torch.equal(labels3, labels7)
    tokens = np.asarray(val.tokens.tokens, dtype=np.int64)
    starts = range(0, len(tokens) - n, n)
    assert len(inputs3) == len(starts)
    original = torch.where(labels3 != IGNORE_INDEX, labels3, inputs3)
    for row, start in zip(original, starts, strict=True):
        assert row[0] == tokenizer.cls_id and row[-1] == tokenizer.sep_id
        assert row[1:-1].tolist() == tokens[start : start + n].tolist()
    assert (labels3 != IGNORE_INDEX).any()


def test_first_training_loss_equals_the_masked_lm_loss_computed_here(patterned_corpus, tmp_path):
    """Iteration 0's loss, rebuilt by hand: the initial encoder (seeded as the trainer seeds
    it, output bias = add-one log frequencies of the training split), the first batch (window
    offsets, then masks, from the generator of iteration 0), cross-entropy on the chosen."""
    out = tmp_path / "run"
    result = train_mlm(tiny_bert_run(patterned_corpus, out, max_iters=1))
    tokenizer = load_tokenizer(out / "checkpoint")
    train_ids = np.fromfile(out / "data" / "train.bin", dtype=np.uint16).astype(np.int64)
    torch.manual_seed(TINY["seed"])
    model = BertEncoder(load_config(out, architecture="bert"))
    counts = np.bincount(train_ids, minlength=tokenizer.vocab_size)
    alpha = 1.0  # add-one smoothing: no id has probability 0
    with torch.no_grad():
        bias = np.log((counts + alpha) / (len(train_ids) + alpha * tokenizer.vocab_size))
        model.mlm_head.decoder.bias.copy_(torch.from_numpy(bias))
    generator = micro_batch_rng(TINY["seed"], 0, 0)
    n = TINY["block_size"] - 2
    starts = generator.integers(0, len(train_ids) - n, size=TINY["batch_size"])
    windows = torch.from_numpy(np.stack([train_ids[s : s + n] for s in starts]))
    cls = torch.full((len(windows), 1), tokenizer.cls_id)
    sep = torch.full((len(windows), 1), tokenizer.sep_id)
    inputs, labels = mask_tokens(
        torch.cat([cls, windows, sep], dim=1),
        mask_id=tokenizer.mask_id,
        vocab_size=tokenizer.vocab_size,
        special_ids={
            tokenizer.cls_id,
            tokenizer.sep_id,
            tokenizer.pad_id,
            tokenizer.mask_id,
            tokenizer.unk_id,
        },
        generator=generator,
    )
    with torch.no_grad():
        logits, _ = model(inputs)  # (B, T, V): every position, no labels
    chosen = labels != IGNORE_INDEX
    expected = F.cross_entropy(logits[chosen].double(), labels[chosen]).item()
    assert result.losses[0] == pytest.approx(expected, rel=1e-5)


def test_masked_lm_training_learns_the_context_and_writes_an_encoder_checkpoint(
    patterned_corpus, tmp_path, capsys
):
    out = tmp_path / "run"
    flags = {"max_iters": 200, "eval_interval": 100, "lr": 5e-3, "n_embd": 64, "n_layer": 2}
    result = train_mlm(tiny_bert_run(patterned_corpus, out, batch_size=16, **flags))
    records = metric_lines(out)
    assert [r["iter"] for r in records] == [0, 100, 200]
    # the loss of predicting every word by its frequency (each sentence is a third of the text)
    counts = collections.Counter(" ".join(SENTENCES).split())
    n_words = sum(counts.values())
    unigram = -sum(c / n_words * math.log(c / n_words) for c in counts.values())
    assert records[-1]["val_loss"] < unigram / 2  # the words now follow from the context
    assert result.iteration == 200 and read_trainer_state(out / "checkpoint")["iteration"] == 200
    config = json.loads((out / "checkpoint" / "config.json").read_text())
    assert config["architecture"] == "bert" and config["model"]["mlm_head"] is True
    model = load(out, architecture="bert")
    assert model.config.n_embd == 64 and model.config.positions == "rotary"
    tokenizer = load_tokenizer(out / "checkpoint")
    (candidates,) = predict_masked(model, tokenizer, "long live the [MASK]")
    assert candidates[0].token == "king"
    # light-llm embed reads the checkpoint: mean of the real tokens' vectors, L2-normalised
    sentences = ["the king is dead", "my lord i pray you"]
    capsys.readouterr()  # the training's output
    assert main(["embed", "--checkpoint", str(out), "--json", *sentences]) == 0
    printed = torch.tensor(json.loads(capsys.readouterr().out))
    for sentence, vector in zip(sentences, printed, strict=True):
        ids = torch.tensor([tokenizer.encode_plus(sentence)["input_ids"]])
        with torch.no_grad():
            mean = model.encode(ids)[0].mean(0)
        torch.testing.assert_close(vector, mean / mean.norm(), rtol=1e-5, atol=1e-6)


def test_the_mlm_trainer_refuses_another_model_and_a_gpt_run(patterned_corpus, tmp_path):
    with pytest.raises(ConfigError, match="not model 'gpt'"):
        Trainer(tiny_bert_run(patterned_corpus, tmp_path / "x", model="gpt"), architecture="bert")
    gpt_out = tmp_path / "gpt"
    train(TrainConfig(**{**TINY, "data": str(patterned_corpus), "out": str(gpt_out)}))
    with pytest.raises(TrainingError, match="holds a gpt training run, not a bert one"):
        train_mlm(TrainConfig(out=str(gpt_out), resume=True, max_iters=12))


def test_the_shipped_encoder_run_is_not_resumed_but_says_why(tmp_path, capsys):
    """It keeps its weights and the record of its run, not the optimizer's state: a resume is
    refused in one sentence (it failed on the missing file's name alone), nothing changed."""
    import shutil

    from light_llm.assets import packaged_encoder_folder

    run = tmp_path / "shipped"
    shutil.copytree(packaged_encoder_folder(), run)
    before = sorted((p.name, p.stat().st_size) for p in run.rglob("*"))
    assert main(["train", "--resume", "--out", str(run), "--max-iters", "2000"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "holds no optimizer state" in err
    assert "train afresh with another --out" in err
    assert sorted((p.name, p.stat().st_size) for p in run.rglob("*")) == before
