"""benchmarks/tokenizer_sweep.py's ``encode``: both engines of the byte-level BPE timed on one
corpus, their ids compared, every token counted."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from tokenizer_sweep import encoding_seconds  # noqa: E402

from light_llm.data import split_train_val
from light_llm.shakespeare import shakespeare_slice
from light_llm.tokenizers.base import text_chunks
from light_llm.tokenizers.bpe import train_bpe


def test_encode_times_both_engines_over_every_token_of_the_corpus():
    text = shakespeare_slice(40_000)
    result = encoding_seconds(text, 400, rounds=2)
    tokenizer = train_bpe(split_train_val(text)[0], 400)
    assert result["tokens"] == sum(len(tokenizer.encode(chunk)) for chunk in text_chunks(text))
    assert result["tiktoken_seconds"] > 0 and result["huggingface_seconds"] > 0
    ratio = result["tiktoken_seconds"] / result["huggingface_seconds"]
    assert result["tiktoken_over_huggingface"] == ratio
