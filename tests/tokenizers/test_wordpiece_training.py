"""A WordPiece vocabulary learned from text: BERT's specials at ids 0-4, exactly the size asked
for, ids equal to transformers' pure-Python BERT tokenizer over the saved vocab.txt, and errors that
give the sizes that would work."""

from __future__ import annotations

import functools

import pytest

from light_llm.errors import TokenizerError
from light_llm.shakespeare import shakespeare_slice
from light_llm.tokenizers import BertTokenizer, load_tokenizer, train_tokenizer
from light_llm.tokenizers.bert import SPECIAL_TOKENS
from light_llm.tokenizers.wordpiece import train_wordpiece
from tests.tokenizers.conftest import PURE_PYTHON_BERT

VOCAB_SIZE = 600


@functools.lru_cache(maxsize=1)
def text() -> str:
    return shakespeare_slice(30_000)


@functools.lru_cache(maxsize=1)
def trained() -> BertTokenizer:
    return train_wordpiece(text(), VOCAB_SIZE)


def test_the_vocabulary_has_the_size_asked_and_bert_specials_first():
    tokenizer = trained()
    assert tokenizer.vocab_size == VOCAB_SIZE
    assert tokenizer.vocab[: len(SPECIAL_TOKENS)] == list(SPECIAL_TOKENS)
    assert (tokenizer.pad_id, tokenizer.unk_id, tokenizer.cls_id) == (0, 1, 2)
    assert (tokenizer.sep_id, tokenizer.mask_id) == (3, 4)
    assert any(token.startswith("##") for token in tokenizer.vocab)


def test_ids_equal_transformers_bert_tokenizer_over_the_saved_vocabulary(tmp_path):
    tokenizer = trained()
    tokenizer.save(tmp_path)
    reference = PURE_PYTHON_BERT(vocab_file=str(tmp_path / "vocab.txt"))
    loaded = load_tokenizer(tmp_path)
    for sample in (text()[-2000:], "To be, or not to be: that is the question.", "Zyzzyva ✓"):
        expected = reference(sample, add_special_tokens=True)["input_ids"]
        assert loaded.encode_plus(sample, truncation=False)["input_ids"] == expected
        assert loaded.encode(sample) == tokenizer.encode(sample)
    # a character never seen in training is unknown (WordPiece, unlike byte-level BPE)
    assert tokenizer.unk_id in tokenizer.encode("✓")


def test_train_tokenizer_by_kind():
    assert train_tokenizer("wordpiece", text(), 200).vocab_size == 200


def test_too_small_and_too_large_vocabularies_say_what_would_fit():
    with pytest.raises(TokenizerError) as info:
        train_wordpiece(text(), 20)
    message = str(info.value)
    least = int(message.split("at least ")[1].split()[0])
    assert train_wordpiece(text(), least).vocab_size == least
    with pytest.raises(TokenizerError) as info:
        train_wordpiece("to be or not to be", 500)
    most = int(str(info.value).split("at most ")[1].split()[0])
    assert train_wordpiece("to be or not to be", most).vocab_size == most
    capped = train_wordpiece("to be or not to be", 500, at_most=True)  # every piece there is
    exact = train_wordpiece("to be or not to be", most)  # (ties are numbered in hash order)
    assert sorted(capped.vocab) == sorted(exact.vocab) and capped.vocab_size == most
    with pytest.raises(TokenizerError):
        train_wordpiece("   ", 100)
