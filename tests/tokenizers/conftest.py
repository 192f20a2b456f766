"""Independent reference tokenizers, built once per test session from the same vocabulary files.

GPT-2: HuggingFace ``tokenizers``' ByteLevelBPETokenizer (a merges-based BPE, written
independently of tiktoken) and tiktoken's own "gpt2" encoding, whose download URLs are pointed
at the packaged files (its SHA-256 checks then prove they are OpenAI's originals).
BERT: ``transformers``' pure-Python BERT tokenizer (basic tokenizer, WordPiece, truncation and
padding all written in Python: BertTokenizerLegacy in transformers 5, BertTokenizer in 4) and
BertTokenizerFast (``tokenizers`` under the hood, loaded from the packaged tokenizer.json).
"""

from __future__ import annotations

from unittest import mock

import pytest
import tiktoken
import tiktoken.load
import tiktoken_ext.openai_public as openai_public
import transformers
from tokenizers import ByteLevelBPETokenizer

from light_llm.tokenizers.bert import packaged_bert_folder
from light_llm.tokenizers.gpt2 import gpt2_vocabulary_files

transformers.logging.set_verbosity_error()  # "longest_first truncation" warnings per call

PURE_PYTHON_BERT = getattr(transformers, "BertTokenizerLegacy", None) or transformers.BertTokenizer


@pytest.fixture(scope="session")
def hf_gpt2():
    encoder_file, merges_file = gpt2_vocabulary_files()
    tokenizer = ByteLevelBPETokenizer(str(encoder_file), str(merges_file))
    tokenizer.add_special_tokens(["<|endoftext|>"])
    return tokenizer


@pytest.fixture(scope="session")
def tiktoken_gpt2() -> tiktoken.Encoding:
    """tiktoken's registered "gpt2" encoding, read from the packaged files, not the network."""
    encoder_file, merges_file = gpt2_vocabulary_files()
    load = tiktoken.load.data_gym_to_mergeable_bpe_ranks

    def from_packaged_files(vocab_bpe_file, encoder_json_file, vocab_bpe_hash, encoder_json_hash):
        assert vocab_bpe_file.endswith("/vocab.bpe") and encoder_json_file.endswith("/encoder.json")
        return load(str(merges_file), str(encoder_file), vocab_bpe_hash, encoder_json_hash)

    with mock.patch.object(openai_public, "data_gym_to_mergeable_bpe_ranks", from_packaged_files):
        return tiktoken.Encoding(**openai_public.gpt2())


@pytest.fixture(scope="session")
def slow_bert():
    folder = packaged_bert_folder()
    return PURE_PYTHON_BERT(
        vocab_file=str(folder / "vocab.txt"), do_lower_case=True, model_max_length=512
    )


@pytest.fixture(scope="session")
def fast_bert():
    return transformers.BertTokenizerFast.from_pretrained(str(packaged_bert_folder()))
