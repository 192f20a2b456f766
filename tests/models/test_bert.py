"""The BERT-style encoder: padding masks, pooling, the MLM head and loss, checkpoints."""

import math

import pytest
import torch
import torch.nn.functional as F

from light_llm.checkpoints import load, load_config, save
from light_llm.config import ModelConfig
from light_llm.errors import CheckpointError, ConfigError
from light_llm.models.bert import (
    IGNORE_INDEX,
    BertEncoder,
    EncoderConfig,
    cls_pool,
    cosine_similarity_matrix,
    encoder_preset,
    mean_pool,
)
from light_llm.models.gpt import GPT
from tests.conftest import gradients_without_and_with_checkpointing


def tiny_encoder_config(**overrides) -> EncoderConfig:
    base = dict(vocab_size=41, block_size=16, n_layer=2, n_head=2, n_embd=16, dropout=0.0)
    base.update(overrides)
    return EncoderConfig(**base)


def padded_batch(lengths: list[int], vocab_size: int, pad_id: int = 0):
    """Random ids right-padded to the longest, with the matching attention mask."""
    T = max(lengths)
    ids = torch.randint(1, vocab_size, (len(lengths), T))
    mask = torch.zeros(len(lengths), T, dtype=torch.long)
    for row, length in enumerate(lengths):
        mask[row, :length] = 1
        ids[row, length:] = pad_id
    return ids, mask


@pytest.mark.parametrize(
    "variant",
    [{}, {"positions": "sinusoidal"}, {"positions": "none"}, {"block_order": "pre"}],
    ids=["learned", "sinusoidal", "no-positions", "pre-ln"],
)
@pytest.mark.parametrize("use_fast", [True, False])
def test_padding_never_changes_real_tokens(variant, use_fast):
    model = BertEncoder(tiny_encoder_config(**variant)).eval()
    model.use_fast_attention(use_fast)
    lengths = [5, 9, 3, 9]
    ids, mask = padded_batch(lengths, model.config.vocab_size)
    types = torch.randint(0, 2, ids.shape) * mask
    batched = model.encode(ids, mask, types)
    for row, length in enumerate(lengths):
        alone = model.encode(ids[row : row + 1, :length], None, types[row : row + 1, :length])
        torch.testing.assert_close(batched[row, :length], alone[0], atol=1e-5, rtol=1e-5)
    # more padding on the right still changes nothing
    extra = model.encode(F.pad(ids, (0, 4)), F.pad(mask, (0, 4)), F.pad(types, (0, 4)))
    torch.testing.assert_close(extra[:, : ids.size(1)] * mask[..., None], batched * mask[..., None])


def test_attention_is_bidirectional():
    """Changing the last token changes the first token's vector (no causal mask)."""
    model = BertEncoder(tiny_encoder_config()).eval()
    ids = torch.randint(1, 41, (1, 6))
    changed = ids.clone()
    changed[0, -1] = (ids[0, -1] % 40) + 1
    assert not torch.allclose(model.encode(ids)[0, 0], model.encode(changed)[0, 0])


def test_fast_and_explicit_attention_agree_with_padding():
    model = BertEncoder(tiny_encoder_config()).eval()
    ids, mask = padded_batch([7, 4, 2], 41)
    fast = model.encode(ids, mask)
    model.use_fast_attention(False)
    torch.testing.assert_close(model.encode(ids, mask), fast, atol=1e-5, rtol=1e-5)


def test_attention_maps_give_padding_no_weight():
    model = BertEncoder(tiny_encoder_config()).eval()
    ids, mask = padded_batch([6, 3], 41)
    maps = model.attention_maps(ids, mask)
    assert len(maps) == model.config.n_layer
    for weights in maps:  # (B, nh, T, T)
        torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]))
        assert torch.all(weights[1, :, :3, 3:] == 0)  # real queries of row 1 never see its pads


def test_mean_pool_ignores_padding():
    hidden = torch.randn(3, 5, 4)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 0, 0, 0, 0]])
    expected = torch.stack(
        [hidden[row, : int(mask[row].sum())].mean(0) for row in range(hidden.size(0))]
    )
    torch.testing.assert_close(mean_pool(hidden, mask), expected)
    torch.testing.assert_close(cls_pool(hidden), hidden[:, 0])


def test_cosine_similarity_matrix():
    vectors = torch.randn(4, 7, dtype=torch.float64)
    expected = F.cosine_similarity(vectors[:, None], vectors[None, :], dim=-1)
    torch.testing.assert_close(cosine_similarity_matrix(vectors), expected)


def test_mlm_loss_is_cross_entropy_on_chosen_positions_only():
    model = BertEncoder(tiny_encoder_config()).eval()
    ids = torch.randint(1, 41, (3, 8))
    labels = torch.full_like(ids, IGNORE_INDEX)
    chosen = torch.rand(ids.shape) < 0.3
    chosen[0, 0] = True
    labels[chosen] = torch.randint(0, 41, (int(chosen.sum()),))
    logits, loss = model(ids, labels)
    full_logits, no_loss = model(ids)  # (B, T, V) at every position
    assert no_loss is None and full_logits.shape == (3, 8, 41)
    torch.testing.assert_close(logits, full_logits[chosen])
    expected = F.cross_entropy(full_logits.reshape(-1, 41), labels.reshape(-1), ignore_index=-1)
    torch.testing.assert_close(loss, expected)


def test_mlm_head_is_tied_to_the_token_table():
    model = BertEncoder(tiny_encoder_config())
    assert model.mlm_head.decoder.weight is model.embeddings.wte.weight
    untied = BertEncoder(tiny_encoder_config(tie_embeddings=False))
    assert untied.mlm_head.decoder.weight is not untied.embeddings.wte.weight


def test_encoder_without_head_returns_hidden_states_and_refuses_labels():
    model = BertEncoder(tiny_encoder_config(mlm_head=False)).eval()
    ids = torch.randint(1, 41, (2, 5))
    hidden, loss = model(ids)
    assert hidden.shape == (2, 5, 16) and loss is None
    with pytest.raises(ConfigError, match="no masked-LM head"):
        model(ids, torch.zeros_like(ids))


def test_uses_the_gpt_layers_with_post_ln_and_no_causal_mask():
    model = BertEncoder(encoder_preset("minilm-l6"))
    assert model.config.block_order == "post" and model.config.norm_eps == 1e-12
    assert all(not block.attn.causal and not block.pre_norm for block in model.h)
    # all-MiniLM-L6-v2 without its pooler (384 x 384 + 384) has 22,565,376 parameters
    assert model.num_parameters() == 22_713_216 - (384 * 384 + 384)


def test_config_errors():
    with pytest.raises(ConfigError, match="rotary"):
        tiny_encoder_config(positions="rotary", n_head=16)  # head size 1: RoPE needs pairs
    with pytest.raises(ConfigError, match="softmax"):
        tiny_encoder_config(attention="linear")
    with pytest.raises(ConfigError, match="type_vocab_size"):
        tiny_encoder_config(type_vocab_size=0)
    with pytest.raises(ConfigError, match="unknown encoder preset"):
        encoder_preset("nope")
    model = BertEncoder(tiny_encoder_config())
    with pytest.raises(ConfigError, match="longer than"):
        model.encode(torch.zeros(1, 17, dtype=torch.long))


@pytest.mark.parametrize("block_order", ["post", "pre"])
def test_save_and_load_round_trip(tmp_path, block_order):
    from light_llm.tokenizers import CharTokenizer, load_tokenizer

    model = BertEncoder(tiny_encoder_config(block_order=block_order)).eval()
    tokenizer = CharTokenizer.from_text("abcdefghijklmnopqrstuvwxyz .,;:!?'-ABCDEF")
    save(model, tmp_path / "enc", tokenizer)
    loaded = load(tmp_path / "enc", architecture="bert")
    assert loaded.mlm_head.decoder.weight is loaded.embeddings.wte.weight
    ids, mask = padded_batch([6, 3], 41)
    expected, _ = model(ids, attention_mask=mask)
    torch.testing.assert_close(loaded(ids, attention_mask=mask)[0], expected)
    assert load_tokenizer(tmp_path / "enc").vocab_size == tokenizer.vocab_size
    assert isinstance(loaded.config, EncoderConfig) and loaded.config == model.config
    assert load_config(tmp_path / "enc", architecture="bert") == model.config


def test_loading_a_gpt_checkpoint_is_refused(tmp_path):
    save(
        GPT(ModelConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=8)),
        tmp_path / "gpt",
    )
    with pytest.raises(CheckpointError, match="holds a GPT, not a BERT-style encoder"):
        load(tmp_path / "gpt", architecture="bert")
    with pytest.raises(CheckpointError, match="holds a GPT, not a BERT-style encoder"):
        load_config(tmp_path / "gpt", architecture="bert")


def test_missing_tensor_is_reported(tmp_path):
    from safetensors.torch import load_file, save_file

    model = BertEncoder(tiny_encoder_config())
    save(model, tmp_path / "enc")
    weights = tmp_path / "enc" / "model.safetensors"
    state = load_file(weights)
    del state["h.1.ln_2.weight"]
    save_file(state, weights)
    with pytest.raises(CheckpointError, match="lacks the tensor"):
        load(tmp_path / "enc", architecture="bert")


# ---------------------------------------------------------------- rotary positions, checkpointing
def rotary_encoder(**overrides) -> BertEncoder:
    base = dict(vocab_size=41, block_size=16, n_layer=2, n_head=2, n_embd=16, dropout=0.0)
    return BertEncoder(EncoderConfig(**{**base, "positions": "rotary", **overrides}))


def rotate(x: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """RoPE as complex multiplication: pair (x_2i, x_2i+1) at position m times e^{i m θ_i},
    θ_i = base^(-2i/hs). x (B, nh, T, hs)."""
    T, hs = x.shape[-2], x.shape[-1]
    theta = base ** (-torch.arange(0, hs, 2, dtype=torch.float64) / hs)  # (hs/2,)
    angles = torch.arange(T)[:, None] * theta  # (T, hs/2): m θ_i
    turn = torch.polar(torch.ones_like(angles), angles)  # e^{i m θ_i}
    pairs = torch.view_as_complex(x.double().reshape(*x.shape[:-1], hs // 2, 2).contiguous())
    return torch.view_as_real(pairs * turn).reshape(x.shape)


def test_the_preset_has_no_position_table_and_rotates_q_and_k():
    assert encoder_preset("bert-shakespeare").positions == "rotary"
    model = rotary_encoder(n_layer=1).eval()
    assert model.embeddings.wpe is None
    assert not any("wpe" in name for name in model.state_dict())
    ids = torch.randint(5, 41, (2, 9))
    (weights,) = model.attention_maps(ids)  # (B, nh, T, T)
    x = model.embeddings(ids, torch.zeros_like(ids))  # post-LN: the block's attention reads x
    attn = model.h[0].attn
    q, k, _ = attn.c_attn(x).split(16, dim=2)
    q, k = (t.view(2, 9, 2, 8).transpose(1, 2) for t in (q, k))  # (B, nh, T, hs)
    scores = rotate(q) @ rotate(k).transpose(-1, -2) / math.sqrt(8)
    expected = torch.softmax(scores, dim=-1)  # bidirectional: no mask
    torch.testing.assert_close(weights.double(), expected, rtol=1e-5, atol=1e-6)


def test_right_padding_leaves_the_real_tokens_unchanged():
    model = rotary_encoder().eval()
    ids = torch.randint(5, 41, (1, 7))
    padded = torch.cat([ids, torch.zeros(1, 5, dtype=torch.long)], dim=1)
    mask = torch.cat([torch.ones(1, 7), torch.zeros(1, 5)], dim=1).long()
    with torch.no_grad():
        alone = model.encode(ids)
        with_padding = model.encode(padded, attention_mask=mask)
    torch.testing.assert_close(with_padding[:, :7], alone, rtol=1e-5, atol=1e-5)


def test_gradient_checkpointing_recomputes_attention_in_the_forwards_number_format():
    """Under bfloat16 autocast with the fused attention in float32 (the trainer's CPU mixed
    precision), the checkpointed backward gives the plain one's gradients."""
    torch.manual_seed(0)
    model = rotary_encoder(n_layer=2)
    ids = torch.randint(5, 41, (2, 12))
    plain, checkpointed = gradients_without_and_with_checkpointing(model, ids)
    for name, grad in plain.items():
        torch.testing.assert_close(checkpointed[name], grad)


def test_gradient_checkpointing_gives_the_same_loss_and_gradients():
    torch.manual_seed(0)
    model = rotary_encoder(n_layer=3)
    ids = torch.randint(5, 41, (3, 12))
    labels = torch.where(torch.rand(3, 12) < 0.3, ids, torch.full_like(ids, IGNORE_INDEX))
    labels[0, 0] = ids[0, 0]  # at least one chosen position
    results = []
    for checkpointing in (False, True):
        model.zero_grad()
        model.gradient_checkpointing = checkpointing
        _, loss = model(ids, labels)
        loss.backward()
        results.append((loss.detach(), [p.grad.clone() for p in model.parameters()]))
    (loss_plain, grads_plain), (loss_ckpt, grads_ckpt) = results
    torch.testing.assert_close(loss_ckpt, loss_plain)
    for plain, ckpt in zip(grads_plain, grads_ckpt, strict=True):
        torch.testing.assert_close(ckpt, plain)
