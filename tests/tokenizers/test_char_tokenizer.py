"""The character tokenizer: vocabulary, round trip, errors, save/load."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from light_llm.errors import TokenizerError
from light_llm.tokenizers import CharTokenizer, load_tokenizer


def test_vocabulary_is_the_sorted_characters_of_the_corpus():
    tokenizer = CharTokenizer.from_text("to be, or not to be")
    assert tokenizer.chars == [" ", ",", "b", "e", "n", "o", "r", "t"]
    assert tokenizer.vocab_size == 8
    assert tokenizer.eos_id is None
    # an id is the character's position in that list
    assert tokenizer.encode("be") == [2, 3]
    assert tokenizer.tokens([7, 5]) == ["t", "o"]


@settings(deadline=None)
@given(st.text(min_size=1))
def test_round_trip_on_any_text(text):
    tokenizer = CharTokenizer.from_text(text)
    ids = tokenizer.encode(text)
    assert len(ids) == len(text)
    assert tokenizer.decode(ids) == text
    assert "".join(tokenizer.tokens(ids)) == text
    assert all(0 <= i < tokenizer.vocab_size for i in ids)


def test_unknown_character_names_it_and_the_vocabulary_size():
    tokenizer = CharTokenizer.from_text("abc")
    with pytest.raises(TokenizerError) as info:
        tokenizer.encode("abz\n")
    message = str(info.value)
    assert "'z'" in message and "'\\n'" in message and "3-character" in message
    assert message.count(".") == 1 and message.endswith(".")


@pytest.mark.parametrize(
    "chars", [[], ["ab"], ["a", "a"], [1]], ids=["empty", "two-chars", "duplicate", "int"]
)
def test_bad_vocabularies_are_refused(chars):
    with pytest.raises(TokenizerError):
        CharTokenizer(chars)


def test_empty_corpus_and_bad_ids_are_refused():
    with pytest.raises(TokenizerError, match="empty text"):
        CharTokenizer.from_text("")
    tokenizer = CharTokenizer.from_text("ab")
    with pytest.raises(TokenizerError, match="token id 2 is outside"):
        tokenizer.decode([0, 2])
    with pytest.raises(TokenizerError, match="token id -1 is outside"):
        tokenizer.tokens([-1])
    with pytest.raises(TokenizerError, match="integers"):
        tokenizer.decode([0.5])
    with pytest.raises(TokenizerError, match="not bytes"):
        tokenizer.encode(b"ab")


def test_save_and_load_give_the_same_ids(tmp_path):
    text = "Ünïcode, tabs\tand\nnewlines 😀"
    tokenizer = CharTokenizer.from_text(text)
    tokenizer.save(tmp_path / "new-folder")
    loaded = load_tokenizer(tmp_path / "new-folder")
    assert isinstance(loaded, CharTokenizer)
    assert loaded.chars == tokenizer.chars
    assert loaded.encode(text) == tokenizer.encode(text)
    assert [p.name for p in (tmp_path / "new-folder").iterdir()] == ["light_tokenizer.json"]
