"""Ablation: zero ablation equals the weights zeroed, mean ablation equals the weights zeroed
and the part's mean added to the bias, both measured by the model's own loss."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from light_llm.errors import InspectError
from light_llm.inspect import ablate_prompt, ablate_text, head_importance
from light_llm.inspect.text import text_windows
from tests.conftest import VARIANTS
from tests.inspect.conftest import numpy_twin, prompt, shaken_gpt, unit_values

TEXT = prompt(50, seed=3)  # three windows of 16 and a tail of 1: every path of text_windows


def loss_of(numpy_model, ids) -> float:
    """The mean next-token loss of the NumPy engine's own forward over consecutive windows."""
    total, count = 0.0, 0
    for inputs, targets, _ in text_windows(ids, numpy_model.config.block_size, 32):
        _, loss, _ = numpy_model.forward(inputs, targets)
        total += loss * targets.size
        count += targets.size
    return total / count


def head_outputs_of(model, layer: int, head: int, batches) -> list[torch.Tensor]:
    """Head ``head`` of ``layer``'s output through its slice of W_O, (B, T, d) for each batch
    of ids in ``batches``, read from the model's own attention (a hook on W_O's input)."""
    attn = model.transformer.h[layer].attn
    hs = model.config.head_dim
    captured = []
    handle = attn.c_proj.register_forward_pre_hook(lambda _, args: captured.append(args[0]))
    try:
        with torch.no_grad():
            for inputs in batches:
                model(torch.as_tensor(inputs))
    finally:
        handle.remove()
    weight = attn.c_proj.weight[:, head * hs : (head + 1) * hs]  # (d, hs)
    return [y[..., head * hs : (head + 1) * hs] @ weight.T for y in captured]


def head_outputs(model, layer: int, head: int, ids) -> np.ndarray:
    """:func:`head_outputs_of` at every position of the windows of ``ids``, (N, d)."""
    windows = [inputs for inputs, _, _ in text_windows(ids, model.config.block_size, 32)]
    rows = [out.reshape(-1, out.shape[-1]) for out in head_outputs_of(model, layer, head, windows)]
    return torch.cat(rows).detach().numpy()


@pytest.mark.parametrize("variant", ["seed", "recipe", "swiglu"])
def test_zero_ablation_of_a_head_is_its_slice_of_w_o_zeroed(variant):
    model = shaken_gpt(torch.float64, **VARIANTS[variant])
    result = ablate_text(model, TEXT, ["L1H0"])
    twin = numpy_twin(model)
    assert result.loss == pytest.approx(loss_of(twin, TEXT), abs=1e-10)
    twin.params["transformer.h.1.attn.c_proj.weight"][:, :8] = 0.0
    assert result.ablated_loss == pytest.approx(loss_of(twin, TEXT), abs=1e-10)
    assert result.n_tokens == len(TEXT) - 1 and abs(result.delta_loss) > 1e-4


def test_mean_ablation_of_a_head_is_its_slice_zeroed_and_its_mean_in_the_bias():
    model = shaken_gpt(torch.float64)
    mean = head_outputs(model, 0, 1, TEXT).mean(0)
    result = ablate_text(model, TEXT, ["L0H1"], method="mean")
    twin = numpy_twin(model)
    twin.params["transformer.h.0.attn.c_proj.weight"][:, 8:] = 0.0
    twin.params["transformer.h.0.attn.c_proj.bias"] += mean
    assert result.ablated_loss == pytest.approx(loss_of(twin, TEXT), abs=1e-10)


def test_mean_ablation_of_a_unit_puts_its_mean_through_w_2():
    model = shaken_gpt(torch.float64, **VARIANTS["relu2"])
    mean = unit_values(model, 1, 7, TEXT).mean()
    twin = numpy_twin(model)
    w2 = twin.params["transformer.h.1.mlp.c_proj.weight"]
    twin.params["transformer.h.1.mlp.c_proj.bias"] += mean * w2[:, 7]
    w2[:, 7] = 0.0
    result = ablate_text(model, TEXT, ["L1N7"], method="mean")
    assert result.ablated_loss == pytest.approx(loss_of(twin, TEXT), abs=1e-10)


def test_the_importance_table_is_each_part_ablated_alone():
    model = shaken_gpt(torch.float64)
    table = head_importance(model, TEXT)
    assert table.heads.shape == (2, 2) and table.mlps.shape == (2,)
    for layer in range(2):
        for head in range(2):
            alone = ablate_text(model, TEXT, [f"L{layer}H{head}"]).delta_loss
            assert table.heads[layer, head] == pytest.approx(alone, abs=1e-12)
        assert table.mlps[layer] == pytest.approx(
            ablate_text(model, TEXT, [f"L{layer}MLP"]).delta_loss
        )
    twin = head_importance(numpy_twin(model), TEXT, method="mean")
    ours = head_importance(model, TEXT, method="mean")
    np.testing.assert_allclose(ours.heads, twin.heads, atol=1e-9)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_the_importance_table_of_a_16_bit_model_is_each_part_ablated_alone(dtype):
    model = shaken_gpt(dtype)
    table = head_importance(model, TEXT)
    for name, delta in (("L1H0", table.heads[1, 0]), ("L0MLP", table.mlps[0])):
        assert delta == pytest.approx(ablate_text(model, TEXT, [name]).delta_loss, abs=0.01)


def test_prompt_ablation_redraws_the_next_token_distribution():
    model = shaken_gpt(torch.float64)
    ids = prompt(9)
    result = ablate_prompt(model, ids, ["L0H0", "L1MLP"])
    own = torch.softmax(model(torch.as_tensor(ids[None]))[0][0, -1], -1).detach().numpy()
    np.testing.assert_allclose(result.probs, own, atol=1e-12)
    twin = numpy_twin(model)
    twin.params["transformer.h.0.attn.c_proj.weight"][:, :8] = 0.0
    twin.params["transformer.h.1.mlp.c_proj.weight"][:] = 0.0
    twin.params["transformer.h.1.mlp.c_proj.bias"][:] = 0.0
    logits, _, _ = twin.forward(ids[None])
    expected = np.exp(logits[0, -1] - logits[0, -1].max())
    np.testing.assert_allclose(result.ablated_probs, expected / expected.sum(), atol=1e-12)
    assert result.token == own.argmax() and result.delta_p == result.ablated_p - result.p
    assert result.components == ["L0H0", "L1MLP"]


def prompt_head_outputs(model, layer: int, head: int, ids) -> np.ndarray:
    """:func:`head_outputs_of` at every position of the prompt ``ids`` (one forward, the last
    position too), (T, d)."""
    return head_outputs_of(model, layer, head, [ids[None]])[0][0].detach().numpy()


@pytest.mark.parametrize("length", [1, 2, 9])
def test_prompt_mean_ablation_takes_the_mean_over_every_position_of_the_prompt(length):
    model = shaken_gpt(torch.float64)
    ids = prompt(length)
    mean = prompt_head_outputs(model, 0, 1, ids).mean(0)  # (d,): all `length` positions
    result = ablate_prompt(model, ids, ["L0H1"], method="mean")
    twin = numpy_twin(model)
    twin.params["transformer.h.0.attn.c_proj.weight"][:, 8:] = 0.0
    twin.params["transformer.h.0.attn.c_proj.bias"] += mean
    logits, _, _ = twin.forward(ids[None])
    expected = np.exp(logits[0, -1] - logits[0, -1].max())
    np.testing.assert_allclose(result.ablated_probs, expected / expected.sum(), atol=1e-12)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda m: ablate_text(m, TEXT, ["L2H0"]),
            "layer 2 is out of range: this model's layers run from 0 to 1",
        ),
        (lambda m: ablate_text(m, TEXT, ["L0H7"]), "head 7 is out of range"),
        (lambda m: ablate_text(m, TEXT, ["L0N64"]), "neuron 64 is out of range"),
        (lambda m: ablate_text(m, TEXT, ["head 3"]), "'head 3' names no part of a model"),
        (lambda m: ablate_text(m, TEXT, []), "name at least one part"),
        (lambda m: ablate_text(m, TEXT, None), "the parts to ablate are a list of names"),
        (lambda m: ablate_prompt(m, [1, 2], 3), "the parts to ablate are a list of names"),
        (lambda m: ablate_text(m, TEXT, ["L0H0"], method="half"), "zero or mean, not 'half'"),
        (lambda m: ablate_text(m, [3], ["L0H0"]), "the text is 1 token long; it needs at least 2"),
        (lambda m: head_importance(m, []), "the text is empty"),
        (lambda m: ablate_prompt(m, [1, 2], ["L0H0"], token=40), "outside the model's vocabulary"),
        (lambda m: ablate_prompt(m, [1, 2], b"L0H0"), "the parts to ablate are a list of names"),
        (lambda m: ablate_prompt(m, [1, 2], ["L\u0660H\u0661"]), "names no part of a model"),
        (
            lambda m: ablate_prompt(m, [1, 2], ["L0H0"], mean_over=[1, 2, 3]),
            "mean_over is the text of a mean ablation: give method='mean'",
        ),
        (lambda m: head_importance(m, TEXT, mlps="no"), "mlps must be true or false, got 'no'"),
    ],
)
def test_bad_input_is_one_sentence(call, message):
    with pytest.raises(InspectError, match=message):
        call(shaken_gpt())
