"""Byte-level BPE trained on your own text (seed 003 §2-3): learned by HuggingFace
``tokenizers``, encoded by ``tiktoken``.

The same three steps as GPT-2's tokenizer (:mod:`light_llm.tokenizers.gpt2`), with merges
learned from the user's corpus instead of OpenAI's:

1. **Pre-tokenisation: GPT-2's regular expression** (:data:`GPT2_SPLIT_PATTERN`). The text is
   cut into words with their leading space, runs of digits, runs of punctuation and runs of
   whitespace, and no merge ever crosses a cut. The reasons: a token is then a piece of one
   word (" the", "ing"), never "e t" glued across a boundary, so the vocabulary is spent on
   reusable pieces; the cut makes training count pairs per distinct word, which is what makes
   it fast; and a text can be cut at newlines into chunks
   (:func:`light_llm.tokenizers.base.text_chunks`) that encode to the same ids as the whole and
   teach the same merges, so that the library's threads share both the learning and the
   encoding of a corpus (:mod:`light_llm.data`). ``benchmarks/tokenizer_sweep.py`` measures
   bytes per token with and without it.
2. **Bytes.** Each chunk becomes its UTF-8 bytes; the 256 byte values are all in the
   vocabulary, so any text encodes and decodes back exactly and nothing is ever unknown.
3. **Merges.** Training repeatedly counts the adjacent pairs of tokens inside the chunks
   (weighted by how often each chunk occurs), makes the most frequent pair a new token
   (ties: the pair whose ids are smallest) and replaces it everywhere, until the vocabulary
   has the size asked for. Encoding applies the learned merges, earliest first.

The vocabulary's layout is light-llm's: the special tokens first (``<|endoftext|>`` = id 0),
then the 256 single bytes in GPT-2's :func:`~light_llm.tokenizers.gpt2.bytes_to_unicode`
order (ids 1-256: the printable bytes ! to ~ first, so byte 108, l, is id 76), then one id
per merge in the order it was learned. So the saved file,
``light_tokenizer.json``, holds only the special tokens and the merges (each written as two
tokens in GPT-2's printable byte alphabet, "Ġ t" for " " + "t", as in GPT-2's ``vocab.bpe``);
every id follows from them. HuggingFace's ``BpeTrainer`` makes exactly this layout, which
:func:`train_bpe` checks.

**Two engines.** HuggingFace's ``tokenizers`` learns the merges and is the pipeline a
``tokenizer.json`` export writes (:attr:`BPETokenizer.engine`); ``tiktoken`` encodes, as it
does GPT-2's vocabulary (:mod:`light_llm.tokenizers.gpt2`), about three times as fast (all of
Shakespeare: 0.55 s against 1.74 s on a 2-core AVX2 machine), which is a second of a
training run's start on a new corpus. tiktoken merges a different way: at each step the
adjacent pair whose *joined bytes* are the token of the lowest id, where step 3 above merges
the pair that is itself the earliest merge. The two agree whenever no token can be reached
by joining a pair other than the merge that made it; merges learned by step 3 have that
property (a pair inside a token can only become adjacent the way the learner made it, since
every merge is applied everywhere before the next is learned), and the ids are checked
against HuggingFace's on all of Shakespeare and on random text
(``tests/tokenizers/test_bpe_tokenizer.py``). Merges written by hand need not have it: a
merge list in which some token, encoded from its own bytes, is not that one token (the
merges ("b", "c"), ("a", "b"), ("ab", "c") give "abc" as "a" "bc") is encoded by HuggingFace's
engine instead (:func:`merges_are_tiktoken_safe`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

import tiktoken
from tokenizers import Tokenizer as TokenizerEngine
from tokenizers import decoders, models, pre_tokenizers, trainers

from light_llm.errors import TokenizerError
from light_llm.limits import check_vocab_size
from light_llm.tokenizers.base import (
    Tokenizer,
    check_text,
    check_utf8,
    learning_pieces,
    write_tokenizer_json,
)
from light_llm.tokenizers.gpt2 import (
    END_OF_TEXT,
    GPT2_SPLIT_PATTERN,
    bytes_to_unicode,
    readable_token,
)

SPECIAL_TOKENS = (END_OF_TEXT,)  # reserved ids 0.. before the bytes
BYTE_ALPHABET = 256
PRE_TOKENIZER = "gpt2-regex"  # the only rule this format knows (module docstring, step 1)
FORMAT_VERSION = 1


def byte_symbols() -> list[str]:
    """The printable symbol of each byte, in the order of their ids (GPT-2's order)."""
    return list(bytes_to_unicode().values())


def minimum_vocab_size(special_tokens: Sequence[str] = SPECIAL_TOKENS) -> int:
    """The smallest byte-level vocabulary: the special tokens and the 256 bytes, no merge."""
    return len(special_tokens) + BYTE_ALPHABET


def byte_level_engine(vocab: dict[str, int], merges: list[tuple[str, str]]) -> TokenizerEngine:
    """A HuggingFace tokenizer doing steps 1-3 of the module docstring with ``merges``.

    ``ByteLevel(use_regex=True)`` splits by GPT-2's regular expression and maps bytes to
    GPT-2's printable symbols; ``add_prefix_space=False`` leaves the text as it is (a leading
    space is not invented), so decoding gives back exactly the text encoded.
    """
    engine = TokenizerEngine(models.BPE(vocab=vocab, merges=merges))
    engine.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    engine.decoder = decoders.ByteLevel()
    return engine


def merges_are_tiktoken_safe(engine: TokenizerEngine, symbols: Sequence[str], first: int) -> bool:
    """Whether every token made by a merge (ids ``first`` on, ``symbols`` in GPT-2's printable
    alphabet) encodes from its own bytes as itself under ``engine``'s merges (step 3 of the
    module docstring): the check that a hand-written merge list gets before tiktoken encodes
    with it (module docstring, "Two engines")."""
    model = engine.model
    return all(
        [token.id for token in model.tokenize(symbol)] == [token_id]
        for token_id, symbol in enumerate(symbols[first:], start=first)
    )


def tiktoken_encoding(
    token_bytes: Sequence[bytes], special_tokens: Sequence[str]
) -> tiktoken.Encoding:
    """The vocabulary as a tiktoken Encoding: GPT-2's split pattern, each non-special token's
    bytes ranked by its id (so merges are ranked in the order they were learned), the special
    tokens at their ids."""
    n_special = len(special_tokens)
    return tiktoken.Encoding(
        name="light-llm-bpe",
        pat_str=GPT2_SPLIT_PATTERN,
        mergeable_ranks={
            data: token_id for token_id, data in enumerate(token_bytes) if token_id >= n_special
        },
        special_tokens={token: token_id for token_id, token in enumerate(special_tokens)},
        explicit_n_vocab=len(token_bytes),
    )


class BPETokenizer(Tokenizer):
    """Byte-level BPE over learned ``merges``; ``eos_id`` is <|endoftext|> (id 0).

    Args:
        merges: the learned merges in order, each a pair of tokens written in GPT-2's printable
            byte alphabet (("Ġ", "t") makes "Ġt", i.e. b" t").
        special_tokens: tokens given the first ids; the literal text "<|endoftext|>" encodes as
            that one id (as GPT-2's does), so documents can be separated in a corpus.
    """

    name = "bpe"

    def __init__(
        self, merges: Sequence[tuple[str, str]], special_tokens: Sequence[str] = SPECIAL_TOKENS
    ) -> None:
        self.special_tokens = list(special_tokens)
        if END_OF_TEXT not in self.special_tokens:
            raise TokenizerError(f"a BPE tokenizer's special tokens must include {END_OF_TEXT}.")
        symbols = [*self.special_tokens, *byte_symbols()]
        id_of = {symbol: index for index, symbol in enumerate(symbols)}
        if len(id_of) != len(symbols):
            raise TokenizerError("the special tokens must differ from each other and the bytes.")
        self.merges = [tuple(pair) for pair in merges]
        for number, pair in enumerate(self.merges):
            if len(pair) != 2 or any(
                not isinstance(part, str) or part not in id_of or part in self.special_tokens
                for part in pair
            ):
                raise TokenizerError(
                    f"merge {number} {pair!r} does not join two tokens made before it."
                )
            merged = pair[0] + pair[1]
            if merged in id_of:
                raise TokenizerError(f"merge {number} {pair!r} makes a token that exists already.")
            id_of[merged] = len(symbols)
            symbols.append(merged)
        self._symbols = symbols
        self.vocab_size = len(symbols)
        self.eos_id = id_of[END_OF_TEXT]
        byte_of_symbol = {symbol: byte for byte, symbol in bytes_to_unicode().items()}
        n_special = len(self.special_tokens)
        self._token_bytes = [token.encode("utf-8") for token in self.special_tokens] + [
            bytes(byte_of_symbol[char] for char in symbol) for symbol in symbols[n_special:]
        ]
        self._engine = byte_level_engine(id_of, self.merges)
        self._engine.add_special_tokens(self.special_tokens)
        self._fast = None  # tiktoken, where it gives HuggingFace's ids (module docstring)
        if merges_are_tiktoken_safe(self._engine, symbols, n_special + BYTE_ALPHABET):
            self._fast = tiktoken_encoding(self._token_bytes, self.special_tokens)

    @property
    def engine(self) -> TokenizerEngine:
        """The HuggingFace ``tokenizers`` pipeline that encodes (its ``to_str()`` is a
        ``tokenizer.json``)."""
        return self._engine

    @property
    def encoded_by(self) -> str:
        """Which engine encodes: "tiktoken", or "tokenizers" for merges tiktoken might merge
        otherwise (module docstring, "Two engines")."""
        return "tokenizers" if self._fast is None else "tiktoken"

    @property
    def n_merges(self) -> int:
        return len(self.merges)

    def symbols(self) -> list[str]:
        """Every token in id order as GPT-2 writes it (special tokens as themselves, bytes in
        GPT-2's printable alphabet: "Ġthe" is b" the")."""
        return list(self._symbols)

    def encode(self, text: str) -> list[int]:
        """The ids of ``text`` (GPT-2 pre-tokenisation, bytes, merges earliest first)."""
        text = check_utf8(text)
        if self._fast is not None:
            return self._fast.encode(text, allowed_special="all")
        return self._engine.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """:meth:`encode` of each text, encoded in parallel threads (a corpus is encoded
        through this) by tiktoken, or by ``tokenizers`` without the character offsets of each
        token that it would otherwise work out (module docstring, "Two engines")."""
        texts = [check_utf8(text) for text in texts]
        if self._fast is not None:
            return self._fast.encode_batch(texts, allowed_special="all")
        encodings = self._engine.encode_batch_fast(texts, add_special_tokens=False)
        return [encoding.ids for encoding in encodings]

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ``ids``; bytes that do not form valid UTF-8 (ids cut inside a multi-byte
        character) become U+FFFD."""
        token_bytes = self._token_bytes
        joined = b"".join(token_bytes[token_id] for token_id in self.check_ids(ids))
        return joined.decode("utf-8", errors="replace")

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes that ``token_id`` stands for (a special token: its text in UTF-8)."""
        return self._token_bytes[self.check_ids([token_id])[0]]

    def tokens(self, ids: Sequence[int]) -> list[str]:
        """Each token's text; bytes that are part of a multi-byte character show as <0xNN>."""
        token_bytes = self._token_bytes
        return [readable_token(token_bytes[token_id]) for token_id in self.check_ids(ids)]

    def to_config(self) -> dict:
        """What ``light_tokenizer.json`` holds (module docstring)."""
        return {
            "type": "bpe",
            "format_version": FORMAT_VERSION,
            "pre_tokenizer": PRE_TOKENIZER,
            "special_tokens": self.special_tokens,
            "merges": [f"{left} {right}" for left, right in self.merges],
        }

    def save(self, folder: str | os.PathLike) -> None:
        write_tokenizer_json(folder, self.to_config())

    @classmethod
    def from_config(cls, config: dict) -> BPETokenizer:
        """The tokenizer a ``light_tokenizer.json`` describes (TokenizerError if it cannot)."""
        if config.get("format_version") != FORMAT_VERSION:
            raise TokenizerError(
                f"a bpe tokenizer of format version {config.get('format_version')!r}; this "
                f"light-llm reads version {FORMAT_VERSION}."
            )
        if config.get("pre_tokenizer") != PRE_TOKENIZER:
            raise TokenizerError(
                f"a bpe tokenizer with the pre-tokenizer {config.get('pre_tokenizer')!r}; this "
                f"light-llm knows {PRE_TOKENIZER!r}."
            )
        merges = config["merges"]
        if not isinstance(merges, list) or not all(
            isinstance(line, str) and line.count(" ") == 1 for line in merges
        ):
            raise TokenizerError("its merges must be strings 'left right'.")
        return cls([tuple(line.split(" ")) for line in merges], config["special_tokens"])


def train_bpe(
    text: str,
    vocab_size: int,
    special_tokens: Sequence[str] = SPECIAL_TOKENS,
    at_most: bool = False,
) -> BPETokenizer:
    """A byte-level BPE tokenizer of ``vocab_size`` ids learned from ``text`` (the training
    split alone: the validation text must stay unseen); ``at_most``: of as many ids as the
    text gives merges for, up to ``vocab_size``.

    TokenizerError when ``vocab_size`` is below the 256 bytes plus the special tokens, when
    the text is empty, or, unless ``at_most``, when the text cannot give that many merges (a
    merge needs a pair of tokens inside one pre-tokenised chunk; the message says how many
    it could learn).
    """
    check_text(text)
    smallest = minimum_vocab_size(special_tokens)
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int):
        raise TokenizerError(f"a vocabulary size is a whole number of ids, got {vocab_size!r}.")
    if vocab_size < smallest:
        raise TokenizerError(
            f"a byte-level BPE vocabulary needs at least {smallest} ids (the 256 bytes and "
            f"{len(special_tokens)} special token(s)), got {vocab_size!r}."
        )
    check_vocab_size(vocab_size, TokenizerError)  # the library would abort the process
    if not text:
        raise TokenizerError("cannot learn BPE merges from empty text.")
    engine = byte_level_engine({}, [])
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=0,
        special_tokens=list(special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    try:
        engine.train_from_iterator(learning_pieces(text), trainer)
    except Exception as exc:  # lone surrogates
        raise TokenizerError(f"cannot learn BPE from this text ({exc}).") from None
    model = json.loads(engine.to_str())["model"]
    merges = [tuple(pair) for pair in model["merges"]]
    tokenizer = BPETokenizer(merges, special_tokens)
    if tokenizer.vocab_size < vocab_size and not at_most:
        raise TokenizerError(
            f"the text holds enough pairs for only {tokenizer.n_merges} merges (a vocabulary "
            f"of {tokenizer.vocab_size}), not the {vocab_size - smallest} that a vocabulary of "
            f"{vocab_size} needs; ask for at most {tokenizer.vocab_size} or give more text."
        )
    trained_ids = model["vocab"]
    layout_ids = {readable: index for index, readable in enumerate(tokenizer.symbols())}
    if trained_ids != layout_ids:  # the layout of the module docstring, which files rely on
        raise TokenizerError("tokenizers' BpeTrainer numbered the vocabulary unexpectedly.")
    return tokenizer
