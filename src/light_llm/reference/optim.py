"""Optimisers for the NumPy engine, written out: SGD with momentum, Adam, AdamW, and global-norm
gradient clipping (seed 000 §7, §10; seed 002 §4.1, §4.3).

Each optimiser holds its state per parameter name and updates the arrays of a parameter dict
in place: ``optimizer.step(grads, lr)``. The learning-rate schedule (linear warmup, then cosine
to a floor) is :func:`light_llm.schedule.learning_rate`, which both engines follow:

    step <  T_w:          lr = lr_max (step + 1) / (T_w + 1)
    T_w <= step <= T_d:   lr = lr_min + ½ (1 + cos(π (step - T_w) / (T_d - T_w))) (lr_max - lr_min)
    step >  T_d:          lr = lr_min
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from light_llm.errors import ConfigError

__all__ = ["SGD", "Adam", "AdamW", "clip_grad_norm", "decays"]

Params = Mapping[str, np.ndarray]


def decays(param: np.ndarray) -> bool:
    """Weight decay applies to tensors of two or more dimensions (matrices, embedding tables),
    not to biases and norm gains, as in the PyTorch trainer's ``decay_groups``."""
    return param.ndim >= 2


def check_learning_rate(lr: float) -> None:
    if not lr >= 0.0:
        raise ConfigError(f"the learning rate must be >= 0, got {lr}.")


class SGD:
    """SGD with momentum (seed 002 §4.1, eqs. 5-6), the velocity starting at v_0 = 0:

        v_t = μ v_{t-1} + (1 - τ) g_t        θ_t = θ_{t-1} - η v_t

    The seed's exponential average is τ = μ (dampening); τ = 0 is the classic heavy ball
    (``torch.optim.SGD``'s rule). ``weight_decay`` λ adds λθ to the gradient (L2)."""

    def __init__(
        self,
        params: Params,
        lr: float,
        momentum: float = 0.9,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
    ) -> None:
        check_learning_rate(lr)
        if not 0.0 <= momentum < 1.0:
            raise ConfigError(f"momentum must be in [0, 1), got {momentum}.")
        self.params = params
        self.lr, self.momentum, self.dampening = lr, momentum, dampening
        self.weight_decay = weight_decay
        self.velocity = {name: np.zeros_like(p) for name, p in params.items()}

    def step(self, grads: Params, lr: float | None = None) -> None:
        lr = self.lr if lr is None else lr
        for name, param in self.params.items():
            grad = grads[name]
            if self.weight_decay and decays(param):
                grad = grad + self.weight_decay * param
            velocity = self.velocity[name]
            velocity *= self.momentum
            velocity += (1.0 - self.dampening) * grad
            param -= lr * velocity


class Adam:
    """Adam (seed 002 §4.1, eqs. 7-9; seed 000 §7), per parameter at step t:

        m = β1 m + (1-β1) g        v = β2 v + (1-β2) g²
        m̂ = m / (1 - β1^t)         v̂ = v / (1 - β2^t)
        θ = θ - η m̂ / (sqrt(v̂) + ε)

    ``weight_decay`` λ here is L2 regularisation, added to the gradient (g + λθ) of
    matrices only, as ``torch.optim.Adam`` does on the parameters it is given."""

    decoupled = False

    def __init__(
        self,
        params: Params,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ) -> None:
        check_learning_rate(lr)
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ConfigError(f"Adam betas must lie in [0, 1), got {betas}.")
        if weight_decay < 0:
            raise ConfigError(f"weight decay must be >= 0, got {weight_decay}.")
        self.params = params
        self.lr, self.betas, self.eps, self.weight_decay = lr, betas, eps, weight_decay
        self.t = 0
        self.m = {name: np.zeros_like(p) for name, p in params.items()}
        self.v = {name: np.zeros_like(p) for name, p in params.items()}

    def step(self, grads: Params, lr: float | None = None) -> None:
        lr = self.lr if lr is None else lr
        beta1, beta2 = self.betas
        self.t += 1
        step_size = lr / (1.0 - beta1**self.t)  # η / (1 - β1^t): m̂ folded into the step
        sqrt_correction2 = math.sqrt(1.0 - beta2**self.t)  # sqrt(v̂) = sqrt(v) / this
        for name, param in self.params.items():
            grad = grads[name]
            if self.weight_decay and decays(param):
                if self.decoupled:
                    param *= 1.0 - lr * self.weight_decay  # θ -= η λ θ (AdamW)
                else:
                    grad = grad + self.weight_decay * param  # g += λ θ (L2)
            m, v = self.m[name], self.v[name]
            m *= beta1
            m += (1.0 - beta1) * grad
            v *= beta2
            v += (1.0 - beta2) * grad * grad
            denominator = np.sqrt(v)
            denominator /= sqrt_correction2
            denominator += self.eps
            param -= step_size * m / denominator


class AdamW(Adam):
    """AdamW (seed 000 §7; seed 002 §4.1): Adam with the weight decay taken out of the
    gradient and applied to the weights directly, before the Adam step, exactly as
    ``torch.optim.AdamW``:

        θ = θ (1 - η λ)            matrices only (:func:`decays`)
        θ = θ - η m̂ / (sqrt(v̂) + ε)

    The seed writes θ - η(m̂/(sqrt(v̂)+ε) + λθ), the same to first order in η."""

    decoupled = True

    def __init__(
        self,
        params: Params,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.01,
    ) -> None:
        super().__init__(params, lr, betas, eps, weight_decay)


def clip_grad_norm(grads: Params, max_norm: float) -> float:
    """Scale every gradient by one factor so that their global L2 norm is at most c
    (seed 002 §4.3, eq. 11; seed 000 §10):

        ||g||_2 = sqrt(Σ_p Σ_i g_p,i²)        g <- min(1, c / (||g||_2 + 1e-6)) g

    (the 1e-6 as ``torch.nn.utils.clip_grad_norm_``). Updates ``grads`` in place and returns
    ||g||_2 before clipping."""
    if not max_norm > 0:
        raise ConfigError(f"the clipping threshold must be positive, got {max_norm}.")
    total = math.sqrt(sum(float(np.vdot(g, g)) for g in grads.values()))
    factor = min(1.0, max_norm / (total + 1e-6))
    if factor < 1.0:
        for grad in grads.values():
            grad *= factor
    return total
