"""The learning-rate schedules both engines follow: linear warmup, then cosine decay to a
floor (seed 000 §7, seed 002 §4.2), or warmup-stable-decay: the peak held, then a linear
or 1 - sqrt cooldown to the floor; Muon's momentum warmup (:func:`muon_momentum`); and the
batch-size and sequence-length warmups (:func:`warmup_size`: the sequences of an iteration's
micro-batches, the tokens of their windows) with the training tokens they count
(:func:`tokens_before`). Plain arithmetic, no tensor library.
"""

from __future__ import annotations

import math
from itertools import pairwise

from light_llm.errors import ConfigError

SCHEDULES = ("cosine", "wsd")
# how warmup-stable-decay's cooldown falls from the peak to the floor: in a straight line, or
# as 1 - sqrt of its progress (Hägele et al. 2024, "Scaling Laws and Compute-Optimal Training
# Beyond Fixed Training Durations"): faster at first, slower near the floor
COOLDOWN_SHAPES = ("linear", "sqrt")
# where Muon's momentum starts under --muon-momentum-warmup (the NanoGPT speedrun's 0.85)
MUON_MOMENTUM_WARMUP_START = 0.85


def learning_rate(
    step: int,
    max_lr: float,
    min_lr: float,
    warmup_iters: int,
    lr_decay_iters: int,
    cooldown_fraction: float | None = None,
    cooldown_shape: str = "linear",
) -> float:
    """Learning rate at optimiser step ``step`` (0-based): warmup + cosine (seed 000 §7,
    seed 002 §4.2, eq. 10 and the cosine formula after it), or with ``cooldown_fraction``
    f warmup + stable + decay ("WSD", the NanoGPT speedrun's and MiniCPM's), the decay
    linear, or with ``cooldown_shape`` "sqrt" falling as 1 - sqrt of its progress p
    (Hägele et al. 2024):

        step <  T_w:          lr = lr_max (step + 1) / (T_w + 1)
        cosine, T_w <= step <= T_d:
                              r  = (step - T_w) / (T_d - T_w)
                              lr = lr_min + 0.5 (1 + cos(pi r)) (lr_max - lr_min)
        WSD, T_c = T_d - f (T_d - T_w):
            T_w <= step <= T_c:   lr = lr_max
            T_c <  step <= T_d:   p  = (step - T_c) / (T_d - T_c)
                linear:           lr = lr_min + (1 - p) (lr_max - lr_min)
                sqrt:             lr = lr_min + (1 - sqrt(p)) (lr_max - lr_min)
        step >  T_d:          lr = lr_min

    The warmup counts from step + 1 so that the very first step already moves (the seed's
    t / T_w would give 0 at t = 0); it reaches lr_max at step T_w, where the cosine (or the
    stable phase) starts. Unlike the seed's version, the decay ends at a floor lr_min instead
    of 0. With an empty decay phase (T_d == T_w) every step from T_w on uses lr_min.
    """
    if warmup_iters < 0 or lr_decay_iters < warmup_iters:
        raise ConfigError(
            f"the schedule needs 0 <= warmup_iters <= lr_decay_iters, got "
            f"warmup_iters={warmup_iters} and lr_decay_iters={lr_decay_iters}."
        )
    if cooldown_fraction is not None and not 0 < cooldown_fraction <= 1:
        raise ConfigError(
            f"the cooldown is a fraction of the steps after warmup, in (0, 1], got "
            f"{cooldown_fraction}."
        )
    if cooldown_shape not in COOLDOWN_SHAPES:
        raise ConfigError(
            f"the cooldown's shape is {' or '.join(COOLDOWN_SHAPES)}, got {cooldown_shape!r}."
        )
    if step < warmup_iters:
        return max_lr * (step + 1) / (warmup_iters + 1)
    if step > lr_decay_iters or lr_decay_iters == warmup_iters:
        return min_lr
    if cooldown_fraction is not None:
        cooldown_start = lr_decay_iters - cooldown_fraction * (lr_decay_iters - warmup_iters)
        if step <= cooldown_start:
            return max_lr
        if cooldown_shape == "sqrt":
            left = 1.0 - math.sqrt((step - cooldown_start) / (lr_decay_iters - cooldown_start))
        else:  # 1 - p, written as the share of the cooldown still ahead
            left = (lr_decay_iters - step) / (lr_decay_iters - cooldown_start)
        return min_lr + left * (max_lr - min_lr)
    ratio = (step - warmup_iters) / (lr_decay_iters - warmup_iters)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (max_lr - min_lr)


def muon_momentum(
    step: int, momentum: float, warmup_iters: int, start: float = MUON_MOMENTUM_WARMUP_START
) -> float:
    """Muon's momentum μ_t at optimiser step ``step`` (0-based): with ``warmup_iters``
    T_μ > 0 it moves linearly from ``start`` μ_0 (0.85) to the run's ``momentum`` μ over the
    first T_μ steps (the NanoGPT speedrun's "Muon momentum warmup"), then stays at μ:

        f   = min(step / T_μ, 1)
        μ_t = (1 - f) μ_0 + f μ

    With T_μ = 0 (off) it is μ at every step. A μ below μ_0 is reached the same way, from
    above (the formula unchanged), rather than refused: the warmup then lowers the momentum.
    The trainers of both engines set the optimizer's μ from it before every step, so a
    resumed run goes on with the momentum of its step."""
    if warmup_iters < 0:
        raise ConfigError(f"the momentum warmup must be >= 0 steps, got {warmup_iters}.")
    if warmup_iters == 0:
        return momentum
    fraction = min(step / warmup_iters, 1.0)
    return (1.0 - fraction) * start + fraction * momentum


def warmup_size(iteration: int, size: int, warmup_iters: int, start: int | None) -> int:
    """The size of iteration ``iteration`` (0-based) under a step warmup: ``start`` S_0 for
    the first ``warmup_iters`` N iterations, then the run's ``size`` S:

        S_t = S_0  if t < N,   S_t = S  otherwise

    With N = 0 (off) it is S at every iteration. ``--batch-warmup N --batch-warmup-size B0``
    sizes every micro-batch of iteration t so (B_t sequences; the NanoGPT speedrun's batch-size
    warmup), ``--context-warmup N --context-warmup-size T0`` its windows (T_t tokens, a
    sequence-length warmup); both trainers draw their batches with it, so a resumed run goes
    on with the sizes of its iteration."""
    if warmup_iters < 0:
        raise ConfigError(f"a size warmup must last >= 0 iterations, got {warmup_iters}.")
    if warmup_iters == 0 or iteration >= warmup_iters:
        return size
    if start is None:
        raise ConfigError("a size warmup of more than 0 iterations needs its starting size.")
    return start


def tokens_before(
    iteration: int,
    grad_accum: int,
    block_size: int,
    batch_size: int,
    batch_warmup: int = 0,
    batch_warmup_size: int | None = None,
    context_warmup: int = 0,
    context_warmup_size: int | None = None,
) -> int:
    """The training tokens of iterations 0 .. ``iteration`` - 1: each iteration t trains on
    G micro-batches of B_t windows of T_t tokens (both :func:`warmup_size`: the batch-size
    warmup's and the sequence-length warmup's), so

        tokens(i) = G sum_(t < i) B_t T_t

    summed here over the stretches where B_t and T_t are both constant (exact integers);
    with the batch-size warmup alone, G T (min(i, N) B_0 + max(i - N, 0) B)."""
    edges = {0, min(batch_warmup, iteration), min(context_warmup, iteration), max(iteration, 0)}
    return sum(
        (end - first)
        * grad_accum
        * warmup_size(first, batch_size, batch_warmup, batch_warmup_size)
        * warmup_size(first, block_size, context_warmup, context_warmup_size)
        for first, end in pairwise(sorted(edges))
    )
