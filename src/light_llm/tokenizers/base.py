"""The interface every light-llm tokenizer follows, where a text may be cut into pieces that
encode (and teach BPE) as the whole does, and the atomic file write tokenizers save with.

A tokenizer turns text into the integer ids a model's embedding table is indexed by (seed 000
§2: X = E[tokens] + P[positions]) and back. Three kinds exist: ``char`` (one id per
character of the training corpus), ``gpt2`` (GPT-2's byte-level BPE) and ``bert`` (WordPiece
with [CLS]/[SEP], seed 003 §3-4). A checkpoint folder stores its tokenizer as
``light_tokenizer.json`` (see :func:`light_llm.tokenizers.load_tokenizer`).
"""

from __future__ import annotations

import json
import operator
import os
import re
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

from light_llm.atomic import write_atomically
from light_llm.errors import CheckpointError, OutputError, TokenizerError, reason

TOKENIZER_FILE = "light_tokenizer.json"
# Where a text may be cut into chunks that any of our tokenizers encodes exactly as it
# encodes the whole, and that the BPE learner counts into the same words: after a newline
# that has a non-space character on both sides. GPT-2's pre-tokenizer always ends a piece at
# such a newline and starts a new one after it (it looks ahead, never behind), and BERT's
# splits at every whitespace, so the pieces, and hence the ids and the merges, are the same.
CHUNK_BOUNDARY = re.compile(r"\S\n(?=\S)")
CHUNK_CHARS = 1 << 18


class Tokenizer(ABC):
    """Text <-> token ids.

    Attributes:
        name: "char", "gpt2" or "bert".
        vocab_size: number of distinct ids; every id is in ``range(vocab_size)``.
        eos_id: the id that ends a document (GPT-2's <|endoftext|>, BERT's [SEP]),
            or None when the vocabulary has none (char).
    """

    name: ClassVar[str]
    vocab_size: int
    eos_id: int | None

    @abstractmethod
    def encode(self, text: str) -> list[int]:
        """The ids of ``text``, without any special tokens added around it."""

    @abstractmethod
    def decode(self, ids: Sequence[int]) -> str:
        """The text that ``ids`` stand for."""

    @abstractmethod
    def tokens(self, ids: Sequence[int]) -> list[str]:
        """The piece of text each id stands for, one string per id, for display."""

    @abstractmethod
    def save(self, folder: str | os.PathLike) -> None:
        """Write ``light_tokenizer.json`` (and any file it refers to) into ``folder``."""

    def check_ids(self, ids: Sequence[int]) -> list[int]:
        """``ids`` as a list of ints; TokenizerError names the first id outside the vocabulary."""
        try:
            checked = [operator.index(i) for i in ids]
        except TypeError as exc:
            raise TokenizerError(f"token ids must be integers ({exc}).") from exc
        for token_id in checked:
            if not 0 <= token_id < self.vocab_size:
                raise TokenizerError(
                    f"token id {token_id} is outside the {self.name} vocabulary "
                    f"(ids run from 0 to {self.vocab_size - 1})."
                )
        return checked

    def __repr__(self) -> str:
        return f"{type(self).__name__}(vocab_size={self.vocab_size})"


def text_chunks(text: str) -> Iterator[str]:
    """``text`` in pieces of about ``CHUNK_CHARS`` characters, cut at ``CHUNK_BOUNDARY``: what
    a corpus is encoded in, and learned from, by pieces that the library's threads share."""
    start = 0
    while start < len(text):
        boundary = CHUNK_BOUNDARY.search(text, start + CHUNK_CHARS)
        end = boundary.end() if boundary else len(text)
        yield text[start:end]
        start = end


# the longest run of non-space (or space) characters a tokenizer trainer is given as one piece
LONGEST_RUN = 4096
LONG_RUN = re.compile(rf"\S{{{LONGEST_RUN}}}|\s{{{LONGEST_RUN}}}")


def learning_pieces(text: str) -> Iterator[str]:
    """:func:`text_chunks` of ``text``, with every run of ``LONGEST_RUN`` characters without a
    space (or of spaces alone) cut off into a piece of its own: the ``tokenizers`` trainers
    spend O(length) on a word at each merge, so a line with no space at all (DNA, digits,
    base64, one repeated letter) made learning quadratic (400,000 characters: 134 s, cut:
    under a second). Natural text has no such run, so what it teaches is unchanged."""
    for chunk in text_chunks(text):
        start = 0
        for run in LONG_RUN.finditer(chunk):
            yield chunk[start : run.end()]
            start = run.end()
        if start < len(chunk):
            yield chunk[start:]


def check_text(text: object) -> str:
    """``text`` itself if it is a str, else TokenizerError (bytes and None are common slips)."""
    if not isinstance(text, str):
        raise TokenizerError(f"tokenizers encode str, not {type(text).__name__}.")
    return text


def check_utf8(text: object) -> str:
    """``text`` itself if it is a str (:func:`check_text`) that can be written as UTF-8 bytes,
    else TokenizerError: a lone
    surrogate (half of an emoji's UTF-16 pair, or a byte that was not UTF-8 kept by Python's
    "surrogateescape") cannot; tiktoken, which encodes the byte-level BPEs, would replace it
    with U+FFFD without a word, and HuggingFace's ``tokenizers`` raises a bare TypeError."""
    try:
        check_text(text).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise TokenizerError(f"the text cannot be encoded as UTF-8 bytes ({exc}).") from None
    return text


def write_tokenizer_json(folder: str | os.PathLike, config: dict[str, Any]) -> None:
    """Write ``config`` as ``folder/light_tokenizer.json`` atomically (CheckpointError if not)."""
    path = Path(folder) / TOKENIZER_FILE
    try:
        write_atomically(path, json.dumps(config).encode("ascii"))
    except OSError as exc:
        raise CheckpointError(f"cannot write the tokenizer to {path}: {reason(exc)}.") from exc
    except OutputError as exc:  # the folder could not be made (e.g. a file in the way)
        raise CheckpointError(f"cannot write the tokenizer to {path}: {exc}") from None
