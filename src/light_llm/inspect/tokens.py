"""Text to the token ids the analyses take, for the faces (CLI, explorer): a prompt, a word that
must be one token, a text file, or a run's validation split."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from light_llm.checkpoints.run import TRAINER_STATE_FILE, read_trainer_state
from light_llm.data import load_corpus, shakespeare_stand_in, split_train_val
from light_llm.errors import InspectError, TokenizerError

MAX_TEXT_TOKENS = 32_768  # tokens of a text the analyses read by default
CHARS_PER_TOKEN_AT_MOST = 16  # a text is cut to this many characters per token asked, first


def one_token(tokenizer, text: object, field: str) -> int:
    """The id of ``text`` when the tokenizer reads it as exactly one token (``" the"`` with its
    space, for a GPT-2-style tokenizer); InspectError naming ``field`` otherwise."""
    if not isinstance(text, str) or not text:
        raise InspectError(f"the {field} must be a token written as text, e.g. ' the'.")
    try:
        ids = tokenizer.encode(text)
    except TokenizerError as error:  # a character a character vocabulary lacks
        raise InspectError(str(error).replace("the text", f"the {field} {text!r}", 1)) from None
    if len(ids) != 1:
        pieces = ", ".join(repr(piece) for piece in tokenizer.tokens(ids))
        raise InspectError(
            f"the {field} {text!r} is {len(ids)} tokens to this model's tokenizer ({pieces}); "
            "it must be exactly one."
        )
    return ids[0]


def text_ids(tokenizer, text: str, max_tokens: int = MAX_TEXT_TOKENS) -> np.ndarray:
    """The first ``max_tokens`` token ids of ``text``."""
    return np.array(tokenizer.encode(text[: max_tokens * CHARS_PER_TOKEN_AT_MOST])[:max_tokens])


def run_corpus(model_folder: Path) -> str | None:
    """The corpus a light-llm training run read (recorded in its trainer state), or None for a
    model that records none (Shakespeare is then the text, as for ``light-llm eval``)."""
    if not (model_folder / TRAINER_STATE_FILE).is_file():
        return None
    return read_trainer_state(model_folder).get("resolved_config", {}).get("data")


def validation_ids(
    model_folder: Path,
    tokenizer,
    data: str | os.PathLike | None = None,
    max_tokens: int = MAX_TEXT_TOKENS,
) -> tuple[np.ndarray, str]:
    """(the first ``max_tokens`` ids of the validation split, what it is): the split (the last
    10%) of ``data``, else of the corpus the run trained on, else of Shakespeare."""
    corpus = data if data is not None else run_corpus(model_folder)
    _, validation = split_train_val(load_corpus(corpus))
    with shakespeare_stand_in(corpus, model_folder, "--text FILE or --prompt TEXT"):
        ids = text_ids(tokenizer, validation, max_tokens)
    return ids, f"{len(ids):,} tokens of the validation split of {corpus or 'Shakespeare'}"
