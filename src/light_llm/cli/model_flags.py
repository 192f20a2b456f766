"""The flags that shape a model (``--n-layer``, ``--positions``, ``--qk-norm`` ...), written once
for the commands that take them: ``light-llm train`` (the model it trains) and ``light-llm info``
(the model it counts). Each sets the :class:`~light_llm.config.ModelConfig` field of its name;
a flag not given leaves the field to the preset or the checkpoint.
"""

from __future__ import annotations

import argparse
from typing import Any

from light_llm.config import ACTIVATIONS, ATTENTIONS, BLOCK_ORDERS, NORMS, POSITIONS

# (flag, config field, type, choices, metavar, help) of the flags that take a value
VALUED = [
    ("--n-layer", "n_layer", int, None, "L", "transformer blocks L"),
    ("--n-head", "n_head", int, None, "H", "attention heads n_h (must divide n_embd)"),
    ("--n-embd", "n_embd", int, None, "D", "model width d_model"),
    (
        "--n-inner",
        "n_inner",
        int,
        None,
        "F",
        "feed-forward hidden width d_ff (default 4 d_model; 8 d_model / 3, to a multiple of 8, "
        "for SwiGLU)",
    ),
    ("--block-size", "block_size", int, None, "T", "context length in tokens T_max"),
    ("--dropout", "dropout", float, None, "P", "dropout probability"),
    ("--positions", "positions", str, POSITIONS, None, "position encoding"),
    (
        "--position-base",
        "position_base",
        float,
        None,
        "B",
        "the base of the position angles, θ_i = B^(-2i/d) for rotary and sinusoidal positions "
        "(default 10000)",
    ),
    ("--norm", "norm", str, NORMS, None, "normalisation layer"),
    ("--activation", "activation", str, ACTIVATIONS, None, "feed-forward activation"),
    ("--block-order", "block_order", str, BLOCK_ORDERS, None, "pre-LN (GPT-2) or post-LN blocks"),
    ("--attention", "attention", str, ATTENTIONS, None, "softmax or causal linear attention"),
    (
        "--logit-softcap",
        "logit_softcap",
        float,
        None,
        "C",
        "cap the output logits smoothly: C tanh(logits / C), C > 0 (default: no cap)",
    ),
    (
        "--mtp-weight",
        "mtp_weight",
        float,
        None,
        "W",
        "multi-token prediction: a second head (h + W_mtp h) predicts the token after next, "
        "and the training loss adds W times its cross-entropy (default 0: off; the "
        "validation loss stays the next token's)",
    ),
]
# (flag, config field, the value it sets, help) of the on/off flags
SWITCHES = [
    (
        "--qk-norm",
        "qk_norm",
        True,
        "RMS-normalise each head's queries and keys (no gain) before rotary and Q K^T",
    ),
    (
        "--untie-embeddings",
        "tie_embeddings",
        False,
        "an output head of its own instead of the token table (V x d more parameters)",
    ),
    ("--no-bias", "bias", False, "no biases in the linear layers and LayerNorms"),
    (
        "--value-embeddings",
        "value_embeddings",
        True,
        "a second token table E_v mixed into every layer's attention values, "
        "V = a X W_V + b E_v[tokens] (a, b learned per layer, from 0.5)",
    ),
    (
        "--embedding-skip",
        "embedding_skip",
        True,
        "every block reads λ x + μ x_0, the embedding mixed back in (λ, μ learned per layer, "
        "from 1 and 0)",
    ),
    (
        "--smear",
        "smear",
        True,
        "a one-token look-back on the embedding: x_t += λ σ(w · x_t[:12]) x_{t-1} "
        "(w and λ learned, from 0)",
    ),
]
FIELDS = [entry[1] for entry in VALUED] + [entry[1] for entry in SWITCHES]


def add_model_flags(group: argparse._ActionsContainer) -> None:
    """Every model flag, on ``group`` (a parser or an argument group)."""
    for flag, field, kind, choices, metavar, help_text in VALUED:
        group.add_argument(
            flag, dest=field, type=kind, choices=choices, metavar=metavar, help=help_text
        )
    for flag, field, value, help_text in SWITCHES:
        group.add_argument(flag, dest=field, action="store_const", const=value, help=help_text)


def given_model_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The model fields the command line set: {field: value} of the flags given."""
    values = {field: getattr(args, field) for field in FIELDS}
    return {field: value for field, value in values.items() if value is not None}


def folder_to_folder_parser(
    subparsers: argparse._SubParsersAction,
    name: str,
    summary: str,
    description: str,
    examples: str,
    checkpoint_help: str,
) -> argparse.ArgumentParser:
    """The parser of a command that reads one model folder (``--checkpoint DIR``) and writes
    another (``--out DIR``): merge, export, quantize."""
    parser = subparsers.add_parser(
        name,
        help=summary,
        description=description,
        epilog=examples,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--checkpoint", required=True, metavar="DIR", help=checkpoint_help)
    parser.add_argument("--out", required=True, metavar="DIR", help="the folder to write")
    return parser
