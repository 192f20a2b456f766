"""Worked examples of seed 001's last two sections: the "Numerical Example (Tiny Transformer)"
(token and position embeddings, the residual sum and the LayerNorm after it) and
"Backpropagation Through Transformers" (dL/dV, dL/dA, the softmax backward, dL/dQ and dL/dK
on the seed's A and V).

The embeddings go through a GPT's own embedding tables (``light_llm.models.gpt``), the
normalisation through its LayerNorm; the backward pass through the NumPy engine's hand-written
attention backward (``light_llm.reference.attention``), checked against PyTorch's autograd.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

from light_llm.config import ModelConfig
from light_llm.explain import plots
from light_llm.explain.attention_examples import CAT_SAT_Q, as_heads, matrix
from light_llm.explain.steps import Example, Step
from light_llm.models.gpt import GPT
from light_llm.nn.attention import attention_explicit, attention_mask
from light_llm.nn.norms import LayerNorm
from light_llm.reference.attention import attention_backward

SEED_001_TINY = 'seed 001, "Numerical Example (Tiny Transformer)"'
TINY_TOKENS = ("The", "cat")
TINY_EMBEDDINGS = [[0.2, 0.5, 0.3, 0.1], [0.8, 0.2, 0.6, 0.4]]  # rows of the table E, by id
TINY_POSITIONS = [[0.1, 0.0, 0.1, 0.0], [0.0, 0.1, 0.0, 0.1]]  # learned P, by position
TINY_ATTENTION_OUTPUT = [[0.4, 0.6, 0.3, 0.2], [0.7, 0.4, 0.5, 0.6]]  # given by the seed
TINY_FFN_OUTPUT = [[0.5, 0.8, 0.4, 0.3], [0.9, 0.5, 0.7, 0.6]]  # given by the seed
SEED_SUM = [[0.3, 0.5, 0.4, 0.1], [0.8, 0.3, 0.6, 0.5]]
NAN = float("nan")


def tiny_model() -> GPT:
    """A GPT with the seed's shape (d_model = 4, 2 heads, 2 layers, a 2-word vocabulary,
    learned positions) whose embedding tables hold the seed's numbers, in float64."""
    config = ModelConfig(vocab_size=2, block_size=2, n_layer=2, n_head=2, n_embd=4)
    model = GPT(config).double()
    with torch.no_grad():
        model.transformer.wte.weight.copy_(matrix(TINY_EMBEDDINGS))
        model.transformer.wpe.weight.copy_(matrix(TINY_POSITIONS))
    return model


def tiny_transformer() -> list[Step]:
    """Seed 001's tiny transformer on "The cat": E[id] (seed 002 §10.2, eq. 42), + P[pos], the
    residual sum x + Attention(x) and LayerNorm of it (seed 002 §5.3, eq. 19), then the same
    after the feed-forward sub-layer, in the seed's post-LN order."""
    model = tiny_model()
    ids = torch.tensor([[0, 1]])  # The = 0, cat = 1
    with torch.no_grad():
        token_embeddings = model.transformer.wte(ids)[0]  # (T, d)
        position_embeddings = model.transformer.wpe(torch.arange(2))  # (T, d)
        x = token_embeddings + position_embeddings
        residual = x + matrix(TINY_ATTENTION_OUTPUT)
        norm = LayerNorm(4).double()  # γ = 1, β = 0: a fresh layer's values
        normalized = norm(residual)
        second_residual = normalized + matrix(TINY_FFN_OUTPUT)
        layer_output = norm(second_residual)
    mean = residual.mean(-1, keepdim=True)
    std = residual.var(-1, unbiased=False, keepdim=True).sqrt()
    rows = {"rows": TINY_TOKENS}
    return [
        Step(
            "Token ids",
            'The vocabulary {The: 0, cat: 1}; "The cat" is the ids [0, 1].',
            ids[0],
            SEED_001_TINY,
            columns=TINY_TOKENS,
            key="token-ids",
        ),
        Step(
            "Token embeddings E[id]",
            "Each id picks its row of the embedding table E (2 x 4), loaded with the seed's "
            "numbers into the GPT's token-embedding layer.",
            token_embeddings,
            f"{SEED_001_TINY}, Step 1; seed 002 §10.2, eq. 42",
            seed_value=TINY_EMBEDDINGS,
            seed_decimals=1,
            **rows,
            key="token-embeddings-e-id",
        ),
        Step(
            "Position embeddings P[pos]",
            "Learned positions (as GPT-2 and BERT): row pos of a second table, P (2 x 4).",
            position_embeddings,
            f"{SEED_001_TINY}, Step 2",
            seed_value=TINY_POSITIONS,
            seed_decimals=1,
            **rows,
            key="position-embeddings-p-pos",
        ),
        Step(
            "x = E[id] + P[pos]",
            "The model's input: word and position added, one vector per token.",
            x,
            f"{SEED_001_TINY}, Step 3",
            seed_value=SEED_SUM,
            seed_decimals=1,
            **rows,
            key="x-e-id-p-pos",
        ),
        Step(
            "Attention output (given by the seed)",
            "Assumed: the seed gives no attention weights for this example, only the output "
            "of the attention sub-layer, which is used as printed.",
            matrix(TINY_ATTENTION_OUTPUT),
            f"{SEED_001_TINY}, Step 4",
            **rows,
            key="attention-output-given-by-the-seed",
        ),
        Step(
            "Residual: x + Attention(x)",
            "The sub-layer's output is added to its input (the residual connection).",
            residual,
            f"{SEED_001_TINY}, Step 5",
            seed_value=[[0.7, 1.1, 0.7, 0.3], [NAN] * 4],
            seed_decimals=1,
            **rows,
            key="residual-x-attention-x",
        ),
        Step(
            "Mean μ and standard deviation σ of each row",
            'For "The": μ = (0.7 + 1.1 + 0.7 + 0.3) / 4 = 0.7, and the deviations 0, 0.4, 0, '
            "-0.4 give σ² = 0.08, σ = 0.2828.",
            torch.cat([mean, std], dim=-1),
            f"{SEED_001_TINY}, Step 5; seed 002 §5.3",
            columns=("μ", "σ"),
            **rows,
            key="mean-mu-and-standard-deviation-sigma-of-each-row",
        ),
        Step(
            "LayerNorm(x + Attention(x))",
            "(x - μ) / sqrt(σ² + ε) with γ = 1, β = 0, by the models' LayerNorm layer. The seed "
            'prints ≈ [-0.5, 1.2, -0.5, -1.2] for "The", which is not what LayerNorm gives: the '
            "entries equal to the mean (0.7) must become 0, and the two others ±0.4 / 0.2828 "
            "= ±1.41. The seed's vector does not even have mean 0.",
            normalized,
            f"{SEED_001_TINY}, Step 5; seed 002 §5.3, eq. 19",
            seed_value=[[-0.5, 1.2, -0.5, -1.2], [NAN] * 4],
            seed_decimals=1,
            **rows,
            key="layernorm-x-attention-x",
        ),
        Step(
            "Mean and variance of the seed's normalised vector",
            "For comparison: a LayerNorm output has mean 0 and variance 1 (without γ, β); the "
            "seed's [-0.5, 1.2, -0.5, -1.2] has neither.",
            [np.mean([-0.5, 1.2, -0.5, -1.2]), np.var([-0.5, 1.2, -0.5, -1.2])],
            f"{SEED_001_TINY}, Step 5",
            columns=("mean", "variance"),
            key="mean-and-variance-of-the-seed-s",
        ),
        Step(
            "Feed-forward output (given by the seed)",
            "Assumed as printed: again the seed gives the sub-layer's output, not its weights.",
            matrix(TINY_FFN_OUTPUT),
            f"{SEED_001_TINY}, Step 6",
            **rows,
            key="feed-forward-output-given-by-the-seed",
        ),
        Step(
            "Layer 1 output: LayerNorm(h + FFN(h))",
            "Step 7, 'similar to step 5': the second residual and LayerNorm. The seed's final "
            "outputs come after a second layer whose weights it never gives, so they cannot "
            "be recomputed.",
            layer_output,
            f"{SEED_001_TINY}, Step 7",
            **rows,
            key="layer-1-output-layernorm-h-ffn-h",
        ),
    ]


def tiny_transformer_figures(folder: Path) -> list[Path]:
    steps = {step.key: step for step in tiny_transformer()}
    series = [
        ("x + Attention(x)", np.asarray(steps["residual-x-attention-x"].value)[0]),
        ("LayerNorm, exact", np.asarray(steps["layernorm-x-attention-x"].value)[0]),
        ("the seed's ≈", np.array([-0.5, 1.2, -0.5, -1.2])),
    ]
    title = 'Residual + LayerNorm for "The" (seed 001, tiny transformer): exact vs the seed'
    labels = [f"feature {i}" for i in range(4)]
    return [
        plots.grouped_bars(
            folder / "tiny_transformer_layernorm.png", series, labels, title, "value", annotate=True
        )
    ]


# ------------------------------------------------------------ backpropagation (seed 001)
SEED_001_BACKPROP = 'seed 001, "Backpropagation Through Transformers"'
BACKPROP_A = [[1.0, 0.0, 0.0], [0.2, 0.8, 0.0], [0.1, 0.3, 0.6]]
BACKPROP_V = [[0.5, 0.2, 0.1], [0.8, 0.9, 0.4], [0.3, 0.5, 1.2]]
BACKPROP_GRAD = [0.1, 0.2, 0.3]  # ∂Loss/∂output, one number per token


def attention_backprop() -> list[Step]:
    """Seed 001's backward pass through attention on its A and V: dL/dV = A^T dL/dO,
    dL/dA = dL/dO V^T, dL/dS = A ⊙ (dL/dA - rowsum(dL/dA ⊙ A)), dL/dQ = dL/dS K / sqrt(d_k),
    dL/dK = dL/dS^T Q / sqrt(d_k) (seed 002 §7.3), by the NumPy engine's attention backward;
    then by autograd for the exact A of the same Q and K."""
    a = np.array(BACKPROP_A)
    v = np.array(BACKPROP_V)
    q = np.array(CAT_SAT_Q)  # K = Q, as in seed 001's attention example
    grad_output = np.repeat(np.array(BACKPROP_GRAD)[:, None], 3, axis=1)  # (T, d_v)
    d_k = q.shape[-1]
    scale = 1.0 / math.sqrt(d_k)
    # the engine's cache, with the seed's A as the softmax output (no dropout)
    cache = (q[None, None], q[None, None], v[None, None], a[None, None], a[None, None], None, scale)
    grad_q, grad_k, grad_v = (g[0, 0] for g in attention_backward(grad_output[None, None], cache))
    grad_a = grad_output @ v.T
    grad_s = a * (grad_a - (grad_a * a).sum(axis=-1, keepdims=True))
    # autograd, through the attention the models use, for the A that Q and K really give
    qt = as_heads(matrix(CAT_SAT_Q)).requires_grad_()
    kt = as_heads(matrix(CAT_SAT_Q)).requires_grad_()
    vt = as_heads(matrix(BACKPROP_V)).requires_grad_()
    allowed = attention_mask(3, 3, 0, causal=True, key_padding=None, device=qt.device)
    output, exact_a = attention_explicit(qt, kt, vt, allowed)
    output.backward(as_heads(torch.from_numpy(grad_output)))
    tokens = ("The", "cat", "sat")
    square = {"rows": tokens, "columns": tokens}
    return [
        Step(
            "A (the seed's attention weights) and V",
            "The seed's causal weights and values, side by side: A | V. V is the first three "
            'columns of the values of "The cat sat" in the seed\'s attention section; A is near '
            "(not the rounding of) the causal weights there.",
            np.concatenate([a, v], axis=1),
            SEED_001_BACKPROP,
            rows=tokens,
            columns=("A:The", "A:cat", "A:sat", "V[0]", "V[1]", "V[2]"),
            key="a-the-seed-s-attention-weights-and-v",
        ),
        Step(
            "dL/dO (given)",
            "The seed's gradient from the next layer is one number per token, [0.1, 0.2, 0.3]; "
            "assumed the same for each of the token's 3 output features, so dL/dO = g 1^T.",
            grad_output,
            f"{SEED_001_BACKPROP}, Step 1",
            rows=tokens,
            key="dl-do-given",
        ),
        Step(
            "dL/dV = A^T · dL/dO",
            "Value j collects the gradient of every token that attended to it, weighted by how "
            "much: row j of A^T is column j of A. By the NumPy engine's attention backward. "
            "Every column is the seed's [0.17, 0.25, 0.18].",
            grad_v,
            f"{SEED_001_BACKPROP}, Step 1",
            seed_value=[[0.17] * 3, [0.25] * 3, [0.18] * 3],
            rows=tokens,
            key="dl-dv-a-t-dl-do",
        ),
        Step(
            "dL/dA = dL/dO · V^T",
            "Entry (i, j): how the loss changes if token i gives a little more weight to token "
            "j, the dot product of row i of dL/dO with value j.",
            grad_a,
            f"{SEED_001_BACKPROP}, Step 1",
            **square,
            key="dl-da-dl-do-v-t",
        ),
        Step(
            "dL/dS = A ⊙ (dL/dA - rowsum(dL/dA ⊙ A))",
            "The softmax backward, row by row (the seed's 'in practice' form of the Jacobian "
            "A_i (δ_ij - A_j)). Masked entries have A = 0, so they get no gradient; the first "
            "row has a single weight of 1, which no score change can move: its gradient is 0.",
            grad_s,
            f"{SEED_001_BACKPROP}, Step 2",
            **square,
            key="dl-ds-a-dl-da-rowsum-dl-da-a",
        ),
        Step(
            "dL/dQ = dL/dS · K / sqrt(d_k)",
            'Assumed: Q = K are the seed\'s query vectors of "The cat sat" (d_k = 3); the seed '
            "gives none here. dL/dS is the previous step's, from the seed's A. By the NumPy "
            "engine.",
            grad_q,
            f"{SEED_001_BACKPROP}, Step 3",
            rows=tokens,
            key="dl-dq-dl-ds-k-sqrt-d-k",
        ),
        Step(
            "dL/dK = dL/dS^T · Q / sqrt(d_k)",
            "The keys' gradient. (With Q = K the model's gradient of that shared matrix would "
            "be the sum of this step and the previous one.)",
            grad_k,
            f"{SEED_001_BACKPROP}, Step 3",
            rows=tokens,
            key="dl-dk-dl-ds-t-q-sqrt-d-k",
        ),
        Step(
            "The exact A of Q and K (causal softmax)",
            "softmax(Q K^T / sqrt(3)) with the causal mask: the seed's A is near these weights "
            "but is not their rounding (0.2547 would be 0.3, not 0.2).",
            exact_a[0, 0],
            SEED_001_BACKPROP,
            seed_value=BACKPROP_A,
            seed_decimals=1,
            **square,
            key="the-exact-a-of-q-and-k-causal-softmax",
        ),
        Step(
            "dL/dV with the exact A (autograd)",
            "PyTorch's autograd through the attention the models use, with the exact A: near "
            "the seed's figures, which come from its own A.",
            vt.grad[0, 0],
            SEED_001_BACKPROP,
            seed_value=[[0.17] * 3, [0.25] * 3, [0.18] * 3],
            rows=tokens,
            key="dl-dv-with-the-exact-a-autograd",
        ),
        Step(
            "dL/dQ with the exact A (autograd)",
            "The query gradient of the exact forward pass.",
            qt.grad[0, 0],
            SEED_001_BACKPROP,
            rows=tokens,
            key="dl-dq-with-the-exact-a-autograd",
        ),
    ]


def attention_backprop_figures(folder: Path) -> list[Path]:
    steps = {step.key: np.asarray(step.value) for step in attention_backprop()}
    tokens = ("The", "cat", "sat")
    panels = [
        [
            ("A (seed)", np.array(BACKPROP_A)),
            ("dL/dA = dL/dO V^T", steps["dl-da-dl-do-v-t"]),
        ],
        [
            ("dL/dS (softmax backward)", steps["dl-ds-a-dl-da-rowsum-dl-da-a"]),
            ("dL/dV = A^T dL/dO", steps["dl-dv-a-t-dl-do"]),
        ],
    ]
    title = "Backpropagation through attention on seed 001's A and V"
    return [
        plots.heatmap_grid(
            folder / "attention_backprop.png",
            panels,
            tokens,
            tokens,
            title,
            value_range=None,
            x_label="column (key, or value feature for dL/dV)",
        )
    ]


# the worked examples of this module, in the order light-llm explain lists them
EXAMPLES = (
    Example(
        "tiny-transformer",
        'the tiny transformer on "The cat": embeddings + positions, residual and '
        "LayerNorm, the seed's normalised vector beside LayerNorm's (seed 001)",
        tiny_transformer,
        tiny_transformer_figures,
    ),
    Example(
        "attention-backprop",
        "backpropagation through attention on the seed's A and V: dL/dV, dL/dA, "
        "the softmax backward, dL/dQ, dL/dK (seed 001)",
        attention_backprop,
        attention_backprop_figures,
    ),
)
