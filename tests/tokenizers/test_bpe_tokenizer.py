"""Byte-level BPE learned from text: exact round trips on any Unicode for every vocabulary size,
ids equal to HuggingFace ``tokenizers`` trained directly with the same settings, the saved file
alone reproducing the ids (in this process and another), and one-sentence errors."""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from light_llm.errors import CheckpointError, TokenizerError
from light_llm.shakespeare import shakespeare_slice, shakespeare_tail
from light_llm.tokenizers import BPETokenizer, base, load_tokenizer, train_tokenizer
from light_llm.tokenizers.base import TOKENIZER_FILE
from light_llm.tokenizers.bpe import minimum_vocab_size, train_bpe
from light_llm.tokenizers.gpt2 import bytes_to_unicode

SMALLEST = 257  # 256 bytes + <|endoftext|>
LARGEST = 700


@functools.lru_cache(maxsize=1)
def corpus_text() -> str:
    """30 KB of Shakespeare plus a few lines of other scripts, so that merges also join the
    bytes of multi-byte characters."""
    other_scripts = "naïve café déjà vu\nκαλημέρα κόσμε\n日本語のテキスト\n🙂🙂 emoji 🙂\n"
    return shakespeare_slice(30_000) + other_scripts * 3


@functools.cache
def trained(vocab_size: int) -> BPETokenizer:
    return train_bpe(corpus_text(), vocab_size)


def hf_trained(text: str, vocab_size: int) -> Tokenizer:
    """HuggingFace's own byte-level BPE pipeline with the settings light-llm states: GPT-2's
    regex, no prefix space, all 256 bytes, <|endoftext|> as the one special token."""
    engine = Tokenizer(models.BPE())
    engine.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    engine.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    engine.train_from_iterator([text], trainer)
    engine.add_special_tokens(["<|endoftext|>"])
    return engine


def test_the_smallest_vocabulary_is_the_bytes_and_the_special_token():
    assert minimum_vocab_size() == SMALLEST
    tokenizer = trained(SMALLEST)
    assert tokenizer.vocab_size == SMALLEST and tokenizer.n_merges == 0
    text = "abc é"
    assert len(tokenizer.encode(text)) == len(text.encode("utf-8"))


@settings(max_examples=60, deadline=None)
@given(text=st.text(), vocab_size=st.integers(SMALLEST, LARGEST))
def test_any_text_round_trips_exactly_for_every_vocabulary_size(text, vocab_size):
    tokenizer = trained(vocab_size)
    ids = tokenizer.encode(text)
    assert tokenizer.decode(ids) == text
    assert all(0 <= token_id < vocab_size for token_id in ids)
    assert b"".join(tokenizer.token_bytes(token_id) for token_id in ids) == text.encode("utf-8")


@settings(max_examples=40, deadline=None)
@given(text=st.text(alphabet=st.characters(codec="utf-8"), max_size=200))
def test_ids_equal_huggingface_trained_with_the_same_settings(text):
    for vocab_size in (300, LARGEST):
        reference = hf_trained_cached(vocab_size)
        assert trained(vocab_size).encode(text) == reference.encode(text).ids


@functools.cache
def hf_trained_cached(vocab_size: int) -> Tokenizer:
    return hf_trained(corpus_text(), vocab_size)


@pytest.mark.parametrize("chunk_chars", [40, 2_000])
def test_learning_from_chunks_gives_the_merges_of_the_whole_text(monkeypatch, chunk_chars):
    """The learner reads the text in pieces its threads share (base.text_chunks): with pieces
    of about 40 or 2,000 characters the merges, and so the ids, are those HuggingFace learns
    from the whole text at once."""
    monkeypatch.setattr(base, "CHUNK_CHARS", chunk_chars)
    assert len(list(base.text_chunks(corpus_text()))) > 10
    chunked = train_bpe(corpus_text(), LARGEST)
    reference = hf_trained_cached(LARGEST)
    assert chunked.vocab_size == LARGEST
    sample = shakespeare_slice(60_000)[30_000:]  # text neither learned from
    assert chunked.encode(sample) == reference.encode(sample).ids


@pytest.mark.parametrize(
    "text",
    [
        "ACGT" * 5_000 + "\nTTAG" * 3,  # a genome on one line
        "x" * 9_000,  # one repeated letter
        "word " * 10 + " " * 10_000 + "end",  # a run of spaces
        "7" * 4_096 + " after",  # exactly the longest run
    ],
)
def test_a_long_run_without_spaces_is_learned_in_pieces(text):
    """The trainer gets no run of more than LONGEST_RUN characters without a space (or of
    spaces) in one piece: its merges cost O(length) per merge in a word, so one word of a
    whole line made learning quadratic. The pieces are the text, cut; text with no such run
    is cut only as text_chunks cuts it."""
    pieces = list(base.learning_pieces(text))
    assert "".join(pieces) == text
    longest = base.LONGEST_RUN
    assert not any(re.search(rf"\S{{{longest + 1}}}|\s{{{longest + 1}}}", p) for p in pieces)
    natural = corpus_text()
    assert list(base.learning_pieces(natural)) == list(base.text_chunks(natural))
    tokenizer = train_bpe(text, 300, at_most=True)
    assert tokenizer.decode(tokenizer.encode(text)) == text


def hf_ids(engine: Tokenizer, texts: list[str]) -> list[list[int]]:
    return [encoding.ids for encoding in engine.encode_batch(texts, add_special_tokens=False)]


def test_tiktoken_gives_the_ids_of_huggingfaces_bpe_on_a_megabyte_not_learned_from():
    """A BPE of 768 ids (the default's on a smaller text) learned from the first megabyte of
    Shakespeare, encoded by tiktoken, against HuggingFace's BPE model with the same merges on
    the last megabyte (romances and tragedies) and text in other scripts, chunk by chunk."""
    tokenizer = train_bpe(shakespeare_slice(), 768)
    assert tokenizer.encoded_by == "tiktoken"
    texts = list(base.text_chunks(shakespeare_tail())) + corpus_text().split("\n")[-12:]
    reference = Tokenizer.from_str(tokenizer.engine.to_str())  # HuggingFace's, as exported
    assert tokenizer.encode_batch(texts) == hf_ids(reference, texts)
    assert [tokenizer.encode(text) for text in texts[-12:]] == hf_ids(reference, texts[-12:])


def test_hand_written_merges_that_tiktoken_would_merge_otherwise_keep_huggingfaces_ids():
    """("b", "c") before ("a", "b"): the bytes of the token "abc" (made by ("ab", "c")) become
    "a" "bc", a pair no merge joins, where tiktoken would join them into "abc"."""
    merges = [("b", "c"), ("a", "b"), ("ab", "c"), ("Ġ", "a")]
    tokenizer = BPETokenizer(merges)
    assert tokenizer.encoded_by == "tokenizers"
    ids = {symbol: index for index, symbol in enumerate(tokenizer.symbols())}
    reference = Tokenizer(models.BPE(vocab=ids, merges=merges))
    reference.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    reference.add_special_tokens(["<|endoftext|>"])
    for text in ("abc", "abc abcabc<|endoftext|>", " a bc"):
        assert tokenizer.encode(text) == reference.encode(text, add_special_tokens=False).ids
    assert tokenizer.encode("abc") == [ids["a"], ids["bc"]]
    assert BPETokenizer(merges[1:]).encoded_by == "tiktoken"  # without ("b", "c"): safe


def test_every_special_token_keeps_its_id_in_both_engines():
    merges = trained(300).merges
    tokenizer = BPETokenizer(merges, ["<|endoftext|>", "<|pad|>"])
    text = "the king<|pad|> and<|endoftext|>the<|pad|>"
    reference = Tokenizer.from_str(tokenizer.engine.to_str())
    assert tokenizer.encode(text) == reference.encode(text, add_special_tokens=False).ids
    assert tokenizer.encode(text).count(1) == 2 and tokenizer.decode(tokenizer.encode(text)) == text


def test_the_vocabulary_layout_is_special_then_bytes_then_merges():
    tokenizer = trained(LARGEST)
    symbols = tokenizer.symbols()
    assert symbols[0] == "<|endoftext|>" and tokenizer.eos_id == 0
    assert symbols[1:257] == list(bytes_to_unicode().values())
    for number, (left, right) in enumerate(tokenizer.merges):
        assert symbols[257 + number] == left + right
    assert json.loads(hf_trained_cached(LARGEST).to_str())["model"]["vocab"] == {
        symbol: index for index, symbol in enumerate(symbols)
    }


def test_end_of_text_is_one_reserved_id_and_round_trips():
    tokenizer = trained(LARGEST)
    ids = tokenizer.encode("the king<|endoftext|>the lord")
    assert ids.count(0) == 1
    assert tokenizer.decode(ids) == "the king<|endoftext|>the lord"
    assert tokenizer.tokens([0]) == ["<|endoftext|>"]
    # no learned token holds the special token's id or text
    assert "<|endoftext|>" not in tokenizer.symbols()[1:]


def test_tokens_show_partial_characters_as_bytes():
    tokenizer = trained(SMALLEST)
    assert tokenizer.tokens(tokenizer.encode("é")) == ["<0xC3>", "<0xA9>"]


def test_a_saved_tokenizer_loads_from_its_file_alone(tmp_path):
    tokenizer = trained(LARGEST)
    tokenizer.save(tmp_path)
    assert [path.name for path in tmp_path.iterdir()] == [TOKENIZER_FILE]
    loaded = load_tokenizer(tmp_path)
    assert isinstance(loaded, BPETokenizer)
    assert loaded.symbols() == tokenizer.symbols()
    text = corpus_text() + "never seen: Zyzzyva 42 ✓"
    assert loaded.encode(text) == tokenizer.encode(text)


def test_ids_are_the_same_in_another_process(tmp_path):
    tokenizer = trained(LARGEST)
    tokenizer.save(tmp_path)
    text = corpus_text()[:3000] + " übermäßig 🙂"
    script = (
        "import json, sys\n"
        "from light_llm.tokenizers import load_tokenizer\n"
        "text = sys.stdin.read()\n"
        f"print(json.dumps(load_tokenizer({str(tmp_path)!r}).encode(text)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        input=text,
        capture_output=True,
        text=True,
        encoding="utf-8",
        check=True,
    )
    assert json.loads(done.stdout) == tokenizer.encode(text)


def test_encode_batch_equals_encode():
    tokenizer = trained(LARGEST)
    texts = corpus_text().split("\n")[:50]
    assert tokenizer.encode_batch(texts) == [tokenizer.encode(text) for text in texts]


def test_train_tokenizer_by_kind():
    tokenizer = train_tokenizer("bpe", corpus_text(), 400)
    assert isinstance(tokenizer, BPETokenizer) and tokenizer.vocab_size == 400


def one_sentence(message: str) -> bool:
    return message.endswith(".") and "\n" not in message


@pytest.mark.parametrize("vocab_size", [0, 100, 256, SMALLEST - 1])
def test_a_vocabulary_below_the_bytes_and_specials_is_refused(vocab_size):
    with pytest.raises(TokenizerError) as info:
        train_bpe(corpus_text(), vocab_size)
    assert "at least 257" in str(info.value) and one_sentence(str(info.value))


@pytest.mark.parametrize("vocab_size", ["512", True, 260.5, 512.0])
def test_a_vocabulary_size_that_is_not_a_whole_number_is_refused_as_such(vocab_size):
    with pytest.raises(TokenizerError) as info:
        train_bpe(corpus_text(), vocab_size)
    assert "whole number" in str(info.value) and one_sentence(str(info.value))


def test_a_text_too_small_for_the_merges_says_how_many_it_could_learn():
    text = "abab abab"  # chunks "abab" and " abab": merges ab, abab, Ġabab
    learnable = hf_trained(text, 10_000).get_vocab_size() - SMALLEST
    with pytest.raises(TokenizerError) as info:
        train_bpe(text, SMALLEST + learnable + 1)
    message = str(info.value)
    assert f"only {learnable} merges" in message and f"at most {SMALLEST + learnable}" in message
    assert one_sentence(message)
    assert train_bpe(text, SMALLEST + learnable).n_merges == learnable


def test_at_most_learns_every_merge_the_text_gives_and_the_same_ids():
    text = "abab abab"
    learnable = hf_trained(text, 10_000).get_vocab_size() - SMALLEST
    capped = train_bpe(text, SMALLEST + learnable + 50, at_most=True)
    exact = train_bpe(text, SMALLEST + learnable)
    assert capped.merges == exact.merges and capped.encode(" abab ab") == exact.encode(" abab ab")
    assert train_bpe(corpus_text(), 300, at_most=True).vocab_size == 300  # enough text: as asked


def test_empty_text_and_lone_surrogates_are_refused():
    with pytest.raises(TokenizerError):
        train_bpe("", 300)
    with pytest.raises(TokenizerError):
        trained(SMALLEST).encode("a\ud800b")
    with pytest.raises(TokenizerError):
        trained(SMALLEST).encode(b"bytes")
    with pytest.raises(TokenizerError):
        trained(LARGEST).encode_batch(["fine", "a\udc80b"])  # tiktoken would replace it


def test_a_corrupt_tokenizer_file_is_a_checkpoint_error(tmp_path):
    config = trained(300).to_config()
    config["merges"] = ["Ġ nonexistent", *config["merges"]]
    (tmp_path / TOKENIZER_FILE).write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(CheckpointError) as info:
        load_tokenizer(tmp_path)
    assert "merge 0" in str(info.value)
    config = {**trained(300).to_config(), "pre_tokenizer": "whitespace"}
    (tmp_path / TOKENIZER_FILE).write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(CheckpointError):
        load_tokenizer(tmp_path)
    config = trained(300).to_config()
    del config["merges"]
    (tmp_path / TOKENIZER_FILE).write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(CheckpointError) as info:
        load_tokenizer(tmp_path)
    assert "'merges'" in str(info.value)
