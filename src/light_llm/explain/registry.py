"""The registry of worked examples: name, one-line summary, the function that computes its steps
and the one that draws its pictures."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from light_llm.errors import ConfigError
from light_llm.explain import (
    attention_examples,
    bpe_examples,
    dynamics_examples,
    efficiency_examples,
    geometry_examples,
    inspect_examples,
    language_model_examples,
    layer_examples,
    masking_examples,
    mlp_examples,
    muon_examples,
    plots,
    position_examples,
    probability_examples,
    regularization_examples,
    tokenization_examples,
    training_examples,
    transformer_examples,
)
from light_llm.explain.steps import Step


@dataclass(frozen=True)
class Example:
    """A worked example: ``steps()`` computes it; ``figures(folder)`` writes its PNGs (None
    when no picture helps) and returns their paths."""

    name: str
    summary: str
    steps: Callable[[], list[Step]]
    figures: Callable[[Path], list[Path]] | None = None


def value_of(steps: list[Step], title: str) -> np.ndarray:
    """The value of the step called ``title``."""
    return next(np.asarray(step.value) for step in steps if step.title == title)


def cat_sat_figures(folder: Path) -> list[Path]:
    steps = attention_examples.cat_sat()
    tokens = attention_examples.CAT_SAT_TOKENS
    panels = [
        [
            ("GPT (causal mask)", value_of(steps, "Attention weights, GPT (causal softmax)")),
            ("BERT (no mask)", value_of(steps, "Attention weights, BERT (no mask)")),
        ]
    ]
    title = 'Attention weights for "The cat sat" (seed 001, d_k = 3)'
    return [plots.heatmap_grid(folder / "cat_sat_attention.png", panels, tokens, tokens, title)]


def multi_head_figures(folder: Path) -> list[Path]:
    steps = attention_examples.multi_head()
    tokens = attention_examples.CAT_SAT_TOKENS
    panels = [
        [(f"head {h}", value_of(steps, f"Attention weights of head {h} (causal)")) for h in (1, 2)]
    ]
    title = 'Multi-head attention on "The cat sat": weights per head (d_model = 4, h = 2)'
    return [plots.heatmap_grid(folder / "multi_head_attention.png", panels, tokens, tokens, title)]


def tiny_attention_figures(folder: Path) -> list[Path]:
    steps = attention_examples.tiny_attention()
    tokens = ("token 1", "token 2")
    panels = [
        [
            ("S = Q·K^T / sqrt(3)", value_of(steps, "S = Q·K^T / sqrt(3)")),
            ("A = softmax(S)", value_of(steps, "A = softmax(S)")),
        ],
        [
            ("dL/dA = dL/dO · V^T", value_of(steps, "dL/dA = dL/dO · V^T")),
            (
                "dL/dS (softmax backward)",
                value_of(steps, "dL/dS = A ⊙ (dL/dA - rowsum(dL/dA ⊙ A))"),
            ),
        ],
    ]
    title = "Tiny attention (seed 002 §14): forward (top) and backward (bottom)"
    return [
        plots.heatmap_grid(
            folder / "tiny_attention.png", panels, tokens, tokens, title, value_range=None
        )
    ]


def norms_figures(folder: Path) -> list[Path]:
    steps = layer_examples.norms()
    series = [
        ("x", value_of(steps, "x (one token, d_model = 4)")),
        ("LayerNorm(x)", value_of(steps, "LayerNorm(x) = γ (x - μ) / sqrt(σ² + ε) + β")),
        ("RMSNorm(x)", value_of(steps, "RMSNorm(x) = γ x / RMS(x)")),
    ]
    labels = [f"feature {i}" for i in range(len(layer_examples.NORM_INPUT))]
    title = "LayerNorm centres and scales x = [1, 3, 2, 4]; RMSNorm only scales it (seed 001)"
    return [plots.grouped_bars(folder / "norms.png", series, labels, title, "value", annotate=True)]


def adamw_figures(folder: Path) -> list[Path]:
    steps = training_examples.adamw_step()
    gradient = value_of(steps, "Gradient g of the weight").ravel()
    change = value_of(steps, "Change of the weight").ravel()
    lr = training_examples.ADAMW_LR
    labels = [f"θ[{i},{j}]" for i in range(2) for j in range(3)]
    series = [("gradient g", gradient), ("change of θ / α", change / lr)]
    title = (
        "One AdamW step: every weight moves by about α whatever its gradient's size (seed 000 §7)"
    )
    return [
        plots.grouped_bars(folder / "adamw_step.png", series, labels, title, "value", annotate=True)
    ]


def grad_clip_figures(folder: Path) -> list[Path]:
    steps = training_examples.grad_clip()
    before = value_of(steps, "Gradients before clipping: weight (2x2) and bias (2)").ravel()
    after = value_of(steps, "Gradients after clipping").ravel()
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


def tokenization_figures(folder: Path) -> list[Path]:
    steps = tokenization_examples.tokenization()
    pair = next(step for step in steps if step.title.startswith("Pair "))
    table = np.asarray(pair.value)[:, 1:]  # attention mask, token type ids
    columns = list(tokenization_examples.MODEL_INPUTS[1:])
    title = 'BERT inputs of "I love dogs." + "Dogs are great." (seed 003 §3)'
    return [
        plots.heatmap_grid(
            folder / "tokenization_pair.png",
            [[("attention mask and token types", table.astype(float))]],
            list(pair.rows),
            columns,
            title,
            x_label="model input",
            y_label="token",
            number_format=".0f",
        )
    ]


def river_figures(folder: Path) -> list[Path]:
    steps = attention_examples.river()
    distributions = [
        (
            "softmax(q·k) (seed 003)",
            value_of(steps, "Attention weights without scaling: softmax(q·k)"),
        ),
        (
            "softmax(q·k / sqrt(3))",
            value_of(steps, "Attention weights with scaling: softmax(q·k / sqrt(3))"),
        ),
    ]
    title = 'Attention of "river" over "The bank of the river was flooded!" (seed 003 §23)'
    return [
        plots.distributions_figure(
            folder / "river_attention.png", distributions, attention_examples.RIVER_TOKENS, title
        )
    ]


def sinusoidal_robot_figures(folder: Path) -> list[Path]:
    tokens = position_examples.ROBOT_TOKENS
    steps = position_examples.sinusoidal_robot()
    table = value_of(steps, "Positional encodings P (d = 4, n = 100)")
    base, dim = position_examples.ROBOT_BASE, position_examples.ROBOT_DIM
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
    steps = position_examples.rope()
    scores = value_of(steps, "Scores q_m · k_n")
    n = position_examples.ROPE_POSITIONS
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


def activation_figures(folder: Path) -> list[Path]:
    return [plots.activations_figure(folder / "activations.png")]


def softmax_figures(folder: Path) -> list[Path]:
    logits = probability_examples.SOFTMAX_LOGITS
    labels = [f"z{i} = {v:g}" for i, v in enumerate(logits)]
    return [
        plots.softmax_temperatures_figure(
            folder / "softmax_temperatures.png", logits, labels, (0.25, 0.5, 1.0, 2.0, 5.0)
        )
    ]


def sampling_figures(folder: Path) -> list[Path]:
    steps = probability_examples.sampling()
    distributions = [
        ("τ = 1", value_of(steps, "P = softmax(logits), τ = 1")),
        ("top-k, k = 3", value_of(steps, "top-k, k = 3")),
        ("top-p, p = 0.9", value_of(steps, "top-p, p = 0.9")),
        ("τ = 0.7, k = 4, p = 0.9", value_of(steps, "τ = 0.7, top-k = 4, top-p = 0.9 together")),
    ]
    tokens = probability_examples.SAMPLING_TOKENS
    return [
        plots.distributions_figure(
            folder / "sampling_filters.png",
            distributions,
            tokens,
            "Next-token distribution after temperature, top-k and top-p (seed 000 §8)",
        ),
        plots.softmax_temperatures_figure(
            folder / "sampling_temperatures.png",
            probability_examples.SAMPLING_LOGITS,
            tokens,
            (0.5, 0.7, 1.0, 2.0),
        ),
    ]


def lr_schedule_figures(folder: Path) -> list[Path]:
    return [schedule_figure(folder, training_examples.default_schedule())]


def schedule_figure(folder: Path, settings: training_examples.ScheduleSettings) -> Path:
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
    )


def muon_figures(folder: Path) -> list[Path]:
    return [
        plots.newton_schulz_figure(
            folder / "muon_newton_schulz.png",
            muon_examples.singular_value_history(),
            muon_examples.NS_COEFFICIENTS,
            "Muon: Newton-Schulz orthogonalisation of a 4 x 3 matrix",
        )
    ]


EXAMPLES: dict[str, Example] = {
    example.name: example
    for example in (
        Example(
            "cat-sat",
            'attention on "The cat sat": Q·K^T, scaling, causal mask, softmax '
            "for GPT and BERT, A·V (seed 001)",
            attention_examples.cat_sat,
            cat_sat_figures,
        ),
        Example(
            "multi-head",
            "multi-head split, per-head attention, concat and W^O with "
            "d_model = 4, h = 2 (seed 001, 000 §3)",
            attention_examples.multi_head,
            multi_head_figures,
        ),
        Example(
            "tiny-attention",
            "the tiny attention forward pass and its backward pass "
            "dL/dV, dL/dA, dL/dS, dL/dQ, dL/dK (seed 002 §14, §7.3)",
            attention_examples.tiny_attention,
            tiny_attention_figures,
        ),
        Example(
            "river",
            'attention for "river" in "The bank of the river was flooded!", with '
            "and without 1/sqrt(d_k) (seed 003 §16-25)",
            attention_examples.river,
            river_figures,
        ),
        Example(
            "sinusoidal",
            'sinusoidal positions, d = 4, base n = 100, for "I am a robot", '
            "and E + P (seed 003 §9, §13)",
            position_examples.sinusoidal_robot,
            sinusoidal_robot_figures,
        ),
        Example(
            "sinusoidal-10000",
            "sinusoidal positions with base 10000, d_model = 512 (seed 001)",
            position_examples.sinusoidal_10000,
            sinusoidal_10000_figures,
        ),
        Example(
            "rope",
            "rotary embeddings: q_m · k_n depends only on m - n (seed 001, 002 §8.2)",
            position_examples.rope,
            rope_figures,
        ),
        Example(
            "norms",
            "LayerNorm and RMSNorm of [1, 3, 2, 4] (seed 001)",
            layer_examples.norms,
            norms_figures,
        ),
        Example(
            "ffn",
            "the ReLU feed-forward network with the seed's 4x4 W_1, W_2 (seed 001)",
            layer_examples.feedforward,
            activation_figures,
        ),
        Example(
            "swiglu",
            "SwiGLU: Swish(x W_1) ⊙ (x V) (seed 001)",
            layer_examples.swiglu,
            activation_figures,
        ),
        Example(
            "softmax",
            "softmax, its Jacobian, log-sum-exp and temperature (seed 002 §2.3, §4.4, App. B)",
            probability_examples.softmax_example,
            softmax_figures,
        ),
        Example(
            "sampling",
            "temperature, top-k and top-p on a next-token distribution (seed 000 §8)",
            probability_examples.sampling,
            sampling_figures,
        ),
        Example(
            "adamw",
            "one AdamW step: moments, bias correction, decoupled weight decay "
            "(seed 000 §7, 002 §4.1)",
            training_examples.adamw_step,
            adamw_figures,
        ),
        Example(
            "lr-schedule",
            "linear warmup + cosine learning-rate schedule (seed 000 §7, 002 §4.2)",
            training_examples.lr_schedule,
            lr_schedule_figures,
        ),
        Example(
            "grad-clip",
            "global-norm clipping of a norm-50 gradient at 5 (seed 002 §4.3)",
            training_examples.grad_clip,
            grad_clip_figures,
        ),
        Example(
            "muon",
            "Muon's Newton-Schulz orthogonalisation of a 4 x 3 matrix, its singular values "
            "step by step (Keller Jordan's Muon)",
            muon_examples.muon,
            muon_figures,
        ),
        Example(
            "logit-lens",
            'the logit lens on a tiny GPT after "the cat": p(next) after the embeddings, the '
            "attention and the MLP; the last is the model's own output",
            inspect_examples.logit_lens_example,
            inspect_examples.logit_lens_figures,
        ),
        Example(
            "attribution",
            "direct logit attribution: a logit difference split into embeddings, heads and "
            "the MLP, the final norm's scale held fixed; the parts add up to it",
            inspect_examples.attribution_example,
            inspect_examples.attribution_figures,
        ),
        Example(
            "ablation",
            "zero ablation of each head of a tiny GPT: the next-token distribution redrawn, "
            "checked against the head's slice of W_O set to zero",
            inspect_examples.ablation_example,
            inspect_examples.ablation_figures,
        ),
        Example(
            "patching",
            'activation patching between "the cat sat" and "the dog sat": the fraction of a '
            "logit difference each clean residual and head restores",
            inspect_examples.patching_example,
            inspect_examples.patching_figures,
        ),
        Example(
            "tokenization",
            'BERT inputs for "I love dogs." and a sentence pair: ids, '
            "attention mask, token types (seed 003 §3-4)",
            tokenization_examples.tokenization,
            tokenization_figures,
        ),
        Example(
            "tiny-transformer",
            'the tiny transformer on "The cat": embeddings + positions, residual and '
            "LayerNorm, the seed's normalised vector beside LayerNorm's (seed 001)",
            transformer_examples.tiny_transformer,
            transformer_examples.tiny_transformer_figures,
        ),
        Example(
            "attention-backprop",
            "backpropagation through attention on the seed's A and V: dL/dV, dL/dA, "
            "the softmax backward, dL/dQ, dL/dK (seed 001)",
            transformer_examples.attention_backprop,
            transformer_examples.attention_backprop_figures,
        ),
        Example(
            "mlp-backprop",
            "a two-layer MLP forward (eqs. 13-15) and backward (eqs. 16-18) by the NumPy "
            "engine's layers (seed 002 §5)",
            mlp_examples.mlp_backprop,
            mlp_examples.mlp_figures,
        ),
        Example(
            "high-dimensions",
            "cosine similarity and distance of random vectors as d grows (concentration of "
            "measure), and maximum inner product search as hard attention (seed 002 §6)",
            geometry_examples.high_dimensions,
            geometry_examples.high_dimensions_figures,
        ),
        Example(
            "score-variance",
            "Var(q·k) = d_k σ⁴ measured for several d_k, and the entropy of the softmax with "
            "and without 1/sqrt(d_k) (seed 002 §7.2)",
            geometry_examples.score_variance,
            geometry_examples.score_variance_figures,
        ),
        Example(
            "gradient-flow",
            "gradient descent and momentum as discretised gradient flow, and the residual "
            "stream as Euler steps of dh/dt = F(h) (seed 002 §3, §4.1)",
            dynamics_examples.gradient_flow,
            dynamics_examples.gradient_flow_figures,
        ),
        Example(
            "perplexity",
            "next-token cross-entropy and perplexity of a small GPT trained here on "
            "Shakespeare, on a line of Hamlet (seed 002 §10, eqs. 2, 41, 44)",
            language_model_examples.perplexity,
            language_model_examples.perplexity_figures,
        ),
        Example(
            "weight-tying",
            "weight tying: the output head is the embedding table (one tensor), softmax(E h), "
            "the parameters saved, the shared gradient (seed 002 §10.2, eq. 43)",
            language_model_examples.weight_tying,
            language_model_examples.weight_tying_figures,
        ),
        Example(
            "kv-cache",
            "one decoding step with and without the KV cache: the cache grows by one key and "
            "value, the logits agree, the work is counted (seed 002 §11.2)",
            efficiency_examples.kv_cache,
            efficiency_examples.kv_cache_figures,
        ),
        Example(
            "linear-attention",
            "causal linear attention: its running state equals its quadratic form; its "
            "weights beside softmax's (seed 002 §11.3)",
            efficiency_examples.linear_attention,
            efficiency_examples.linear_attention_figures,
        ),
        Example(
            "checkpointing",
            "gradient checkpointing: activations kept for the backward pass with and without "
            "it, from the model's counts and measured, and the extra compute (seed 001)",
            efficiency_examples.checkpointing,
            efficiency_examples.checkpointing_figures,
        ),
        Example(
            "dropout",
            "inverted dropout keeps the expectation: one draw, the mean of many, attention "
            "dropout (seed 002 §12.1, eqs. 49-50)",
            regularization_examples.dropout,
            regularization_examples.dropout_figures,
        ),
        Example(
            "label-smoothing",
            "label smoothing on a five-class distribution: the target, the loss, its gradient, "
            "the confidence it rewards (seed 002 §12.2, eq. 51)",
            regularization_examples.label_smoothing,
            regularization_examples.label_smoothing_figures,
        ),
        Example(
            "initialization",
            "Xavier/Glorot and GPT-2 initialisation variances, measured, and the signal "
            "through a deep stack (seed 002 §13.1, eq. 52)",
            regularization_examples.initialization,
            regularization_examples.initialization_figures,
        ),
        Example(
            "mixed-precision",
            "float16 and bfloat16 against float32: rounding, range, lost small updates, "
            "loss scaling (seed 002 §13.2)",
            regularization_examples.mixed_precision,
            regularization_examples.mixed_precision_figures,
        ),
        Example(
            "bert-masking",
            "BERT's masking rule on a sentence: which tokens are chosen, which become [MASK], "
            "random or stay, with a fixed seed; the shares measured (seed 003 §29)",
            masking_examples.bert_masking,
            masking_examples.bert_masking_figures,
        ),
        Example(
            "bpe",
            "byte-level BPE learned merge by merge on a tiny text (the pair counts, the chosen "
            "pair, the new token), then a new word encoded with it (seed 003 §2)",
            bpe_examples.bpe,
            bpe_examples.bpe_figures,
        ),
    )
}


def names() -> list[str]:
    """The example names, in the order ``light-llm explain`` lists them."""
    return list(EXAMPLES)


def get(name: str) -> Example:
    """The example called ``name``; ConfigError naming the known ones otherwise."""
    try:
        return EXAMPLES[name]
    except KeyError:
        raise ConfigError(
            f"there is no worked example {name!r}; the examples are: {', '.join(EXAMPLES)}."
        ) from None


def run(name: str) -> list[Step]:
    """The steps of the example called ``name``, computed now."""
    return get(name).steps()


def write_figures(name: str, folder: str | Path) -> list[Path]:
    """Write the PNGs of the example called ``name`` into ``folder``; [] if it has none."""
    example = get(name)
    if example.figures is None:
        return []
    return example.figures(Path(folder))
