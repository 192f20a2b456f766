"""``light-llm fill-mask``: the masked-LM head's top candidates for each [MASK] of a text."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

DESCRIPTION = """\
Predict the token behind each [MASK] of TEXT with a masked-language-model encoder (seed 003
§29): for every [MASK], left to right, the TOP_K most probable tokens and their probabilities
P = softmax(logits) at that position. Give a second text for a sentence pair. The checkpoint
must have an MLM head: one trained with `light-llm train --model bert`, or a HuggingFace
BertForMaskedLM folder (the packaged MiniLM is a sentence-embedding model without one).
"""

EXAMPLES = """\
examples:
  light-llm fill-mask --checkpoint out-bert "to be or not to [MASK]"
  light-llm fill-mask --checkpoint out-bert --top-k 10 "[MASK] , [MASK] , wherefore art thou"
  light-llm fill-mask --checkpoint out-bert --json "the king is [MASK]"
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "fill-mask",
        help="top predictions for each [MASK] of a text (masked-LM encoder)",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("text", metavar="TEXT", help="text with one or more [MASK]")
    parser.add_argument(
        "text_pair", nargs="?", metavar="TEXT_PAIR", help="second sentence of a pair"
    )
    parser.add_argument(
        "--checkpoint",
        type=Path,
        metavar="DIR",
        help="a light-llm BERT checkpoint (or training output folder) or HuggingFace BERT folder "
        "with a masked-LM head (required; without it, the error names one to use)",
    )
    parser.add_argument(
        "--top-k", type=int, default=5, metavar="K", help="candidates per [MASK] (default 5)"
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help='print a JSON list, one per [MASK], of {"token", "id", "probability"}',
    )
    parser.set_defaults(func=run)


def missing_checkpoint(root: Path) -> str:
    """What to give as --checkpoint: the newest encoder run under ``root``, else how to train
    one (the packaged MiniLM embeds sentences but has no masked-LM head to fill masks)."""
    from light_llm.checkpoints.folder import ENCODER_ARCHITECTURE, RUN_PATTERNS, inspect_folder
    from light_llm.errors import LightLLMError

    runs = []
    for pattern in RUN_PATTERNS:
        for weights in root.glob(pattern):
            try:
                encoder = inspect_folder(weights.parent).architecture == ENCODER_ARCHITECTURE
            except LightLLMError:
                continue
            if encoder:
                runs.append(weights)
    if runs:
        newest = max(runs, key=lambda path: path.stat().st_mtime).parent.parent
        return f"fill-mask needs --checkpoint DIR: the encoder run here is --checkpoint {newest}."
    return (
        "fill-mask needs --checkpoint DIR, a masked-LM encoder: train one with `light-llm "
        "train --model bert --out out-bert` (the packaged MiniLM embeds sentences but has no "
        "masked-LM head)."
    )


def run(args: argparse.Namespace) -> int:
    from light_llm.checkpoints import load, load_tokenizer, resolve_checkpoint_dir
    from light_llm.errors import CheckpointError, ConfigError
    from light_llm.models.bert import predict_masked
    from light_llm.tokenizers import BertTokenizer

    if args.checkpoint is None:
        raise ConfigError(missing_checkpoint(Path.cwd()))
    folder = resolve_checkpoint_dir(args.checkpoint)
    model = load(folder, architecture="bert")
    tokenizer = load_tokenizer(folder, check_model=True)
    if not isinstance(tokenizer, BertTokenizer):
        raise CheckpointError(
            f"{folder} has a {tokenizer.name} tokenizer, not BERT's WordPiece with [MASK]."
        )
    predictions = predict_masked(model, tokenizer, args.text, args.text_pair, args.top_k)
    if args.json:
        print(json.dumps([[candidate._asdict() for candidate in row] for row in predictions]))
        return 0
    for number, candidates in enumerate(predictions, start=1):
        print(f"[MASK] {number} of {len(predictions)}:")
        width = max(len(candidate.token) for candidate in candidates)
        for candidate in candidates:
            print(f"  {candidate.token:<{width}}  {candidate.probability:7.2%}")
    return 0
