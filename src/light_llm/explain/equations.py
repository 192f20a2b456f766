"""Every numbered equation of seed 002 (1-53): where a worked example computes it (example name
and step key) and which functions implement it (dotted import paths), for
``light-llm explain --equations``.

The seed's numbering skips 26-28: the four unnumbered gradient lines of its §7.3 (G_V, G_P,
G_S, G_Q and G_K) stand between eq. 25 and eq. 29, and the table lists them there. The tests
import every function named here and run every example step named here, so the table cannot
name code that does not exist.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Equation:
    """One equation: its number, the formula in plain text, the seed section, the example
    steps that compute it ((example, step key) pairs) and the functions implementing it."""

    number: str
    formula: str
    section: str
    examples: tuple[tuple[str, str], ...] = ()
    functions: tuple[str, ...] = ()


EQUATIONS: tuple[Equation, ...] = (
    Equation(
        "1",
        "softmax(z)_i = e^{z_i} / Σ_j e^{z_j}",
        "§2.3",
        (("softmax", "p-softmax-z"),),
        (
            "light_llm.reference.softmax.softmax_forward",
            "light_llm.nn.attention.attention_explicit",
        ),
    ),
    Equation(
        "2",
        "L = -Σ_i y_i log p_i",
        "§2.3",
        (("perplexity", "cross-entropy-of-each-next-token-log-p-x-t-x-t"),),
        ("light_llm.reference.loss.cross_entropy_forward",),
    ),
    Equation(
        "3",
        "dθ/dt = -∇L(θ)",
        "§3.1",
        (("gradient-flow", "gradient-descent-theta-t-1-theta-t"),),
        ("light_llm.reference.optim.SGD",),
    ),
    Equation(
        "4",
        "dh/dt = F(h)  (h_{l+1} = h_l + F(h_l))",
        "§3.2",
        (("gradient-flow", "residual-stream-h-l-1-h-l-f-h-l-l-10-layers"),),
        ("light_llm.nn.blocks.Block.forward", "light_llm.reference.blocks.block_forward"),
    ),
    Equation(
        "5",
        "v_t = β v_{t-1} + (1-β) ∇L",
        "§4.1",
        (("gradient-flow", "momentum-v-t-beta-v-t-1"),),
        ("light_llm.reference.optim.SGD",),
    ),
    Equation(
        "6",
        "θ_t = θ_{t-1} - η v_t",
        "§4.1",
        (("gradient-flow", "momentum-v-t-beta-v-t-1"),),
        ("light_llm.reference.optim.SGD",),
    ),
    Equation(
        "7",
        "m_t = β1 m_{t-1} + (1-β1) ∇L",
        "§4.1",
        (("adamw", "m-1-beta-1-m-0-1-beta-1-g"),),
        ("light_llm.train.optim.configure_adamw", "light_llm.reference.optim.Adam"),
    ),
    Equation(
        "8",
        "v_t = β2 v_{t-1} + (1-β2) (∇L)²",
        "§4.1",
        (("adamw", "v-1-beta-2-v-0-1-beta-2-g-2"),),
        ("light_llm.train.optim.configure_adamw", "light_llm.reference.optim.Adam"),
    ),
    Equation(
        "9",
        "θ_t = θ_{t-1} - η m̂_t / (sqrt(v̂_t) + ε)",
        "§4.1",
        (("adamw", "m-sqrt-v-eps"),),
        ("light_llm.train.optim.configure_adamw", "light_llm.reference.optim.AdamW"),
    ),
    Equation(
        "10",
        "η_t = η_max min(t / T_warmup, 1)",
        "§4.2",
        (("lr-schedule", "learning-rate-at-selected-steps"),),
        ("light_llm.schedule.learning_rate",),
    ),
    Equation(
        "11",
        "g̃ = min(1, c / ||g||_2) g",
        "§4.3",
        (("grad-clip", "scale-factor-min-1-c-g-c-5"),),
        ("light_llm.train.optim.clip_grad_norm", "light_llm.reference.optim.clip_grad_norm"),
    ),
    Equation(
        "12",
        "log Σ e^{x_i} = c + log Σ e^{x_i - c}",
        "§4.4",
        (("softmax", "log-sigma-e-z-i-c-log-sigma-e-z-i-c-c-max-z"),),
        ("light_llm.reference.softmax.log_softmax_forward",),
    ),
    Equation(
        "13",
        "z1 = x W1 + b1",
        "§5.1",
        (("mlp-backprop", "z1-x-w1-b1"),),
        ("light_llm.reference.linear.linear_forward",),
    ),
    Equation(
        "14",
        "h1 = σ(z1)",
        "§5.1",
        (("mlp-backprop", "h1-sigma-z1-sigma-gelu"),),
        ("light_llm.reference.activations.activation_forward",),
    ),
    Equation(
        "15",
        "z2 = h1 W2 + b2",
        "§5.1",
        (("mlp-backprop", "z2-h1-w2-b2"),),
        ("light_llm.reference.linear.linear_forward",),
    ),
    Equation(
        "16",
        "∂L/∂z2 = ∂L/∂ŷ",
        "§5.2",
        (("mlp-backprop", "d-l-d-z2-d-l-d-y-hat-y-hat-y"),),
        ("light_llm.reference.linear.linear_backward",),
    ),
    Equation(
        "17",
        "∂L/∂W2 = h1^T ∂L/∂z2",
        "§5.2",
        (("mlp-backprop", "d-l-d-w2-h1-t-d-l-d-z2"),),
        ("light_llm.reference.linear.linear_backward",),
    ),
    Equation(
        "18",
        "∂L/∂W1 = x^T (∂L/∂z2 W2^T ⊙ σ'(z1))",
        "§5.2",
        (("mlp-backprop", "d-l-d-w1-x-t-d-l-d-z2-w2-t-sigma-z1"),),
        (
            "light_llm.reference.linear.linear_backward",
            "light_llm.reference.activations.gelu_backward",
        ),
    ),
    Equation(
        "19",
        "LayerNorm(x) = γ ⊙ (x - μ) / sqrt(σ² + ε) + β",
        "§5.3",
        (("norms", "layernorm-x-gamma-x-mu-sqrt-sigma-2-eps-beta"),),
        ("light_llm.nn.norms.LayerNorm.forward", "light_llm.reference.norms.layernorm_forward"),
    ),
    Equation(
        "20",
        "s_i = q^T k_i",
        "§7.1",
        (("river", "raw-scores-q-river-k-j"), ("high-dimensions", "inner-products-q-v-i")),
        ("light_llm.nn.attention.attention_explicit",),
    ),
    Equation(
        "21",
        "α_i = e^{s_i} / Σ_j e^{s_j}",
        "§7.1",
        (("river", "attention-weights-without-scaling-softmax-q-k"),),
        ("light_llm.nn.attention.attention_explicit",),
    ),
    Equation(
        "22",
        "o = Σ_i α_i v_i",
        "§7.1",
        (("river", "output-for-river-without-scaling-sigma-a-j-v-j"),),
        ("light_llm.nn.attention.attention_explicit",),
    ),
    Equation(
        "23",
        "Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V",
        "§7.1",
        (("cat-sat", "output-a-v-gpt-every-token"), ("tiny-attention", "o-a-v")),
        (
            "light_llm.nn.attention.attention_explicit",
            "light_llm.reference.attention.attention_forward",
        ),
    ),
    Equation(
        "24",
        "Var(q·k) = d_k σ⁴",
        "§7.2",
        (("score-variance", "var-q-k-measured-against-d-k-sigma-4"),),
    ),
    Equation(
        "25",
        "∂p_i/∂z_j = p_i (δ_ij - p_j)",
        "§7.3",
        (("softmax", "jacobian-d-p-i-d-z-j"),),
        ("light_llm.reference.softmax.softmax_backward",),
    ),
    Equation(
        "26-28",
        "(unnumbered in the seed) G_V = P^T G_O, G_P = G_O V^T, G_S row by row, "
        "G_Q = G_S K / sqrt(d_k), G_K = G_S^T Q / sqrt(d_k)",
        "§7.3",
        (
            ("tiny-attention", "dl-dv-a-t-dl-do"),
            ("tiny-attention", "dl-da-dl-do-v-t"),
            ("tiny-attention", "dl-ds-a-dl-da-rowsum-dl-da-a"),
            ("tiny-attention", "dl-dq-dl-ds-k-sqrt-d-k"),
        ),
        ("light_llm.reference.attention.attention_backward",),
    ),
    Equation(
        "29",
        "head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)",
        "§8.1",
        (("multi-head", "output-head-1"),),
        ("light_llm.nn.attention.SelfAttention.forward",),
    ),
    Equation(
        "30",
        "MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O",
        "§8.1",
        (("multi-head", "concat-w-o"),),
        ("light_llm.nn.attention.SelfAttention.forward",),
    ),
    Equation(
        "31",
        "PE(pos, 2i) = sin(pos / 10000^{2i/d})",
        "§8.2",
        (("sinusoidal-10000", "pe-for-positions-0-and-1-dimensions"),),
        (
            "light_llm.nn.positions.sinusoidal_table",
            "light_llm.reference.positions.sinusoidal_table",
        ),
    ),
    Equation(
        "32",
        "PE(pos, 2i+1) = cos(pos / 10000^{2i/d})",
        "§8.2",
        (("sinusoidal-10000", "pe-for-positions-0-and-1-dimensions"),),
        (
            "light_llm.nn.positions.sinusoidal_table",
            "light_llm.reference.positions.sinusoidal_table",
        ),
    ),
    Equation(
        "33",
        "q_m = R_{Θ,m} q",
        "§8.2",
        (("rope", "q-rotated-to-each-position-m"),),
        ("light_llm.nn.positions.apply_rotary", "light_llm.reference.positions.rotary_forward"),
    ),
    Equation(
        "34",
        "k_n = R_{Θ,n} k",
        "§8.2",
        (("rope", "scores-q-m-k-n"),),
        ("light_llm.nn.positions.apply_rotary", "light_llm.reference.positions.rotary_forward"),
    ),
    Equation(
        "35",
        "h1 = LayerNorm(x)",
        "§9.1",
        (),
        ("light_llm.nn.blocks.Block.forward", "light_llm.reference.blocks.block_forward"),
    ),
    Equation(
        "36",
        "h2 = x + MultiHeadAttn(h1, h1, h1)",
        "§9.1",
        (),
        ("light_llm.nn.blocks.Block.forward", "light_llm.reference.blocks.block_forward"),
    ),
    Equation(
        "37",
        "h3 = LayerNorm(h2)",
        "§9.1",
        (),
        ("light_llm.nn.blocks.Block.forward", "light_llm.reference.blocks.block_forward"),
    ),
    Equation(
        "38",
        "y = h2 + FFN(h3)",
        "§9.1",
        (),
        ("light_llm.nn.blocks.Block.forward", "light_llm.reference.blocks.block_forward"),
    ),
    Equation(
        "39",
        "FFN(x) = GELU(x W1 + b1) W2 + b2",
        "§9.1",
        (("mlp-backprop", "z2-h1-w2-b2"),),
        ("light_llm.nn.feedforward.MLP.forward", "light_llm.reference.blocks.feedforward_forward"),
    ),
    Equation(
        "40",
        "GELU(x) = x Φ(x)",
        "§9.2",
        (("mlp-backprop", "h1-sigma-z1-sigma-gelu"),),
        ("light_llm.nn.feedforward.activation_fn", "light_llm.reference.activations.gelu_forward"),
    ),
    Equation(
        "41",
        "L = -Σ_t log P(x_t | x_1, ..., x_{t-1})",
        "§10.1",
        (("perplexity", "mean-cross-entropy-the-training-loss"),),
        ("light_llm.models.gpt.GPT.forward", "light_llm.reference.loss.cross_entropy_forward"),
    ),
    Equation(
        "42",
        "e_i = E[i]",
        "§10.2",
        (("tiny-transformer", "token-embeddings-e-id"),),
        ("light_llm.reference.embedding.embedding_forward",),
    ),
    Equation(
        "43",
        "P(w_t | context) = softmax(E h_t)",
        "§10.2",
        (("weight-tying", "softmax-e-h-the-next-token-distribution"),),
        ("light_llm.models.gpt.GPT.forward",),
    ),
    Equation(
        "44",
        "PPL = exp(-(1/T) Σ_t log P(x_t | x_<t))",
        "§10.2",
        (("perplexity", "perplexity-exp-mean-cross-entropy"),),
        ("light_llm.train.evaluate.sequential_loss",),
    ),
    Equation(
        "45",
        "K_cache = [K_cache; k_new]",
        "§11.2",
        (("kv-cache", "k-cache-after-the-step-k-cache-k-new"),),
        ("light_llm.nn.attention.LayerKV.append", "light_llm.reference.kv_cache.LayerKV.append"),
    ),
    Equation(
        "46",
        "V_cache = [V_cache; v_new]",
        "§11.2",
        (("kv-cache", "v-cache-after-the-step-v-cache-v-new"),),
        ("light_llm.nn.attention.LayerKV.append", "light_llm.reference.kv_cache.LayerKV.append"),
    ),
    Equation(
        "47",
        "Attention = softmax(q_new K_cache^T / sqrt(d_k)) V_cache",
        "§11.2",
        (("kv-cache", "next-token-logits-with-the-cache"),),
        ("light_llm.models.gpt.GPT.forward",),
    ),
    Equation(
        "48",
        "LinAttn(Q, K, V) = φ(Q)(φ(K)^T V) / φ(Q)(φ(K)^T 1)",
        "§11.3",
        (("linear-attention", "running-state-token-by-token"),),
        (
            "light_llm.nn.attention.causal_linear_attention",
            "light_llm.reference.linear_attention.causal_linear_attention_forward",
        ),
    ),
    Equation(
        "49",
        "A_dropped = Dropout(softmax(Q K^T / sqrt(d_k)))",
        "§12.1",
        (("dropout", "attention-weights-after-dropout-p-0-5"),),
        ("light_llm.nn.attention.attention_explicit",),
    ),
    Equation(
        "50",
        "FFN(x) = W2 Dropout(GELU(W1 x))",
        "§12.1",
        (("dropout", "inverted-dropout-of-x-p-0-5"),),
        ("light_llm.reference.dropout.dropout_forward",),
    ),
    Equation(
        "51",
        "y_smooth = (1-α) y + α/V",
        "§12.2",
        (("label-smoothing", "y-smooth-1-alpha-y-alpha-v"),),
        ("light_llm.reference.loss.cross_entropy_forward",),
    ),
    Equation(
        "52",
        "W ~ N(0, 2 / (n_in + n_out))",
        "§13.1",
        (("initialization", "variance-of-the-weights-measured-and-formula"),),
    ),
    Equation(
        "53",
        "g̃ = min(1, c / ||g||_2) g",
        "§13.3",
        (("grad-clip", "gradients-after-clipping"),),
        ("light_llm.train.optim.clip_grad_norm", "light_llm.reference.optim.clip_grad_norm"),
    ),
)


def resolve(dotted: str) -> object:
    """The object a dotted path names: the longest importable module prefix, then attributes
    (``light_llm.nn.blocks.Block.forward``)."""
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:split]))
        except ModuleNotFoundError:
            continue
        for name in parts[split:]:
            target = getattr(target, name)
        return target
    raise ModuleNotFoundError(dotted)


def equations_text() -> str:
    """The table as aligned text: number, section, formula, then where it is computed."""
    lines = [
        "Seed 002's numbered equations: the worked example that computes each "
        "(light-llm explain NAME) and the code that implements it.",
        "",
    ]
    for eq in EQUATIONS:
        lines.append(f"({eq.number}) {eq.section}  {eq.formula}")
        for example, step in eq.examples:
            lines.append(f"      example:  {example}, step '{step}'")
        for function in eq.functions:
            lines.append(f"      code:     {function}")
    return "\n".join(lines) + "\n"


def equations_json() -> list[dict]:
    return [
        {
            "number": eq.number,
            "formula": eq.formula,
            "section": f"seed 002 {eq.section}",
            "examples": [{"example": name, "step": step} for name, step in eq.examples],
            "functions": list(eq.functions),
        }
        for eq in EQUATIONS
    ]


EQUATIONS_TITLE = "Seed 002's numbered equations in light-llm"  # the page's heading


def equations_markdown() -> str:
    rows = [
        f"# {EQUATIONS_TITLE}",
        "",
        "Each equation, the worked example that computes it (`light-llm explain NAME`) and the "
        "functions that implement it. The seed's numbering skips 26-28; the unnumbered "
        "gradient lines of its §7.3 stand there.",
        "",
        "| eq. | section | formula | computed by | implemented by |",
        "|---|---|---|---|---|",
    ]
    for eq in EQUATIONS:
        examples = "<br>".join(f"`{name}`: {step}" for name, step in eq.examples) or "-"
        functions = "<br>".join(f"`{f}`" for f in eq.functions) or "-"
        formula = eq.formula.replace("|", "\\|")
        rows.append(f"| ({eq.number}) | {eq.section} | {formula} | {examples} | {functions} |")
    return "\n".join(rows) + "\n"
