"""Finding a tokenizer: by name (``get_tokenizer``) or in a checkpoint (``load_tokenizer``)."""

from __future__ import annotations

import os
from pathlib import Path

from light_llm.errors import CheckpointError, TokenizerError, reason
from light_llm.tokenizers.base import TOKENIZER_FILE, Tokenizer
from light_llm.tokenizers.bert import VOCAB_FILE, BertTokenizer, load_hf_bert_tokenizer
from light_llm.tokenizers.bpe import BPETokenizer, train_bpe
from light_llm.tokenizers.char import CharTokenizer
from light_llm.tokenizers.gpt2 import GPT2Tokenizer
from light_llm.tokenizers.hf_json import HF_TOKENIZER_FILE, tokenizer_from_hf_json
from light_llm.tokenizers.wordpiece import train_wordpiece
from light_llm.untrusted import file_inside, read_json_object

TOKENIZER_NAMES = ("char", "gpt2", "bert", "bpe", "wordpiece")
# The types a light_tokenizer.json names (a learned WordPiece vocabulary is saved as "bert").
FILE_TYPES = ("char", "gpt2", "bert", "bpe")
# Tokenizers whose vocabulary is learned from the corpus, to a size the user picks.
TRAINED_KINDS = {"bpe": train_bpe, "wordpiece": train_wordpiece}


def get_tokenizer(name: str, text: str | None = None, vocab_size: int | None = None) -> Tokenizer:
    """A fresh tokenizer by name: "gpt2", "bert" (the packaged all-MiniLM-L6-v2 vocabulary),
    "char", whose vocabulary is built from ``text`` (the training corpus), or "bpe" /
    "wordpiece", learned from ``text`` with ``vocab_size`` ids (:func:`train_tokenizer`)."""
    if name == "gpt2":
        return GPT2Tokenizer()
    if name == "bert":
        return BertTokenizer.packaged()
    if name in ("char", *TRAINED_KINDS) and text is None:
        raise TokenizerError(f"the {name} tokenizer needs the corpus text to build its vocabulary.")
    if name == "char":
        return CharTokenizer.from_text(text)
    if name in TRAINED_KINDS:
        return train_tokenizer(name, text, vocab_size)
    raise TokenizerError(
        f"unknown tokenizer {name!r}; the known ones are {', '.join(TOKENIZER_NAMES)}."
    )


def train_tokenizer(
    kind: str, text: str, vocab_size: int | None, at_most: bool = False
) -> Tokenizer:
    """A ``kind`` ("bpe" or "wordpiece") tokenizer of ``vocab_size`` ids learned from ``text``
    (``at_most``: fewer where the text cannot give that many): byte-level BPE
    (:func:`~light_llm.tokenizers.bpe.train_bpe`) or an uncased WordPiece vocabulary with
    BERT's specials (:func:`~light_llm.tokenizers.wordpiece.train_wordpiece`)."""
    if kind not in TRAINED_KINDS:
        raise TokenizerError(
            f"only {' and '.join(TRAINED_KINDS)} tokenizers are trained, not {kind!r}."
        )
    if vocab_size is None:
        raise TokenizerError(f"a {kind} tokenizer is trained: give its vocabulary size.")
    return TRAINED_KINDS[kind](text, vocab_size, at_most=at_most)


def load_tokenizer(folder: str | os.PathLike) -> Tokenizer:
    """The tokenizer saved in a checkpoint folder.

    Reads ``light_tokenizer.json`` (what :meth:`Tokenizer.save` writes). A folder without one
    may be a HuggingFace model: a ``tokenizer.json`` of a kind light-llm's export writes (an
    exported folder transformers saved again: :mod:`light_llm.tokenizers.hf_json`), else a
    ``config.json`` with ``"model_type": "gpt2"`` means the GPT-2 tokenizer, and a
    ``vocab.txt`` means a BERT WordPiece tokenizer over it.
    """
    folder = Path(folder)
    try:
        is_folder = folder.is_dir()
    except OSError as exc:  # a name longer than the file system takes
        raise CheckpointError(
            f"cannot read the checkpoint folder {folder}: {reason(exc)}."
        ) from None
    if not is_folder:
        raise CheckpointError(f"no checkpoint folder at {folder}.")
    path = folder / TOKENIZER_FILE
    if path.is_file():
        return tokenizer_from_json(read_json(path), folder)
    if (folder / HF_TOKENIZER_FILE).is_file() and not (folder / VOCAB_FILE).is_file():
        return tokenizer_from_hf_json(folder / HF_TOKENIZER_FILE)
    config_path = folder / "config.json"
    if config_path.is_file() and read_json(config_path).get("model_type") == "gpt2":
        return GPT2Tokenizer()
    if (folder / VOCAB_FILE).is_file():
        return load_hf_bert_tokenizer(folder)
    raise CheckpointError(
        f"no tokenizer in {folder}: expected {TOKENIZER_FILE}, a GPT-2 config.json or a BERT "
        f"{VOCAB_FILE}."
    )


def read_json(path: Path) -> dict:
    """A JSON object from ``path``; CheckpointError if it is unreadable, not a regular file
    of bounded size, or not an object (:func:`light_llm.untrusted.read_json_object`)."""
    return read_json_object(path)


def tokenizer_from_json(config: dict, folder: Path) -> Tokenizer:
    """The tokenizer described by the ``light_tokenizer.json`` of ``folder``."""
    kind = config.get("type")
    try:
        if kind == "gpt2":
            return GPT2Tokenizer()
        if kind == "char":
            return CharTokenizer(config["chars"])
        if kind == "bpe":
            return BPETokenizer.from_config(config)
        if kind == "bert":
            return BertTokenizer.from_vocab_file(
                file_inside(folder, config["vocab_file"]),
                lowercase=config["lowercase"],
                strip_accents=config["strip_accents"],
                model_max_length=config["model_max_length"],
                chinese_words=config.get("chinese_words", True),  # absent before it was written
            )
    except KeyError as exc:
        raise CheckpointError(
            f"{folder / TOKENIZER_FILE} lacks the {exc.args[0]!r} entry of a {kind} tokenizer."
        ) from None
    except (TokenizerError, TypeError) as exc:
        raise CheckpointError(f"{folder / TOKENIZER_FILE} is corrupt: {exc}") from None
    raise CheckpointError(
        f"{folder / TOKENIZER_FILE} names an unknown tokenizer type {kind!r}; "
        f"the known ones are {', '.join(FILE_TYPES)}."
    )
