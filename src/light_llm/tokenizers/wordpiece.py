"""A WordPiece vocabulary trained on your own text, for BERT-style encoders (seed 003 §3).

The text is normalised and split as BERT's uncased tokenizer does (lower case, accents
stripped, words and punctuation apart; :class:`~light_llm.tokenizers.bert.BertTokenizer`),
then HuggingFace's ``WordPieceTrainer`` learns the vocabulary: BERT's five special tokens
first ([PAD] = 0, [UNK] = 1, [CLS] = 2, [SEP] = 3, [MASK] = 4), then every character of the
text as a word start and as a "##" continuation, then pieces merged by BPE-style pair counts
until the vocabulary has the size asked for. The result is a ``BertTokenizer`` over that
vocabulary, saved as BERT's ``vocab.txt``, so masked-LM training and ``fill-mask`` use it as
they use the packaged one. Unlike byte-level BPE it is lossy (lower case, no accents, a
character never seen in training is [UNK]): it is for encoders, not for generating text.

One known limit: ``tokenizers``' WordPieceTrainer numbers the "##" continuations in the order
of a hash map, so pairs of equal frequency can be merged in another order from one training
to the next, and two trainings on the same text may differ in a few tokens. A saved vocabulary
gives the same ids everywhere; train once and pass the folder (``light-llm tokenizer train``,
then ``light-llm train --tokenizer DIR``) where identical vocabularies matter.
"""

from __future__ import annotations

from tokenizers import Tokenizer as TokenizerEngine
from tokenizers import models, normalizers, pre_tokenizers, trainers

from light_llm.errors import TokenizerError
from light_llm.limits import check_vocab_size
from light_llm.tokenizers.base import check_utf8, learning_pieces
from light_llm.tokenizers.bert import SPECIAL_TOKENS, BertTokenizer


def train_wordpiece(text: str, vocab_size: int, at_most: bool = False) -> BertTokenizer:
    """An uncased WordPiece tokenizer of exactly ``vocab_size`` ids learned from ``text``
    (``at_most``: of as many as the text gives, up to ``vocab_size``).

    TokenizerError when ``vocab_size`` cannot hold the special tokens and the text's
    characters (the message gives the least it needs), or, unless ``at_most``, when the
    text has too few distinct pieces to fill it (the message gives the most it can have).
    """
    check_utf8(text)
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 1:
        raise TokenizerError(f"a vocabulary size is a positive integer, got {vocab_size!r}.")
    check_vocab_size(vocab_size, TokenizerError)  # the library would abort the process
    if not text.strip():
        raise TokenizerError("cannot learn a WordPiece vocabulary from empty text.")
    engine = TokenizerEngine(models.WordPiece(unk_token="[UNK]"))
    engine.normalizer = normalizers.BertNormalizer(lowercase=True)
    engine.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size,
        min_frequency=0,
        special_tokens=list(SPECIAL_TOKENS),
        continuing_subword_prefix="##",
        show_progress=False,
    )
    try:
        engine.train_from_iterator(learning_pieces(text), trainer)
    except Exception as exc:  # lone surrogates
        raise TokenizerError(f"cannot learn WordPiece from this text ({exc}).") from None
    id_of = engine.get_vocab()
    vocab = sorted(id_of, key=id_of.__getitem__)
    if len(vocab) > vocab_size:
        raise TokenizerError(
            f"this text needs at least {len(vocab)} WordPiece ids (the {len(SPECIAL_TOKENS)} "
            f"special tokens and each of its characters alone and as a ## continuation), "
            f"not {vocab_size}."
        )
    if len(vocab) < vocab_size and not at_most:
        raise TokenizerError(
            f"the text holds only enough distinct pieces for a WordPiece vocabulary of "
            f"{len(vocab)}, not {vocab_size}; ask for at most {len(vocab)} or give more text."
        )
    if vocab[: len(SPECIAL_TOKENS)] != list(SPECIAL_TOKENS):
        raise TokenizerError("tokenizers' WordPieceTrainer numbered the specials unexpectedly.")
    return BertTokenizer(vocab, lowercase=True)
