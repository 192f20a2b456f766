"""Muon for the matrices inside the transformer blocks, AdamW for every other parameter, as
one PyTorch optimizer (:class:`MuonAdamW`).

Muon ("MomentUm Orthogonalized by Newton-Schulz", Keller Jordan, 2024) replaces the update
of a weight matrix W (d_out, d_in) with gradient G by the orthogonal factor of its
momentum: if M = U S Vᵀ, the step is along U Vᵀ, every direction of the momentum moved by
the same amount however large its singular value. At step t with learning rate η:

    M  = μ M + G                         momentum buffer (seed 002 §4.1, eq. 5 with τ = 0)
    N  = G + μ M                         Nesterov: the gradient plus the look-ahead
    X0 = N / (||N||_F + ε)               every singular value now <= 1
    Xk = a Xk-1 + (b A + c A²) Xk-1,     A = Xk-1 Xk-1ᵀ,  k = 1..5,  (a, b, c) =
                                         (3.4445, -4.7750, 2.0315)   (X transposed first
                                         when d_out > d_in, so that A is the smaller Gram)
    W  = W (1 - η λ_μ) - η s X5,         s = sqrt(max(1, d_out / d_in))  (``scale="keller"``)
                                         or sqrt(max(d_out, d_in) / min(d_out, d_in))
                                         (``scale="aspect"``: light_llm.muon_spec.update_scale)

The momentum μ is the group's ``momentum``, which the trainer sets before every step
(:func:`light_llm.train.optim.set_muon_momentum`): the run's μ, or under a momentum warmup
of T_μ steps (:func:`light_llm.schedule.muon_momentum`, the NanoGPT speedrun's)

    μ_t = (1 - f) 0.85 + f μ,            f = min(t / T_μ, 1)

``normuon=True`` (NorMuon, :mod:`light_llm.muon_spec`) replaces X5 in the last line by
the same update normalised per output neuron (row i of X5), with a second-moment buffer
v ∈ R^{d_out} per matrix (optimizer state, ``second_moment``, saved with the checkpoint):

    v_i = β2 v_i + (1 - β2) mean_j(X5_ij²)                 β2 = 0.95, v = 0 at the start
    Ô_ij = X5_ij / (sqrt(v_i) + ε);   Ô = Ô ||X5||_F / (||Ô||_F + ε)      ε = 1e-10

One Newton-Schulz step maps each singular value σ of X to p(σ) = aσ + bσ³ + cσ⁵ and keeps
the singular vectors; five steps of this quintic push every σ in (0, 1] into about
[0.7, 1.2], so X5 ≈ U Vᵀ without an SVD. ``orthogonaliser="polar-express"`` takes Polar
Express's five quintics instead, one per step
(:data:`light_llm.muon_spec.POLAR_EXPRESS_COEFFICIENTS`), and ``cautious=True`` decays only
the entries whose update agrees in sign with the weight (Cautious Weight Decay:
W = W - η (u + λ 1[u ⊙ W >= 0] ⊙ W), for Muon's u = scale · X5 and AdamW's
u = m̂ / (sqrt(v̂) + ε) alike). It runs in bfloat16 where that is fast (CUDA, a
CPU with bfloat16 arithmetic) and in the parameter's dtype otherwise (float64 stays float64,
for the comparison with the NumPy engine).

The other parameters take AdamW's step (seed 000 §7; seed 002 §4.1, eqs. 7-9), written out
here as ``torch.optim.AdamW`` computes it, decay on 2-D tensors only:

    W = W (1 - η λ);  m = β1 m + (1-β1) g;  v = β2 v + (1-β2) g²
    W = W - η/(1-β1^t) · m / (sqrt(v)/sqrt(1-β2^t) + ε)

Each param group has a ``kind`` ("muon" or "adamw") and an ``lr_ratio``: the trainer sets
``lr = lr_ratio · lr(t)`` from the one warmup + decay schedule
(:func:`light_llm.train.optim.set_learning_rate`), so the muon group follows it at its own
peak ``muon_lr``. Its weight decay is λ_μ = λ / lr_ratio, so that η_μ λ_μ = η λ: a matrix
shrinks per step as much as under AdamW, whichever optimizer updates it.
"""

from __future__ import annotations

import torch
from torch import nn

from light_llm.errors import ConfigError
from light_llm.muon_spec import (
    NORMUON_BETA2,
    NORMUON_EPS,
    NS_EPS,
    NS_STEPS,
    ORTHOGONALISERS,
    check_scale,
    is_muon_matrix,
    orthogonaliser_steps,
    update_scale,
)
from light_llm.train.param_groups import embedding_group
from light_llm.train.precision import cpu_has_native_bfloat16

KINDS = ("muon", "adamw")


def is_tall(matrix: torch.Tensor) -> bool:
    """More rows than columns: :func:`newton_schulz` orthogonalises its transpose."""
    return matrix.shape[-2] > matrix.shape[-1]


def newton_schulz(
    matrix: torch.Tensor,
    steps: int = NS_STEPS,
    dtype: torch.dtype | None = None,
    method: str = "newton-schulz",
) -> torch.Tensor:
    """The quintic Newton-Schulz orthogonalisation of a matrix (Keller Jordan's Muon, or
    Polar Express's per-step quintics with ``method="polar-express"``; equations in the
    module docstring and :func:`light_llm.muon_spec.orthogonaliser_steps`): about U Vᵀ for
    matrix = U S Vᵀ, in ``dtype`` (default: the matrix's). A stack (..., rows, cols) is
    orthogonalised matrix by matrix, in three batched products per step, the last two with
    the step's sums inside them (``baddbmm``: b A + c A², then a X + (...) X); on a 2-core
    AMD EPYC (AVX2, float32) that made the default's training step 2-3% shorter than
    products and sums apart (docs/recipe.md, "1200 iterations in float32")."""
    margin, coefficients = orthogonaliser_steps(method, steps)
    x = matrix.to(dtype or matrix.dtype)  # (..., rows, cols)
    tall = is_tall(x)
    if tall:  # (..., r, n) with r = min(rows, cols): the Gram matrix below is r x r,
        x = x.mT.contiguous()  # laid out row by row (bfloat16 products of a view are slower)
    x = x / (margin * torch.linalg.matrix_norm(x, keepdim=True) + NS_EPS)
    stack_shape = x.shape
    x = x.reshape(-1, *x.shape[-2:])  # (k, r, n): one batch of products per step
    for a, b, c in coefficients:
        gram = x @ x.mT  # A: (k, r, r)
        polynomial = torch.baddbmm(gram, gram, gram, beta=b, alpha=c)  # b A + c A²
        x = torch.baddbmm(x, polynomial, x, beta=a)  # a X + (b A + c A²) X
    x = x.reshape(stack_shape)
    return x.mT if tall else x


def unwrapped(method):
    """The function a decorator wrapped (its ``__wrapped__``, functools.wraps' convention), or
    ``method`` itself where nothing wraps it."""
    return getattr(method, "__wrapped__", method)


# On a CPU, a Newton-Schulz stack of fewer multiply-adds than this in its Gram products
# (k r² n for k matrices of r x n, r <= n) runs in float32, not bfloat16: the casts and the
# smaller products' overheads cost more than bfloat16's arithmetic saves. Float32 against
# bfloat16, 2 threads, a 2-core Xeon with AMX (benchmarks/bench_precision.py): 3x96x96 (2.7
# million) 0.80-0.96x, 3x96x128 (3.5 million) 0.88x, 3x112x112 (4.2 million) 0.95x; 3x96x256
# (7.1 million) 1.05-1.09x, 3x96x288 (8.0 million) 1.08x, 4x96x384 (14 million) 1.23x.
SMALL_ORTHOGONALISATION_MACS = 6 * 2**20


def orthogonalisation_dtype(stack: torch.Tensor) -> torch.dtype:
    """The number format Newton-Schulz runs in for ``stack`` ((..., rows, cols), or one
    matrix): bfloat16 for float32/half matrices on CUDA, and on a CPU with bfloat16 arithmetic
    for all but small stacks (:data:`SMALL_ORTHOGONALISATION_MACS`); the matrices' own dtype
    otherwise (float64 stays float64).

    bfloat16 runs the larger stacks' products at up to twice the speed, one thread, a 2-core
    AMD EPYC with AVX-512 BF16 (benchmarks/bench_precision.py), float32 against bfloat16:
    4x288x96 3.5 / 2.1 ms, 4x384x96 4.5 / 2.5 ms, 4x512x128 10.7 / 5.0 ms (a tall stack
    transposed into a contiguous copy first: read through the transposed view, bfloat16 took
    1.3x as long)."""
    if stack.dtype == torch.float64:
        return torch.float64
    if stack.is_cuda:
        return torch.bfloat16
    if stack.device.type != "cpu" or not cpu_has_native_bfloat16():
        return stack.dtype
    short, long = sorted(stack.shape[-2:])
    count = stack.numel() // max(short * long, 1)  # matrices in the stack
    small = count * short * short * long < SMALL_ORTHOGONALISATION_MACS
    return stack.dtype if small else torch.bfloat16


class MuonAdamW(torch.optim.Optimizer):
    """Muon on the param groups of ``kind="muon"`` (2-D tensors only), AdamW on those of
    ``kind="adamw"`` (see the module docstring). Group options: ``lr``, ``lr_ratio``,
    ``weight_decay``, ``cautious`` (Cautious Weight Decay), ``momentum`` μ,
    ``orthogonaliser``, ``normuon`` and ``scale`` (muon), ``betas`` and ``eps`` (adamw)."""

    # torch.optim.Optimizer wraps these four methods so that torch.compile leaves them alone,
    # and the wrapper imports torch._dynamo the first time one runs: 1.8 s on a 2-core CPU,
    # before a run's first step. This optimizer's step is plain eager code that nothing
    # compiles, so it takes the methods unwrapped and never loads the compiler.
    add_param_group = unwrapped(torch.optim.Optimizer.add_param_group)
    zero_grad = unwrapped(torch.optim.Optimizer.zero_grad)
    state_dict = unwrapped(torch.optim.Optimizer.state_dict)
    load_state_dict = unwrapped(torch.optim.Optimizer.load_state_dict)

    def __init__(
        self,
        params,
        lr: float,
        momentum: float = 0.95,
        betas: tuple[float, float] = (0.9, 0.95),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        orthogonaliser: str = "newton-schulz",
        cautious: bool = False,
        normuon: bool = False,
        scale: str = "keller",
    ) -> None:
        if not 0.0 <= momentum < 1.0:
            raise ConfigError(f"the Muon momentum must lie in [0, 1), got {momentum}.")
        if orthogonaliser not in ORTHOGONALISERS:
            raise ConfigError(
                f"unknown orthogonaliser {orthogonaliser!r}; known: {', '.join(ORTHOGONALISERS)}."
            )
        check_scale(scale)
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ConfigError(f"AdamW betas must lie in [0, 1), got {betas}.")
        defaults = {
            "lr": lr,
            "lr_ratio": 1.0,
            "kind": "adamw",
            "momentum": momentum,
            "betas": betas,
            "eps": eps,
            "weight_decay": weight_decay,
            "orthogonaliser": orthogonaliser,
            "cautious": cautious,
            "normuon": normuon,
            "scale": scale,
        }
        super().__init__(params, defaults)
        for group in self.param_groups:
            if group["kind"] not in KINDS:
                raise ConfigError(
                    f"a param group's kind must be muon or adamw, not {group['kind']!r}."
                )
            if group["kind"] == "muon" and any(p.dim() != 2 for p in group["params"]):
                raise ConfigError(
                    "Muon orthogonalises matrices; its group holds a tensor that is not 2-D."
                )

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            with_grad = [p for p in group["params"] if p.grad is not None]
            if group["kind"] == "adamw":
                for parameter in with_grad:
                    self._adamw_update(parameter, parameter.grad, group, self.state[parameter])
                continue
            same_shape: dict[tuple, list[torch.Tensor]] = {}
            for parameter in with_grad:  # one batched Newton-Schulz per shape, either way up
                key = (tuple(sorted(parameter.shape)), parameter.dtype, parameter.device)
                same_shape.setdefault(key, []).append(parameter)
            for parameters in same_shape.values():
                self._muon_update(parameters, group)
        return loss

    def _muon_update(self, parameters: list[torch.Tensor], group: dict) -> None:
        """Muon's step for matrices of one shape either way up ((r, n) and (n, r)),
        orthogonalised together: a tall one as its transpose, as :func:`newton_schulz` would
        take it alone, since NS(Nᵀ) = NS(N)ᵀ."""
        lr, mu = group["lr"], group["momentum"]
        tall = [is_tall(parameter) for parameter in parameters]
        nesterov = []
        for parameter, transposed in zip(parameters, tall, strict=True):
            state = self.state[parameter]
            if "momentum_buffer" not in state:
                state["momentum_buffer"] = torch.zeros_like(parameter)
            momentum = state["momentum_buffer"]  # (d_out, d_in)
            momentum.mul_(mu).add_(parameter.grad)
            look_ahead = parameter.grad.add(momentum, alpha=mu)
            nesterov.append(look_ahead.mT if transposed else look_ahead)  # (r, n)
        stack = torch.stack(nesterov)  # (k, r, n)
        dtype = orthogonalisation_dtype(stack)
        orthogonal = newton_schulz(stack, dtype=dtype, method=group["orthogonaliser"])
        for parameter, transposed, update in zip(
            parameters, tall, orthogonal.unbind(), strict=True
        ):
            scale = update_scale(*parameter.shape, group["scale"])
            update = (update.mT if transposed else update).to(parameter.dtype)
            if group["normuon"]:
                state = self.state[parameter]
                if "second_moment" not in state:
                    state["second_moment"] = parameter.new_zeros(parameter.shape[0], 1)
                update = normalise_neurons(update, state["second_moment"])
            decay(parameter, update, lr * group["weight_decay"], group["cautious"])
            parameter.add_(update, alpha=-lr * scale)

    @staticmethod
    def _adamw_update(parameter, grad, group, state) -> None:
        lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
        if "step" not in state:
            state["step"] = 0
            state["exp_avg"] = torch.zeros_like(parameter)
            state["exp_avg_sq"] = torch.zeros_like(parameter)
        state["step"] += 1
        t, m, v = state["step"], state["exp_avg"], state["exp_avg_sq"]
        m.mul_(beta1).add_(grad, alpha=1.0 - beta1)
        v.mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)
        denominator = (v.sqrt() / (1.0 - beta2**t) ** 0.5).add_(eps)
        if group["cautious"] and group["weight_decay"]:  # the update's sign decides the decay
            decay(parameter, m / denominator, lr * group["weight_decay"], cautious=True)
        else:
            parameter.mul_(1.0 - lr * group["weight_decay"])
        parameter.addcdiv_(m, denominator, value=-lr / (1.0 - beta1**t))


def normalise_neurons(
    update: torch.Tensor,
    second_moment: torch.Tensor,
    beta2: float = NORMUON_BETA2,
    eps: float = NORMUON_EPS,
) -> torch.Tensor:
    """NorMuon's update (module docstring): ``update`` O (d_out, d_in) with each row divided
    by the root of its neuron's second moment v (d_out, 1), which this updates in place
    (v = β2 v + (1 - β2) mean_j O_ij²), then scaled back to O's Frobenius norm."""
    second_moment.mul_(beta2).add_((update * update).mean(dim=-1, keepdim=True), alpha=1 - beta2)
    normalised = update / (second_moment.sqrt() + eps)
    norm = torch.linalg.matrix_norm(update)
    return normalised * (norm / (torch.linalg.matrix_norm(normalised) + eps))


def decay(parameter: torch.Tensor, update: torch.Tensor, rate: float, cautious: bool) -> None:
    """Decoupled weight decay W = W (1 - η λ) with ``rate`` = η λ, before the step along
    ``update``; with ``cautious`` only where update and weight agree in sign,
    W = W - η λ 1[u ⊙ W >= 0] ⊙ W (Cautious Weight Decay, :mod:`light_llm.muon_spec`)."""
    if not rate:
        return
    if cautious:
        parameter.sub_(parameter * (update * parameter >= 0), alpha=rate)
    else:
        parameter.mul_(1.0 - rate)


def muon_param_groups(
    model: nn.Module,
    lr: float,
    muon_lr: float,
    weight_decay: float,
    embedding_lr: float | None = None,
) -> list[dict]:
    """The param groups of :class:`MuonAdamW` for ``model``: the block matrices
    (:func:`~light_llm.muon_spec.is_muon_matrix`) with Muon at peak ``muon_lr`` (its group's
    ``lr``), the
    other tensors of two or more dimensions with AdamW and decay, the 1-D ones (biases,
    gains) with AdamW and no decay. A tied matrix (wte = lm_head) is listed once. With
    ``embedding_lr`` the embedding tables form an AdamW group of their own
    (:func:`~light_llm.train.param_groups.embedding_group`)."""
    ratio = muon_lr / lr
    tables, in_tables = embedding_group(model, lr, embedding_lr, weight_decay)
    muon, decay, no_decay = [], [], []
    for name, parameter in model.named_parameters():  # a shared tensor comes once
        if not parameter.requires_grad or id(parameter) in in_tables:
            continue
        if is_muon_matrix(name, parameter.dim()):
            muon.append(parameter)
        else:
            (decay if parameter.dim() >= 2 else no_decay).append(parameter)
    groups = [
        {
            "params": muon,
            "kind": "muon",
            "lr": muon_lr,
            "lr_ratio": ratio,
            "weight_decay": weight_decay / ratio,
        },
        *({**group, "kind": "adamw"} for group in tables),
        {"params": decay, "kind": "adamw", "weight_decay": weight_decay},
        {"params": no_decay, "kind": "adamw", "weight_decay": 0.0},
    ]
    return [group for group in groups if group["params"]]


def configure_muon(
    model: nn.Module,
    lr: float,
    muon_lr: float,
    momentum: float,
    betas: tuple[float, float],
    weight_decay: float,
    embedding_lr: float | None = None,
    orthogonaliser: str = "newton-schulz",
    cautious: bool = False,
    normuon: bool = False,
    scale: str = "keller",
) -> MuonAdamW:
    """:class:`MuonAdamW` over ``model``'s parameters (:func:`muon_param_groups`), the
    learning rates set to their peaks ``muon_lr`` (muon) and ``lr`` (adamw)."""
    if not muon_lr > 0 or not lr > 0:
        raise ConfigError(f"the learning rates must be positive, got lr={lr}, muon_lr={muon_lr}.")
    if weight_decay < 0:
        raise ConfigError(f"weight decay must be >= 0, got {weight_decay}.")
    groups = muon_param_groups(model, lr, muon_lr, weight_decay, embedding_lr)
    return MuonAdamW(
        groups,
        lr,
        momentum=momentum,
        betas=betas,
        weight_decay=weight_decay,
        orthogonaliser=orthogonaliser,
        cautious=cautious,
        normuon=normuon,
        scale=scale,
    )
