"""Worked examples of position information: sinusoidal encodings with base n = 100 for
"I am a robot" (seed 003 §8-13), with base 10000 (seed 001) and rotary embeddings (seed 001,
seed 002 §8.2), all computed by ``light_llm.nn.positions``."""

from __future__ import annotations

from pathlib import Path

import torch

from light_llm.explain import plots
from light_llm.explain.steps import Example, Step, value_of
from light_llm.nn.positions import (
    SinusoidalPositions,
    apply_rotary,
    rope_angles,
    sinusoidal_table,
)

NAN = float("nan")

ROBOT_TOKENS = ("I", "am", "a", "robot")
ROBOT_EMBEDDINGS = [  # seed 003 §8
    [1.0, 0.5, 0.3, 0.0],
    [0.9, 0.8, 0.2, 1.0],
    [0.7, 0.1, 0.4, 0.0],
    [1.1, 0.4, 0.3, 1.0],
]
ROBOT_DIM = 4
ROBOT_BASE = 100.0


def dimension_labels(dim: int) -> tuple[str, ...]:
    """ "sin 0", "cos 0", "sin 1", ...: which function and which pair i each column holds."""
    return tuple(f"{'sin' if j % 2 == 0 else 'cos'} i={j // 2}" for j in range(dim))


def sinusoidal_robot() -> list[Step]:
    """Sinusoidal encodings with d = 4 and base n = 100 for "I am a robot" and the combined
    embeddings E + P (seed 003 §8-9, §13), by ``SinusoidalPositions``, the GPT's own table."""
    positions = SinusoidalPositions(len(ROBOT_TOKENS), ROBOT_DIM, ROBOT_BASE)
    table = positions(torch.arange(len(ROBOT_TOKENS)))  # (T, d)
    embeddings = torch.tensor(ROBOT_EMBEDDINGS)
    pair = torch.arange(0, ROBOT_DIM, 2, dtype=torch.float64)
    divisors = ROBOT_BASE ** (pair / ROBOT_DIM)  # n^(2i/d), i = 0, 1
    columns = dimension_labels(ROBOT_DIM)
    return [
        Step(
            "Divisors n^(2i/d) for i = 0, 1",
            "PE(pos, 2i) = sin(pos / n^(2i/d)) and PE(pos, 2i+1) = cos(pos / n^(2i/d)) with "
            "n = 100 and d = 4: the first pair turns once per 2π positions, the second ten "
            "times slower.",
            divisors,
            "seed 003 §9",
            columns=("i=0", "i=1"),
            key="divisors-n-2i-d-for-i-0-1",
        ),
        Step(
            "Positional encodings P (d = 4, n = 100)",
            "One row per position 0-3, by the table the GPT uses for positions='sinusoidal'. "
            "The seed prints 1-2 decimals.",
            table,
            "seed 003 §9, §13",
            seed_value=[
                [0.0, 1.0, 0.0, 1.0],
                [0.84, 0.54, 0.1, 1.0],
                [0.91, -0.42, 0.20, 0.98],
                [0.14, -0.99, 0.30, 0.96],
            ],
            rows=ROBOT_TOKENS,
            columns=columns,
            key="positional-encodings-p-d-4-n-100",
        ),
        Step(
            "Token embeddings E",
            "The seed's 4-dimensional embeddings of the four words.",
            embeddings,
            "seed 003 §8",
            rows=ROBOT_TOKENS,
            key="token-embeddings-e",
        ),
        Step(
            "Combined embeddings C = E + P",
            "What the first transformer layer receives (seed 000 §2: X = E[tokens] + "
            "P[positions]).",
            embeddings.double() + table.double(),
            "seed 003 §13",
            seed_value=[
                [1.0, 1.5, 0.3, 1.0],
                [1.74, 1.34, 0.3, 2.0],
                [1.61, -0.32, 0.6, 0.98],
                [1.24, -0.59, 0.6, 1.96],
            ],
            rows=ROBOT_TOKENS,
            key="combined-embeddings-c-e-p",
        ),
    ]


def sinusoidal_10000() -> list[Step]:
    """Sinusoidal encodings with base 10000 and d_model = 512, positions 0 and 1 (seed 001,
    Position Encodings; seed 002 §8.2, eqs. 31-32), by ``sinusoidal_table``."""
    dim, shown = 512, 8
    table = sinusoidal_table(2, dim, 10000.0)[:, :shown]  # (2, 8): the first 8 of 512 dims
    pair = torch.arange(0, shown, 2, dtype=torch.float64)
    angles = 1.0 / 10000.0 ** (pair / dim)  # the angle at position 1, pairs i = 0..3
    where_seed_fits = 10000.0 ** (torch.tensor([0.75], dtype=torch.float64))
    return [
        Step(
            "Angles at position 1: 1 / 10000^(2i/512)",
            "With d = 512 the first pairs turn almost as fast as pair 0: 10000^(2/512) is only "
            "1.0366.",
            angles,
            "seed 001, Sinusoidal Position Encoding",
            columns=tuple(f"i={i}" for i in range(shown // 2)),
            key="angles-at-position-1-1-10000-2i-512",
        ),
        Step(
            "PE for positions 0 and 1, dimensions 0-7 (d = 512, base 10000)",
            "The seed prints PE_1[2] ≈ 0.001 and PE_1[3] ≈ 1.0, but sin(1 / 10000^(2/512)) = "
            f"sin({angles[1]:.4f}) = {table[1, 2]:.4f} and cos = {table[1, 3]:.4f}; 0.001 "
            "would be right only where 10000^(2i/d) = 1000, i.e. at 2i/d = 0.75 (dimension "
            "384 of 512).",
            table,
            "seed 001, Sinusoidal Position Encoding",
            seed_value=[
                [0.0, 1.0, 0.0, 1.0, NAN, NAN, NAN, NAN],
                [0.841, 0.540, 0.001, 1.0, NAN, NAN, NAN, NAN],
            ],
            seed_decimals=3,
            rows=("pos 0", "pos 1"),
            columns=dimension_labels(shown),
            key="pe-for-positions-0-and-1-dimensions",
        ),
        Step(
            "10000^0.75",
            "The divisor that would turn position 1 into the seed's 0.001 (sin(1/1000)).",
            where_seed_fits[0],
            "seed 001, Sinusoidal Position Encoding",
            key="10000-0-75",
        ),
    ]


ROPE_QUERY = [1.0, 0.5, -0.5, 2.0]
ROPE_KEY = [0.5, 1.0, 1.5, -1.0]
ROPE_POSITIONS = 6
ROPE_BASE = 10000.0


def rope() -> list[Step]:
    """RoPE on one query and one key of dimension 4 placed at positions 0-5 (seed 001, Rotary
    Position Embedding; seed 002 §8.2, eqs. 33-34): q_m · k_n depends only on m - n. Computed
    by ``rope_angles`` and ``apply_rotary``, as in the GPT with positions='rotary'."""
    head_dim = len(ROPE_QUERY)
    positions = torch.arange(ROPE_POSITIONS)
    cos, sin = rope_angles(positions, head_dim, ROPE_BASE)  # (T, hs/2)
    query = torch.tensor(ROPE_QUERY).expand(1, 1, ROPE_POSITIONS, head_dim)  # same q at each m
    key = torch.tensor(ROPE_KEY).expand(1, 1, ROPE_POSITIONS, head_dim)
    rotated_q = apply_rotary(query, cos, sin)[0, 0]  # (T, hs): q placed at m = 0..5
    rotated_k = apply_rotary(key, cos, sin)[0, 0]
    scores = rotated_q @ rotated_k.T  # (m, n)
    by_offset = torch.stack([scores[m, 0] for m in range(ROPE_POSITIONS)])  # m - n = 0..5
    names = tuple(f"m={m}" for m in range(ROPE_POSITIONS))
    key_names = tuple(f"n={n}" for n in range(ROPE_POSITIONS))
    angle = torch.atan2(sin, cos)
    return [
        Step(
            "Angles m θ_i, θ_i = 10000^(-2i/d), d = 4",
            "Assumed: a 4-dimensional q and k (the seed gives no numbers). Pair i rotates by "
            "m θ_i at position m: pair 0 by 1 radian per position, pair 1 by only 0.01 "
            "(angles shown modulo 2π, in (-π, π]).",
            angle,
            "seed 001, Rotary Position Embedding; seed 002 §8.2",
            rows=names,
            columns=("θ_0 m", "θ_1 m"),
            key="angles-m-theta-i-theta-i-10000-2i-d-d-4",
        ),
        Step(
            "q rotated to each position m",
            f"q = {ROPE_QUERY}: each pair (q_2i, q_2i+1) turned by m θ_i (eq. 33).",
            rotated_q,
            "seed 002 §8.2, eq. 33",
            rows=names,
            key="q-rotated-to-each-position-m",
        ),
        Step(
            "|q_m| at each position",
            "A rotation keeps the length: every row has the norm of q.",
            rotated_q.norm(dim=-1),
            "seed 002 §8.2, Length preservation",
            columns=names,
            key="q-m-at-each-position",
        ),
        Step(
            "Scores q_m · k_n",
            f"k = {ROPE_KEY}. Every diagonal (fixed m - n) holds one value: the score sees "
            "only the offset, not where the pair sits.",
            scores,
            "seed 002 §8.2, Relative position dependency",
            rows=names,
            columns=key_names,
            key="scores-q-m-k-n",
        ),
        Step(
            "Score as a function of the offset m - n = 0..5",
            "The first column of the table above; any other cell with the same m - n equals it.",
            by_offset,
            "seed 002 §8.2",
            columns=tuple(f"m-n={d}" for d in range(ROPE_POSITIONS)),
            key="score-as-a-function-of-the-offset-m-n-0-5",
        ),
    ]


def sinusoidal_robot_figures(folder: Path) -> list[Path]:
    tokens = ROBOT_TOKENS
    steps = sinusoidal_robot()
    table = value_of(steps, "positional-encodings-p-d-4-n-100")
    base, dim = ROBOT_BASE, ROBOT_DIM
    return [
        plots.positional_encoding_heatmap(
            folder / "positional_encoding_heatmap.png", 100, 64, base, example=(tokens, table)
        ),
        plots.positional_encoding_curves(
            folder / "positional_encoding_curves.png", dim, base, 64, range(dim), tokens
        ),
    ]


def sinusoidal_10000_figures(folder: Path) -> list[Path]:
    return [
        plots.positional_encoding_heatmap(
            folder / "positional_encoding_heatmap_10000.png", 100, 512, 10000.0
        ),
        plots.positional_encoding_curves(
            folder / "positional_encoding_curves_10000.png",
            512,
            10000.0,
            100,
            (16, 48, 96, 160, 256),
        ),
    ]


def rope_figures(folder: Path) -> list[Path]:
    steps = rope()
    scores = value_of(steps, "scores-q-m-k-n")
    n = ROPE_POSITIONS
    return [
        plots.heatmap_grid(
            folder / "rope_scores.png",
            [[("q_m · k_n", scores)]],
            [f"m={m}" for m in range(n)],
            [f"n={m}" for m in range(n)],
            "RoPE: q_m · k_n\nconstant along each diagonal: depends on m - n only",
            value_range=None,
            x_label="key position n",
            y_label="query position m",
        )
    ]


# the worked examples of this module, in the order light-llm explain lists them
EXAMPLES = (
    Example(
        "sinusoidal",
        'sinusoidal positions, d = 4, base n = 100, for "I am a robot", '
        "and E + P (seed 003 §9, §13)",
        sinusoidal_robot,
        sinusoidal_robot_figures,
    ),
    Example(
        "sinusoidal-10000",
        "sinusoidal positions with base 10000, d_model = 512 (seed 001)",
        sinusoidal_10000,
        sinusoidal_10000_figures,
    ),
    Example(
        "rope",
        "rotary embeddings: q_m · k_n depends only on m - n (seed 001, 002 §8.2)",
        rope,
        rope_figures,
    ),
)
