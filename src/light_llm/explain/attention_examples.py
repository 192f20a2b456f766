"""Worked examples of attention: "The cat sat" (seed 001), multi-head split / concat / W^O
(seed 001, seed 000 §3), the tiny forward and backward pass (seed 002 §14) and "river" in
"The bank of the river was flooded!" (seed 003 §16-25).

Every weight matrix and output comes from ``light_llm.nn.attention`` (``attention_explicit``,
``attention_mask``, ``SelfAttention``), the code the models train with. The seeds write
x W with W of shape (in, out); an ``nn.Linear`` stores W^T, so the seeds' matrices are loaded
transposed.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

from light_llm.config import ModelConfig
from light_llm.explain import plots
from light_llm.explain.steps import Example, Step, value_of
from light_llm.nn.attention import SelfAttention, attention_explicit, attention_mask
from light_llm.reference.softmax import softmax_backward

INF = float("inf")


def matrix(rows) -> torch.Tensor:
    """A float64 tensor from nested lists (float64 keeps the seeds' arithmetic exact)."""
    return torch.tensor(rows, dtype=torch.float64)


def as_heads(x: torch.Tensor) -> torch.Tensor:
    """(T, d) -> (B=1, nh=1, T, d): the layout attention_explicit takes."""
    return x[None, None]


def linear_from_seed(layer: torch.nn.Linear, weight_in_out: torch.Tensor) -> None:
    """Load a seed matrix W (in, out), for y = x W, into an nn.Linear (which holds W^T)."""
    with torch.no_grad():
        layer.weight.copy_(weight_in_out.T)


# --------------------------------------------------------------------------- "The cat sat"
CAT_SAT_TOKENS = ("The", "cat", "sat")
CAT_SAT_Q = [[1.0, 0.2, 0.1], [0.3, 1.5, 0.4], [0.2, 0.5, 1.8]]  # K is the same (seed 001)
CAT_SAT_V = [[0.5, 0.2, 0.1, 0.3], [0.8, 0.9, 0.4, 0.2], [0.3, 0.5, 1.2, 0.7]]
SEED_001_ATTENTION = "seed 001, Attention Mechanism Mathematics"


def cat_sat() -> list[Step]:
    """Attention on "The cat sat" with the seed's Q = K (d_k = 3) and V (d_v = 4): seed 001,
    Attention Mechanism Mathematics, steps 1-5 (scores, scaling, causal mask, softmax for GPT
    and BERT, weighted sum of values)."""
    tokens = CAT_SAT_TOKENS
    q = as_heads(matrix(CAT_SAT_Q))  # (1, 1, T, d_k)
    k = q.clone()
    v = as_heads(matrix(CAT_SAT_V))  # (1, 1, T, d_v)
    d_k = q.size(-1)
    scores = q @ k.transpose(-2, -1)  # (1, 1, T, T)
    scaled = scores / math.sqrt(d_k)
    allowed = attention_mask(3, 3, 0, causal=True, key_padding=None, device=q.device)
    masked = scaled.masked_fill(~allowed, -INF)
    gpt_output, gpt_weights = attention_explicit(q, k, v, allowed)
    bert_output, bert_weights = attention_explicit(q, k, v)
    seed_weights_sat = matrix([0.11, 0.29, 0.60])
    square = {"rows": tokens, "columns": tokens}
    return [
        Step(
            "Q = K (queries and keys, d_k = 3)",
            "The seed's simplified query vectors; for self-attention it uses the same vectors "
            "as keys.",
            q[0, 0],
            f"{SEED_001_ATTENTION}, Step 1",
            rows=tokens,
            key="q-k-queries-and-keys-d-k-3",
        ),
        Step(
            "V (values, d_v = 4)",
            "The value vectors, one row per token.",
            v[0, 0],
            f"{SEED_001_ATTENTION}, Step 5",
            rows=tokens,
            key="v-values-d-v-4",
        ),
        Step(
            "Scores = Q·K^T",
            "Entry (i, j) is the dot product of token i's query with token j's key. The seed "
            "prints 0.74, 2.66, 0.49 and 1.51 where the dot products are 0.64, 2.50, 0.48 and "
            "1.53 (e.g. The·cat = 1.0·0.3 + 0.2·1.5 + 0.1·0.4 = 0.64).",
            scores[0, 0],
            f"{SEED_001_ATTENTION}, Step 1",
            seed_value=[[1.05, 0.74, 0.49], [0.74, 2.66, 1.51], [0.49, 1.51, 3.53]],
            **square,
            key="scores-q-k-t",
        ),
        Step(
            "Scaled scores = Q·K^T / sqrt(d_k)",
            f"Divided by sqrt(3) = {math.sqrt(3):.4f}. The seed scales its own (partly wrong) "
            "scores, so the same entries differ.",
            scaled[0, 0],
            f"{SEED_001_ATTENTION}, Step 2",
            seed_value=[[0.61, 0.43, 0.28], [0.43, 1.54, 0.87], [0.28, 0.87, 2.04]],
            **square,
            key="scaled-scores-q-k-t-sqrt-d-k",
        ),
        Step(
            "Causal mask (GPT): future positions set to -inf",
            "The causal mask lets query i see key j only when j <= i (a token never looks ahead); "
            "the other scores become -inf, so softmax gives them weight 0.",
            masked[0, 0],
            f"{SEED_001_ATTENTION}, Step 3",
            seed_value=[[0.61, -INF, -INF], [0.43, 1.54, -INF], [0.28, 0.87, 2.04]],
            **square,
            key="causal-mask-gpt-future-positions-set-to-inf",
        ),
        Step(
            "Attention weights, GPT (causal softmax)",
            "softmax of each masked row; every row sums to 1. Computed by the attention code the "
            "models train with (light_llm/nn/attention.py), with the causal mask. The seed's "
            "rows 2 and 3 are not the softmax even of its own "
            "scaled scores (those give 0.25 / 0.75 and 0.12 / 0.21 / 0.67).",
            gpt_weights[0, 0],
            f"{SEED_001_ATTENTION}, Step 4",
            seed_value=[[1.00, 0.00, 0.00], [0.23, 0.77, 0.00], [0.11, 0.29, 0.60]],
            **square,
            key="attention-weights-gpt-causal-softmax",
        ),
        Step(
            "Attention weights, BERT (no mask)",
            "softmax of the unmasked scaled scores: every token sees every other token. "
            "Computed by the same attention code without a mask. The seed's figures are not the "
            "softmax of its own scaled scores either (row 1 would be 0.39, 0.33, 0.28).",
            bert_weights[0, 0],
            f"{SEED_001_ATTENTION}, Step 4",
            seed_value=[[0.40, 0.35, 0.25], [0.13, 0.69, 0.18], [0.10, 0.24, 0.66]],
            **square,
            key="attention-weights-bert-no-mask",
        ),
        Step(
            "Output = A·V, GPT (every token)",
            "Each row is the attention-weighted average of the value rows that token may see.",
            gpt_output[0, 0],
            f"{SEED_001_ATTENTION}, Step 5",
            rows=tokens,
            key="output-a-v-gpt-every-token",
        ),
        Step(
            "BERT output = A·V (every token)",
            "The same weighted sum with the unmasked weights.",
            bert_output[0, 0],
            f"{SEED_001_ATTENTION}, Step 5",
            rows=tokens,
            key="bert-output-a-v-every-token",
        ),
        Step(
            'The seed\'s weights (0.11, 0.29, 0.60) times V, for "sat"',
            "For comparison: even with its own weights the seed's sum is off "
            "(0.11·0.2 + 0.29·0.9 + 0.60·0.5 = 0.583, not 0.61).",
            seed_weights_sat @ v[0, 0],
            f"{SEED_001_ATTENTION}, Step 5",
            seed_value=[0.46, 0.61, 0.86, 0.50],
            key="the-seed-s-weights-0-11-0",
        ),
        Step(
            'Output for "sat" (GPT)',
            'The last row of the GPT output: "sat" mixes the values of The, cat and sat with '
            "the exact causal weights.",
            gpt_output[0, 0, 2],
            f"{SEED_001_ATTENTION}, Step 5",
            seed_value=[0.46, 0.61, 0.86, 0.50],
            key="output-for-sat-gpt",
        ),
    ]


# --------------------------------------------------------------------------- multi-head
SEED_001_MULTIHEAD = "seed 001, Multi-Head Attention; seed 000 §3"
MULTI_HEAD_W_O = [  # (in, out): the first two outputs average the heads, the last two subtract
    [0.5, 0.0, 0.5, 0.0],
    [0.0, 0.5, 0.0, 0.5],
    [0.5, 0.0, -0.5, 0.0],
    [0.0, 0.5, 0.0, -0.5],
]


def multi_head() -> list[Step]:
    """Multi-head attention with d_model = 4, h = 2, d_k = d_v = 2 on "The cat sat" (seed 001,
    Multi-Head Attention; seed 000 §3; seed 002 §8.1, eq. 30), through the SelfAttention module:
    fused projection, split into heads, attention per head, concatenation, W^O."""
    tokens = CAT_SAT_TOKENS
    config = ModelConfig(vocab_size=3, block_size=3, n_layer=1, n_head=2, n_embd=4, bias=False)
    attn = SelfAttention(config, causal=True).double()
    identity = torch.eye(4, dtype=torch.float64)
    linear_from_seed(attn.c_attn, torch.cat([identity, identity, identity], dim=1))
    linear_from_seed(attn.c_proj, matrix(MULTI_HEAD_W_O))
    x = matrix(CAT_SAT_V)[None]  # (B=1, T, d_model)
    with torch.no_grad():
        q, k, v = attn.c_attn(x).split(config.n_embd, dim=2)  # each (1, T, d_model)
        q, k, v = attn.split_heads(q), attn.split_heads(k), attn.split_heads(v)  # (1, nh, T, hs)
        allowed = attention_mask(3, 3, 0, causal=True, key_padding=None, device=x.device)
        heads, weights = attention_explicit(q, k, v, allowed)  # (1, nh, T, hs), (1, nh, T, T)
        concat = heads.transpose(1, 2).reshape(1, 3, config.n_embd)  # (1, T, d_model)
        projected = attn.c_proj(concat)
        attn.use_fast = False
        module_output = attn(x)
    square = {"rows": tokens, "columns": tokens}
    head_columns = ("h1[0]", "h1[1]", "h2[0]", "h2[1]")
    steps = [
        Step(
            "X (input, d_model = 4)",
            "Assumed input: the seed gives no vectors for this example, so X reuses the "
            'value vectors of "The cat sat" from the attention example. Assumed weights: '
            "W^Q = W^K = W^V = I (so Q = K = V = X) and the W^O shown below; the seed's head "
            "weights (0.2/0.7/0.1 and 0.1/0.3/0.6) and head outputs ([0.5, 0.8], [0.3, 0.6]) "
            "are illustrative and come from no stated weights, so they are not compared.",
            x[0],
            f"{SEED_001_MULTIHEAD}",
            rows=tokens,
            key="x-input-d-model-4",
        ),
    ]
    for head in range(config.n_head):
        name = f"head {head + 1}"
        steps += [
            Step(
                f"Q of {name} (columns {2 * head}-{2 * head + 1} of Q)",
                "Splitting into heads reshapes (T, d_model) to (n_h, T, d_k): head i takes its own "
                "d_k = d_model / n_h = 2 columns of Q (and of K and V).",
                q[0, head],
                f"{SEED_001_MULTIHEAD}, Multi-Head Reshaping",
                rows=tokens,
                key=f"q-head-{head + 1}",
            ),
            Step(
                f"Attention weights of {name} (causal)",
                "softmax(Q_i K_i^T / sqrt(2)) with the causal mask, per head.",
                weights[0, head],
                f"{SEED_001_MULTIHEAD}, head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)",
                **square,
                key=f"weights-head-{head + 1}",
            ),
            Step(
                f"Output of {name}",
                "A_i V_i: each head's own weighted sum, d_v = 2 values per token.",
                heads[0, head],
                f"{SEED_001_MULTIHEAD}, head_i",
                rows=tokens,
                key=f"output-head-{head + 1}",
            ),
        ]
    steps += [
        Step(
            "Concat(head_1, head_2)",
            "The heads side by side: (n_h, T, d_v) -> (T, n_h d_v) = (T, d_model).",
            concat[0],
            f"{SEED_001_MULTIHEAD}, Multi-Head Concatenation",
            rows=tokens,
            columns=head_columns,
            key="concat-head-1-head-2",
        ),
        Step(
            "W^O (output projection, in x out)",
            "Assumed: the first two outputs average the two heads, the last two take their "
            "difference, so each output mixes both heads.",
            matrix(MULTI_HEAD_W_O),
            f"{SEED_001_MULTIHEAD}, Final projection (W_O)",
            rows=head_columns,
            key="w-o-output-projection-in-x-out",
        ),
        Step(
            "Concat · W^O",
            "The multi-head output: Concat(head_1, ..., head_h) W^O.",
            projected[0],
            f"{SEED_001_MULTIHEAD}, MultiHead(Q, K, V)",
            rows=tokens,
            key="concat-w-o",
        ),
        Step(
            "The attention layer in one call",
            "The GPT's attention layer (light_llm/nn/attention.py) run on X in one call: the "
            "same numbers as the steps above.",
            module_output[0],
            f"{SEED_001_MULTIHEAD}",
            rows=tokens,
            key="the-attention-layer-in-one-call",
        ),
    ]
    return steps


# --------------------------------------------------------------------------- seed 002 §14
SEED_002_TINY = "seed 002 §14.1"
TINY_Q = [[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]]
TINY_K = [[1.0, 1.0, 0.0], [1.0, 0.0, 1.0]]
TINY_V = [[2.0, 0.0, 1.0], [1.0, 1.0, 0.0]]
TINY_GRAD_OUTPUT = [[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]]


def tiny_attention() -> list[Step]:
    """The tiny attention forward pass (seed 002 §14.1) and its backward pass (§14.2; §7.3):
    dL/dV = A^T dL/dO, with dL/dQ and dL/dK, all by autograd through attention_explicit."""
    q = as_heads(matrix(TINY_Q)).requires_grad_()
    k = as_heads(matrix(TINY_K)).requires_grad_()
    v = as_heads(matrix(TINY_V)).requires_grad_()
    output, weights = attention_explicit(q, k, v)  # no mask: both tokens see both
    weights.retain_grad()  # dL/dA, read after the backward pass
    grad_output = matrix(TINY_GRAD_OUTPUT)
    output.backward(as_heads(grad_output))  # L with dL/dO = grad_output
    with torch.no_grad():
        scores = q @ k.transpose(-2, -1)
    grad_weights = weights.grad[0, 0]  # (T, T)
    # the softmax backward of the NumPy engine, row by row: A ⊙ (dL/dA - Σ_j dL/dA ⊙ A)
    grad_scores = softmax_backward(grad_weights.numpy(), weights[0, 0].detach().numpy())
    tokens = ("token 1", "token 2")
    square = {"rows": tokens, "columns": tokens}
    return [
        Step(
            "Q·K^T",
            "n = 2 tokens, d_k = d_v = 3, one head, no mask.",
            scores[0, 0],
            f"{SEED_002_TINY}, Step 1",
            seed_value=[[1, 2], [1, 1]],
            **square,
            key="q-k-t",
        ),
        Step(
            "S = Q·K^T / sqrt(3)",
            "The scaled scores.",
            scores[0, 0] / math.sqrt(3),
            f"{SEED_002_TINY}, Step 1",
            **square,
            key="s-q-k-t-sqrt-3",
        ),
        Step(
            "A = softmax(S)",
            "Row 1 is 1 / (1 + e^(1/sqrt 3)) = 0.3595 and 0.6405; the seed prints 0.38 and 0.62.",
            weights[0, 0],
            f"{SEED_002_TINY}, Step 2",
            seed_value=[[0.38, 0.62], [0.5, 0.5]],
            **square,
            key="a-softmax-s",
        ),
        Step(
            "O = A·V",
            "The seed's first row follows from its rounded weights 0.38 / 0.62.",
            output[0, 0],
            f"{SEED_002_TINY}, Step 3",
            seed_value=[[1.38, 0.62, 0.38], [1.5, 0.5, 0.5]],
            rows=tokens,
            key="o-a-v",
        ),
        Step(
            "dL/dO (given)",
            "The gradient arriving from the layer above.",
            grad_output,
            "seed 002 §14.2",
            rows=tokens,
            key="dl-do-given",
        ),
        Step(
            "dL/dV = A^T · dL/dO",
            "By autograd (PyTorch differentiating the attention code); equal to A^T dL/dO (seed "
            "002 §7.3). The "
            "seed's 0.38 / 0.62 come from its rounded A.",
            v.grad[0, 0],
            "seed 002 §14.2",
            seed_value=[[0.38, 0.5, 0.38], [0.62, 0.5, 0.62]],
            rows=tokens,
            key="dl-dv-a-t-dl-do",
        ),
        Step(
            "dL/dA = dL/dO · V^T",
            "The gradient at the attention weights, read from autograd: entry (i, j) is how "
            "much the loss changes when token i gives a little more weight to token j, the "
            "dot product of row i of dL/dO with value row j. The seed stops at dL/dV.",
            grad_weights,
            "seed 002 §7.3 (G_P = G_O V^T)",
            **square,
            key="dl-da-dl-do-v-t",
        ),
        Step(
            "dL/dS = A ⊙ (dL/dA - rowsum(dL/dA ⊙ A))",
            "Each row of dL/dA through the softmax Jacobian diag(a) - a a^T of that row "
            "(seed 002 §7.3, eq. 25), computed by the NumPy engine's softmax backward. Each "
            "row sums to 0: adding the same number to every score of a row changes no weight.",
            grad_scores,
            "seed 002 §7.3 (G_S), eq. 25; seed 001, Gradient of Softmax",
            **square,
            key="dl-ds-a-dl-da-rowsum-dl-da-a",
        ),
        Step(
            "dL/dQ = dL/dS · K / sqrt(d_k)",
            "By autograd through the attention code; equal to the previous step times K, "
            "divided by sqrt(3).",
            q.grad[0, 0],
            "seed 002 §7.3",
            rows=tokens,
            key="dl-dq-dl-ds-k-sqrt-d-k",
        ),
        Step(
            "dL/dK = dL/dS^T · Q / sqrt(d_k)",
            "The keys' gradient, by autograd.",
            k.grad[0, 0],
            "seed 002 §7.3",
            rows=tokens,
            key="dl-dk-dl-ds-t-q-sqrt-d-k",
        ),
    ]


# --------------------------------------------------------------------------- "river"
RIVER_TOKENS = ("[CLS]", "The", "bank", "of", "the", "river", "was", "flooded", "[SEP]")
RIVER_EMBEDDINGS = [
    [1.0, 0.2, 0.1],
    [0.2, 0.8, 0.1],
    [0.2, 0.1, 0.9],
    [0.9, 1.0, 0.2],
    [0.2, 0.8, 0.1],
    [0.0, 0.9, 0.9],
    [0.3, 0.8, 0.9],
    [0.1, 0.9, 0.8],
    [0.0, 0.3, 0.1],
]
RIVER_W_Q = [[0.0, 0.0, 0.0], [0.0, 15.33, 0.0], [0.0, 0.0, -13.11]]
RIVER_W_K = [[0.1, 0.2, 0.3], [0.4, 0.5, 0.6], [0.7, 0.8, 0.9]]
RIVER_W_V = [[0.7, 0.8, 0.9], [1.0, 1.1, 1.2], [1.3, 1.4, 1.5]]
RIVER = RIVER_TOKENS.index("river")
# the attention weights of "river" that seed 003 §23 prints
SEED_RIVER_WEIGHTS = [0.0576, 0.0964, 0.1530, 0.0562, 0.0964, 0.1549, 0.1248, 0.1374, 0.1233]
NAN = float("nan")
SEED_003 = "seed 003"


def river() -> list[Step]:
    """Step-by-step attention for "river" in "The bank of the river was flooded!" with the
    seed's embeddings and W_Q, W_K, W_V (seed 003 §16-25), through a one-head SelfAttention
    (W^O = I), with and without the 1/sqrt(d_k) scaling."""
    tokens = RIVER_TOKENS
    config = ModelConfig(vocab_size=9, block_size=9, n_layer=1, n_head=1, n_embd=3, bias=False)
    attn = SelfAttention(config, causal=False).double()  # BERT-style: no causal mask
    linear_from_seed(
        attn.c_attn, torch.cat([matrix(RIVER_W_Q), matrix(RIVER_W_K), matrix(RIVER_W_V)], dim=1)
    )
    linear_from_seed(attn.c_proj, torch.eye(3, dtype=torch.float64))
    x = matrix(RIVER_EMBEDDINGS)[None]  # (1, T, 3)
    with torch.no_grad():
        q, k, v = (attn.split_heads(t) for t in attn.c_attn(x).split(3, dim=2))  # (1, 1, T, 3)
        d_k = q.size(-1)
        raw_scores = q[0, 0, RIVER] @ k[0, 0].T  # (T,)
        seed_query = matrix([0.0, 13.8, -11.8])  # the seed's rounded Q_river
        seed_query_scores = seed_query @ k[0, 0].T
        river_q = q[:, :, RIVER : RIVER + 1]  # (1, 1, 1, 3)
        # without scaling: softmax(q·k) = attention_explicit of sqrt(d_k) q, which cancels the
        # 1/sqrt(d_k) inside
        unscaled_out, unscaled_weights = attention_explicit(river_q * math.sqrt(d_k), k, v)
        seed_query_out, seed_query_weights = attention_explicit(
            as_heads(seed_query[None]) * math.sqrt(d_k), k, v
        )
        scaled_out, scaled_weights = attention_explicit(river_q, k, v)
        module_out = attn(x)[0, RIVER]
    unscaled_weights = unscaled_weights[0, 0, 0]
    weighted_values = unscaled_weights[:, None] * v[0, 0]  # (T, 3)
    columns = tokens
    seed_raw = [-0.774, -0.258, 0.204, -0.798, NAN, 0.216, 0.0, 0.096, NAN]
    return [
        Step(
            "Embeddings x (d = 3)",
            "The seed's 3-dimensional embeddings of the nine tokens.",
            x[0],
            f"{SEED_003} §16",
            rows=tokens,
            key="embeddings-x-d-3",
        ),
        Step(
            "W_Q, W_K, W_V (in x out)",
            "W_Q = diag(0, 15.33, -13.11); W_K and W_V as in the seed, loaded into the "
            "attention layer's projection (which stores each matrix transposed).",
            torch.cat([matrix(RIVER_W_Q), matrix(RIVER_W_K), matrix(RIVER_W_V)], dim=1),
            f"{SEED_003} §16",
            columns=("Q1", "Q2", "Q3", "K1", "K2", "K3", "V1", "V2", "V3"),
            key="w-q-w-k-w-v-in-x-out",
        ),
        Step(
            "Keys K = x W_K",
            "The seed prints four of the nine rows: [CLS], The and flooded in §17, river's "
            "own key in §19.",
            k[0, 0],
            f"{SEED_003} §17, §19",
            seed_value=[
                [0.25, 0.38, 0.51],
                [0.41, 0.52, 0.63],
                *[[NAN] * 3] * 3,
                [0.99, 1.17, 1.35],
                [NAN] * 3,
                [0.93, 1.11, 1.29],
                [NAN] * 3,
            ],
            rows=tokens,
            key="keys-k-x-w-k",
        ),
        Step(
            'Query of "river" q = x_river W_Q',
            "x_river = [0, 0.9, 0.9]; the seed rounds the query to [0, 13.8, -11.8].",
            q[0, 0, RIVER],
            f"{SEED_003} §19",
            seed_value=[0.0, 13.8, -11.8],
            seed_decimals=1,
            key="query-of-river-q-x-river-w-q",
        ),
        Step(
            "Raw scores q_river · k_j",
            "One dot product per token (the seed skips 'the' and [SEP]). The seed's figures "
            "were computed with its rounded query [0, 13.8, -11.8]; the next step shows that.",
            raw_scores,
            f"{SEED_003} §19",
            seed_value=seed_raw,
            seed_decimals=3,
            columns=columns,
            key="raw-scores-q-river-k-j",
        ),
        Step(
            "Raw scores with the seed's rounded query [0, 13.8, -11.8]",
            "The same keys with the seed's rounded query reproduce its printed scores.",
            seed_query_scores,
            f"{SEED_003} §19",
            seed_value=seed_raw,
            seed_decimals=3,
            columns=columns,
            key="raw-scores-with-the-seed-s-rounded",
        ),
        Step(
            "Attention weights without scaling: softmax(q·k)",
            "The seed's §23 weights are the softmax of the raw scores, not divided by "
            "sqrt(d_k), although §22 mentions normalising; its 4th decimals follow from the "
            "rounded query.",
            unscaled_weights,
            f"{SEED_003} §23",
            seed_value=SEED_RIVER_WEIGHTS,
            seed_decimals=4,
            columns=columns,
            key="attention-weights-without-scaling-softmax-q-k",
        ),
        Step(
            "Attention weights without scaling, from the seed's rounded query",
            "softmax of the scores of the rounded query: exactly the seed's figures.",
            seed_query_weights[0, 0, 0],
            f"{SEED_003} §23",
            seed_value=SEED_RIVER_WEIGHTS,
            seed_decimals=4,
            columns=columns,
            key="attention-weights-without-scaling-from-the-seed",
        ),
        Step(
            "Attention weights with scaling: softmax(q·k / sqrt(3))",
            "What every model here computes: dividing by sqrt(d_k) flattens the distribution.",
            scaled_weights[0, 0, 0],
            f"{SEED_003} §22-23",
            columns=columns,
            key="attention-weights-with-scaling-softmax-q-k",
        ),
        Step(
            "Values V = x W_V",
            "The seed prints five of the nine rows.",
            v[0, 0],
            f"{SEED_003} §25",
            seed_value=[
                [1.03, 1.16, 1.29],
                [1.07, 1.18, 1.29],
                [1.41, 1.53, 1.65],
                [NAN] * 3,
                [NAN] * 3,
                [2.07, 2.25, 2.43],
                [NAN] * 3,
                [2.01, 2.19, 2.37],
                [NAN] * 3,
            ],
            rows=tokens,
            key="values-v-x-w-v",
        ),
        Step(
            "Weighted values a_j v_j (without scaling)",
            "Each value row times its (unscaled) attention weight. Where the seed differs in "
            "the 4th decimal (marked *), neither the exact query nor the seed's rounded one "
            "gives its figure: it rounded inside its own arithmetic.",
            weighted_values,
            f"{SEED_003} §25",
            seed_value=[
                [0.0593, 0.0668, 0.0743],
                [NAN] * 3,
                [0.2158, 0.2340, 0.2525],
                *[[NAN] * 3] * 2,
                [0.3205, 0.3486, 0.3766],
                *[[NAN] * 3] * 3,
            ],
            seed_decimals=4,
            rows=tokens,
            key="weighted-values-a-j-v-j-without-scaling",
        ),
        Step(
            'Output for "river" without scaling: Σ a_j v_j',
            "The sum of the weighted rows, with the exact query.",
            unscaled_out[0, 0, 0],
            f"{SEED_003} §25",
            seed_value=[1.5094, 1.6410, 1.7726],
            seed_decimals=4,
            key="output-for-river-without-scaling-sigma-a-j-v-j",
        ),
        Step(
            'Output for "river" without scaling, from the seed\'s rounded query',
            "The seed's own path: its first entry agrees, but its second and third entries "
            "(1.6410, 1.7726) do not follow from its own weights and values.",
            seed_query_out[0, 0, 0],
            f"{SEED_003} §25",
            seed_value=[1.5094, 1.6410, 1.7726],
            seed_decimals=4,
            key="output-for-river-without-scaling-from-the",
        ),
        Step(
            'Output for "river" with scaling',
            "softmax(q·k / sqrt(3)) V: the value a BERT layer computes (before W^O).",
            scaled_out[0, 0, 0],
            f"{SEED_003} §25",
            key="output-for-river-with-scaling",
        ),
        Step(
            'The attention layer in one call, row "river"',
            "The encoder's attention layer (light_llm/nn/attention.py; no causal mask, W^O = I) "
            "in one call: the same as the scaled output.",
            module_out,
            f"{SEED_003} §25-26",
            key="the-attention-layer-in-one-call-row-river",
        ),
    ]


def cat_sat_figures(folder: Path) -> list[Path]:
    steps = cat_sat()
    tokens = CAT_SAT_TOKENS
    panels = [
        [
            ("GPT (causal mask)", value_of(steps, "attention-weights-gpt-causal-softmax")),
            ("BERT (no mask)", value_of(steps, "attention-weights-bert-no-mask")),
        ]
    ]
    title = 'Attention weights for "The cat sat" (seed 001, d_k = 3)'
    return [plots.heatmap_grid(folder / "cat_sat_attention.png", panels, tokens, tokens, title)]


def multi_head_figures(folder: Path) -> list[Path]:
    steps = multi_head()
    tokens = CAT_SAT_TOKENS
    panels = [[(f"head {h}", value_of(steps, f"weights-head-{h}")) for h in (1, 2)]]
    title = 'Multi-head attention on "The cat sat": weights per head (d_model = 4, h = 2)'
    return [plots.heatmap_grid(folder / "multi_head_attention.png", panels, tokens, tokens, title)]


def tiny_attention_figures(folder: Path) -> list[Path]:
    steps = tiny_attention()
    tokens = ("token 1", "token 2")
    panels = [
        [
            ("S = Q·K^T / sqrt(3)", value_of(steps, "s-q-k-t-sqrt-3")),
            ("A = softmax(S)", value_of(steps, "a-softmax-s")),
        ],
        [
            ("dL/dA = dL/dO · V^T", value_of(steps, "dl-da-dl-do-v-t")),
            (
                "dL/dS (softmax backward)",
                value_of(steps, "dl-ds-a-dl-da-rowsum-dl-da-a"),
            ),
        ],
    ]
    title = "Tiny attention (seed 002 §14): forward (top) and backward (bottom)"
    return [
        plots.heatmap_grid(
            folder / "tiny_attention.png", panels, tokens, tokens, title, value_range=None
        )
    ]


def river_figures(folder: Path) -> list[Path]:
    steps = river()
    distributions = [
        (
            "softmax(q·k) (seed 003)",
            value_of(steps, "attention-weights-without-scaling-softmax-q-k"),
        ),
        (
            "softmax(q·k / sqrt(3))",
            value_of(steps, "attention-weights-with-scaling-softmax-q-k"),
        ),
    ]
    title = 'Attention of "river" over "The bank of the river was flooded!" (seed 003 §23)'
    return [
        plots.distributions_figure(
            folder / "river_attention.png", distributions, RIVER_TOKENS, title
        )
    ]


# the worked examples of this module, in the order light-llm explain lists them
EXAMPLES = (
    Example(
        "cat-sat",
        'attention on "The cat sat": Q·K^T, scaling, causal mask, softmax '
        "for GPT and BERT, A·V (seed 001)",
        cat_sat,
        cat_sat_figures,
    ),
    Example(
        "multi-head",
        "multi-head split, per-head attention, concat and W^O with "
        "d_model = 4, h = 2 (seed 001, 000 §3)",
        multi_head,
        multi_head_figures,
    ),
    Example(
        "tiny-attention",
        "the tiny attention forward pass and its backward pass "
        "dL/dV, dL/dA, dL/dS, dL/dQ, dL/dK (seed 002 §14, §7.3)",
        tiny_attention,
        tiny_attention_figures,
    ),
    Example(
        "river",
        'attention for "river" in "The bank of the river was flooded!", with '
        "and without 1/sqrt(d_k) (seed 003 §16-25)",
        river,
        river_figures,
    ),
)
