"""Optimisers for the NumPy engine, written out: SGD with momentum, Adam, AdamW, Muon with AdamW
(Keller Jordan's Muon, as :mod:`light_llm.train.muon`), and global-norm gradient clipping
(seed 000 §7, §10; seed 002 §4.1, §4.3).

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
from light_llm.muon_spec import (
    NORMUON_BETA2,
    NORMUON_EPS,
    NS_EPS,
    NS_STEPS,
    ORTHOGONALISERS,
    check_scale,
    is_embedding_table,
    is_muon_matrix,
    orthogonaliser_steps,
    update_scale,
)

__all__ = [
    "SGD",
    "Adam",
    "AdamW",
    "MuonAdamW",
    "clip_grad_norm",
    "configure_optimizer",
    "decays",
    "newton_schulz",
]

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
    matrices only, as ``torch.optim.Adam`` does on the parameters it is given.
    ``embedding_lr`` gives the embedding tables (:func:`is_embedding_table`) the step size
    η · embedding_lr / lr instead of η (the schedule scales both); their decoupled decay per
    step stays η λ, as in the PyTorch trainer's embedding group."""

    decoupled = False

    def __init__(
        self,
        params: Params,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        embedding_lr: float | None = None,
        cautious: bool = False,
    ) -> None:
        check_learning_rate(lr)
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ConfigError(f"Adam betas must lie in [0, 1), got {betas}.")
        if weight_decay < 0:
            raise ConfigError(f"weight decay must be >= 0, got {weight_decay}.")
        self.params = params
        self.lr, self.betas, self.eps, self.weight_decay = lr, betas, eps, weight_decay
        self.cautious = cautious
        if embedding_lr is not None:
            check_learning_rate(embedding_lr)
        ratio = 1.0 if embedding_lr is None else embedding_lr / lr
        self.lr_ratios = {name: ratio if is_embedding_table(name) else 1.0 for name in params}
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
            decayed = self.weight_decay and decays(param)
            if decayed and not self.decoupled:
                grad = grad + self.weight_decay * param  # g += λ θ (L2)
            m, v = self.m[name], self.v[name]
            m *= beta1
            m += (1.0 - beta1) * grad
            v *= beta2
            v += (1.0 - beta2) * grad * grad
            denominator = np.sqrt(v)
            denominator /= sqrt_correction2
            denominator += self.eps
            if decayed and self.decoupled:  # θ -= η λ θ (AdamW), cautious: where u ⊙ θ >= 0
                decay(param, m / denominator, lr * self.weight_decay, self.cautious)
            param -= (step_size * self.lr_ratios[name]) * m / denominator


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
        embedding_lr: float | None = None,
        cautious: bool = False,
    ) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, embedding_lr, cautious)


def newton_schulz(
    matrix: np.ndarray, steps: int = NS_STEPS, method: str = "newton-schulz"
) -> np.ndarray:
    """The quintic Newton-Schulz orthogonalisation of Keller Jordan's Muon: about U Vᵀ for
    matrix = U S Vᵀ (its singular values pushed into about [0.7, 1.2]), in its dtype.

        X0 = G / (m ||G||_F + ε)   (Gᵀ when G has more rows than columns)
        Xk = a_k Xk-1 + (b_k A + c_k A²) Xk-1,   A = Xk-1 Xk-1ᵀ

    with (a, b, c) = (3.4445, -4.7750, 2.0315) at every step and m = 1, or with
    ``method="polar-express"`` Polar Express's quintic for each step and m = 1.02
    (:func:`light_llm.muon_spec.orthogonaliser_steps`).
    """
    margin, coefficients = orthogonaliser_steps(method, steps)
    tall = matrix.shape[0] > matrix.shape[1]
    x = matrix.T if tall else matrix  # (r, n), r = min(rows, cols)
    x = x / (margin * np.sqrt(np.sum(x * x)) + NS_EPS)
    for a, b, c in coefficients:
        gram = x @ x.T  # (r, r)
        x = a * x + (b * gram + c * (gram @ gram)) @ x
    return x.T if tall else x


def normalise_neurons(
    update: np.ndarray,
    second_moment: np.ndarray,
    beta2: float = NORMUON_BETA2,
    eps: float = NORMUON_EPS,
) -> np.ndarray:
    """NorMuon (:mod:`light_llm.muon_spec`): ``update`` O (d_out, d_in) with each row (output
    neuron) divided by the root of its second moment v (d_out, 1), which this updates in
    place, then scaled back to O's Frobenius norm:

        v_i = β2 v_i + (1 - β2) mean_j(O_ij²)
        Ô_ij = O_ij / (sqrt(v_i) + ε);    Ô = Ô ||O||_F / (||Ô||_F + ε)
    """
    second_moment *= beta2
    second_moment += (1.0 - beta2) * np.mean(update * update, axis=-1, keepdims=True)
    normalised = update / (np.sqrt(second_moment) + eps)
    norm = np.sqrt(np.sum(update * update))
    return normalised * (norm / (np.sqrt(np.sum(normalised * normalised)) + eps))


def decay(param: np.ndarray, update: np.ndarray, rate: float, cautious: bool) -> None:
    """Decoupled weight decay θ = θ (1 - η λ), ``rate`` = η λ, before the step along
    ``update``; with ``cautious`` only where update and weight agree in sign,
    θ = θ - η λ 1[u ⊙ θ >= 0] ⊙ θ (Cautious Weight Decay, :mod:`light_llm.muon_spec`)."""
    if not rate:
        return
    if cautious:
        param -= rate * (param * (update * param >= 0))
    else:
        param *= 1.0 - rate


class MuonAdamW:
    """Muon on the 2-D weights inside the transformer blocks (:func:`is_muon_matrix` of their
    names), AdamW (:class:`AdamW`) on every other parameter; the twin of
    :class:`light_llm.train.muon.MuonAdamW`, equal to it step for step in float64:

        M = μ M + G;   N = G + μ M;   O = newton_schulz(N)
        W = W (1 - η_μ λ_μ) - η_μ s O

    with s = sqrt(max(1, d_out / d_in)) (``scale="keller"``) or
    sqrt(max(d_out, d_in) / min(d_out, d_in)) (``scale="aspect"``; :func:`update_scale`).

    With ``normuon`` O is first normalised per output neuron (NorMuon,
    :func:`normalise_neurons`), with a second moment v ∈ R^{d_out} per matrix
    (``second_moment``): v_i = β2 v_i + (1 - β2) mean_j(O_ij²), O_ij = O_ij / (sqrt(v_i) + ε),
    O = O ||O_before||_F / (||O||_F + ε); β2 = 0.95, ε = 1e-10.

    ``step(grads, lr)`` takes the schedule's AdamW rate η; the Muon rate is η_μ = η ·
    muon_lr / lr (the schedule scales both) and λ_μ = λ · lr / muon_lr, so that
    η_μ λ_μ = η λ (the same decay per step as AdamW's). μ is the attribute ``momentum``, which
    the NumPy trainer sets before every step from the momentum warmup
    (:func:`light_llm.schedule.muon_momentum`: μ_t = (1 - f) 0.85 + f μ, f = min(t / T_μ, 1)),
    as the PyTorch trainer does for its optimizer."""

    def __init__(
        self,
        params: Params,
        lr: float,
        muon_lr: float = 0.02,
        momentum: float = 0.95,
        betas: tuple[float, float] = (0.9, 0.95),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        embedding_lr: float | None = None,
        orthogonaliser: str = "newton-schulz",
        cautious: bool = False,
        normuon: bool = False,
        scale: str = "keller",
    ) -> None:
        if not (lr > 0 and muon_lr > 0):
            raise ConfigError(f"the learning rates must be positive, got {lr} and {muon_lr}.")
        if not 0.0 <= momentum < 1.0:
            raise ConfigError(f"the Muon momentum must lie in [0, 1), got {momentum}.")
        if orthogonaliser not in ORTHOGONALISERS:
            raise ConfigError(
                f"unknown orthogonaliser {orthogonaliser!r}; known: {', '.join(ORTHOGONALISERS)}."
            )
        self.lr, self.lr_ratio, self.momentum = lr, muon_lr / lr, momentum
        check_scale(scale)
        self.orthogonaliser, self.cautious, self.scale = orthogonaliser, cautious, scale
        self.muon_weight_decay = weight_decay / self.lr_ratio
        self.muon_params = {n: p for n, p in params.items() if is_muon_matrix(n, p.ndim)}
        others = {n: p for n, p in params.items() if n not in self.muon_params}
        self.adamw = AdamW(others, lr, betas, eps, weight_decay, embedding_lr, cautious)
        self.velocity = {name: np.zeros_like(p) for name, p in self.muon_params.items()}
        self.normuon = normuon  # NorMuon's per-neuron second moments, (d_out, 1) each
        self.second_moment = {
            name: np.zeros((p.shape[0], 1), p.dtype)
            for name, p in (self.muon_params.items() if normuon else ())
        }

    def step(self, grads: Params, lr: float | None = None) -> None:
        lr = self.lr if lr is None else lr
        muon_lr = lr * self.lr_ratio
        for name, param in self.muon_params.items():
            grad, momentum = grads[name], self.velocity[name]  # (d_out, d_in)
            momentum *= self.momentum
            momentum += grad
            orthogonal = newton_schulz(grad + self.momentum * momentum, method=self.orthogonaliser)
            if self.normuon:
                orthogonal = normalise_neurons(orthogonal, self.second_moment[name])
            decay(param, orthogonal, muon_lr * self.muon_weight_decay, self.cautious)
            param -= (muon_lr * update_scale(*param.shape, self.scale)) * orthogonal
        self.adamw.step(grads, lr)


def configure_optimizer(params: Params, cfg) -> AdamW | MuonAdamW:
    """The optimizer a resolved :class:`~light_llm.train.config.TrainConfig` asks for, as
    the PyTorch trainer's ``configure_optimizer``: AdamW, or Muon with AdamW."""
    betas = (cfg.beta1, cfg.beta2)
    if cfg.optimizer == "muon":
        return MuonAdamW(
            params,
            cfg.lr,
            cfg.muon_lr,
            cfg.muon_momentum,
            betas,
            weight_decay=cfg.weight_decay,
            embedding_lr=cfg.embedding_lr,
            orthogonaliser=cfg.muon_orthogonaliser,
            cautious=cfg.cautious_weight_decay,
            normuon=cfg.normuon,
            scale=cfg.muon_scale,
        )
    return AdamW(
        params, cfg.lr, betas, weight_decay=cfg.weight_decay, embedding_lr=cfg.embedding_lr
    )


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
