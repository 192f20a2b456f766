"""The parts of Muon that both engines share, without torch: which parameters it updates, the
Newton-Schulz coefficients (Keller Jordan's, or Polar Express's per-step ones) and the
shape-dependent scale of its update (Keller Jordan's, or one by both sides' ratio).

Muon (Keller Jordan's "Muon: An optimizer for hidden layers in neural networks", 2024)
orthogonalises the momentum of a weight matrix; it is meant for the matrices that mix
features inside the transformer blocks. Embedding tables, the output head, norm gains and
biases are not such maps (a row of an embedding is looked up, not multiplied), so they stay
with AdamW. The PyTorch optimizer is :class:`light_llm.train.muon.MuonAdamW`, the NumPy one
:class:`light_llm.reference.optim.MuonAdamW`.
"""

from __future__ import annotations

import math
import re

from light_llm.errors import ConfigError

# Quintic Newton-Schulz X <- a X + (b A + c A²) X with A = X Xᵀ: chosen (not convergent to
# exactly 1) so that small singular values grow fast; after 5 steps they lie near [0.7, 1.2].
NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)
NS_STEPS = 5
NS_EPS = 1e-7  # added to ||G||_F so that a zero gradient stays zero

# Polar Express (Amsel, Persson, Musco and Gower, "The Polar Express: Optimal Matrix Sign
# Methods and Their Application to the Muon Algorithm", 2025): a different quintic at each
# step, each the minimax-optimal one for the interval the singular values lie in after the
# steps before it, so that five steps bring every σ in [1e-3, 1] much closer to 1 than five
# steps of one fixed quintic. Their coefficients for 5 steps, as the NanoGPT speedrun uses
# them, with X0 = G / (1.02 ||G||_F + ε): the margin keeps σ_max below 1 in bfloat16.
POLAR_EXPRESS_COEFFICIENTS = (
    (8.156554524902461, -22.48329292557795, 15.878769915207462),
    (4.042929935166739, -2.808917465908714, 0.5000178451051316),
    (3.8916678022926607, -2.772484153217685, 0.5060648178503393),
    (3.285753657755655, -2.3681294933425376, 0.46449024233003106),
    (2.3465413258596377, -1.7097828382687081, 0.42323551169305323),
)
POLAR_EXPRESS_MARGIN = 1.02
ORTHOGONALISERS = ("newton-schulz", "polar-express")

# Cautious Weight Decay (Chen, Liu, Liang et al., "Cautious Weight Decay", 2025): for a step
# W <- W - η u, decay only the entries where the update and the weight agree in sign,
#     W <- W - η (u + λ 1[u ⊙ W >= 0] ⊙ W),
# so that decay never pulls a weight against the direction its own update moves it. Both
# engines' MuonAdamW apply it to their Muon and AdamW parameters with --cautious-weight-decay.

# NorMuon (Li et al., "NorMuon: Making Muon more efficient and scalable", 2025):
# Muon's orthogonalised update O (d_out, d_in) gives its output neurons (rows) updates of
# unequal size; NorMuon keeps a second moment per neuron, an exponential average of each
# row's mean square, and divides the row by its root, then scales the whole update back to
# O's Frobenius norm (so the step size stays Muon's):
#     v_i = β2 v_i + (1 - β2) mean_j(O_ij²)          v ∈ R^{d_out}, v = 0 at the start
#     Ô_ij = O_ij / (sqrt(v_i) + ε);    Ô <- Ô ||O||_F / (||Ô||_F + ε)
# with β2 = 0.95 and ε = 1e-10 as in the authors' reference implementation, and as there
# without bias correction: v's correction 1 / (1 - β2^t) is the same for every row, so the
# rescaling to ||O||_F takes it out again (up to ε). Both engines' MuonAdamW do this with
# --normuon, before the weight decay and the shape scale (update_scale).
NORMUON_BETA2 = 0.95
NORMUON_EPS = 1e-10


def orthogonaliser_steps(
    method: str = "newton-schulz", steps: int = NS_STEPS
) -> tuple[float, tuple[tuple[float, float, float], ...]]:
    """(margin m, the (a, b, c) of each step) of an orthogonaliser: X0 = G / (m ||G||_F + ε),
    then Xk = a_k Xk-1 + (b_k A + c_k A²) Xk-1 with A = Xk-1 Xk-1ᵀ. "newton-schulz" repeats
    Keller Jordan's quintic ``steps`` times (m = 1); "polar-express" takes Polar Express's
    first ``steps`` quintics (at most 5)."""
    if method == "newton-schulz":
        return 1.0, (NS_COEFFICIENTS,) * steps
    if method == "polar-express":
        if not 0 <= steps <= len(POLAR_EXPRESS_COEFFICIENTS):
            raise ConfigError(f"Polar Express has {len(POLAR_EXPRESS_COEFFICIENTS)} steps.")
        return POLAR_EXPRESS_MARGIN, POLAR_EXPRESS_COEFFICIENTS[:steps]
    raise ConfigError(f"unknown orthogonaliser {method!r}; known: {', '.join(ORTHOGONALISERS)}.")


# a parameter inside transformer block i is named "...h.{i}.<module>.weight" in both engines
BLOCK_PARAMETER = re.compile(r"(^|\.)h\.\d+\.")


def is_muon_matrix(name: str, ndim: int) -> bool:
    """Whether Muon updates the parameter ``name`` of ``ndim`` dimensions: a 2-D weight
    inside a transformer block (attention q/k/v and output projections, the MLP's
    matrices). Everything else (embeddings, head, norm gains, biases) goes to AdamW."""
    return ndim == 2 and BLOCK_PARAMETER.search(name) is not None


# the GPT's token, learned-position and value-embedding tables, named alike in both engines
EMBEDDING_TABLE = re.compile(r"(^|\.)(wte|wpe|wve)\.weight$")


def is_embedding_table(name: str) -> bool:
    """Whether ``name`` is one of the GPT's embedding tables (token ``wte``, learned
    positions ``wpe``, value embeddings ``wve``): the AdamW parameters that ``embedding_lr``
    gives a rate of their own. A table is looked up one row per token, so each row gets a
    gradient only from the tokens it stands for; a larger rate makes up for that (the NanoGPT
    speedrun and nanochat train theirs with rates 10 to 300 times the output head's)."""
    return EMBEDDING_TABLE.search(name) is not None


# How Muon scales the orthogonalised update of a (d_out, d_in) matrix (update_scale):
# "keller", Keller Jordan's sqrt(max(1, d_out / d_in)); "aspect", sqrt(max/min of the two
# sides), which gives a wide matrix (a feed-forward layer's W_2) the scale of its transpose.
MUON_SCALES = ("keller", "aspect")
# the scale of a run started before the scale was a setting
MUON_SCALE_BEFORE_CHOICE = "keller"


def check_scale(rule: str) -> None:
    """ConfigError unless ``rule`` is one of :data:`MUON_SCALES`."""
    if rule not in MUON_SCALES:
        raise ConfigError(f"unknown Muon scale {rule!r}; known: {', '.join(MUON_SCALES)}.")


def update_scale(rows: int, cols: int, rule: str = "keller") -> float:
    """The factor s in W <- W - η s O for a (rows, cols) = (d_out, d_in) weight. The
    orthogonalised update O has min(rows, cols) unit singular values, so its entries have
    RMS sqrt(min / (rows cols)) = 1/sqrt(max(rows, cols)). Then

        "keller":  s = sqrt(max(1, rows / cols))          update RMS 1/sqrt(d_in)
        "aspect":  s = sqrt(max(rows, cols) / min(rows, cols))
                                                          update RMS 1/sqrt(min(d_out, d_in))

    "keller" is Keller Jordan's Muon: tall matrices as square ones, a wide one (d_out < d_in)
    not raised. "aspect" raises a wide one as much as its transpose: among matrices that
    share their shorter side (every block matrix of a GPT, its width), it is Moonlight's
    0.2 sqrt(max(rows, cols)) (Liu et al., "Muon is Scalable for LLM Training", 2025) divided
    by a square matrix's, so a square matrix's step is the same under both rules."""
    if rule == "keller":
        return math.sqrt(max(1.0, rows / cols))
    check_scale(rule)  # an unknown name stops here; a known one costs two comparisons a step
    return math.sqrt(max(rows, cols) / min(rows, cols))
