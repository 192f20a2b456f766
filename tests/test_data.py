"""Tests of light_llm.data: corpus loading, the token cache, batches (the Shakespeare conversion:
test_shakespeare.py).

Expected values come from the source Markdown read here with plain regular expressions,
from the tokenizers' own encode of the whole text, and from the arrays on disk.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from light_llm import data
from light_llm.errors import DataError
from light_llm.shakespeare import shakespeare_slice
from light_llm.tokenizers import CharTokenizer, GPT2Tokenizer
from light_llm.tokenizers import base as tokenizer_base


class StandInCharTokenizer:
    """A tokenizer written here, independent of light_llm.tokenizers: id = offset + rank of
    the character in the sorted alphabet; ``offset`` makes a vocabulary of any size."""

    def __init__(self, text: str, offset: int = 0, name: str = "stand-in-char") -> None:
        self.name = name
        self.alphabet = sorted(set(text))
        self.offset = offset
        self.vocab_size = offset + len(self.alphabet)
        self.encode_calls = 0

    def encode(self, text: str) -> list[int]:
        self.encode_calls += 1
        return [self.offset + self.alphabet.index(char) for char in text]

    def decode(self, ids: list[int]) -> str:
        return "".join(self.alphabet[i - self.offset] if i >= self.offset else "\x00" for i in ids)


def one_sentence(message: str) -> bool:
    """One line that ends with a full stop and holds no other sentence end."""
    return "\n" not in message and message.endswith(".") and not re.search(r"[.!?] [A-Z]", message)


# ---------------------------------------------------------------- load_corpus


def test_load_corpus_reads_utf8_and_defaults_to_shakespeare(tmp_path, shakespeare):
    path = tmp_path / "corpus.txt"
    path.write_bytes("\ufeffOne line\r\nTwo — lines\rthree\n".encode())
    assert data.load_corpus(path) == "One line\nTwo — lines\nthree\n"
    assert data.load_corpus(str(path)) == "One line\nTwo — lines\nthree\n"
    assert data.load_corpus(None) is shakespeare


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "does not exist"),
        (b"", "is empty"),
        (b" \n\t\n", "only whitespace"),
        (b"text\x00\x01\x02binary", "NUL bytes at offset 4"),
        (b"caf\xc3\xa9 ok, then \xff bad", "byte 0xff at offset 15"),  # é is 2 bytes
        (b"abc\xe2\x82", "byte 0xe2 at offset 3"),
    ],
)
def test_load_corpus_rejects_bad_files_with_one_sentence(tmp_path, content, expected):
    path = tmp_path / "corpus.txt"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(DataError) as info:
        data.load_corpus(path)
    assert expected in str(info.value) and str(path) in str(info.value)
    assert one_sentence(str(info.value)), str(info.value)


def test_load_corpus_rejects_a_folder(tmp_path):
    with pytest.raises(DataError, match="is a folder") as info:
        data.load_corpus(tmp_path)
    assert one_sentence(str(info.value))


# ---------------------------------------------------------------- the token cache

TEXT = "".join(f"SPEAKER {i % 7}:\nline {i} of the play,  with  spaces\n\n" for i in range(300))


def read_ids(path: Path, dtype: str) -> list[int]:
    return np.fromfile(path, dtype=dtype).tolist()


def test_cache_equals_direct_encoding_of_each_split(tmp_path):
    tokenizer = StandInCharTokenizer(TEXT)
    train_path, val_path = data.encode_corpus(TEXT, tokenizer, tmp_path / "cache")
    split_at = int(len(TEXT) * 0.9)
    assert read_ids(train_path, "uint16") == tokenizer.encode(TEXT[:split_at])
    assert read_ids(val_path, "uint16") == tokenizer.encode(TEXT[split_at:])
    meta = json.loads((tmp_path / "cache" / "meta.json").read_text())
    assert meta["tokenizer"] == "stand-in-char" and meta["vocab_size"] == tokenizer.vocab_size
    assert meta["dtype"] == "uint16"
    assert meta["train_tokens"] + meta["val_tokens"] == len(TEXT)
    assert abs(meta["train_tokens"] / len(TEXT) - 0.9) < 1 / len(TEXT)


@pytest.mark.parametrize("chunk_chars", [7, 64, 1 << 18])
def test_chunked_gpt2_encoding_equals_encoding_the_whole_text(tmp_path, monkeypatch, chunk_chars):
    monkeypatch.setattr(tokenizer_base, "CHUNK_CHARS", chunk_chars)
    text = (
        "ROMEO:\nBut, soft!  what light \nthrough yonder window breaks?\n\n\n"
        "  Indented line\n\t tabbed\nA<|endoftext|>B\nnumbers 12345 and 'quotes' don't\n"
    ) * 40
    tokenizer = GPT2Tokenizer()
    train_path, val_path = data.encode_corpus(text, tokenizer, tmp_path)
    train_text, val_text = data.split_train_val(text)
    assert read_ids(train_path, "uint16") == tokenizer.encode(train_text)
    assert read_ids(val_path, "uint16") == tokenizer.encode(val_text)


def test_batch_encode_is_used_when_the_tokenizer_has_it(tmp_path, monkeypatch):
    monkeypatch.setattr(tokenizer_base, "CHUNK_CHARS", 100)
    tokenizer = StandInCharTokenizer(TEXT)
    batches = []

    def encode_batch(texts):
        batches.append(len(texts))
        return [tokenizer.encode(text) for text in texts]

    tokenizer.encode_batch = encode_batch
    train_path, _ = data.encode_corpus(TEXT, tokenizer, tmp_path)
    assert read_ids(train_path, "uint16") == tokenizer.encode(TEXT[: int(len(TEXT) * 0.9)])
    assert max(batches) > 1


def test_char_tokenizer_cache_of_the_shakespeare_slice(tmp_path):
    text = shakespeare_slice()
    tokenizer = CharTokenizer.from_text(text)
    train_path, val_path = data.encode_corpus(text, tokenizer, tmp_path)
    ids = np.concatenate([np.fromfile(train_path, np.uint16), np.fromfile(val_path, np.uint16)])
    alphabet = sorted(set(text))
    assert ids.tolist() == [alphabet.index(char) for char in text]


@pytest.mark.parametrize(("offset", "dtype"), [(65536 - 3, "uint16"), (65536 - 2, "uint32")])
def test_uint32_when_ids_do_not_fit_in_16_bits(tmp_path, offset, dtype):
    text = "abcabcabba"  # alphabet of 3: vocab_size = offset + 3
    tokenizer = StandInCharTokenizer(text, offset=offset)
    train_path, _ = data.encode_corpus(text, tokenizer, tmp_path)
    assert json.loads((tmp_path / "meta.json").read_text())["dtype"] == dtype
    assert data.token_dtype(tokenizer.vocab_size) == np.dtype(dtype)
    assert read_ids(train_path, dtype) == tokenizer.encode(text[:9])
    assert max(read_ids(train_path, dtype)) == tokenizer.vocab_size - 1


def test_cache_is_reused_only_for_the_same_text_and_tokenizer(tmp_path):
    tokenizer = StandInCharTokenizer(TEXT)
    data.encode_corpus(TEXT, tokenizer, tmp_path)
    calls = tokenizer.encode_calls
    data.encode_corpus(TEXT, tokenizer, tmp_path)
    assert tokenizer.encode_calls == calls  # reused

    changed = TEXT.replace("line 7 ", "line 8 ")
    train_path, _ = data.encode_corpus(changed, tokenizer, tmp_path)
    assert tokenizer.encode_calls > calls  # rebuilt for new text
    assert read_ids(train_path, "uint16") == tokenizer.encode(changed[: int(len(changed) * 0.9)])

    other = StandInCharTokenizer(TEXT + "Z")  # another alphabet: other ids for the same text
    train_path, _ = data.encode_corpus(changed, other, tmp_path)
    assert other.encode_calls > 0
    assert read_ids(train_path, "uint16") == other.encode(changed[: int(len(changed) * 0.9)])


def test_a_truncated_cache_file_is_rebuilt(tmp_path):
    tokenizer = StandInCharTokenizer(TEXT)
    train_path, _ = data.encode_corpus(TEXT, tokenizer, tmp_path)
    good = train_path.read_bytes()
    train_path.write_bytes(good[:-2])
    data.encode_corpus(TEXT, tokenizer, tmp_path)
    assert train_path.read_bytes() == good


def test_a_failure_mid_write_leaves_the_old_cache_intact(tmp_path, monkeypatch):
    monkeypatch.setattr(tokenizer_base, "CHUNK_CHARS", 50)
    tokenizer = StandInCharTokenizer(TEXT)
    train_path, val_path = data.encode_corpus(TEXT, tokenizer, tmp_path)
    old_train, old_val = train_path.read_bytes(), val_path.read_bytes()

    class FailsMidway(StandInCharTokenizer):
        def encode(self, text):
            if self.encode_calls == 3:
                raise OSError(28, "No space left on device")
            return super().encode(text)

    changed = TEXT.replace("play", "work")
    with pytest.raises(DataError, match="No space left on device") as info:
        data.encode_corpus(changed, FailsMidway(changed), tmp_path)
    assert one_sentence(str(info.value))
    assert train_path.read_bytes() == old_train and val_path.read_bytes() == old_val
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.bin", "val.bin"]

    # a failing rename (after the temporary file is complete) changes nothing either
    real_replace = os.replace

    def failing_replace(source, target):
        if Path(target).name == "val.bin":
            raise OSError(5, "Input/output error")
        return real_replace(source, target)

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(DataError, match="Input/output error"):
        data.encode_corpus(changed, StandInCharTokenizer(changed), tmp_path)
    assert val_path.read_bytes() == old_val
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]

    # with meta.json gone, the next run rebuilds instead of trusting a half-updated pair
    monkeypatch.setattr(os, "replace", real_replace)
    train_path, val_path = data.encode_corpus(TEXT, tokenizer, tmp_path)
    assert train_path.read_bytes() == old_train and val_path.read_bytes() == old_val


def test_an_unwritable_cache_folder_is_a_data_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(DataError, match="cannot write the token cache") as info:
        data.encode_corpus(TEXT, StandInCharTokenizer(TEXT), blocker / "cache")
    assert one_sentence(str(info.value))


# ---------------------------------------------------------------- batches


@pytest.fixture
def token_file(tmp_path) -> tuple[Path, np.ndarray]:
    tokens = np.random.default_rng(1).integers(0, 50_000, size=1000).astype(np.uint16)
    path = tmp_path / "train.bin"
    tokens.tofile(path)
    return path, tokens


def test_batches_are_windows_of_the_file_with_targets_shifted_by_one(token_file):
    path, tokens = token_file
    dataset = data.TokenDataset(path, "uint16", block_size=16)
    assert isinstance(dataset.tokens, np.memmap) and len(dataset) == 1000
    x, y = dataset.get_batch(8, torch.Generator().manual_seed(3))
    assert x.shape == y.shape == (8, 16) and x.dtype == y.dtype == torch.int64
    assert torch.equal(x[:, 1:], y[:, :-1])
    starts = torch.randint(0, 1000 - 16, (8,), generator=torch.Generator().manual_seed(3))
    for row, start in enumerate(starts.tolist()):
        assert x[row].tolist() == tokens[start : start + 16].tolist()
        assert y[row].tolist() == tokens[start + 1 : start + 17].tolist()


def test_batches_depend_only_on_the_generator_state(token_file):
    path, _ = token_file
    dataset = data.TokenDataset(path, np.uint16, block_size=8)
    generator = torch.Generator().manual_seed(0)
    state = generator.get_state()
    first = [dataset.get_batch(4, generator) for _ in range(3)]
    torch.manual_seed(123)  # the global RNG plays no part
    generator.set_state(state)
    again = [dataset.get_batch(4, generator) for _ in range(3)]
    for (x1, y1), (x2, y2) in zip(first, again, strict=True):
        assert torch.equal(x1, x2) and torch.equal(y1, y2)
    other = dataset.get_batch(4, torch.Generator().manual_seed(1))
    assert not torch.equal(other[0], first[0][0])

    numpy_batches = [dataset.get_batch(4, np.random.default_rng(7)) for _ in range(2)]
    assert torch.equal(numpy_batches[0][0], numpy_batches[1][0])


def test_every_window_start_can_be_drawn(tmp_path):
    path = tmp_path / "val.bin"
    np.arange(12, dtype=np.uint32).tofile(path)
    dataset = data.TokenDataset(path, "uint32", block_size=9)  # starts 0, 1, 2
    x, y = dataset.get_batch(300, np.random.default_rng(0))
    assert set(x[:, 0].tolist()) == {0, 1, 2}
    assert y[:, -1].max().item() == 11


def test_a_shorter_context_gives_shorter_windows_from_every_start_it_allows(tmp_path):
    """A sequence-length warmup's windows: context 4 in a 12-token file with block_size 9 has
    the starts 0 .. 7 (12 - 4 - 1), each window 4 inputs and their 4 next tokens, the same
    from a NumPy generator in the torch and the NumPy forms."""
    path = tmp_path / "train.bin"
    np.arange(12, dtype=np.uint32).tofile(path)
    dataset = data.TokenDataset(path, "uint32", block_size=9)
    x, y = dataset.get_batch(400, np.random.default_rng(0), context=4)
    assert x.shape == y.shape == (400, 4)
    assert set(x[:, 0].tolist()) == set(range(8))
    for row in range(400):
        first = x[row, 0].item()
        assert x[row].tolist() == list(range(first, first + 4))
        assert y[row].tolist() == list(range(first + 1, first + 5))
    arrays = dataset.sample_windows(400, np.random.default_rng(0), context=4)
    assert np.array_equal(arrays[0], x.numpy()) and np.array_equal(arrays[1], y.numpy())
    x_torch, _ = dataset.get_batch(50, torch.Generator().manual_seed(0), context=4)
    assert x_torch.shape == (50, 4) and x_torch[:, 0].max().item() <= 7


def test_sequential_batches_score_every_token_once(token_file):
    path, tokens = token_file
    dataset = data.TokenDataset(path, "uint16", block_size=10)
    whole = list(dataset.sequential_batches(batch_size=32, tail=False))
    targets = torch.cat([y.reshape(-1) for _, y in whole]).tolist()
    inputs = torch.cat([x.reshape(-1) for x, _ in whole]).tolist()
    n_windows = (1000 - 1) // 10
    assert [len(x) for x, _ in whole] == [32, 32, 32, n_windows - 96]
    assert targets == tokens[1 : 1 + 10 * n_windows].tolist()
    assert inputs == tokens[: 10 * n_windows].tolist()
    assert len(list(dataset.sequential_batches(batch_size=32, max_batches=2))) == 2
    # with the tail window (the default), every token but the first is a target once
    batches = list(dataset.sequential_batches(batch_size=32))
    assert [len(x) for x, _ in batches] == [32, 32, 32, n_windows - 96 + 1]
    tail_x, tail_y = batches[-1][0][-1].tolist(), batches[-1][1][-1].tolist()
    assert tail_x == tokens[1000 - 11 : 1000 - 1].tolist()
    scored = [t for _, y in batches for t in y.reshape(-1).tolist() if t != data.IGNORE_TARGET]
    assert scored == tokens[1:].tolist()
    assert tail_y[-9:] == tokens[-9:].tolist() and set(tail_y[:-9]) == {data.IGNORE_TARGET}
    assert torch.cat([x.reshape(-1) for x, _ in batches]).min() >= 0  # inputs untouched


def test_sequential_batches_add_no_tail_when_the_windows_cover_the_split(tmp_path):
    path = tmp_path / "val.bin"
    tokens = np.arange(41, dtype=np.uint16)  # 40 targets: exactly 4 windows of 10
    tokens.tofile(path)
    batches = list(data.TokenDataset(path, "uint16", block_size=10).sequential_batches(3))
    scored = [t for _, y in batches for t in y.reshape(-1).tolist()]
    assert scored == tokens[1:].tolist()


def test_a_split_shorter_than_one_block_plus_one_is_a_data_error(tmp_path):
    path = tmp_path / "val.bin"
    np.arange(64, dtype=np.uint16).tofile(path)
    with pytest.raises(DataError) as info:
        data.TokenDataset(path, "uint16", block_size=64)
    message = str(info.value)
    assert "val split has 64 tokens" in message and "at least 65" in message
    assert one_sentence(message)
    assert data.TokenDataset(path, "uint16", block_size=63).get_batch(2, np.random.default_rng())


def test_a_damaged_token_file_is_a_data_error(tmp_path):
    path = tmp_path / "train.bin"
    path.write_bytes(b"\x01\x02\x03")
    with pytest.raises(DataError, match="not a whole number") as info:
        data.TokenDataset(path, "uint16", block_size=1)
    assert one_sentence(str(info.value))
    with pytest.raises(DataError, match="does not exist"):
        data.TokenDataset(tmp_path / "missing.bin", "uint16", block_size=1)


def test_split_sizes_count_tokens_utf8_bytes_and_characters(tmp_path):
    text = TEXT + "éà – ünïcode\n" * 30
    tokenizer = StandInCharTokenizer(text)
    data.encode_corpus(text, tokenizer, tmp_path / "cache")
    sizes = data.split_sizes(tmp_path / "cache")
    split_at = int(len(text) * 0.9)
    for split, part in (("train", text[:split_at]), ("val", text[split_at:])):
        expected = {"tokens": len(part), "bytes": len(part.encode("utf-8")), "chars": len(part)}
        assert sizes[split] == expected
    assert sizes["val"]["bytes"] > sizes["val"]["chars"]


def test_a_cache_without_sizes_is_a_data_error(tmp_path):
    (tmp_path / "meta.json").write_text('{"train_tokens": 3}')
    with pytest.raises(DataError, match="does not record the sizes of the splits"):
        data.split_sizes(tmp_path)
