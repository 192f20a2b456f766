"""The tokenizer a training run starts with: named, learned from the training split, or read
from a folder (one written by ``light-llm tokenizer train``, a checkpoint or a run)."""

from __future__ import annotations

from pathlib import Path

from light_llm.cache import learned_tokenizer
from light_llm.checkpoints import load_tokenizer
from light_llm.data import split_sizes, split_train_val
from light_llm.errors import ConfigError, DataError
from light_llm.tokenizers import Tokenizer, get_tokenizer
from light_llm.tokenizers.registry import TRAINED_KINDS
from light_llm.train.config import (
    LARGE_TEXT_CHARACTERS,
    LARGE_TEXT_VOCAB,
    MODEL_TOKENIZERS,
    TRAINED_TOKENIZER_VOCAB,
    TrainConfig,
    fits_vocabulary_to_text,
    fitted_vocab_size,
)

# The kinds (Tokenizer.name) of tokenizer each architecture can be given in a folder; a
# trained WordPiece vocabulary is a "bert" tokenizer.
FOLDER_KINDS = {"gpt": ("char", "gpt2", "bpe"), "bert": ("bert",)}


def tokenizer_for_run(config: TrainConfig, text: str) -> Tokenizer:
    """The tokenizer of a fresh run of ``config`` (resolved) on the corpus ``text``.

    ``bpe`` and ``wordpiece`` are learned from the training split alone (the first 90% of
    the text, :func:`~light_llm.data.split_train_val`), so that the validation text stays
    unseen, with ``vocab_size`` ids; when that was not given, with the kind's default number
    (``TRAINED_TOKENIZER_VOCAB``; the default preset's on a large text,
    :func:`~light_llm.train.config.fitted_vocab_size`) or as many as a small text gives
    (:func:`vocabulary_note` says either); ``char`` takes the characters of the whole text (a
    character missing from its vocabulary could not be encoded at all); a folder's tokenizer
    must suit the model.
    """
    name = config.tokenizer
    if name in TRAINED_KINDS:
        training_split, _ = split_train_val(text)
        if config.vocab_size is not None:  # learned once, then from the user cache
            return learned_tokenizer(name, training_split, config.vocab_size, at_most=False)
        fitted = fitted_vocab_size(config, len(training_split))  # a large text's, or None
        default = fitted or TRAINED_TOKENIZER_VOCAB[name]
        return learned_tokenizer(name, training_split, default, at_most=True)
    if name in MODEL_TOKENIZERS[config.model]:
        return get_tokenizer(name, text=text)
    tokenizer = load_tokenizer(name)
    kinds = FOLDER_KINDS[config.model]
    if tokenizer.name not in kinds:
        shown = "WordPiece (bert)" if tokenizer.name == "bert" else tokenizer.name
        raise ConfigError(
            f"{name} holds a {shown} tokenizer, and a {config.model} model trains with a "
            f"{' or '.join(kinds)} one."
        )
    return tokenizer


def vocabulary_note(config: TrainConfig, tokenizer: Tokenizer) -> str | None:
    """One line when a tokenizer learned at its default size (no ``vocab_size`` given) is not
    the kind's default: more ids, fitted to a large training text
    (:func:`~light_llm.train.config.fitted_vocab_size`), or fewer, because the training split
    could not give more; else None (and for a fine-tuning run, whose tokenizer is its base's,
    learned from nothing here)."""
    default = TRAINED_TOKENIZER_VOCAB.get(config.tokenizer)
    if config.vocab_size is not None or default is None or config.init_from is not None:
        return None
    if tokenizer.vocab_size == LARGE_TEXT_VOCAB and fits_vocabulary_to_text(config):
        return (
            f"tokenizer: {LARGE_TEXT_VOCAB} {config.tokenizer} ids, not {default}: a training "
            f"split of {LARGE_TEXT_CHARACTERS:,} characters or more gives each of them enough "
            "examples, and at equal time the larger vocabulary learns more (docs/recipe.md; "
            "--vocab-size asks for a number)."
        )
    if tokenizer.vocab_size >= default:
        return None
    return (
        f"tokenizer: the training split gives only {tokenizer.vocab_size} {config.tokenizer} "
        f"ids, not the default {default}; learned those (--vocab-size asks for a number)."
    )


def check_enough_tokens(config: TrainConfig, cache_dir: Path) -> None:
    """DataError, for a new GPT run, when the tokenizer packs a split whose characters would
    fill a block (``block_size`` + 1 of them) into fewer tokens than that: a learned BPE on one
    character repeated merges ever longer runs of it. The way out is then fewer characters a
    token (a character tokenizer, a smaller learned vocabulary) or a shorter block, not a longer
    corpus, which :class:`~light_llm.data.TokenDataset`'s refusal of a short split advises."""
    if config.init_from is not None or config.model != "gpt" or config.tokenizer == "char":
        return  # a fine-tuned model's tokenizer is its base's; an encoder's is WordPiece
    needed = config.block_size + 1
    for split, size in split_sizes(cache_dir).items():
        if size["tokens"] < needed <= size["chars"]:
            smaller = " or a smaller --vocab-size" if config.tokenizer in TRAINED_KINDS else ""
            raise DataError(
                f"the {split} split's {size['chars']:,} characters make only {size['tokens']:,} "
                f"tokens, fewer than the {needed:,} a block of {config.block_size:,} needs: "
                f"train on characters (--tokenizer char){smaller}, or give a smaller "
                "--block-size."
            )
