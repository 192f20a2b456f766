"""Worked examples of softmax and sampling: the softmax and its Jacobian, the log-sum-exp trick,
temperature (seed 002 §2.3, §4.4, §15.4, App. B) and temperature / top-k / top-p filtering of a
small next-token distribution (seed 000 §8), by ``torch.softmax`` (what attention and the loss
use) and ``light_llm.generate.filter_logits`` (what sampling uses)."""

from __future__ import annotations

from pathlib import Path

import torch

from light_llm.explain import plots
from light_llm.explain.steps import Example, Step, value_of
from light_llm.generate import filter_logits

SOFTMAX_LOGITS = [2.0, 1.0, 0.1]
LARGE_LOGITS = [1000.0, 1001.0, 1002.0]
TEMPERATURES = (0.5, 1.0, 2.0)


def softmax_example() -> list[Step]:
    """softmax(z)_i = e^{z_i} / Σ_j e^{z_j} (seed 002 §2.3, eq. 1), its Jacobian
    p_i (δ_ij - p_j) (App. B.1, §7.3 eq. 25), log-sum-exp (§4.4, eq. 12) and temperature
    (§15.4)."""
    z = torch.tensor(SOFTMAX_LOGITS, dtype=torch.float64)
    probabilities = torch.softmax(z, dim=-1)
    jacobian = torch.autograd.functional.jacobian(lambda logits: torch.softmax(logits, -1), z)
    large = torch.tensor(LARGE_LOGITS, dtype=torch.float64)
    naive = torch.exp(large).sum().log()  # overflows: e^1000 is beyond float64
    shift = large.max()
    stable = shift + torch.exp(large - shift).sum().log()
    by_temperature = torch.stack(
        [torch.softmax(filter_logits(z[None], temperature=t)[0].double(), -1) for t in TEMPERATURES]
    )
    names = tuple(f"z{i}={v:g}" for i, v in enumerate(SOFTMAX_LOGITS))
    return [
        Step(
            "Logits z",
            "Assumed scores for three classes (the seed gives none).",
            z,
            "seed 002 §2.3",
            key="logits-z",
        ),
        Step(
            "p = softmax(z)",
            "Positive and summing to 1; the exponential stretches the differences.",
            probabilities,
            "seed 002 §2.3, eq. 1",
            columns=names,
            key="p-softmax-z",
        ),
        Step(
            "Jacobian ∂p_i/∂z_j",
            "By autograd (PyTorch differentiating the softmax); equal to diag(p) - p p^T: "
            "p_i (1 - p_i) on "
            "the diagonal, -p_i p_j off it. Each row and column sums to 0 (adding a constant "
            "to every logit changes nothing).",
            jacobian,
            "seed 002 App. B.1; §7.3, eq. 25",
            rows=tuple(f"p{i}" for i in range(3)),
            columns=tuple(f"z{j}" for j in range(3)),
            key="jacobian-d-p-i-d-z-j",
        ),
        Step(
            "log Σ e^{z_i} computed naively, z = [1000, 1001, 1002]",
            "e^1000 overflows even in float64, so the naive sum is inf.",
            naive,
            "seed 002 §4.4",
            key="log-sigma-e-z-i-computed-naively",
        ),
        Step(
            "log Σ e^{z_i} = c + log Σ e^{z_i - c}, c = max z",
            "The log-sum-exp trick: after subtracting the maximum the largest exponent is "
            "e^0 = 1. PyTorch's logsumexp and softmax do exactly this.",
            stable,
            "seed 002 §4.4, eq. 12",
            key="log-sigma-e-z-i-c-log-sigma-e-z-i-c-c-max-z",
        ),
        Step(
            "PyTorch's logsumexp(z)",
            "The library routine, the same value.",
            torch.logsumexp(large, dim=-1),
            "seed 002 §4.4, eq. 12",
            key="pytorch-s-logsumexp-z",
        ),
        Step(
            "softmax(z / τ) for τ = 0.5, 1, 2",
            "Temperature divides the logits (as light-llm generate does): τ < 1 sharpens "
            "the distribution, τ > 1 flattens it.",
            by_temperature,
            "seed 002 §15.4; seed 000 §8",
            rows=tuple(f"τ={t:g}" for t in TEMPERATURES),
            columns=names,
            key="softmax-z-tau-for-tau-0-5-1-2",
        ),
    ]


SAMPLING_TOKENS = ("mat", "rug", "sofa", "floor", "roof", "moon")
SAMPLING_LOGITS = [3.0, 2.2, 1.8, 1.0, 0.2, -1.0]
SEED_000_SAMPLING = "seed 000 §8"


def sampling() -> list[Step]:
    """Temperature, top-k and top-p (nucleus) filtering of one next-token distribution (seed 000
    §8), by ``filter_logits`` followed by softmax, as ``sample_next`` draws from it."""
    logits = torch.tensor([SAMPLING_LOGITS])  # (B=1, V)

    def distribution(**options) -> torch.Tensor:
        return torch.softmax(filter_logits(logits, **options), dim=-1)[0]

    base = distribution()
    cumulative = torch.sort(base, descending=True).values.cumsum(0)
    columns = SAMPLING_TOKENS
    return [
        Step(
            'Logits for the word after "The cat sat on the"',
            "Assumed: a 6-word vocabulary and these logits (the seed gives formulas only).",
            logits[0],
            SEED_000_SAMPLING,
            columns=columns,
            key="logits-for-the-word-after-the-cat-sat-on-the",
        ),
        Step(
            "P = softmax(logits), τ = 1",
            "The model's distribution before any filtering.",
            base,
            f"{SEED_000_SAMPLING}, Temperature Sampling",
            columns=columns,
            key="p-softmax-logits-tau-1",
        ),
        Step(
            "τ = 0.5",
            "softmax(logits / 0.5): sharper; τ -> 0 becomes argmax (greedy).",
            distribution(temperature=0.5),
            f"{SEED_000_SAMPLING}, Temperature Sampling",
            columns=columns,
            key="tau-0-5",
        ),
        Step(
            "τ = 2",
            "softmax(logits / 2): flatter; τ -> ∞ becomes uniform.",
            distribution(temperature=2.0),
            f"{SEED_000_SAMPLING}, Temperature Sampling",
            columns=columns,
            key="tau-2",
        ),
        Step(
            "top-k, k = 3",
            "Logits below the 3rd largest are set to -inf; the three survivors are "
            "renormalised: P(x_i) / Z, Z the mass of the top 3.",
            distribution(top_k=3),
            f"{SEED_000_SAMPLING}, Top-K Sampling",
            columns=columns,
            key="top-k-k-3",
        ),
        Step(
            "Cumulative probability, sorted",
            "The running sum of P in descending order, the quantity top-p looks at.",
            cumulative,
            f"{SEED_000_SAMPLING}, Top-P (Nucleus) Sampling",
            columns=tuple(f"top {i + 1}" for i in range(len(SAMPLING_TOKENS))),
            key="cumulative-probability-sorted",
        ),
        Step(
            "top-p, p = 0.9",
            "The smallest set of most likely words whose mass reaches 0.9 is kept: mat, rug "
            "and sofa hold 0.8909 < 0.9, so floor joins (0.9597); then renormalised.",
            distribution(top_p=0.9),
            f"{SEED_000_SAMPLING}, Top-P (Nucleus) Sampling",
            columns=columns,
            key="top-p-p-0-9",
        ),
        Step(
            "τ = 0.7, top-k = 4, top-p = 0.9 together",
            "Temperature first, then top-k, then top-p, the order light-llm generate uses.",
            distribution(temperature=0.7, top_k=4, top_p=0.9),
            SEED_000_SAMPLING,
            columns=columns,
            key="tau-0-7-top-k-4-top-p-0-9-together",
        ),
    ]


def softmax_figures(folder: Path) -> list[Path]:
    logits = SOFTMAX_LOGITS
    labels = [f"z{i} = {v:g}" for i, v in enumerate(logits)]
    return [
        plots.softmax_temperatures_figure(
            folder / "softmax_temperatures.png", logits, labels, (0.25, 0.5, 1.0, 2.0, 5.0)
        )
    ]


def sampling_figures(folder: Path) -> list[Path]:
    steps = sampling()
    distributions = [
        ("τ = 1", value_of(steps, "p-softmax-logits-tau-1")),
        ("top-k, k = 3", value_of(steps, "top-k-k-3")),
        ("top-p, p = 0.9", value_of(steps, "top-p-p-0-9")),
        ("τ = 0.7, k = 4, p = 0.9", value_of(steps, "tau-0-7-top-k-4-top-p-0-9-together")),
    ]
    tokens = SAMPLING_TOKENS
    return [
        plots.distributions_figure(
            folder / "sampling_filters.png",
            distributions,
            tokens,
            "Next-token distribution after temperature, top-k and top-p (seed 000 §8)",
        ),
        plots.softmax_temperatures_figure(
            folder / "sampling_temperatures.png",
            SAMPLING_LOGITS,
            tokens,
            (0.5, 0.7, 1.0, 2.0),
        ),
    ]


# the worked examples of this module, in the order light-llm explain lists them
EXAMPLES = (
    Example(
        "softmax",
        "softmax, its Jacobian, log-sum-exp and temperature (seed 002 §2.3, §4.4, App. B)",
        softmax_example,
        softmax_figures,
    ),
    Example(
        "sampling",
        "temperature, top-k and top-p on a next-token distribution (seed 000 §8)",
        sampling,
        sampling_figures,
    ),
)
