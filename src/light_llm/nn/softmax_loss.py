"""The next-token cross-entropy of a training step's logits in two passes over them, on a CPU.

Under bfloat16 autocast the output head gives (N, V) logits in bfloat16. PyTorch's
``F.cross_entropy`` on a CPU wants them in float32, so a training step copies them up, takes
the log-softmax, fills a zero gradient for the negative log-likelihood, takes the log-softmax's
backward and copies the gradient back down: six passes over an (N, V) array, most of them in
float32. With a vocabulary of 1536 ids they cost about a tenth of the default's step on a
2-core CPU, more than the head's products (docs/recipe.md). In float32 (a CPU without bfloat16
arithmetic) the copies go but the other four passes stay. The same loss and gradient need
only the softmax, once, in the logits' dtype (PyTorch's kernel computes it in float32 inside),
and one multiply in the backward.
"""

from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable

TRAINED_DTYPES = (torch.bfloat16, torch.float32)  # the logits' dtypes that take it
CONFIDENT = 0.5  # above this p_y, p_y - 1 is taken from the other probabilities' sum


class SoftmaxCrossEntropy(torch.autograd.Function):
    """Mean cross-entropy L = -(1/N) Σ_i log p_{i,y_i} with p = softmax(z) row by row, and its
    gradient ∂L/∂z_{ij} = (p_ij - [j = y_i]) / N (seed 000 §7).

    p is computed once, by PyTorch's softmax kernel (float32 inside, rounded to the logits'
    dtype), and kept for the backward, which scales it. The target's entry p_y - 1 is where
    rounding hurts: for a confident row (p_y > 1/2) the rounded p_y is off by up to 2^-9 of
    itself in bfloat16 (2^-24 in float32), which can be a large part of 1 - p_y. There it is
    taken as minus the sum of the row's other probabilities, each rounded on its own, summed in
    float32 (in which the rounded p_y cancels), so that the row's gradient sums to zero before
    its last rounding, as the exact one does. log p_y is log1p(-(that sum)) there, the log of
    the rounded p_y elsewhere: in bfloat16 each token's loss within 2^-9 of float32's, their
    mean within a few 1e-5 for logits of the scale a model trains at (2e-4 for logits of scale
    30). A row whose p_y underflows (to 0, or below the dtype's smallest normal number, where
    it keeps too few digits for its log) takes the exact log-softmax instead.
    """

    @staticmethod
    def forward(ctx, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        probabilities = torch.softmax(logits, dim=1)  # (N, V), the logits' dtype
        index = targets[:, None]  # (N, 1)
        target_probability = probabilities.gather(1, index).float()  # p_y, (N, 1)
        complement = 1.0 - target_probability  # Σ_{j≠y} p_j, exact for small p_y
        log_probability = torch.log(target_probability)  # log p_y, (N, 1)
        confident = (target_probability > CONFIDENT).squeeze(1).nonzero(as_tuple=True)[0]
        if confident.numel():
            row_sums = probabilities[confident].sum(1, keepdim=True, dtype=torch.float32)
            complement[confident] = row_sums - target_probability[confident]
            log_probability[confident] = torch.log1p(-complement[confident])
        smallest_normal = torch.finfo(logits.dtype).tiny
        underflowed = (target_probability < smallest_normal).squeeze(1).nonzero(as_tuple=True)[0]
        if underflowed.numel():  # z_y far below the row's log-sum-exp: the exact value
            exact = torch.log_softmax(logits[underflowed].float(), dim=1)
            log_probability[underflowed] = exact.gather(1, index[underflowed])
        ctx.save_for_backward(probabilities, index, complement)
        return -log_probability.mean()

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_loss: torch.Tensor) -> tuple[torch.Tensor, None]:
        probabilities, index, complement = ctx.saved_tensors
        scale = grad_loss.float() / probabilities.size(0)  # dL/dL · 1/N
        gradient = probabilities * scale.to(probabilities.dtype)  # p / N (p kept: retain_graph)
        # (p_y - 1) / N at each row's target, written by index (scatter_ on a bfloat16 CPU
        # tensor copies the whole (N, V) array, docs/recipe.md)
        rows = torch.arange(gradient.size(0), device=gradient.device)
        gradient[rows, index[:, 0]] = (-complement * scale).to(gradient.dtype)[:, 0]
        return gradient, None


def softmax_loss_applies(
    logits: torch.Tensor, targets: torch.Tensor, label_smoothing: float, reduction: str
) -> bool:
    """Whether :class:`SoftmaxCrossEntropy` computes this loss: bfloat16 or float32 logits on a
    CPU that need a gradient, the mean over every position, no label smoothing, every target
    an id of the vocabulary (none ignored). Everything else (an evaluation, float64's exact
    checks, a GPU, whose fused kernel does not copy) takes ``F.cross_entropy`` in float32 or
    above, which also names a target out of range."""
    return (
        logits.dtype in TRAINED_DTYPES
        and logits.device.type == "cpu"
        and logits.requires_grad
        and torch.is_grad_enabled()
        and label_smoothing == 0
        and reduction == "mean"
        and targets.numel() > 0
        and ids_within(targets, logits.size(-1))
    )


def ids_within(targets: torch.Tensor, vocab_size: int) -> bool:
    """Whether every target is an id in [0, vocab_size), from one pass over them."""
    lowest, highest = targets.aminmax()
    return 0 <= int(lowest) and int(highest) < vocab_size


def softmax_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of ``logits`` (N, V) at ``targets`` (N,) (seed 000 §7), by
    :class:`SoftmaxCrossEntropy`."""
    return SoftmaxCrossEntropy.apply(logits, targets)
