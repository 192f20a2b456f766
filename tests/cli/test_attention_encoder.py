"""``light-llm attention`` on encoders (bidirectional, [CLS]/[SEP]) and its --json output."""

from __future__ import annotations

import json

import numpy as np
import torch

from light_llm.checkpoints import load, load_tokenizer, save
from light_llm.cli import main
from light_llm.config import ModelConfig
from light_llm.models.bert import BertEncoder, EncoderConfig
from light_llm.models.gpt import GPT
from light_llm.tokenizers import BertTokenizer, CharTokenizer

RIVER = "The bank of the river was flooded!"


def test_an_encoders_weights_as_json(capsys, tmp_path):
    tokenizer = BertTokenizer.packaged()
    config = EncoderConfig(
        vocab_size=tokenizer.vocab_size, block_size=16, n_layer=2, n_head=2, n_embd=8
    )
    save(BertEncoder(config), tmp_path / "bert", tokenizer=tokenizer)
    assert (
        main(["attention", "--checkpoint", str(tmp_path / "bert"), "--prompt", RIVER, "--json"])
        == 0
    )
    document = json.loads(capsys.readouterr().out)
    ids = tokenizer.encode_plus(RIVER)["input_ids"]
    assert document["ids"] == ids and document["tokens"][0] == "[CLS]"
    assert document["tokens"][-1] == "[SEP]"
    model = load(tmp_path / "bert", architecture="bert")
    expected = torch.stack(model.attention_maps(torch.tensor([ids])))[:, 0]  # (L, H, T, T)
    np.testing.assert_allclose(document["weights"], expected.numpy(), atol=1e-6)
    assert not (tmp_path / "attention.png").exists()


def test_the_packaged_minilm_by_default_with_a_picture(capsys, tmp_path):
    out = tmp_path / "river.png"
    assert main(["attention", "--prompt", RIVER, "--layer", "5", "--out", str(out), "--json"]) == 0
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert f"wrote {out}" in captured.err and out.is_file()
    weights = np.array(document["weights"])
    assert document["layers"] == [5] and weights.shape == (1, 12, 10, 10)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
    assert (weights[..., 0, -1] > 0).all()  # [CLS] attends to [SEP]: no causal mask


def test_a_gpts_json_weights_are_causal_rows(capsys, tmp_path):
    tokenizer = CharTokenizer.from_text("to be or not")
    config = ModelConfig(
        vocab_size=tokenizer.vocab_size, block_size=8, n_layer=1, n_head=2, n_embd=8
    )
    save(GPT(config), tmp_path / "gpt", tokenizer=tokenizer)
    assert (
        main(["attention", "--checkpoint", str(tmp_path / "gpt"), "--prompt", "to be", "--json"])
        == 0
    )
    weights = np.array(json.loads(capsys.readouterr().out)["weights"])
    model, tokenizer = load(tmp_path / "gpt"), load_tokenizer(tmp_path / "gpt")
    with torch.no_grad():
        expected = model.attention_maps(torch.tensor([tokenizer.encode("to be")]))[0][0]
    np.testing.assert_allclose(weights[0], expected.numpy(), atol=1e-6)
    assert np.allclose(np.triu(weights[0, 0], k=1), 0.0)
