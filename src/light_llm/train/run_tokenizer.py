"""The tokenizer a training run starts with: named, learned from the training split, or read
from a folder (one written by ``light-llm tokenizer train``, a checkpoint or a run)."""

from __future__ import annotations

from light_llm.checkpoints import load_tokenizer
from light_llm.data import split_train_val
from light_llm.errors import ConfigError
from light_llm.tokenizers import Tokenizer, get_tokenizer
from light_llm.tokenizers.registry import TRAINED_KINDS
from light_llm.train.config import MODEL_TOKENIZERS, TrainConfig

# The kinds (Tokenizer.name) of tokenizer each architecture can be given in a folder; a
# trained WordPiece vocabulary is a "bert" tokenizer.
FOLDER_KINDS = {"gpt": ("char", "gpt2", "bpe"), "bert": ("bert",)}


def tokenizer_for_run(config: TrainConfig, text: str) -> Tokenizer:
    """The tokenizer of a fresh run of ``config`` (resolved) on the corpus ``text``.

    ``bpe`` and ``wordpiece`` are learned from the training split alone (the first 90% of
    the text, :func:`~light_llm.data.split_train_val`), so that the validation text stays
    unseen; ``char`` takes the characters of the whole text (a character missing from its
    vocabulary could not be encoded at all); a folder's tokenizer must suit the model.
    """
    name = config.tokenizer
    if name in TRAINED_KINDS:
        training_split, _ = split_train_val(text)
        return get_tokenizer(name, text=training_split, vocab_size=config.vocab_size)
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
