"""The LoRA layer (Hu et al. 2021): the base exactly at B = 0, merged = unmerged, only A and B
trainable, and the bad targets and ranks refused."""

import pytest
import torch

from light_llm.errors import ConfigError
from light_llm.models.gpt import GPT
from light_llm.nn.lora import LoRALinear, add_lora, lora_state, merge_lora
from tests.conftest import VARIANTS, tiny_config

pytestmark = pytest.mark.usefixtures("one_thread")

ALL_BLOCK_MATRICES = "c_attn,c_proj,c_fc,c_v"


def adapted(config, targets="c_attn,c_proj,c_fc", rank=3, alpha=6.0, dropout=0.0):
    base = GPT(config).eval()
    model = GPT(config).eval()
    model.load_state_dict(base.state_dict())
    names = add_lora(model, targets, rank, alpha, dropout)
    return base, model, names


@pytest.mark.parametrize("variant", ["seed", "swiglu", "recipe", "smear"])
def test_with_b_zero_the_logits_are_the_bases_exactly(variant):
    config = tiny_config(**VARIANTS[variant], dropout=0.1)
    targets = "c_attn,c_proj,c_fc" + (",c_v" if variant == "swiglu" else "")
    if not config.tie_embeddings:
        targets += ",lm_head"
    base, model, names = adapted(config, targets, dropout=0.2)
    assert names and all(isinstance(model.get_submodule(n), LoRALinear) for n in names)
    idx = torch.randint(0, config.vocab_size, (3, 12))
    with torch.no_grad():
        assert torch.equal(model(idx)[0], base(idx)[0])


def test_merged_and_unmerged_logits_agree_after_the_adapters_moved():
    config = tiny_config(dropout=0.0)
    _, model, _ = adapted(config)
    with torch.no_grad():
        for tensor in lora_state(model).values():
            tensor.normal_(0.0, 0.5)  # as if trained: B no longer 0
    idx = torch.randint(0, config.vocab_size, (2, 16))
    with torch.no_grad():
        unmerged = model(idx)[0]
        merged_model = merge_lora(model)
        merged = merged_model(idx)[0]
    assert not any(isinstance(m, LoRALinear) for m in merged_model.modules())
    assert set(merged_model.state_dict()) == set(GPT(config).state_dict())
    assert (merged - unmerged).abs().max().item() <= 1e-5
    assert (unmerged - GPT(config).eval()(idx)[0]).abs().max().item() > 1e-2


def test_cached_decoding_applies_the_output_heads_adapters():
    """The KV cache's (d, V) copy of the head is the adapted head's W + (α/r) B A (it was W
    alone, so cached greedy decoding dropped a LoRA on lm_head): cached logits, one token at a
    time, equal a full forward's."""
    config = tiny_config(**VARIANTS["untied"], dropout=0.0)
    _, model, _ = adapted(config, "c_attn,lm_head")
    with torch.no_grad():
        for tensor in lora_state(model).values():
            tensor.normal_(0.0, 0.5)
    idx = torch.randint(0, config.vocab_size, (2, 10))
    cache = model.new_cache(2)
    assert cache.output_head is not None  # the fast path this test is about (CPU, float32)
    with torch.no_grad():
        full = model(idx)[0]
        stepped = torch.cat([model(idx[:, t : t + 1], kv_cache=cache)[0] for t in range(10)], 1)
    torch.testing.assert_close(stepped, full, atol=1e-5, rtol=1e-5)


def test_merged_weight_is_w_plus_scaled_b_a():
    layer = LoRALinear(5, 7, rank=2, alpha=3.0)
    with torch.no_grad():
        layer.lora_B.normal_()
    expected = layer.weight + (3.0 / 2) * torch.einsum("or,ri->oi", layer.lora_B, layer.lora_A)
    assert torch.allclose(layer.merged_weight(), expected, atol=1e-6)
    x = torch.randn(4, 5)
    assert torch.allclose(layer(x), x @ expected.T + layer.bias, atol=1e-5)


def test_only_a_and_b_require_gradients_and_receive_them():
    config = tiny_config()
    _, model, names = adapted(config)
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable == {f"{n}.{p}" for n in names for p in ("lora_A", "lora_B")}
    idx = torch.randint(0, config.vocab_size, (2, 8))
    _, loss = model.train()(idx, idx)
    loss.backward()
    for name, parameter in model.named_parameters():
        assert (parameter.grad is not None) == (name in trainable), name


def test_adapters_share_the_base_tensors_and_count_r_times_d_in_plus_d_out():
    config = tiny_config()
    model = GPT(config)
    weight = model.transformer.h[0].attn.c_attn.weight
    add_lora(model, "attn.c_attn", rank=4)
    layer = model.transformer.h[0].attn.c_attn
    assert layer.weight is weight and layer.scaling == 1.0  # alpha defaults to the rank
    d = config.n_embd
    assert sum(t.numel() for t in lora_state(model).values()) == config.n_layer * 4 * (d + 3 * d)


def test_a_target_naming_no_layer_lists_the_layer_names():
    with pytest.raises(ConfigError, match="'wq'.*c_attn, c_fc, c_proj, lm_head"):
        add_lora(GPT(tiny_config()), "c_attn,wq", rank=2)


@pytest.mark.parametrize("rank", [0, -1, 17])
def test_a_rank_outside_one_to_the_layer_size_is_refused(rank):
    with pytest.raises(ConfigError, match="rank"):
        add_lora(GPT(tiny_config(n_embd=16)), "c_attn", rank=rank)


def test_a_tied_output_head_is_refused():
    with pytest.raises(ConfigError, match="lm_head.*tied"):
        add_lora(GPT(tiny_config()), "lm_head", rank=2)
