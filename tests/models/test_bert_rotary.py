"""The encoder with rotary positions (the bert-shakespeare preset) and with activation
checkpointing: attention weights against RoPE written out here with complex numbers, padding
invariance, and the same loss and gradients with checkpointing on and off."""

import math

import torch

from light_llm.models.bert import IGNORE_INDEX, BertEncoder, EncoderConfig, encoder_preset


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
