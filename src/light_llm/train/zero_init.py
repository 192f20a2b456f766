"""``--zero-init-projections``: a new model's block output projections start at zero
(modded-nanogpt's zero-init), the same in both engines.

Every block l adds its two sublayers' outputs to the residual stream through an output
projection, attention's W^O (``transformer.h.l.attn.c_proj.weight``) and the MLP's W_2
(``transformer.h.l.mlp.c_proj.weight``). With the switch both start at 0 instead of
N(0, 0.02):

    W^O_l = 0,  W_2_l = 0   (l = 1..L; their biases are 0 already)
    so  X_l = X_{l-1} + 0 + 0 = X_{l-1}:  each block starts as the identity.

They still learn: the gradient of W^O is (attention output)^T dX, nonzero although W^O is
zero, and Muon's orthogonalised update of a zero matrix is a full-rank step of the usual
size. Only the weights a run starts from change: every other weight is drawn exactly as
without the switch (the projections are drawn, then set to zero), so that two runs differ in
these matrices alone. It is a setting of the training run, not of the model: checkpoints,
inference and export are those of any GPT. A fine-tuning run (``init_from``) starts from its
base's weights and refuses it; a resumed run inherits it (and starts from its checkpoint).

Plain names, no tensor library: the PyTorch trainer zeroes these in its ``nn.Module``, the
NumPy trainer in its ``params``.
"""

from __future__ import annotations

from collections.abc import Iterable

# the residual-stream output projections of a block (GPT-2's names, both engines)
PROJECTION_SUFFIXES = (".attn.c_proj.weight", ".mlp.c_proj.weight")


def projection_names(names: Iterable[str]) -> list[str]:
    """The names among ``names`` (a model's parameter names) of the blocks' output
    projections that ``--zero-init-projections`` starts at zero, in the order given."""
    return [name for name in names if name.endswith(PROJECTION_SUFFIXES)]
