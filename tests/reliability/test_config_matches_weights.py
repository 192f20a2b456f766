"""Validate before allocating, the last case of issue 12: a config.json that fits in memory
but does not describe the weights beside it is found from the safetensors header, before any
weight is read or the model built, and said in one sentence naming the first tensor that
differs and both shapes: light-llm GPT and encoder checkpoints, HuggingFace GPT-2 and BERT
folders, both engines, and the CLI."""

from __future__ import annotations

import json

import pytest
import torch

import light_llm.checkpoints.encoder as encoder_loader
import light_llm.checkpoints.gpt as gpt_loader
import light_llm.checkpoints.hf_bert as hf_bert_loader
import light_llm.checkpoints.numpy_gpt as numpy_loader
from light_llm.checkpoints import load, save
from light_llm.checkpoints.hf_gpt2 import export_hf_gpt2
from light_llm.errors import CheckpointError
from light_llm.models.bert import BertEncoder, EncoderConfig
from light_llm.tokenizers import CharTokenizer
from tests.reliability.conftest import assert_refused, run_cli, snapshot

LETTERS = "abcdefghi"  # a vocabulary of 9


def refuse_reading_and_building(monkeypatch):
    """Make reading the weights, and building a model anywhere but on the meta device (where
    nothing is allocated), fail the test."""

    def must_not_read(*args, **kwargs):
        raise AssertionError("the weights were read before the header was checked")

    for module in (gpt_loader, numpy_loader, encoder_loader, hf_bert_loader):
        monkeypatch.setattr(module, "read_weights", must_not_read)
    for module, name in [(gpt_loader, "GPT"), (numpy_loader, "NumpyGPT")]:
        monkeypatch.setattr(module, name, must_not_read)
    original = BertEncoder.__init__

    def build_on_meta_only(self, config):
        assert torch.empty(0).device.type == "meta", "the encoder was built before the check"
        original(self, config)

    monkeypatch.setattr(BertEncoder, "__init__", build_on_meta_only)


def edit_config(folder, section, **changes):
    path = folder / "config.json"
    config = json.loads(path.read_text())
    (config[section] if section else config).update(changes)
    path.write_text(json.dumps(config))


# (the change to config.json, the tensor named, its stored shape, the shape the config needs)
GPT_CHANGES = {
    "wider": ({"n_embd": 32}, "transformer.wte.weight", (9, 16), (9, 32)),
    "bigger vocabulary": ({"vocab_size": 12}, "transformer.wte.weight", (9, 16), (12, 16)),
    "longer context": ({"block_size": 24}, "transformer.wpe.weight", (16, 16), (24, 16)),
    "wider MLP": ({"n_inner": 40}, "transformer.h.0.mlp.c_fc.weight", (64, 16), (40, 16)),
    "a layer more": ({"n_layer": 2}, "transformer.h.1", None, None),
    "untied head": ({"tie_embeddings": False}, "lm_head.weight", None, None),
    "no biases": ({"bias": False}, "bias", None, None),
}


@pytest.fixture
def gpt_checkpoint(tmp_path):
    tokenizer = CharTokenizer.from_text(LETTERS)
    config = dict(vocab_size=tokenizer.vocab_size, block_size=16, n_layer=1, n_head=2)
    from light_llm import GPT, ModelConfig

    save(GPT(ModelConfig(**config, n_embd=16)), tmp_path / "ck", tokenizer)
    return tmp_path / "ck"


def assert_names(message, name, stored, needed):
    assert name in message, message
    if stored is not None:
        assert str(stored) in message and str(needed) in message, message


@pytest.mark.parametrize("engine", ["torch", "numpy"])
@pytest.mark.parametrize(
    ("change", "name", "stored", "needed"), GPT_CHANGES.values(), ids=GPT_CHANGES.keys()
)
def test_a_gpt_config_that_does_not_match_its_weights_is_found_in_the_header(
    monkeypatch, gpt_checkpoint, engine, change, name, stored, needed
):
    edit_config(gpt_checkpoint, "model", **change)
    refuse_reading_and_building(monkeypatch)
    with pytest.raises(CheckpointError) as raised:
        load(gpt_checkpoint, engine=engine)
    assert_names(str(raised.value), name, stored, needed)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(
    ("change", "name", "stored", "needed"),
    [
        ({"n_embd": 32}, "transformer.wte.weight", (9, 16), (9, 32)),
        ({"n_positions": 8}, "transformer.wpe.weight", (16, 16), (8, 16)),
        ({"n_inner": 40}, "transformer.h.0.mlp.c_fc.weight", (64, 16), (40, 16)),
        ({"n_layer": 3}, "transformer.h.1", None, None),
    ],
)
def test_a_gpt2_config_that_does_not_match_its_weights_is_found_in_the_header(
    monkeypatch, tmp_path, gpt_checkpoint, change, name, stored, needed
):
    export_hf_gpt2(load(gpt_checkpoint), tmp_path / "hf", CharTokenizer.from_text(LETTERS))
    edit_config(tmp_path / "hf", None, **change)
    refuse_reading_and_building(monkeypatch)
    for engine in ("torch", "numpy"):
        with pytest.raises(CheckpointError) as raised:
            load(tmp_path / "hf", engine=engine)
        assert_names(str(raised.value), name, stored, needed)


ENCODER_CHANGES = {
    "wider": ({"n_embd": 32}, "embeddings.wte.weight", (20, 16), (20, 32)),
    "more token types": ({"type_vocab_size": 3}, "embeddings.wtt.weight", (2, 16), (3, 16)),
    "a layer more": ({"n_layer": 2}, "h.1", None, None),
    "no MLM head": ({"mlm_head": False}, "mlm_head", None, None),
}


@pytest.mark.parametrize(
    ("change", "name", "stored", "needed"), ENCODER_CHANGES.values(), ids=ENCODER_CHANGES.keys()
)
def test_an_encoder_config_that_does_not_match_its_weights_is_found_in_the_header(
    monkeypatch, tmp_path, change, name, stored, needed
):
    config = EncoderConfig(vocab_size=20, block_size=8, n_layer=1, n_head=2, n_embd=16)
    save(BertEncoder(config), tmp_path / "bert")
    edit_config(tmp_path / "bert", "model", **change)
    refuse_reading_and_building(monkeypatch)
    with pytest.raises(CheckpointError) as raised:
        load(tmp_path / "bert", architecture="bert")
    assert_names(str(raised.value), name, stored, needed)


HF_BERT_CHANGES = {
    "wider": ({"hidden_size": 32}, "embeddings.wte.weight", (30, 16), (30, 32)),
    "bigger vocabulary": ({"vocab_size": 40}, "embeddings.wte.weight", (30, 16), (40, 16)),
    "wider MLP": ({"intermediate_size": 20}, "h.0.mlp.c_fc.weight", (24, 16), (20, 16)),
    "a layer more": ({"num_hidden_layers": 2}, "h.1", None, None),
    "more positions": ({"max_position_embeddings": 12}, "embeddings.wpe.weight", (8, 16), (12, 16)),
}


@pytest.mark.parametrize(
    ("change", "name", "stored", "needed"), HF_BERT_CHANGES.values(), ids=HF_BERT_CHANGES.keys()
)
def test_a_hf_bert_config_that_does_not_match_its_weights_is_found_in_the_header(
    monkeypatch, tmp_path, change, name, stored, needed
):
    from transformers import BertConfig, BertForMaskedLM

    hf_config = BertConfig(
        vocab_size=30,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=24,
        max_position_embeddings=8,
    )
    BertForMaskedLM(hf_config).save_pretrained(tmp_path / "hf")
    load(tmp_path / "hf", architecture="bert")  # as saved, it loads
    edit_config(tmp_path / "hf", None, **change)
    refuse_reading_and_building(monkeypatch)
    with pytest.raises(CheckpointError) as raised:
        load(tmp_path / "hf", architecture="bert")
    assert_names(str(raised.value), name, stored, needed)


@pytest.mark.parametrize("command", ["generate", "eval", "attention", "export"])
def test_the_cli_says_it_in_one_sentence_and_touches_nothing(
    capsys, tmp_path, gpt_checkpoint, command
):
    edit_config(gpt_checkpoint, "model", n_embd=32)
    before = snapshot(gpt_checkpoint)
    (tmp_path / "text.txt").write_text(LETTERS * 50)
    argv = {
        "generate": ["--prompt", "to", "--max-new-tokens", "2"],
        "eval": ["--data", tmp_path / "text.txt"],
        "attention": ["--prompt", "abc", "--out", tmp_path / "maps"],
        "export": ["--format", "hf", "--out", tmp_path / "exported"],
    }[command]
    code, _, err = run_cli(capsys, command, "--checkpoint", gpt_checkpoint, *argv)
    assert_refused(code, err, "transformer.wte.weight", "(9, 16)", "(9, 32)")
    assert snapshot(gpt_checkpoint) == before
