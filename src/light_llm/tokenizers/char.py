"""Character-level tokenizer: one id per distinct character of the training corpus.

The simplest map from text to the integers an embedding table is indexed by (seed 000 §2):
the vocabulary is the sorted set of characters the corpus contains, and a character's id is
its position in that list. It is saved with the model, because another corpus gives other ids.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from light_llm.errors import TokenizerError
from light_llm.tokenizers.base import Tokenizer, check_text, write_tokenizer_json


class CharTokenizer(Tokenizer):
    """Ids are positions in ``chars``, a list of distinct single characters."""

    name = "char"

    def __init__(self, chars: Sequence[str]) -> None:
        chars = list(chars)
        if not chars:
            raise TokenizerError("a character vocabulary needs at least one character.")
        for char in chars:
            if not isinstance(char, str) or len(char) != 1:
                raise TokenizerError(
                    f"a character vocabulary holds single characters, got {char!r}."
                )
        if len(set(chars)) != len(chars):
            raise TokenizerError("a character vocabulary lists each character once.")
        self.chars = chars
        self.vocab_size = len(chars)
        self.eos_id = None
        self._id_of = {char: index for index, char in enumerate(chars)}

    @classmethod
    def from_text(cls, text: str) -> CharTokenizer:
        """The vocabulary of ``text``: its distinct characters, sorted by code point."""
        if not check_text(text):
            raise TokenizerError("cannot build a character vocabulary from empty text.")
        return cls(sorted(set(text)))

    def encode(self, text: str) -> list[int]:
        check_text(text)
        id_of = self._id_of
        try:
            return [id_of[char] for char in text]
        except KeyError:
            unknown = sorted({char for char in text if char not in id_of})
            shown = ", ".join(repr(char) for char in unknown[:10])
            more = f" and {len(unknown) - 10} more" if len(unknown) > 10 else ""
            raise TokenizerError(
                f"the text has {len(unknown)} character(s) outside this tokenizer's "
                f"{self.vocab_size}-character vocabulary: {shown}{more}."
            ) from None

    def decode(self, ids: Sequence[int]) -> str:
        chars = self.chars
        return "".join(chars[token_id] for token_id in self.check_ids(ids))

    def tokens(self, ids: Sequence[int]) -> list[str]:
        chars = self.chars
        return [chars[token_id] for token_id in self.check_ids(ids)]

    def save(self, folder: str | os.PathLike) -> None:
        write_tokenizer_json(folder, {"type": "char", "chars": self.chars})
