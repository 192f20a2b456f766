"""A HuggingFace ``tokenizer.json`` read back as a light-llm tokenizer, for the kinds that
``light-llm export`` writes (:mod:`light_llm.checkpoints.hf_tokenizer`), so that an exported
folder that transformers saved again (``save_pretrained`` keeps ``tokenizer.json`` and drops
``light_tokenizer.json``) still loads in light-llm with the ids it was trained on:

    byte-level BPE  a BPE model behind the ByteLevel pre-tokenizer (GPT-2's regex, bytes as
                    GPT-2's printable symbols) whose vocabulary is laid out as light-llm's BPE
                    lays it out (the special tokens, the 256 bytes in GPT-2's order, then one id
                    per merge): a :class:`BPETokenizer` of its merges and special tokens; with
                    GPT-2's own 50,257 ids and merges, the :class:`GPT2Tokenizer`
    characters      a BPE model with no merge and no pre-tokenizer whose every id is one
                    character: a :class:`CharTokenizer` of them in id order
    WordPiece       what transformers writes for a BERT folder (without a ``vocab.txt``):
                    "##" pieces behind BERT's normalizer, a :class:`BertTokenizer` of its
                    vocabulary, lower-cased and accents stripped as the normalizer says

Any other ``tokenizer.json`` (a SentencePiece model, another layout of ids) is a
CheckpointError that says what light-llm reads: the ids it would give are not checked to be
the ones the model was trained on, so it is not guessed at.
"""

from __future__ import annotations

from pathlib import Path

from light_llm.errors import CheckpointError, TokenizerError
from light_llm.tokenizers.base import TOKENIZER_FILE, Tokenizer
from light_llm.tokenizers.bert import BertTokenizer, hf_model_max_length, hf_tokenizer_options
from light_llm.tokenizers.bpe import BPETokenizer
from light_llm.tokenizers.char import CharTokenizer
from light_llm.tokenizers.gpt2 import END_OF_TEXT_ID, GPT2Tokenizer, gpt2_vocabulary
from light_llm.untrusted import read_json_object

HF_TOKENIZER_FILE = "tokenizer.json"


def tokenizer_from_hf_json(path: Path) -> Tokenizer:
    """The light-llm tokenizer whose pipeline the ``tokenizer.json`` at ``path`` describes
    (module docstring), else CheckpointError (a TokenizerError of the tokenizer it describes,
    such as a merge of tokens not made before it, included)."""
    try:
        return described_tokenizer(read_json_object(path), path)
    except TokenizerError as error:
        raise not_light_llms(path, str(error).rstrip(".")) from None


def described_tokenizer(description: dict, path: Path) -> Tokenizer:
    """:func:`tokenizer_from_hf_json` of the file's JSON object ``description``."""
    model = description.get("model")
    if isinstance(model, dict) and model.get("type") == "WordPiece":
        return wordpiece_tokenizer(description, path)
    if not isinstance(model, dict) or model.get("type") != "BPE":
        kind = model.get("type") if isinstance(model, dict) else None
        raise not_light_llms(path, f"its model is {kind!r}, not a BPE")
    vocab, merges = model.get("vocab"), model.get("merges")
    if not isinstance(vocab, dict) or not isinstance(merges, list):
        raise not_light_llms(path, "its BPE model lacks a vocabulary or a list of merges")
    symbols = tokens_by_id(vocab, path)
    pairs = [merge_pair(merge, path) for merge in merges]
    pre_tokenizer = description.get("pre_tokenizer")
    if pre_tokenizer is None and not pairs:
        return CharTokenizer(symbols)
    if not isinstance(pre_tokenizer, dict) or pre_tokenizer.get("type") != "ByteLevel":
        raise not_light_llms(path, "its BPE does not read bytes (no ByteLevel pre-tokenizer)")
    if len(symbols) == END_OF_TEXT_ID + 1 and (vocab, pairs) == gpt2_vocabulary():
        return GPT2Tokenizer()
    specials = [entry.get("content") for entry in description.get("added_tokens") or []]
    tokenizer = BPETokenizer(pairs, [token for token in symbols if token in specials])
    if tokenizer.symbols() != symbols:
        raise not_light_llms(path, "its ids are not laid out as light-llm's BPE lays them out")
    return tokenizer


def tokens_by_id(vocab: object, path: Path) -> list[str]:
    """The tokens of a ``tokenizer.json`` vocabulary (token -> id) in id order, refused unless
    the ids are 0, 1, 2, ... one per token."""
    if not isinstance(vocab, dict):
        raise not_light_llms(path, "its model has no vocabulary of tokens and ids")
    by_id = sorted(vocab.items(), key=lambda item: item[1] if isinstance(item[1], int) else -1)
    if [token_id for _, token_id in by_id] != list(range(len(by_id))):
        raise not_light_llms(path, "its ids are not 0, 1, 2, ... one per token")
    return [token for token, _ in by_id]


def wordpiece_tokenizer(description: dict, path: Path) -> BertTokenizer:
    """A HuggingFace BERT folder's ``tokenizer.json`` (transformers writes it without a
    ``vocab.txt``): WordPiece with "##" pieces behind BERT's normalizer, which says whether it
    lower-cases and strips accents; its longest input from ``tokenizer_config.json``."""
    model, normalizer = description["model"], description.get("normalizer")
    if model.get("continuing_subword_prefix", "##") != "##":
        raise not_light_llms(path, "its WordPiece does not mark a word's pieces with ##")
    if not isinstance(normalizer, dict) or normalizer.get("type") != "BertNormalizer":
        raise not_light_llms(path, "its WordPiece is not behind BERT's normalizer")
    strip_accents = normalizer.get("strip_accents")
    return BertTokenizer(
        tokens_by_id(model.get("vocab"), path),
        lowercase=bool(normalizer.get("lowercase", True)),
        strip_accents=None if strip_accents is None else bool(strip_accents),
        model_max_length=hf_model_max_length(hf_tokenizer_options(path.parent)),
        chinese_words=bool(normalizer.get("handle_chinese_chars", True)),
    )


def merge_pair(merge: object, path: Path) -> tuple[str, str]:
    """A merge as ``tokenizers`` writes it, "left right" (older versions) or [left, right]."""
    pair = merge.split(" ") if isinstance(merge, str) else merge
    if not isinstance(pair, list) or len(pair) != 2 or not all(isinstance(p, str) for p in pair):
        raise not_light_llms(path, f"its merge {merge!r} is not a pair of tokens")
    return pair[0], pair[1]


def not_light_llms(path: Path, why: str) -> CheckpointError:
    """The error for a ``tokenizer.json`` that is none of the kinds light-llm writes."""
    return CheckpointError(
        f"{path} is not a tokenizer light-llm wrote ({why}), and {path.parent} holds no "
        f"{TOKENIZER_FILE}: light-llm reads the tokenizers it trains and exports, GPT-2's, and "
        "a BERT vocab.txt."
    )
