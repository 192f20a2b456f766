"""Worked examples of the optimiser side of training: one AdamW step, the warmup + cosine
learning-rate schedule and global-norm gradient clipping (seed 000 §7, §10; seed 002 §4), by
``light_llm.train.optim`` (``configure_adamw``, ``learning_rate``, ``clip_grad_norm``), the
functions the trainer calls."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from light_llm.checkpoints import resolve_checkpoint_dir
from light_llm.checkpoints.run import (
    MetricsLog,
    evaluation_records,
    read_trainer_state,
    training_records,
)
from light_llm.errors import CheckpointError
from light_llm.explain import plots
from light_llm.explain.steps import Example, Step, value_of
from light_llm.schedule import learning_rate
from light_llm.train.config import DEFAULT_COOLDOWN_SHAPE, TrainConfig
from light_llm.train.optim import clip_grad_norm, configure_adamw

ADAMW_WEIGHT = [[0.5, -0.3, 0.8], [-0.2, 0.4, 0.1]]
ADAMW_BIAS = [0.1, -0.1]
ADAMW_WEIGHT_GRAD = [[0.1, -0.2, 0.3], [0.05, 0.0, -0.4]]
ADAMW_BIAS_GRAD = [0.2, -0.05]
ADAMW_LR = 0.01
ADAMW_BETAS = (0.9, 0.95)
ADAMW_WEIGHT_DECAY = 0.1
ADAMW_EPS = 1e-8
SEED_000_ADAMW = "seed 000 §7, AdamW"


def adamw_step() -> list[Step]:
    """One AdamW step on a 3 -> 2 linear layer (seed 000 §7; seed 002 §4.1, eqs. 7-9):
    m = β1 m + (1-β1) g, v = β2 v + (1-β2) g², bias correction, θ -= α (m̂/(√v̂+ε) + λθ),
    with decay on the weight matrix only, as ``configure_adamw`` sets it up for training."""
    layer = nn.Linear(3, 2).double()
    with torch.no_grad():
        layer.weight.copy_(torch.tensor(ADAMW_WEIGHT, dtype=torch.float64))
        layer.bias.copy_(torch.tensor(ADAMW_BIAS, dtype=torch.float64))
    layer.weight.grad = torch.tensor(ADAMW_WEIGHT_GRAD, dtype=torch.float64)
    layer.bias.grad = torch.tensor(ADAMW_BIAS_GRAD, dtype=torch.float64)
    weight_before = layer.weight.detach().clone()
    bias_before = layer.bias.detach().clone()
    optimizer = configure_adamw(
        layer, ADAMW_WEIGHT_DECAY, ADAMW_LR, ADAMW_BETAS, device_type="cpu", eps=ADAMW_EPS
    )
    optimizer.step()
    state = optimizer.state[layer.weight]
    m, v = state["exp_avg"], state["exp_avg_sq"]
    beta1, beta2 = ADAMW_BETAS
    m_hat = m / (1 - beta1)  # t = 1
    v_hat = v / (1 - beta2)
    direction = m_hat / (v_hat.sqrt() + ADAMW_EPS)
    settings = (
        f"α = {ADAMW_LR}, β1 = {beta1}, β2 = {beta2}, ε = {ADAMW_EPS:g}, "
        f"λ = {ADAMW_WEIGHT_DECAY} on the weight matrix, 0 on the bias"
    )
    return [
        Step(
            "Weight θ before the step",
            f"Assumed: a 3 -> 2 linear layer with these weights and gradients; {settings} "
            "(training decays weight matrices only, never biases or norm gains).",
            weight_before,
            SEED_000_ADAMW,
            key="weight-theta-before-the-step",
        ),
        Step(
            "Gradient g of the weight",
            "dL/dθ from the backward pass.",
            layer.weight.grad,
            SEED_000_ADAMW,
            key="gradient-g-of-the-weight",
        ),
        Step(
            "m_1 = β1 m_0 + (1 - β1) g",
            "First moment (momentum), from the optimizer's state; m_0 = 0, so m_1 = 0.1 g.",
            m,
            f"{SEED_000_ADAMW}; seed 002 §4.1, eq. 7",
            key="m-1-beta-1-m-0-1-beta-1-g",
        ),
        Step(
            "v_1 = β2 v_0 + (1 - β2) g²",
            "Second moment, from the optimizer's state; v_0 = 0, so v_1 = 0.05 g².",
            v,
            f"{SEED_000_ADAMW}; seed 002 §4.1, eq. 8",
            key="v-1-beta-2-v-0-1-beta-2-g-2",
        ),
        Step(
            "m̂ = m / (1 - β1^t), v̂ = v / (1 - β2^t), t = 1: m̂ (v̂ = g² likewise)",
            "Bias correction undoes the pull towards the zero start: at t = 1, m̂ = g and v̂ = g².",
            m_hat,
            f"{SEED_000_ADAMW}, bias correction",
            key="m-m-1-beta-1-t-v",
        ),
        Step(
            "m̂ / (sqrt(v̂) + ε)",
            "At the first step this is g / |g| = ±1 wherever g ≠ 0 (and 0 where g = 0): Adam "
            "moves every weight by about α whatever the gradient's size.",
            direction,
            f"{SEED_000_ADAMW}; seed 002 §4.1, eq. 9",
            key="m-sqrt-v-eps",
        ),
        Step(
            "Weight after: θ - α (m̂/(sqrt(v̂) + ε) + λ θ)",
            "PyTorch's AdamW, set up as training sets it up: the Adam step plus the decoupled "
            "decay α λ θ.",
            layer.weight,
            SEED_000_ADAMW,
            key="weight-after-theta-alpha-m-sqrt-v",
        ),
        Step(
            "Change of the weight",
            "θ_after - θ_before = -α (±1) - α λ θ_before.",
            layer.weight.detach() - weight_before,
            SEED_000_ADAMW,
            key="change-of-the-weight",
        ),
        Step(
            "Bias: before, gradient, after",
            "The bias gets the same Adam step but no decay (λ = 0 for 1-D tensors).",
            torch.stack([bias_before, layer.bias.grad, layer.bias.detach()]),
            SEED_000_ADAMW,
            rows=("before", "gradient", "after"),
            key="bias-before-gradient-after",
        ),
    ]


@dataclass(frozen=True)
class ScheduleSettings:
    """The schedule settings of a training run (``learning_rate``'s arguments), its length,
    and where they come from."""

    max_lr: float
    min_lr: float
    warmup_iters: int
    lr_decay_iters: int
    max_iters: int
    source: str
    logged: tuple[tuple[int, float], ...] = ()  # (step, lr) the run logged, in step order
    cooldown_fraction: float | None = None  # warmup-stable-decay's; None: the cosine
    cooldown_shape: str = "linear"  # warmup-stable-decay's cooldown: linear or sqrt
    other_peaks: str = ""  # the rates other parameter groups take on the same shape

    @classmethod
    def from_train_config(cls, config: TrainConfig, source: str) -> ScheduleSettings:
        """The schedule of a resolved :class:`TrainConfig` (a run from before the schedule
        was a setting has none: the cosine)."""
        wsd = config.lr_schedule == "wsd"
        return cls(
            config.lr,
            config.min_lr,
            config.warmup_iters,
            config.lr_decay_iters,
            config.max_iters,
            source,
            cooldown_fraction=config.cooldown_fraction if wsd else None,
            cooldown_shape=config.cooldown_shape or DEFAULT_COOLDOWN_SHAPE,
            other_peaks=other_peaks(config),
        )

    def rate(self, step: int) -> float:
        """The learning rate at ``step``, by :func:`light_llm.schedule.learning_rate`."""
        return learning_rate(
            step,
            self.max_lr,
            self.min_lr,
            self.warmup_iters,
            self.lr_decay_iters,
            self.cooldown_fraction,
            self.cooldown_shape,
        )

    @property
    def decay_start(self) -> int:
        """Where the decay starts: the end of warmup (cosine), or of the stable phase (WSD)."""
        warmup, decay_end = self.warmup_iters, self.lr_decay_iters
        if self.cooldown_fraction is None:
            return warmup
        return math.ceil(decay_end - self.cooldown_fraction * (decay_end - warmup))

    def landmarks(self) -> list[int]:
        """Steps worth a look: the start, the warmup, the quarters of the decay, the end."""
        warmup, start, decay_end = self.warmup_iters, self.decay_start, self.lr_decay_iters
        decay = [start + (decay_end - start) * k // 4 for k in range(5)]
        steps = {0, warmup // 2, max(warmup - 1, 0), warmup, *decay, max(self.max_iters - 1, 0)}
        return sorted(steps)


def other_peaks(config: TrainConfig) -> str:
    """The sentence naming the peaks of the parameter groups that do not take lr_max (Muon's
    block matrices, the token table's own rate), each lr(t) scaled by its peak / lr_max; ""
    when every parameter takes lr_max."""
    groups = []
    if config.optimizer == "muon":
        groups.append(f"the blocks' matrices {config.muon_lr:g} (Muon)")
    if config.embedding_lr is not None:
        groups.append(f"the token table {config.embedding_lr:g}")
    if not groups:
        return ""
    return (
        f" lr_max is the rate of the AdamW parameters (the head, the norms' gains); "
        f"{' and '.join(groups)} peak at their own rates on the same shape (each lr(t) "
        "times its peak / lr_max)."
    )


def default_schedule() -> ScheduleSettings:
    """The schedule of ``light-llm train`` with no flags (its default preset and recipe)."""
    config = TrainConfig().resolve()
    return ScheduleSettings.from_train_config(
        config, f"the default light-llm train run (preset {config.preset})"
    )


def run_schedule(folder: str | Path) -> ScheduleSettings:
    """The schedule of the training run saved in ``folder`` (OUT or OUT/checkpoint), read
    from its ``trainer_state.json``, with the learning rates it logged in ``metrics.jsonl``
    (the schedule it really followed, which a resume that re-stretched the cosine changed)."""
    checkpoint = resolve_checkpoint_dir(folder)
    state = read_trainer_state(checkpoint)
    try:
        config = TrainConfig.from_dict(state["resolved_config"])
    except (KeyError, TypeError) as exc:
        raise CheckpointError(
            f"{checkpoint} holds no readable training configuration ({exc})."
        ) from None
    settings = ScheduleSettings.from_train_config(config, f"the training run in {folder}")
    records = MetricsLog(checkpoint.parent).records()
    # the steps' own records; a run that logged none (the NumPy engine) has its evaluations'
    records = training_records(records) or evaluation_records(records)
    logged = {int(r["iter"]): float(r["lr"]) for r in records if "lr" in r and "iter" in r}
    return dataclasses.replace(settings, logged=tuple(sorted(logged.items())))


def halfway_sentence(s: ScheduleSettings, at_the_middle: str) -> str:
    """The sentence on the rate half way through the decay: at the integer step M there,
    lr_min + x (lr_max - lr_min) with x the schedule's own (a short decay's middle falls
    between steps), beside ``at_the_middle``, what the shape gives at its exact middle; ""
    when nothing decays."""
    start, end = s.decay_start, s.lr_decay_iters
    if end <= start or s.max_lr <= s.min_lr:
        return ""
    middle = (start + end) // 2
    share = (s.rate(middle) - s.min_lr) / (s.max_lr - s.min_lr)
    phase = "decay" if s.cooldown_fraction is None else "cooldown"
    return (
        f" At t = {middle}, half way through the {phase}, the rate is lr_min + {share:.3f} "
        f"(lr_max - lr_min) (the shape gives {at_the_middle} at its exact middle)."
    )


def lr_schedule(settings: ScheduleSettings | None = None) -> list[Step]:
    """The learning-rate schedule of a training configuration (default: ``light-llm
    train``'s), by :func:`light_llm.schedule.learning_rate` at its landmark steps: warmup +
    cosine (seed 000 §7; seed 002 §4.2, eq. 10 and the cosine formula), or warmup, stable
    phase and a linear or 1 - sqrt cooldown (WSD)."""
    s = settings or default_schedule()
    steps = s.landmarks()
    rates = [s.rate(step) for step in steps]
    columns = tuple(f"t={t}" for t in steps)
    sqrt = s.cooldown_fraction is not None and s.cooldown_shape == "sqrt"
    halfway = halfway_sentence(s, "1 - sqrt(1/2) = 0.293" if sqrt else "0.5")
    if s.cooldown_fraction is None:
        lengths = "Warmup until T_w, cosine decay until T_d, the floor after that."
        formula = (
            "Linear warmup lr_max (t + 1) / (T_w + 1), then lr_min + 0.5 (1 + cos(π r)) "
            "(lr_max - lr_min) with r = (t - T_w) / (T_d - T_w), then lr_min. Unlike the "
            "seeds' t / T_w, the first step already moves, and the cosine ends at lr_min, "
            f"not 0.{halfway}"
        )
    else:
        lengths = (
            f"Warmup until T_w, the peak held until T_c = T_d - f (T_d - T_w) with f = "
            f"{s.cooldown_fraction:g} (warmup-stable-decay), a "
            f"{'1 - sqrt' if sqrt else 'linear'} cooldown until T_d, the floor after that."
        )
        cooldown = (
            "lr_min + (1 - sqrt(p)) (lr_max - lr_min) with p = (t - T_c) / (T_d - T_c), "
            "falling fast at first and slowly near the floor (Hägele et al. 2024)"
            if sqrt
            else "lr_min + (T_d - t) / (T_d - T_c) (lr_max - lr_min)"
        )
        formula = (
            "Linear warmup lr_max (t + 1) / (T_w + 1) (the first step already moves), then "
            f"lr_max until T_c, then {cooldown}, then lr_min.{halfway} This is not the seeds' "
            "cosine (seed 000 §7): the NanoGPT speedrun's schedule"
            + (
                " with Hägele et al.'s cooldown (docs/recipe.md compares the two shapes)."
                if sqrt
                else ", measured better for light-llm's default (docs/recipe.md)."
            )
        )
    return [
        Step(
            "Peak and floor: lr_max, lr_min",
            f"The schedule of {s.source}.{s.other_peaks}",
            [s.max_lr, s.min_lr],
            "seed 000 §7, Learning Rate Scheduling",
            columns=("max_lr", "min_lr"),
            key="peak-and-floor-lr-max-lr-min",
        ),
        Step(
            "Lengths: warmup_iters T_w, lr_decay_iters T_d, max_iters",
            lengths,
            [s.warmup_iters, s.lr_decay_iters, s.max_iters],
            "seed 000 §7; seed 002 §4.2",
            columns=("warmup_iters", "lr_decay_iters", "max_iters"),
            key="lengths-warmup-iters-t-w-lr-decay",
        ),
        Step(
            "Learning rate at selected steps",
            formula,
            rates,
            "seed 000 §7, Learning Rate Scheduling; seed 002 §4.2",
            columns=columns,
            key="learning-rate-at-selected-steps",
        ),
        Step(
            "lr / max_lr",
            "The same, as a fraction of the peak.",
            [rate / s.max_lr for rate in rates],
            "seed 000 §7",
            columns=columns,
            key="lr-max-lr",
        ),
        *logged_rates(s),
    ]


def logged_rates(s: ScheduleSettings) -> list[Step]:
    """The learning rates a run logged in metrics.jsonl, at up to 9 of its logged steps (a
    step for the run's own record; none for a schedule that did not run)."""
    if not s.logged:
        return []
    picks = sorted({round(k * (len(s.logged) - 1) / 8) for k in range(9)})
    chosen = [s.logged[index] for index in picks]
    return [
        Step(
            "Learning rate the run logged (metrics.jsonl)",
            "What the run really used, at some of its logged steps; it differs from the "
            "formula above where a resume changed the schedule (--restretch-schedule).",
            [rate for _, rate in chosen],
            "seed 000 §7",
            columns=tuple(f"t={step}" for step, _ in chosen),
            key="learning-rate-the-run-logged-metrics-jsonl",
        )
    ]


CLIP_WEIGHT_GRAD = [[24.0, -18.0], [0.0, 0.0]]  # norm 30
CLIP_BIAS_GRAD = [0.0, 40.0]  # norm 40; together sqrt(30² + 40²) = 50
CLIP_MAX_NORM = 5.0
SEED_CLIP = "seed 002 §4.3, eq. 11 (again §13.3, eq. 53); seed 000 §10"
SEED_CLIP_EXAMPLE = "seed 002 §4.3, Example"  # the norm-50 example is in §4.3 only


def grad_clip() -> list[Step]:
    """Global-norm clipping of a gradient of norm 50 at c = 5 (seed 002 §4.3 example, eq. 11):
    g <- min(1, c / ||g||) g, one factor for all parameters, by ``train.optim.clip_grad_norm``."""
    layer = nn.Linear(2, 2).double()
    layer.weight.grad = torch.tensor(CLIP_WEIGHT_GRAD, dtype=torch.float64)
    layer.bias.grad = torch.tensor(CLIP_BIAS_GRAD, dtype=torch.float64)
    norms_before = torch.stack([layer.weight.grad.norm(), layer.bias.grad.norm()])
    total_norm = clip_grad_norm(layer.parameters(), CLIP_MAX_NORM)
    norm_after = torch.cat([layer.weight.grad.flatten(), layer.bias.grad]).norm()
    return [
        Step(
            "Gradients before clipping: weight (2x2) and bias (2)",
            "Assumed: gradients of a 2 -> 2 linear layer chosen so the global norm is the "
            "seed's 50.",
            torch.cat([torch.tensor(CLIP_WEIGHT_GRAD), torch.tensor([CLIP_BIAS_GRAD])]),
            SEED_CLIP,
            rows=("weight row 0", "weight row 1", "bias"),
            key="gradients-before-clipping-weight-2x2-and-bias-2",
        ),
        Step(
            "Norm of each parameter's gradient",
            "30 and 40.",
            norms_before,
            SEED_CLIP,
            columns=("weight", "bias"),
            key="norm-of-each-parameter-s-gradient",
        ),
        Step(
            "Global norm ||g||_2 = sqrt(30² + 40²)",
            "All gradients together, as the training loop's clipping measures it (before "
            "clipping).",
            total_norm,
            SEED_CLIP_EXAMPLE,
            seed_value=50.0,
            seed_decimals=0,
            key="global-norm-g-2-sqrt-30-2-40-2",
        ),
        Step(
            "Scale factor min(1, c / ||g||), c = 5",
            "The factor the clipping applied (the norm after over the norm before): the "
            "seed's 5 / 50 = 0.1 (torch adds 1e-6 to the norm, invisible here).",
            norm_after / total_norm,
            SEED_CLIP_EXAMPLE,
            seed_value=0.1,
            seed_decimals=1,
            key="scale-factor-min-1-c-g-c-5",
        ),
        Step(
            "Gradients after clipping",
            "Every gradient times 0.1: the direction is kept, the length is now 5.",
            torch.cat([layer.weight.grad, layer.bias.grad[None]]),
            SEED_CLIP,
            rows=("weight row 0", "weight row 1", "bias"),
            key="gradients-after-clipping",
        ),
        Step(
            "Global norm after clipping",
            "c = 5.",
            norm_after,
            SEED_CLIP,
            key="global-norm-after-clipping",
        ),
    ]


def adamw_figures(folder: Path) -> list[Path]:
    steps = adamw_step()
    gradient = value_of(steps, "gradient-g-of-the-weight").ravel()
    change = value_of(steps, "change-of-the-weight").ravel()
    lr = ADAMW_LR
    labels = [f"θ[{i},{j}]" for i in range(2) for j in range(3)]
    series = [("gradient g", gradient), ("change of θ / α", change / lr)]
    title = (
        "One AdamW step: every weight moves by about α whatever its gradient's size (seed 000 §7)"
    )
    return [
        plots.grouped_bars(folder / "adamw_step.png", series, labels, title, "value", annotate=True)
    ]


def grad_clip_figures(folder: Path) -> list[Path]:
    steps = grad_clip()
    before = value_of(steps, "gradients-before-clipping-weight-2x2-and-bias-2").ravel()
    after = value_of(steps, "gradients-after-clipping").ravel()
    labels = ["w[0,0]", "w[0,1]", "w[1,0]", "w[1,1]", "b[0]", "b[1]"]
    series = [("before (norm 50)", before), ("after (norm 5)", after)]
    title = (
        "Global-norm clipping at c = 5: every gradient times 5/50, directions kept (seed 002 §4.3)"
    )
    return [
        plots.grouped_bars(
            folder / "grad_clip.png", series, labels, title, "gradient", annotate=True
        )
    ]


def lr_schedule_figures(folder: Path) -> list[Path]:
    return [schedule_figure(folder, default_schedule())]


def schedule_figure(folder: Path, settings: ScheduleSettings) -> Path:
    """The learning-rate schedule of one training configuration."""
    s = settings
    return plots.learning_rate_figure(
        folder / "learning_rate_schedule.png",
        s.max_lr,
        s.min_lr,
        s.warmup_iters,
        s.lr_decay_iters,
        s.max_iters,
        title=f"Learning-rate schedule of {s.source}",
        logged=s.logged,
        cooldown_fraction=s.cooldown_fraction,
        cooldown_shape=s.cooldown_shape,
    )


# the worked examples of this module, in the order light-llm explain lists them
EXAMPLES = (
    Example(
        "adamw",
        "one AdamW step: moments, bias correction, decoupled weight decay (seed 000 §7, 002 §4.1)",
        adamw_step,
        adamw_figures,
    ),
    Example(
        "lr-schedule",
        "linear warmup, then cosine decay (seed 000 §7, 002 §4.2) or warmup-stable-decay",
        lr_schedule,
        lr_schedule_figures,
    ),
    Example(
        "grad-clip",
        "global-norm clipping of a norm-50 gradient at 5 (seed 002 §4.3)",
        grad_clip,
        grad_clip_figures,
    ),
)
