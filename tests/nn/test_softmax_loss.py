"""The softmax loss of bfloat16 and float32 logits against PyTorch's cross-entropy in float64 of
the same logits (the exact loss and gradient of what the head computed), and against the
float32 path it replaces."""

import pytest
import torch
import torch.nn.functional as F

from light_llm.models.gpt import GPT
from light_llm.nn.softmax_loss import softmax_cross_entropy, softmax_loss_applies


def bfloat16_logits(rows: int, vocab: int, scale: float, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    logits = (torch.randn(rows, vocab, generator=generator) * scale).bfloat16()
    targets = torch.randint(0, vocab, (rows,), generator=generator)
    targets[: rows // 4] = logits[: rows // 4].float().argmax(1)  # confident rows too
    return logits, targets


def loss_and_gradient(loss_fn, logits, targets):
    leaf = logits.clone().requires_grad_()
    loss = loss_fn(leaf, targets)
    loss.backward()
    return loss.detach().double(), leaf.grad.double()


def relative(a, b):
    return ((a - b).norm() / b.norm()).item()


@pytest.mark.parametrize("scale", [0.5, 3.0, 12.0])
def test_loss_and_gradient_match_float64(scale):
    logits, targets = bfloat16_logits(512, 300, scale)
    exact_loss, exact_grad = loss_and_gradient(F.cross_entropy, logits.double(), targets)
    loss, grad = loss_and_gradient(softmax_cross_entropy, logits, targets)
    float32_loss, float32_grad = loss_and_gradient(
        lambda z, y: F.cross_entropy(z.float(), y), logits, targets
    )
    assert grad.dtype == torch.float64 and torch.isfinite(loss)
    assert abs(loss - exact_loss).item() < 2e-4
    # about as near the exact gradient as float32's, rounded to bfloat16, is (the target
    # entries of unsure rows are rounded twice: from p_y, then to bfloat16)
    assert relative(grad, exact_grad) < 1.2 * relative(float32_grad, exact_grad)
    assert abs(float32_loss - exact_loss).item() < 1e-5  # the comparison itself is sound


@pytest.mark.parametrize("scale", [0.5, 3.0, 12.0, 40.0])
def test_float32_logits_match_float64_as_pytorchs_float32_does(scale):
    logits, targets = bfloat16_logits(512, 300, scale, seed=5)
    logits = logits.float() + torch.randn(logits.shape, generator=torch.Generator().manual_seed(6))
    exact_loss, exact_grad = loss_and_gradient(F.cross_entropy, logits.double(), targets)
    loss, grad = loss_and_gradient(softmax_cross_entropy, logits, targets)
    pytorch_loss, pytorch_grad = loss_and_gradient(F.cross_entropy, logits, targets)
    assert abs(loss - exact_loss).item() <= 2 * abs(pytorch_loss - exact_loss).item() + 1e-6
    assert relative(grad, exact_grad) < 2 * relative(pytorch_grad, exact_grad) + 1e-7


def test_confident_rows_keep_their_target_entry():
    logits, targets = bfloat16_logits(256, 200, 10.0, seed=1)
    _, exact_grad = loss_and_gradient(F.cross_entropy, logits.double(), targets)
    _, grad = loss_and_gradient(softmax_cross_entropy, logits, targets)
    _, float32_grad = loss_and_gradient(lambda z, y: F.cross_entropy(z.float(), y), logits, targets)
    probabilities = torch.softmax(logits.double(), 1)
    confident = probabilities.gather(1, targets[:, None]).squeeze(1) > 0.9
    assert confident.sum() > 20
    rows = confident.nonzero().squeeze(1)
    target_entries = grad[rows, targets[rows]]
    exact_entries = exact_grad[rows, targets[rows]]
    float32_entries = float32_grad[rows, targets[rows]]
    rounded_entries = (torch.softmax(logits, 1).double()[rows, targets[rows]] - 1) / len(targets)

    def worst(entries):
        return ((entries - exact_entries) / exact_entries).abs().max().item()

    # (p_y - 1) / N as near as float32's path gets it; 1 minus the rounded p_y is far off
    assert worst(target_entries) <= 1.05 * worst(float32_entries) + 2**-8
    assert worst(rounded_entries) > 0.5


def test_a_target_whose_probability_underflows_takes_the_exact_loss():
    logits = torch.zeros(4, 50, dtype=torch.bfloat16)
    logits[:, 0] = 120.0
    targets = torch.tensor([0, 1, 2, 0])  # two rows with p_y = e^-120, below bfloat16's range
    exact_loss, exact_grad = loss_and_gradient(F.cross_entropy, logits.double(), targets)
    loss, grad = loss_and_gradient(softmax_cross_entropy, logits, targets)
    assert torch.isfinite(loss) and abs(loss - exact_loss).item() < 1e-3 * exact_loss.item()
    assert torch.allclose(grad, exact_grad, atol=1e-3)


def test_scaled_loss_scales_the_gradient():
    logits, targets = bfloat16_logits(128, 64, 2.0, seed=2)
    _, grad = loss_and_gradient(softmax_cross_entropy, logits, targets)
    _, grad_third = loss_and_gradient(lambda z, y: softmax_cross_entropy(z, y) / 3, logits, targets)
    assert relative(grad_third * 3, grad) < 2**-7


def test_which_losses_take_it():
    logits, targets = bfloat16_logits(16, 10, 1.0)
    training = logits.clone().requires_grad_()
    assert softmax_loss_applies(training, targets, 0.0, "mean")
    assert not softmax_loss_applies(logits, targets, 0.0, "mean")  # no gradient: evaluation
    assert softmax_loss_applies(training.float(), targets, 0.0, "mean")  # a float32 step
    assert not softmax_loss_applies(training.double(), targets, 0.0, "mean")  # exact checks
    assert not softmax_loss_applies(training, targets, 0.1, "mean")
    assert not softmax_loss_applies(training, targets, 0.0, "sum")
    ignored = targets.clone()
    ignored[3] = -1
    assert not softmax_loss_applies(training, ignored, 0.0, "mean")
    beyond = targets.clone()
    beyond[5] = 10  # F.cross_entropy names it
    assert not softmax_loss_applies(training, beyond, 0.0, "mean")
    with torch.no_grad():
        assert not softmax_loss_applies(training, targets, 0.0, "mean")


def test_the_model_trains_with_it_under_autocast():
    """GPT.next_token_loss in a bfloat16 training step gives the float32 path's loss and
    gradients; evaluated without a gradient it is that path, to the bit."""
    logits, targets = bfloat16_logits(64, 40, 2.0, seed=3)
    logits, targets = logits.reshape(4, 16, 40), targets.reshape(4, 16)
    leaf = logits.clone().requires_grad_()
    loss = GPT.next_token_loss(leaf, targets, 0.0)
    loss.backward()
    reference = logits.clone().requires_grad_()
    float32_loss = F.cross_entropy(reference.reshape(-1, 40).float(), targets.reshape(-1))
    float32_loss.backward()
    assert abs(loss.item() - float32_loss.item()) < 2e-4
    assert relative(leaf.grad.double(), reference.grad.double()) < 2**-7
    with torch.no_grad():
        evaluated = GPT.next_token_loss(logits, targets, 0.0)
    assert torch.equal(evaluated, float32_loss.detach())


def test_a_retained_graph_gives_the_same_gradient_twice():
    logits, targets = bfloat16_logits(64, 30, 2.0, seed=4)
    leaf = logits.clone().requires_grad_()
    loss = softmax_cross_entropy(leaf, targets)
    loss.backward(retain_graph=True)
    first = leaf.grad.clone()
    leaf.grad = None
    loss.backward()
    assert torch.equal(leaf.grad, first)
