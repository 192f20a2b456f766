"""Generated text holds back a UTF-8 character cut between byte-level tokens (issue 27): no
U+FFFD while streaming, none at the end, for every tokenizer a GPT generates with."""

from __future__ import annotations

import pytest
import torch

import light_llm.generate
from light_llm import GPT, ModelConfig
from light_llm.generate import generate_text
from light_llm.tokenizers import CharTokenizer, GPT2Tokenizer
from light_llm.tokenizers.bpe import train_bpe
from light_llm.tokenizers.stream import TextStream, whole_text

TEXT = "naïve café: 😀 日本語, ok"


def tokenizers():
    return {
        "bpe, bytes only": train_bpe("some text", 257),  # every byte a token of its own
        "gpt2": GPT2Tokenizer(),
        "char": CharTokenizer.from_text(TEXT),
    }


@pytest.mark.parametrize("name", ["bpe, bytes only", "gpt2", "char"])
def test_text_streams_in_whole_characters(name):
    tokenizer = tokenizers()[name]
    stream = TextStream(tokenizer)
    pieces = [stream.add([token]) for token in tokenizer.encode(TEXT)]
    assert "".join(pieces) == TEXT
    assert not any("\ufffd" in piece for piece in pieces)


@pytest.mark.parametrize("name", ["bpe, bytes only", "gpt2"])
def test_a_character_cut_at_the_end_is_left_out(name):
    tokenizer = tokenizers()[name]
    ids = tokenizer.encode("ok 😀")
    assert whole_text(tokenizer, ids[:-1]) == "ok "  # the emoji's last byte never came
    assert whole_text(tokenizer, ids) == "ok 😀"


@pytest.mark.parametrize("name", ["bpe, bytes only", "gpt2"])
def test_generate_text_streams_and_returns_whole_characters(monkeypatch, name):
    tokenizer = tokenizers()[name]
    drawn = tokenizer.encode("é😀")[:-1]  # the emoji cut before its last byte

    def stream_tokens(model, idx, max_new_tokens, **options):
        for token in drawn[:max_new_tokens]:
            yield torch.tensor([token])

    monkeypatch.setattr(light_llm.generate, "stream_tokens", stream_tokens)
    model = GPT(
        ModelConfig(vocab_size=tokenizer.vocab_size, block_size=8, n_layer=1, n_head=2, n_embd=8)
    )
    pieces = []
    (text,) = generate_text(
        model,
        tokenizer,
        ["a"],
        len(drawn),
        on_text=lambda row, piece: pieces.append(piece),
        stop_at_eos=False,
    )
    assert text == "é" == "".join(pieces)
