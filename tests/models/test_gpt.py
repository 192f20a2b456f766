"""The GPT: fast vs explicit attention, causality, KV cache vs full recomputation, padding."""

import pytest
import torch

from light_llm.config import model_counts, preset
from light_llm.errors import ConfigError
from light_llm.models.gpt import GPT
from tests.conftest import VARIANTS, gradients_without_and_with_checkpointing, tiny_config


def make_model(variant: str, **overrides) -> GPT:
    model = GPT(tiny_config(**VARIANTS[variant], **overrides))
    model.eval()
    return model


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_fast_and_explicit_attention_agree(variant):
    model = make_model(variant)
    idx = torch.randint(0, 37, (3, 16))
    fast, _ = model(idx)
    model.use_fast_attention(False)
    explicit, _ = model(idx)
    assert (fast - explicit).abs().max().item() <= 1e-5


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_changing_token_t_never_changes_earlier_logits(variant):
    model = make_model(variant)
    idx = torch.randint(0, 37, (1, 16))
    base, _ = model(idx)
    for t in (0, 5, 15):
        changed = idx.clone()
        changed[0, t] = (changed[0, t] + 1) % 37
        logits, _ = model(changed)
        assert torch.equal(logits[0, :t], base[0, :t]) or (
            (logits[0, :t] - base[0, :t]).abs().max() < 1e-6
        )
        if t < 15:  # and the change is visible from t on
            assert (logits[0, t:] - base[0, t:]).abs().max() > 1e-6


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_kv_cache_decoding_equals_full_recomputation_at_every_step(variant):
    model = make_model(variant)
    idx = torch.randint(0, 37, (2, 16))
    full, _ = model(idx)
    cache = model.new_cache(2)
    # a prompt of 5 tokens, then one token at a time, then a chunk of 3
    pieces = [idx[:, :5]] + [idx[:, t : t + 1] for t in range(5, 13)] + [idx[:, 13:16]]
    start = 0
    for piece in pieces:
        logits, _ = model(piece, kv_cache=cache)
        end = start + piece.size(1)
        assert (logits - full[:, start:end]).abs().max().item() <= 1e-5, (variant, start)
        start = end
    assert cache.length == 16


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_left_padding_does_not_change_a_row(variant):
    """A left-padded row in a batch gives the logits that row gives alone."""
    model = make_model(variant)
    short = torch.randint(1, 37, (1, 6))
    long = torch.randint(1, 37, (1, 10))
    alone, _ = model(short)
    batch = torch.cat((torch.cat((torch.zeros(1, 4, dtype=torch.long), short), 1), long))
    mask = torch.ones_like(batch)
    mask[0, :4] = 0
    padded, _ = model(batch, attention_mask=mask)
    assert (padded[0, 4:] - alone[0]).abs().max().item() <= 1e-5
    long_alone, _ = model(long)
    assert (padded[1] - long_alone[0]).abs().max().item() <= 1e-5
    # and with the KV cache, token by token after the padded prompt
    cache = model.new_cache(2)
    model(batch, kv_cache=cache, attention_mask=mask)
    nxt = torch.randint(1, 37, (2, 1))
    mask2 = torch.cat((mask, torch.ones(2, 1, dtype=torch.long)), 1)
    step, _ = model(nxt, kv_cache=cache, attention_mask=mask2)
    ref, _ = model(torch.cat((short, nxt[:1]), 1))
    assert (step[0, -1] - ref[0, -1]).abs().max().item() <= 1e-5


def test_loss_is_mean_cross_entropy_of_the_next_token():
    model = make_model("seed")
    idx = torch.randint(0, 37, (2, 8))
    targets = torch.randint(0, 37, (2, 8))
    targets[0, 3] = -1  # ignored
    logits, loss = model(idx, targets)
    log_probs = torch.log_softmax(logits.double(), -1)
    picked = [
        -log_probs[b, t, targets[b, t]] for b in range(2) for t in range(8) if targets[b, t] >= 0
    ]
    assert abs(loss.item() - torch.stack(picked).mean().item()) < 1e-5


def test_label_smoothing_matches_formula():
    """Seed 002 §12.2, eq. 51: y = (1 - α) onehot + α/V."""
    model = make_model("seed")
    idx = torch.randint(0, 37, (2, 8))
    targets = torch.randint(0, 37, (2, 8))
    logits, loss = model(idx, targets, label_smoothing=0.1)
    log_probs = torch.log_softmax(logits.double(), -1).reshape(-1, 37)
    smooth = torch.full_like(log_probs, 0.1 / 37)
    smooth[torch.arange(16), targets.reshape(-1)] += 0.9
    expected = -(smooth * log_probs).sum(-1).mean()
    assert abs(loss.item() - expected.item()) < 1e-5


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_parameter_count_formula_matches_the_module(variant):
    config = tiny_config(**VARIANTS[variant])
    model = GPT(config)
    assert model_counts(config).params == sum(p.numel() for p in model.parameters())


def test_tied_head_is_the_embedding_and_init_is_n_0_002():
    model = GPT(tiny_config(vocab_size=500, n_embd=64, n_head=4))
    assert model.lm_head.weight.data_ptr() == model.transformer.wte.weight.data_ptr()
    weight = model.transformer.h[0].mlp.c_fc.weight
    assert abs(weight.std().item() - 0.02) < 0.002 and abs(weight.mean().item()) < 0.002
    assert torch.count_nonzero(model.transformer.h[0].attn.c_attn.bias) == 0


def test_softcap_is_c_tanh_of_the_uncapped_logits():
    capped = make_model("softcap")
    uncapped = GPT(capped.config.replace(logit_softcap=None)).eval()
    idx = torch.randint(0, 37, (2, 16))
    targets = torch.randint(0, 37, (2, 16))
    with torch.no_grad():
        for parameter in capped.parameters():  # logits well beyond the cap of 2
            parameter.mul_(3.0)
        uncapped.load_state_dict(capped.state_dict())
        logits, loss = capped(idx, targets)
        raw, _ = uncapped(idx)
    assert raw.abs().max() > 2.0 > logits.abs().max()
    assert torch.allclose(logits, 2.0 * torch.tanh(raw / 2.0), atol=1e-6)
    expected = torch.nn.functional.cross_entropy(logits.reshape(-1, 37), targets.reshape(-1))
    assert abs(loss.item() - expected.item()) < 1e-6


@pytest.mark.parametrize("qk_norm", [True, False])
def test_qk_norm_makes_attention_blind_to_the_scale_of_q_and_k(qk_norm):
    """With QK-norm (and no biases), scaling W^Q and W^K of one layer leaves the logits
    unchanged, since q / RMS(q) is; without it, the attention sharpens and they change."""
    model = make_model("no-bias", qk_norm=qk_norm)
    idx = torch.randint(0, 37, (2, 16))
    with torch.no_grad():
        before, _ = model(idx)
        model.transformer.h[0].attn.c_attn.weight[: 2 * 16].mul_(50.0)  # rows of W^Q, W^K
        after, _ = model(idx)
    changed = (after - before).abs().max().item()
    assert changed <= 1e-4 if qk_norm else changed > 1e-3


def test_no_bias_leaves_no_bias_anywhere_and_untied_adds_a_head():
    names = [name for name, _ in GPT(tiny_config(bias=False)).named_parameters()]
    assert not [name for name in names if name.endswith(".bias")]
    tied, untied = GPT(tiny_config()), GPT(tiny_config(tie_embeddings=False))
    assert untied.lm_head.weight is not untied.transformer.wte.weight
    assert untied.num_parameters() == tied.num_parameters() + 37 * 16


def test_the_nanogpt_cpu_preset_is_nanogpts_train_py_model():
    """nanoGPT's train.py trains with bias=False: its CPU recipe's model (4 layers, 4 heads,
    128 wide, context 64, 65 characters, tied head) has no biases, and nanoGPT's model.py
    counts its parameters as the token and position tables plus, per layer, two LayerNorm
    weights, W_QKV, W_O and the MLP's two matrices, plus the final LayerNorm's weight."""
    model = GPT(preset("nanogpt-cpu", vocab_size=65))
    names = [name for name, _ in model.named_parameters()]
    assert not [name for name in names if name.endswith(".bias")]
    d, layers, vocab, context = 128, 4, 65, 64
    per_layer = 2 * d + d * 3 * d + d * d + 2 * d * 4 * d
    nanogpt_count = vocab * d + context * d + layers * per_layer + d
    assert sum(p.numel() for p in model.parameters()) == nanogpt_count
    assert model.lm_head.weight is model.transformer.wte.weight


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"logit_softcap": 0.0}, "logit_softcap must be a positive number"),
        ({"logit_softcap": -3.0}, "logit_softcap must be a positive number"),
        ({"logit_softcap": float("inf")}, "logit_softcap must be a positive number"),
        ({"qk_norm": "yes"}, "qk_norm must be true or false"),
        ({"activation": "relu3"}, "activation must be one of gelu, gelu_tanh, relu, relu2"),
    ],
)
def test_bad_recipe_switches_are_one_sentence(changes, message):
    with pytest.raises(ConfigError, match=message):
        tiny_config(**changes)


def test_too_long_sequence_is_a_config_error():
    model = make_model("seed")
    with pytest.raises(ConfigError, match="longer than the context"):
        model(torch.zeros(1, 17, dtype=torch.long))


def test_n_embd_not_divisible_by_n_head_is_one_sentence():
    with pytest.raises(ConfigError, match="divisible by n_head"):
        tiny_config(n_embd=10, n_head=3)


def test_gradient_checkpointing_gives_the_same_gradients():
    model = GPT(tiny_config())
    idx = torch.randint(0, 37, (2, 16))
    _, loss = model(idx, idx)
    loss.backward()
    plain = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    model.gradient_checkpointing = True
    _, loss = model(idx, idx)
    loss.backward()
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.grad, plain[name], rtol=1e-5, atol=1e-7)


def test_gradient_checkpointing_recomputes_attention_in_the_forwards_number_format():
    """Under bfloat16 autocast with the fused attention in float32 (the trainer's CPU
    mixed precision), the checkpointed backward gives the plain one's gradients."""
    model = GPT(tiny_config(value_embeddings=True, embedding_skip=True, smear=True))
    idx = torch.randint(0, 37, (2, 16))
    plain, checkpointed = gradients_without_and_with_checkpointing(model, idx)
    for name, grad in plain.items():
        torch.testing.assert_close(checkpointed[name], grad, rtol=1e-5, atol=1e-7)


def test_attention_maps_are_causal_distributions():
    model = make_model("seed")
    maps = model.attention_maps(torch.randint(0, 37, (1, 9)))
    assert len(maps) == 2 and maps[0].shape == (1, 2, 9, 9)
    for weights in maps:
        torch.testing.assert_close(weights.sum(-1), torch.ones(1, 2, 9))
        assert torch.all(weights.triu(1) == 0)


@pytest.mark.parametrize("variant", ["seed", "linear-attention"])
def test_kv_cache_bytes_formula_matches_the_allocated_cache(variant):
    model = make_model(variant)
    cache = model.new_cache(1)
    model(torch.randint(0, 37, (1, 16)), kv_cache=cache)  # fill it to the whole context
    tensors = [t for layer in cache.layers for t in vars(layer).values()]
    allocated = sum(t.numel() * t.element_size() for t in tensors)
    assert model_counts(model.config, context=16).kv_cache_bytes == allocated


def test_cache_output_head_is_the_transposed_head_and_keeps_gradients():
    model = make_model("seed")
    cache = model.new_cache(1)
    torch.testing.assert_close(cache.output_head, model.lm_head.weight.t(), rtol=0, atol=0)
    assert cache.output_head.is_contiguous()
    idx = torch.randint(0, 37, (1, 6))
    targets = torch.randint(0, 37, (1, 6))
    _, loss = model(idx, targets)
    expected = torch.autograd.grad(loss, model.lm_head.weight)[0]
    _, loss = model(idx, targets, kv_cache=cache)
    torch.testing.assert_close(torch.autograd.grad(loss, model.lm_head.weight)[0], expected)
    assert make_model("seed").to(torch.bfloat16).new_cache(1).output_head is None


@pytest.mark.parametrize("variant", ["seed", "linear-attention"])
def test_a_cleared_cache_decodes_like_a_new_one(variant):
    model = make_model(variant)
    first, second = torch.randint(0, 37, (2, 1, 9))
    cache = model.new_cache(1)
    model(first, kv_cache=cache)
    cache.clear()
    assert cache.length == 0
    logits, _ = model(second, kv_cache=cache)
    torch.testing.assert_close(logits, model(second, kv_cache=model.new_cache(1))[0])


@pytest.mark.parametrize("positions", ["rotary", "learned"])
@pytest.mark.parametrize("architecture", ["gpt", "bert"])
def test_ids_of_no_position_are_refused_in_one_sentence(architecture, positions):
    """(B, 0) ids: a SamplingError naming the shape (a rotary model raised the library's
    reshape error)."""
    from light_llm.errors import SamplingError
    from light_llm.models.bert import BertEncoder, EncoderConfig

    if architecture == "gpt":
        model = GPT(tiny_config(positions=positions))
    else:
        shape = dict(vocab_size=20, block_size=8, n_layer=1, n_head=2, n_embd=8)
        model = BertEncoder(EncoderConfig(**shape, positions=positions))
    with pytest.raises(SamplingError, match=r"empty \(shape \(1, 0\)\)"):
        model(torch.zeros(1, 0, dtype=torch.long))


@pytest.mark.parametrize("smoothing", [-1.0, float("nan"), 2.0, float("inf"), "0.1", True])
def test_label_smoothing_outside_0_to_1_is_refused_by_both_engines(smoothing):
    """α in eq. 51 (seed 002 §12.2) mixes the one-hot target with the uniform one, so it lies
    in [0, 1]; the torch engine read -1 and NaN as 0 and left 2 and "0.1" to PyTorch's own
    errors, where the NumPy engine refused them: both now say the same sentence."""
    import numpy as np

    from light_llm.reference.loss import cross_entropy_forward

    model = GPT(tiny_config())
    ids = torch.randint(0, 37, (2, 5))
    said = f"label_smoothing must be a finite number in [0, 1], got {smoothing!r}."
    with pytest.raises(ConfigError) as torch_error:
        model(ids, ids, label_smoothing=smoothing)
    with pytest.raises(ConfigError) as numpy_error:
        cross_entropy_forward(np.zeros((2, 5, 37)), ids.numpy(), label_smoothing=smoothing)
    assert str(torch_error.value) == str(numpy_error.value) == said
