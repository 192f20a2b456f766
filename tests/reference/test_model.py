"""NumpyGPT against the PyTorch GPT, for every variant the config allows: parameter names and
shapes, logits, loss and every parameter's gradient (1e-10 in float64, 1e-5 in float32),
checkpoints in both directions, the KV cache, generation and bad input."""

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from light_llm.checkpoints import load, save
from light_llm.errors import CheckpointError, ConfigError, SamplingError
from light_llm.generate import generate as torch_generate
from light_llm.models.gpt import GPT
from light_llm.reference.model import NumpyGPT, parameter_shapes
from tests.conftest import VARIANTS, tiny_config

TOLERANCE = {np.float64: 1e-10, np.float32: 1e-5}
VOCAB = 37


def rel(a, b) -> float:
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return float(np.abs(a - b).max() / max(np.abs(a).max() + np.abs(b).max(), 1e-300))


def paired_models(variant: str, dtype=np.float64, **overrides) -> tuple[GPT, NumpyGPT]:
    """A PyTorch GPT with weights moved off their init (norm gains not 1, biases not 0) and a
    NumpyGPT holding the same weights (in float64 both build exact position tables)."""
    config = tiny_config(**VARIANTS[variant], **overrides)
    torch_model = GPT(config).eval()
    with torch.no_grad():
        for parameter in torch_model.parameters():
            parameter.add_(0.1 * torch.randn_like(parameter))
    if dtype == np.float64:
        torch_model = torch_model.double()
    numpy_model = NumpyGPT.from_torch_state_dict(torch_model.state_dict(), config)
    assert numpy_model.dtype == dtype
    return torch_model, numpy_model


def autograd_gradient(name: str, parameter: torch.Tensor) -> np.ndarray:
    """A parameter's gradient from autograd: 0 for the multi-token head, which only a
    training-mode forward with targets uses (no gradient reaches it otherwise)."""
    if parameter.grad is None:
        assert name == "mtp_proj.weight", name
        return np.zeros(parameter.shape)
    return parameter.grad.numpy()


def batch(seed: int = 0, B: int = 3, T: int = 16):
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, VOCAB, (B, T))
    targets = rng.integers(0, VOCAB, (B, T))
    targets[0, :3] = -1  # ignored positions
    return idx, targets


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_parameter_names_and_shapes_are_the_pytorch_ones(variant):
    config = tiny_config(**VARIANTS[variant])
    expected = {name: tuple(p.shape) for name, p in GPT(config).named_parameters()}
    assert parameter_shapes(config) == expected
    model = NumpyGPT(config)
    assert list(model.params) == list(expected)
    assert set(model.state_dict()) == set(GPT(config).state_dict())


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_logits_loss_and_every_gradient_match_autograd(variant, dtype):
    torch_model, numpy_model = paired_models(variant, dtype)
    idx, targets = batch()
    logits, _ = torch_model(torch.from_numpy(idx))
    loss = F.cross_entropy(
        logits.reshape(-1, VOCAB),
        torch.from_numpy(targets).reshape(-1),
        ignore_index=-1,
        label_smoothing=0.1,
    )
    loss.backward()
    our_logits, our_loss, cache = numpy_model.forward(idx, targets, label_smoothing=0.1)
    grads = numpy_model.backward(cache)
    tol = TOLERANCE[dtype]
    assert our_logits.dtype == dtype
    assert rel(our_logits, logits.detach().numpy()) <= tol
    assert abs(our_loss - loss.item()) <= tol * abs(loss.item())
    torch_grads = dict(torch_model.named_parameters())
    assert set(grads) == set(torch_grads)
    for name, parameter in torch_grads.items():
        assert grads[name].dtype == dtype
        assert rel(grads[name], autograd_gradient(name, parameter)) <= tol, name


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize(
    "overrides",
    [{}, {"tie_embeddings": False, "logit_softcap": 2.0}],
    ids=["tied", "untied-softcap"],
)
def test_multi_token_training_loss_and_gradients_match_autograd(overrides, dtype):
    """In training mode the loss adds w x the cross-entropy on the token after next: both
    engines' losses, and every gradient, W_mtp's included, against autograd; in evaluation
    mode the loss is the next-token loss alone (what eval and the validation split report)."""
    torch_model, numpy_model = paired_models("multi-token", dtype, dropout=0.0, **overrides)
    idx, targets = batch(2)
    targets[1, 5:9] = -1
    torch_model.train()
    numpy_model.training = True
    _, loss = torch_model(torch.from_numpy(idx), torch.from_numpy(targets), label_smoothing=0.1)
    loss.backward()
    _, our_loss, cache = numpy_model.forward(idx, targets, label_smoothing=0.1)
    grads = numpy_model.backward(cache)
    tol = TOLERANCE[dtype]
    assert abs(our_loss - loss.item()) <= tol * abs(loss.item())
    for name, parameter in torch_model.named_parameters():
        assert rel(grads[name], autograd_gradient(name, parameter)) <= tol, name
    assert np.abs(grads["mtp_proj.weight"]).max() > 1e-4  # W_mtp learns
    # the same loss composed from F.cross_entropy by hand: next token + w x token after next
    with torch.no_grad():
        logits, _ = torch_model(torch.from_numpy(idx))
        hidden = numpy_model_hidden(numpy_model, idx)  # LN_f(X_L): (B, T, d)
        ahead = torch.from_numpy(hidden[:, :-1]) @ (
            torch.eye(hidden.shape[-1], dtype=logits.dtype) + torch_model.mtp_proj.weight.T
        )
        second = ahead @ torch_model.lm_head.weight.T
        if torch_model.config.logit_softcap:
            cap = torch_model.config.logit_softcap
            second = cap * torch.tanh(second / cap)
        expected = F.cross_entropy(
            logits.reshape(-1, VOCAB),
            torch.from_numpy(targets).reshape(-1),
            ignore_index=-1,
            label_smoothing=0.1,
        ) + 0.5 * F.cross_entropy(
            second.reshape(-1, VOCAB),
            torch.from_numpy(targets[:, 1:]).reshape(-1),
            ignore_index=-1,
            label_smoothing=0.1,
        )
    assert abs(loss.item() - expected.item()) <= tol * abs(expected.item())
    torch_model.eval()
    numpy_model.training = False
    eval_loss = torch_model(torch.from_numpy(idx), torch.from_numpy(targets))[1].item()
    plain = F.cross_entropy(
        logits.reshape(-1, VOCAB), torch.from_numpy(targets).reshape(-1), ignore_index=-1
    ).item()
    assert abs(eval_loss - plain) <= tol * plain
    assert abs(numpy_model.forward(idx, targets)[1] - plain) <= tol * plain


def test_multi_token_loss_with_no_target_after_next_adds_nothing():
    """A batch whose tokens after next are all ignored: the second loss is 0 (not NaN) in
    both engines, and W_mtp gets no gradient."""
    torch_model, numpy_model = paired_models("multi-token", dropout=0.0)
    idx, targets = batch(3)
    targets[:, 1:] = -1
    torch_model.train()
    numpy_model.training = True
    _, loss = torch_model(torch.from_numpy(idx), torch.from_numpy(targets))
    loss.backward()
    torch_model.eval()
    plain = torch_model(torch.from_numpy(idx), torch.from_numpy(targets))[1].item()
    _, our_loss, cache = numpy_model.forward(idx, targets)
    assert np.isfinite(loss.item()) and abs(loss.item() - plain) <= 1e-10 * plain
    assert abs(our_loss - plain) <= 1e-10 * plain
    assert not torch_model.mtp_proj.weight.grad.any()
    assert not numpy_model.backward(cache)["mtp_proj.weight"].any()


def numpy_model_hidden(model: NumpyGPT, idx) -> np.ndarray:
    """The final hidden states LN_f(X_L) (B, T, d) of a NumPy forward: the head's input."""
    _, _, cache = model.forward(idx)
    return cache.head_cache[0]


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_left_padding_matches_autograd(variant):
    """With an attention mask (left padding: positions restart at each row's first token),
    logits and gradients still agree, in float64."""
    torch_model, numpy_model = paired_models(variant)
    idx, targets = batch(1, B=2, T=10)
    mask = np.ones_like(idx)
    mask[0, :4] = 0
    targets[0, :4] = -1
    logits, _ = torch_model(torch.from_numpy(idx), attention_mask=torch.from_numpy(mask))
    F.cross_entropy(
        logits.reshape(-1, VOCAB), torch.from_numpy(targets).reshape(-1), ignore_index=-1
    ).backward()
    our_logits, _, cache = numpy_model.forward(idx, targets, attention_mask=mask)
    grads = numpy_model.backward(cache)
    assert rel(our_logits, logits.detach().numpy()) <= 1e-10
    for name, parameter in torch_model.named_parameters():
        assert rel(grads[name], autograd_gradient(name, parameter)) <= 1e-10, name


def test_backward_with_a_given_upstream_gradient():
    torch_model, numpy_model = paired_models("seed")
    idx, _ = batch()
    upstream = np.random.default_rng(5).standard_normal((3, 16, VOCAB))
    logits, _ = torch_model(torch.from_numpy(idx))
    logits.backward(torch.from_numpy(upstream))
    _, loss, cache = numpy_model.forward(idx)
    assert loss is None
    grads = numpy_model.backward(cache, upstream)
    for name, parameter in torch_model.named_parameters():
        assert rel(grads[name], autograd_gradient(name, parameter)) <= 1e-10, name


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_pytorch_checkpoint_loads_into_numpy_with_the_same_logits(variant, tmp_path):
    torch_model, _ = paired_models(variant, np.float32)
    save(torch_model, tmp_path / "ckpt")
    numpy_model = load(tmp_path / "ckpt", engine="numpy")
    assert numpy_model.dtype == np.float32
    idx, _ = batch()
    logits, _ = torch_model(torch.from_numpy(idx))
    assert rel(numpy_model.forward(idx)[0], logits.detach().numpy()) <= 1e-5


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_numpy_checkpoint_loads_into_pytorch_with_the_same_logits(variant, tmp_path):
    numpy_model = NumpyGPT(tiny_config(**VARIANTS[variant]), seed=3)
    save(numpy_model, tmp_path / "ckpt")
    files = sorted(p.name for p in (tmp_path / "ckpt").iterdir() if not p.name.startswith("."))
    assert files == ["config.json", "model.safetensors"]
    config_json = json.loads((tmp_path / "ckpt" / "config.json").read_text())
    assert config_json["format"] == "light-llm" and config_json["architecture"] == "gpt"
    torch_model = load(tmp_path / "ckpt")
    idx, _ = batch()
    logits, _ = torch_model(torch.from_numpy(idx))
    assert rel(numpy_model.forward(idx)[0], logits.detach().numpy()) <= 1e-5
    reloaded = load(tmp_path / "ckpt", engine="numpy")
    assert all(np.array_equal(reloaded.params[n], p) for n, p in numpy_model.params.items())


def test_checkpoint_with_a_tokenizer_and_a_training_folder(tmp_path):
    from light_llm.tokenizers import CharTokenizer, load_tokenizer

    tokenizer = CharTokenizer.from_text("hello world")
    model = NumpyGPT(tiny_config(vocab_size=tokenizer.vocab_size))
    save(model, tmp_path / "out" / "checkpoint", tokenizer=tokenizer)
    assert load_tokenizer(tmp_path / "out" / "checkpoint").encode("hello") == tokenizer.encode(
        "hello"
    )
    reloaded = load(tmp_path / "out", engine="numpy")  # a training output folder
    assert reloaded.config == model.config


def test_a_checkpoint_of_another_config_is_one_sentence(tmp_path):
    save(NumpyGPT(tiny_config(n_embd=16)), tmp_path / "ckpt")
    config_json = json.loads((tmp_path / "ckpt" / "config.json").read_text())
    config_json["model"]["n_embd"] = 32
    (tmp_path / "ckpt" / "config.json").write_text(json.dumps(config_json))
    with pytest.raises(CheckpointError, match=r"has shape \(37, 16\) but the config needs"):
        load(tmp_path / "ckpt", engine="numpy")
    other = NumpyGPT(tiny_config(tie_embeddings=False))
    with pytest.raises(CheckpointError, match="lacks lm_head.weight"):
        other.load_state_dict(NumpyGPT(tiny_config()).params)
    with pytest.raises(CheckpointError, match="holds transformer.wpe.weight"):
        NumpyGPT(tiny_config(positions="rotary")).load_state_dict(NumpyGPT(tiny_config()).params)
    with pytest.raises(CheckpointError, match="no checkpoint folder"):
        load(tmp_path / "missing", engine="numpy")


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_kv_cache_decoding_equals_full_recomputation(variant):
    _, model = paired_models(variant)
    idx, _ = batch(2, B=2)
    full, _, _ = model.forward(idx)
    cache = model.new_cache(2)
    pieces = [idx[:, :5]] + [idx[:, t : t + 1] for t in range(5, 13)] + [idx[:, 13:]]
    start = 0
    for piece in pieces:
        logits, _, _ = model.forward(piece, kv_cache=cache)
        assert rel(logits, full[:, start : start + piece.shape[1]]) <= 1e-12, (variant, start)
        start += piece.shape[1]
    assert cache.length == 16


@pytest.mark.parametrize("variant", ["seed", "rotary", "linear-attention", "smear"])
def test_kv_cache_with_left_padding_equals_recomputation(variant):
    _, model = paired_models(variant)
    idx, _ = batch(3, B=2, T=9)
    mask = np.ones_like(idx)
    mask[1, :3] = 0
    full, _, _ = model.forward(idx, attention_mask=mask)
    cache = model.new_cache(2)
    first, _, _ = model.forward(idx[:, :6], kv_cache=cache, attention_mask=mask[:, :6])
    assert rel(first, full[:, :6]) <= 1e-12
    for t in range(6, 9):
        step, _, _ = model.forward(
            idx[:, t : t + 1], kv_cache=cache, attention_mask=mask[:, : t + 1]
        )
        assert rel(step, full[:, t : t + 1]) <= 1e-12


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_greedy_generation_equals_the_pytorch_engine_and_recomputation(variant):
    """Greedy decoding past the context length: with the KV cache, without it, and the
    PyTorch engine's generate, all give the same tokens (float64, so no near-ties flip)."""
    torch_model, numpy_model = paired_models(variant)
    prompt, _ = batch(4, B=2, T=5)
    cached = numpy_model.generate(prompt, 14, temperature=0.0)  # 19 tokens: past the 16
    recomputed = numpy_model.generate(prompt, 14, temperature=0.0, use_cache=False)
    theirs = torch_generate(torch_model, torch.from_numpy(prompt), 14, temperature=0.0)
    assert cached.shape == (2, 19)
    assert np.array_equal(cached, recomputed)
    assert np.array_equal(cached, theirs.numpy())


def test_sampled_generation_is_reproducible_and_cache_independent():
    _, model = paired_models("seed", np.float32)
    prompt, _ = batch(5, B=3, T=4)
    options = dict(temperature=0.9, top_k=10, top_p=0.9)
    a = model.generate(prompt, 15, rng=np.random.default_rng(7), **options)
    b = model.generate(prompt, 15, rng=np.random.default_rng(7), use_cache=False, **options)
    assert np.array_equal(a, b)
    assert np.array_equal(a[:, :4], prompt)
    with pytest.raises(SamplingError):
        model.generate(prompt, 5, top_p=1.5)


def test_dropout_in_training_mode_only():
    model = NumpyGPT(tiny_config(dropout=0.2), dtype=np.float64)
    idx, targets = batch()
    first, _, _ = model.forward(idx)
    assert np.array_equal(first, model.forward(idx)[0])  # eval: deterministic
    model.training = True
    assert not np.array_equal(model.forward(idx)[0], model.forward(idx)[0])


def test_bad_input_is_one_sentence():
    model = NumpyGPT(tiny_config())
    with pytest.raises(ConfigError, match="longer than the context of 16"):
        model.forward(np.zeros((1, 17), dtype=np.int64))
    with pytest.raises(ConfigError, match=r"idx must be a \(B, T\) array"):
        model.forward(np.zeros(5, dtype=np.int64))
    with pytest.raises(ConfigError, match="attention_mask must have shape"):
        model.forward(np.zeros((2, 4), dtype=np.int64), attention_mask=np.ones((2, 3)))
    with pytest.raises(ConfigError, match="outside the table of 37 rows"):
        model.forward(np.full((1, 3), 40))
    with pytest.raises(ConfigError, match="float32 or float64"):
        NumpyGPT(tiny_config(), dtype=np.float16)
    _, _, cache = model.forward(np.zeros((1, 3), dtype=np.int64))
    with pytest.raises(ConfigError, match="needs a forward pass with targets, or dlogits"):
        model.backward(cache)
    with pytest.raises(ConfigError, match="targets must be integer token ids"):
        model.forward(np.zeros((1, 3), dtype=np.int64), np.zeros((1, 3)))
    kv = model.new_cache(1)
    zeros = np.zeros((1, 3), dtype=np.int64)
    _, _, cache = model.forward(zeros, zeros, kv_cache=kv)
    with pytest.raises(ConfigError, match="without a KV cache"):
        model.backward(cache)
