"""GPT-2 byte-level BPE: the same ids as GPT-2's, checked against two independent implementations
(HF tokenizers' merges-based BPE and tiktoken's own "gpt2" encoding, both reading the packaged
OpenAI files), and lossless round trips."""

from __future__ import annotations

import json
import re

import pytest
import tiktoken.load
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import pre_tokenizers

from light_llm.errors import TokenizerError
from light_llm.tokenizers import GPT2Tokenizer, get_tokenizer, load_tokenizer
from light_llm.tokenizers.gpt2 import bytes_to_unicode, gpt2_mergeable_ranks, gpt2_vocabulary_files

# Text made of arbitrary characters (no lone surrogates: they are not text and UTF-8 cannot
# hold them), with runs of whitespace, newlines, emoji and the document separator mixed in.
PIECES = st.one_of(
    st.text(),
    st.text(alphabet=" \t\n\r\u00a0\u3000", min_size=1),
    st.sampled_from(["😀", "👩‍👩‍👧", "🇫🇷", "日本語", "naïve café", "<|endoftext|>", "'s", "'ll"]),
    st.from_regex(r"[A-Za-z0-9 .,'!?\n]{1,40}", fullmatch=True),
)
TEXTS = st.lists(PIECES, max_size=8).map("".join)


@pytest.fixture(scope="module")
def tokenizer() -> GPT2Tokenizer:
    return GPT2Tokenizer()


def test_vocabulary_and_special_token(tokenizer):
    assert tokenizer.name == "gpt2"
    assert tokenizer.vocab_size == 50257
    assert tokenizer.eos_id == 50256
    assert tokenizer.encode("<|endoftext|>") == [50256]
    assert tokenizer.tokens([50256]) == ["<|endoftext|>"]


def test_mergeable_ranks_equal_tiktokens_own_construction():
    encoder_file, merges_file = gpt2_vocabulary_files()
    ours = gpt2_mergeable_ranks(encoder_file, merges_file)
    theirs = tiktoken.load.data_gym_to_mergeable_bpe_ranks(str(merges_file), str(encoder_file))
    assert ours == theirs
    assert len(ours) == 50256


def test_bytes_to_unicode_matches_the_vocabulary_files():
    mapping = bytes_to_unicode()
    assert sorted(mapping) == list(range(256))
    assert set(mapping.values()) == set(pre_tokenizers.ByteLevel.alphabet())  # HF's 256 symbols
    assert mapping[ord(" ")] == "Ġ" and mapping[ord("\n")] == "Ċ"
    # ids 0..255 of encoder.json are the single-byte tokens, in the dict's order
    encoder_file, _ = gpt2_vocabulary_files()
    encoder = json.loads(encoder_file.read_text(encoding="utf-8"))
    single_byte_tokens = sorted((i, token) for token, i in encoder.items() if i < 256)
    assert [token for _, token in single_byte_tokens] == list(mapping.values())


def test_known_sentence_against_both_references(tokenizer, hf_gpt2, tiktoken_gpt2):
    text = "Hello world! I love dogs.\n\nThe end<|endoftext|>Next document 😀"
    ids = tokenizer.encode(text)
    assert ids == hf_gpt2.encode(text).ids
    assert ids == tiktoken_gpt2.encode(text, allowed_special="all")
    assert ids[:4] == [15496, 995, 0, 314]  # GPT-2's ids of "Hello", " world", "!", " I"
    assert 50256 in ids


@settings(deadline=None, max_examples=300)
@given(TEXTS)
def test_same_ids_as_references_and_lossless(tokenizer, hf_gpt2, tiktoken_gpt2, text):
    ids = tokenizer.encode(text)
    assert ids == hf_gpt2.encode(text).ids
    assert ids == tiktoken_gpt2.encode(text, allowed_special="all")
    assert tokenizer.decode(ids) == text
    assert all(0 <= i < 50257 for i in ids)


@settings(deadline=None)
@given(TEXTS)
def test_tokens_show_each_tokens_bytes(tokenizer, hf_gpt2, text):
    """A token that is whole UTF-8 shows as its text; otherwise reading each <0xNN> back as the
    byte NN (and the rest as UTF-8) gives the token's bytes, taken from HF's spelling of it."""
    byte_of_symbol = {symbol: byte for byte, symbol in bytes_to_unicode().items()}
    ids = tokenizer.encode(text)
    shown = tokenizer.tokens(ids)
    assert len(shown) == len(ids)
    for token_id, token in zip(ids, shown, strict=True):
        spelling = hf_gpt2.id_to_token(token_id)
        if spelling == "<|endoftext|>":
            assert token == spelling
            continue
        token_bytes = bytes(byte_of_symbol[symbol] for symbol in spelling)
        try:
            assert token == token_bytes.decode("utf-8")
        except UnicodeDecodeError:
            parts = re.split(r"<0x([0-9A-F]{2})>", token)
            rebuilt = b"".join(
                bytes([int(part, 16)]) if i % 2 else part.encode("utf-8")
                for i, part in enumerate(parts)
            )
            assert rebuilt == token_bytes


def test_emoji_split_across_tokens_is_shown_as_bytes(tokenizer):
    ids = tokenizer.encode(" 😀")  # U+1F600 is F0 9F 98 80 in UTF-8
    assert tokenizer.decode(ids) == " 😀"
    assert "".join(tokenizer.tokens(ids)) == " <0xF0><0x9F><0x98><0x80>"


def test_decode_replaces_a_cut_character_and_refuses_bad_ids(tokenizer):
    ids = tokenizer.encode("😀")
    assert tokenizer.decode(ids[:-1]) == "\ufffd"
    with pytest.raises(TokenizerError, match="50257 is outside"):
        tokenizer.decode([50257])


def test_save_load_and_get_tokenizer(tmp_path):
    tokenizer = get_tokenizer("gpt2")
    tokenizer.save(tmp_path)
    assert json.loads((tmp_path / "light_tokenizer.json").read_text()) == {"type": "gpt2"}
    assert isinstance(load_tokenizer(tmp_path), GPT2Tokenizer)


def test_a_lone_surrogate_is_refused_not_replaced():
    """tiktoken alone would encode "a\\ud800b" as "a", "\ufffd", "b" without a word."""
    with pytest.raises(TokenizerError, match="UTF-8"):
        GPT2Tokenizer().encode("a\ud800b")
    with pytest.raises(TokenizerError, match="UTF-8"):
        GPT2Tokenizer().encode("caf\udcc3")  # a byte kept by "surrogateescape"
