"""The parts of Muon that both engines share, without torch: which parameters it updates, the
Newton-Schulz coefficients and the shape-dependent scale of its update.

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

# Quintic Newton-Schulz X <- a X + (b A + c A²) X with A = X Xᵀ: chosen (not convergent to
# exactly 1) so that small singular values grow fast; after 5 steps they lie near [0.7, 1.2].
NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)
NS_STEPS = 5
NS_EPS = 1e-7  # added to ||G||_F so that a zero gradient stays zero

# a parameter inside transformer block i is named "...h.{i}.<module>.weight" in both engines
BLOCK_PARAMETER = re.compile(r"(^|\.)h\.\d+\.")


def is_muon_matrix(name: str, ndim: int) -> bool:
    """Whether Muon updates the parameter ``name`` of ``ndim`` dimensions: a 2-D weight
    inside a transformer block (attention q/k/v and output projections, the MLP's
    matrices). Everything else (embeddings, head, norm gains, biases) goes to AdamW."""
    return ndim == 2 and BLOCK_PARAMETER.search(name) is not None


# the GPT's token and learned-position tables, named alike in both engines
EMBEDDING_TABLE = re.compile(r"(^|\.)(wte|wpe)\.weight$")


def is_embedding_table(name: str) -> bool:
    """Whether ``name`` is one of the GPT's embedding tables (token ``wte``, learned
    positions ``wpe``): the AdamW parameters that ``embedding_lr`` gives a rate of their own.
    A table is looked up one row per token, so each row gets a gradient only from the
    tokens it stands for; a larger rate makes up for that (the NanoGPT speedrun and nanochat
    train theirs with rates 10 to 300 times the output head's)."""
    return EMBEDDING_TABLE.search(name) is not None


def update_scale(rows: int, cols: int) -> float:
    """sqrt(max(1, rows / cols)) for a (rows, cols) = (d_out, d_in) weight: the
    orthogonalised update O has min(rows, cols) unit singular values, so its entries have
    RMS 1/sqrt(max(rows, cols)); times this scale every matrix's update has RMS
    1/sqrt(cols) = 1/sqrt(d_in), tall ones as square ones (Keller Jordan's Muon)."""
    return math.sqrt(max(1.0, rows / cols))
