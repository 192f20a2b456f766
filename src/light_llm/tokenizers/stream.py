"""Generated ids as text while they come, whole characters only.

A byte-level tokenizer (``bpe``, ``gpt2``) may cut a multi-byte UTF-8 character between two
tokens: "é" can be the token <0xC3> followed by <0xA9>. Decoding the first alone prints
U+FFFD (�). :class:`TextStream` holds such bytes back until the character completes, as an
incremental UTF-8 decoder does; a character still cut when the generation ends is left out
rather than shown as �. Tokenizers whose tokens are whole characters (``char``) pass through.
"""

from __future__ import annotations

import codecs
from collections.abc import Sequence


class TextStream:
    """Text of the ids given so far (:meth:`add` returns what is new), holding back the bytes
    of a character that is not complete yet."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self.token_bytes = getattr(tokenizer, "token_bytes", None)
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def add(self, ids: Sequence[int]) -> str:
        """The text that ``ids`` complete ("" while a character waits for its last bytes)."""
        if not ids:
            return ""
        if self.token_bytes is None:
            return self.tokenizer.decode(list(ids))
        return self.decoder.decode(b"".join(self.token_bytes(token) for token in ids))


def whole_text(tokenizer, ids: Sequence[int]) -> str:
    """The text of ``ids`` without a character cut at their end (see :class:`TextStream`)."""
    return TextStream(tokenizer).add(ids)
