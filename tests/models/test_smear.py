"""The smear (--smear): X_0[t] += λ σ(w · X_0[t, :k]) X_0[t-1] on the embedding, both engines:
the formula by hand, a fresh model is the plain one, the KV cache and left padding with
weights off their init, and the refusals (the encoder, export)."""

import numpy as np
import pytest
import torch

from light_llm.checkpoints import save
from light_llm.cli import build_parser, main
from light_llm.cli.train import config_from_args
from light_llm.config import smear_width
from light_llm.errors import ConfigError
from light_llm.models.bert import EncoderConfig
from light_llm.models.gpt import GPT
from light_llm.reference.model import NumpyGPT, parameter_shapes
from tests.conftest import shaken, tiny_config


def smeared(seed: int = 0, **overrides) -> GPT:
    """A tiny --smear GPT in float64, every weight (λ and w too) moved off its init."""
    torch.manual_seed(seed)
    return shaken(GPT(tiny_config(smear=True, **overrides)).double().eval())


def test_the_parameters_their_start_and_their_optimiser_group():
    """λ (1,) and w (k,), both 0 in both engines; vectors, so AdamW without decay."""
    from light_llm.train.muon import muon_param_groups

    config = tiny_config(smear=True, n_embd=8)
    model = GPT(config)
    shapes = {name: tuple(p.shape) for name, p in model.named_parameters()}
    assert shapes["transformer.smear.gain"] == (1,)
    assert shapes["transformer.smear.gate"] == (8,) == (smear_width(config),)
    assert smear_width(tiny_config(n_embd=16)) == 12
    assert list(parameter_shapes(config).items()) == list(shapes.items())
    assert not model.transformer.smear.gain.any() and not model.transformer.smear.gate.any()
    numpy_model = NumpyGPT(config)
    assert not numpy_model.params["transformer.smear.gain"].any()
    assert not numpy_model.params["transformer.smear.gate"].any()
    smear = {id(model.transformer.smear.gain), id(model.transformer.smear.gate)}
    for group in muon_param_groups(model, lr=1e-3, muon_lr=0.02, weight_decay=0.1):
        if smear & {id(p) for p in group["params"]}:
            assert (group["kind"], group["weight_decay"]) == ("adamw", 0.0)
            assert smear <= {id(p) for p in group["params"]}


def test_the_formula_by_hand():
    """logits of the model = logits of the plain model fed X_0' = X_0 + g X_0[t-1] by hand."""
    model = smeared()
    idx = torch.randint(0, 37, (2, 7))
    with torch.no_grad():
        x = model.transformer.wte(idx) + model.transformer.wpe(torch.arange(7))
        w, gain = model.transformer.smear.gate, model.transformer.smear.gain
        by_hand = x.clone()
        for t in range(1, 7):
            g = gain * torch.sigmoid(x[:, t, :12] @ w)  # (B,)
            by_hand[:, t] = x[:, t] + g[:, None] * x[:, t - 1]
        hidden = by_hand
        for block in model.transformer.h:
            hidden = block(hidden)
        expected = model.lm_head(model.transformer.ln_f(hidden))
        logits, _ = model(idx)
    assert (logits - expected).abs().max() < 1e-12
    assert (by_hand - x).abs().max() > 1e-3  # the look-back changed the embedding


def test_a_fresh_model_is_the_plain_one_exactly_and_a_trained_one_is_not():
    torch.manual_seed(0)
    plain = GPT(tiny_config()).eval()
    torch.manual_seed(0)
    model = GPT(tiny_config(smear=True)).eval()
    extra = set(model.state_dict()) - set(plain.state_dict())
    assert extra == {"transformer.smear.gain", "transformer.smear.gate"}
    model.load_state_dict({**model.state_dict(), **plain.state_dict()})  # all but λ, w
    idx = torch.randint(0, 37, (2, 12))
    with torch.no_grad():
        assert torch.equal(model(idx)[0], plain(idx)[0])
        numpy_plain = NumpyGPT.from_torch_state_dict(plain.state_dict(), plain.config)
        numpy_model = NumpyGPT.from_torch_state_dict(model.state_dict(), model.config)
        assert np.array_equal(numpy_model(idx.numpy())[0], numpy_plain(idx.numpy())[0])
        model.transformer.smear.gain.fill_(0.5)  # λ off 0 (w = 0: σ = 1/2, g = 1/4)
        assert (model(idx)[0] - plain(idx)[0]).abs().max() > 1e-4
        assert torch.equal(model(idx)[0][:, 0], plain(idx)[0][:, 0])  # t = 0 has no look-back


def test_a_training_step_moves_both_parameters():
    model = GPT(tiny_config(smear=True)).train()
    idx = torch.randint(0, 37, (2, 12))
    _, loss = model(idx, idx)
    loss.backward()
    assert model.transformer.smear.gain.grad.abs().item() > 0  # dλ = Σ dg σ, 0 at no λ
    assert not model.transformer.smear.gate.grad.any()  # dw carries λ = 0
    with torch.no_grad():
        model.transformer.smear.gain.fill_(0.3)
    model.zero_grad()
    model(idx, idx)[1].backward()
    assert model.transformer.smear.gate.grad.abs().max() > 0


@pytest.mark.parametrize("engine", ["torch", "numpy"])
def test_kv_cache_and_left_padding_with_a_trained_smear(engine):
    """Off its init: decoding token by token equals the full forward (the cache keeps the last
    X_0), a left-padded row gives its logits alone (no look-back at a pad), also decoding."""
    model = smeared()
    if engine == "numpy":
        model = NumpyGPT.from_torch_state_dict(model.state_dict(), model.config)

    def run(idx, kv_cache=None, attention_mask=None):
        if engine == "numpy":
            return model.forward(idx, kv_cache=kv_cache, attention_mask=attention_mask)[0]
        mask = None if attention_mask is None else torch.as_tensor(attention_mask)
        with torch.no_grad():
            return model(torch.as_tensor(idx), kv_cache=kv_cache, attention_mask=mask)[0].numpy()

    rng = np.random.default_rng(0)
    idx = rng.integers(1, 37, (2, 12))
    full = run(idx)
    cache = model.new_cache(2)
    start = 0
    for piece in (idx[:, :5], *(idx[:, t : t + 1] for t in range(5, 9)), idx[:, 9:]):
        got = run(piece, kv_cache=cache)
        assert np.abs(got - full[:, start : start + piece.shape[1]]).max() < 1e-12
        start += piece.shape[1]
    if engine == "torch":  # the NumPy engine's caches are not reused
        cache.clear()
    else:
        cache = model.new_cache(2)
    assert cache.previous_embedding is None and cache.length == 0
    assert np.abs(run(idx[:, :4], kv_cache=cache) - full[:, :4]).max() < 1e-12

    short = idx[:1, :6]
    batch = np.concatenate([np.concatenate([np.zeros((1, 4), np.int64), short], 1), idx[1:, :10]])
    mask = np.ones_like(batch)
    mask[0, :4] = 0
    padded = run(batch, attention_mask=mask)
    assert np.abs(padded[0, 4:] - run(short)[0]).max() < 1e-12
    assert np.abs(padded[1] - run(idx[1:, :10])[0]).max() < 1e-12
    cache = model.new_cache(2)
    run(batch[:, :7], kv_cache=cache, attention_mask=mask[:, :7])
    step = run(batch[:, 7:8], kv_cache=cache, attention_mask=mask[:, :8])
    assert np.abs(step[0, 0] - run(short[:, :4])[0, -1]).max() < 1e-12


def test_the_encoder_refuses_it_in_one_sentence():
    sentence = r"^the smear is a GPT option .*; the encoder has none\.$"
    with pytest.raises(ConfigError, match=sentence):
        EncoderConfig(vocab_size=37, block_size=16, n_layer=1, n_head=2, n_embd=16, smear=True)


def test_the_flag_sets_the_switch():
    config = config_from_args(build_parser().parse_args(["train", "--smear"])).resolve()
    assert config.smear is True and config.model_config(50).smear is True
    plain = config_from_args(build_parser().parse_args(["train"])).resolve()
    assert not plain.model_config(50).smear


def test_export_refuses_it_with_the_switch_named(tmp_path, capsys):
    save(smeared().float(), tmp_path / "ck")
    argv = ["export", "--checkpoint", str(tmp_path / "ck"), "--format", "hf"]
    assert main([*argv, "--out", str(tmp_path / "hf")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("light-llm export: error: "), lines
    assert "smear=True" in lines[0]
    assert not (tmp_path / "hf").exists()
