"""A light-llm tokenizer written as HuggingFace's ``AutoTokenizer.from_pretrained`` reads it:
``tokenizer.json`` (the ``tokenizers`` library's own description of the pipeline) and a
``tokenizer_config.json`` that names the generic fast tokenizer, so that no model-specific
class (LlamaTokenizer adds a BOS token and a Metaspace step) rewrites that pipeline.

    bpe    light-llm's byte-level BPE already runs on ``tokenizers``: its pipeline as it is
           (GPT-2's pre-tokenising regex, bytes, the learned merges; <|endoftext|> special)
    gpt2   the same pipeline over GPT-2's own vocabulary and merges (encoder.json, vocab.bpe),
           <|endoftext|> special (a GPT-2 folder also gets them as vocab.json, merges.txt)
    char   a BPE with the characters as its vocabulary and no merge, which splits text into
           code points and looks each up, and a Fuse decoder that joins them back. Exact on
           every text light-llm encodes; a character outside the vocabulary, which light-llm
           refuses, is dropped by ``tokenizers`` (it has no refusal)

Any other kind gets no HuggingFace files (:func:`hf_tokenizer_files` returns none).
"""

from __future__ import annotations

import json

from tokenizers import Tokenizer as TokenizerEngine
from tokenizers import decoders, models

from light_llm.checkpoints.folder import tokenizer_files
from light_llm.tokenizers import BPETokenizer, CharTokenizer, GPT2Tokenizer
from light_llm.tokenizers.bpe import byte_level_engine
from light_llm.tokenizers.gpt2 import END_OF_TEXT, gpt2_vocabulary
from light_llm.tokenizers.hf_json import HF_TOKENIZER_FILE

HF_TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
GENERIC_TOKENIZER_CLASS = "PreTrainedTokenizerFast"


def char_engine(tokenizer: CharTokenizer) -> TokenizerEngine:
    """A ``tokenizers`` pipeline giving the ids of ``tokenizer`` (module docstring)."""
    vocab = {char: index for index, char in enumerate(tokenizer.chars)}
    engine = TokenizerEngine(models.BPE(vocab=vocab, merges=[]))
    engine.decoder = decoders.Fuse()
    return engine


def gpt2_engine() -> TokenizerEngine:
    """A ``tokenizers`` pipeline giving GPT-2's ids (module docstring)."""
    engine = byte_level_engine(*gpt2_vocabulary())
    engine.add_special_tokens([END_OF_TEXT])
    return engine


def hf_engine(tokenizer) -> TokenizerEngine | None:
    """The ``tokenizers`` pipeline that gives ``tokenizer``'s ids (a light-llm ``bpe``,
    ``gpt2`` or ``char`` tokenizer), or None for a kind it is not written for."""
    if isinstance(tokenizer, BPETokenizer):
        return tokenizer.engine
    if isinstance(tokenizer, GPT2Tokenizer):
        return gpt2_engine()
    if isinstance(tokenizer, CharTokenizer):
        return char_engine(tokenizer)
    return None


def hf_tokenizer_files(tokenizer, model_max_length: int) -> dict[str, bytes]:
    """tokenizer.json and tokenizer_config.json of ``tokenizer`` (:func:`hf_engine`); none
    for a kind ``tokenizers`` is not given."""
    engine = hf_engine(tokenizer)
    if engine is None:
        return {}
    settings = {
        "tokenizer_class": GENERIC_TOKENIZER_CLASS,
        "model_max_length": model_max_length,
        "clean_up_tokenization_spaces": False,  # decode gives back the text, spaces as they were
    }
    if tokenizer.eos_id is not None:
        settings["eos_token"] = settings["bos_token"] = engine.id_to_token(tokenizer.eos_id)
    return {
        HF_TOKENIZER_FILE: engine.to_str().encode("utf-8"),
        HF_TOKENIZER_CONFIG_FILE: json.dumps(settings, indent=2).encode("utf-8"),
    }


def exported_tokenizer_files(tokenizer, model_max_length: int) -> dict[str, bytes]:
    """Every file of ``tokenizer`` in an exported folder: light_tokenizer.json, which
    light-llm reads first, and the HuggingFace files of :func:`hf_tokenizer_files`."""
    return {**tokenizer_files(tokenizer), **hf_tokenizer_files(tokenizer, model_max_length)}
