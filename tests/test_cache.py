"""The user cache (light_llm.cache, issue 27): a second run on the same corpus with the same
tokenizer settings learns no BPE and encodes nothing; a changed corpus or setting is a new
entry; a damaged entry is made afresh; LIGHT_LLM_CACHE="" turns it off."""

from __future__ import annotations

import os

import pytest

import light_llm.data
import light_llm.tokenizers.registry
from light_llm.cache import CACHE_ENV, cache_root, converted_texts, learned_tokenizer
from light_llm.data import encode_corpus
from tests.train.helpers import write_corpus


@pytest.fixture
def text(tmp_path):
    return write_corpus(tmp_path / "corpus.txt", n_lines=300).read_text()


def count_calls(monkeypatch, module, name):
    calls = []
    real = getattr(module, name)

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def test_the_cache_is_where_the_environment_says(monkeypatch, tmp_path):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "c"))
    assert cache_root() == tmp_path / "c"
    monkeypatch.delenv(CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "light-llm"
    monkeypatch.setenv(CACHE_ENV, "")
    assert cache_root() is None


def test_a_learned_tokenizer_is_learned_once(monkeypatch, text):
    calls = count_calls(monkeypatch, light_llm.tokenizers, "train_tokenizer")
    first = learned_tokenizer("bpe", text, 300, at_most=True)
    second = learned_tokenizer("bpe", text, 300, at_most=True)
    assert len(calls) == 1
    assert second.encode(text[:500]) == first.encode(text[:500])
    learned_tokenizer("bpe", text + "more", 300, at_most=True)  # another corpus
    learned_tokenizer("bpe", text, 299, at_most=True)  # another size
    assert len(calls) == 3


def test_the_ids_of_a_corpus_are_encoded_once_for_every_run(monkeypatch, tmp_path, text):
    tokenizer = learned_tokenizer("bpe", text, 300, at_most=True)
    calls = count_calls(monkeypatch, light_llm.data, "encode_in_chunks")
    encode_corpus(text, tokenizer, tmp_path / "run1" / "data")
    encode_corpus(text, tokenizer, tmp_path / "run2" / "data")
    assert len(calls) == 2  # the two splits of the first run, none for the second
    for name in ("train.bin", "val.bin", "meta.json"):
        first = (tmp_path / "run1" / "data" / name).read_bytes()
        assert (tmp_path / "run2" / "data" / name).read_bytes() == first


def test_a_damaged_cache_entry_is_made_afresh(monkeypatch, tmp_path, text):
    tokenizer = learned_tokenizer("bpe", text, 300, at_most=True)
    encode_corpus(text, tokenizer, tmp_path / "run1" / "data")
    (entry,) = (cache_root() / "corpus").iterdir()
    ids = bytearray((entry / "train.bin").read_bytes())
    ids[0] ^= 1  # the same size, other bytes
    (entry / "train.bin").unlink()  # (a hard link of run1's: replace, not write through)
    (entry / "train.bin").write_bytes(bytes(ids))
    calls = count_calls(monkeypatch, light_llm.data, "encode_in_chunks")
    encode_corpus(text, tokenizer, tmp_path / "run2" / "data")
    assert len(calls) == 2
    expected = (tmp_path / "run1" / "data" / "train.bin").read_bytes()
    assert (tmp_path / "run2" / "data" / "train.bin").read_bytes() == expected


def test_without_a_cache_nothing_is_written_outside_the_run(monkeypatch, tmp_path, text):
    monkeypatch.setenv(CACHE_ENV, "")
    tokenizer = learned_tokenizer("bpe", text, 300, at_most=True)
    encode_corpus(text, tokenizer, tmp_path / "run" / "data")
    assert sorted(os.listdir(tmp_path)) == ["corpus.txt", "run"]


def upper_counted(calls):
    def convert(source):
        calls.append(source)
        return source.upper()

    return convert


def test_texts_are_converted_once_per_sources_and_converter():
    calls = []
    sources = {"b": "first play", "a": "second play"}
    first = converted_texts("plays", sources, upper_counted(calls), "v1")
    assert first == {"b": "FIRST PLAY", "a": "SECOND PLAY"} and list(first) == ["b", "a"]
    assert converted_texts("plays", sources, upper_counted(calls), "v1") == first
    assert len(calls) == 2  # the second call read them back
    converted_texts("plays", {**sources, "a": "second play, revised"}, upper_counted(calls), "v1")
    converted_texts("plays", sources, upper_counted(calls), "v2")  # another converter
    assert len(calls) == 6


@pytest.mark.parametrize(
    "damage",
    [
        lambda path: path.write_text(path.read_text()[:-20]),  # cut short
        lambda path: path.write_text(path.read_text().replace("FIRST", "FIRsT")),  # altered
        lambda path: path.unlink(),
    ],
)
def test_a_damaged_converted_text_is_converted_afresh_and_replaced(damage):
    calls = []
    sources = {"one": "first play"}
    converted_texts("plays", sources, upper_counted(calls), "v1")
    (folder,) = (cache_root() / "plays").iterdir()
    damage(folder / "texts.json")
    assert converted_texts("plays", sources, upper_counted(calls), "v1") == {"one": "FIRST PLAY"}
    assert converted_texts("plays", sources, upper_counted(calls), "v1") == {"one": "FIRST PLAY"}
    assert len(calls) == 2  # converted again once, then read from the replaced entry


def test_without_a_cache_texts_are_converted_every_time(monkeypatch):
    monkeypatch.setenv(CACHE_ENV, "")
    calls = []
    for _ in range(2):
        assert converted_texts("plays", {"one": "x"}, upper_counted(calls), "v1") == {"one": "X"}
    assert len(calls) == 2
