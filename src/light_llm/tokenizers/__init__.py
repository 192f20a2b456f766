"""Tokenizers: text <-> the integer ids a model embeds (seed 000 §2; seed 003 §3-4).

``char`` (one id per character of the corpus), ``gpt2`` (GPT-2's byte-level BPE, ids identical
to GPT-2's), ``bert`` (WordPiece with [CLS]/[SEP], padding, attention masks and token type
ids), and two learned from your corpus: ``bpe`` (byte-level BPE) and ``wordpiece`` (a
``bert`` tokenizer over a vocabulary of its own). All follow :class:`Tokenizer`;
:func:`get_tokenizer` makes one by name, :func:`train_tokenizer` learns one, and
:func:`load_tokenizer` reads the one saved in a checkpoint folder.
"""

from light_llm.tokenizers.base import Tokenizer
from light_llm.tokenizers.bert import BertTokenizer
from light_llm.tokenizers.bpe import BPETokenizer
from light_llm.tokenizers.char import CharTokenizer
from light_llm.tokenizers.gpt2 import GPT2Tokenizer
from light_llm.tokenizers.registry import (
    TOKENIZER_NAMES,
    get_tokenizer,
    load_tokenizer,
    train_tokenizer,
)

__all__ = [
    "TOKENIZER_NAMES",
    "BPETokenizer",
    "BertTokenizer",
    "CharTokenizer",
    "GPT2Tokenizer",
    "Tokenizer",
    "get_tokenizer",
    "load_tokenizer",
    "train_tokenizer",
]
