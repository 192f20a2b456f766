"""Masked-LM data: BERT's 15% / 80-10-10 rule on a large sample, batches from a corpus, and a
tiny encoder that learns a batch by heart."""

import math

import numpy as np
import pytest
import torch

from light_llm.errors import ConfigError, TokenizerError
from light_llm.models.bert import IGNORE_INDEX, BertEncoder, EncoderConfig
from light_llm.tokenizers import BertTokenizer, CharTokenizer
from light_llm.train.mlm import MaskedLMDataset, mask_tokens, mlm_datasets

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


def test_masked_lm_needs_the_bert_tokenizer(corpus_datasets):
    _, train, _ = corpus_datasets
    with pytest.raises(TokenizerError, match="bert tokenizer"):
        MaskedLMDataset(train.tokens, CharTokenizer.from_text("abc"))
    with pytest.raises(ConfigError, match="block needs"):
        mlm_datasets("abc", BertTokenizer.packaged(), "unused", block_size=2)


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
