"""``light-llm fill-mask``: the masked-LM head's top candidates for each [MASK] of a text."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

DESCRIPTION = """\
Predict the token behind each [MASK] of TEXT with a masked-language-model encoder (seed 003
§29): for every [MASK], left to right, the TOP_K most probable tokens and their probabilities
P = softmax(logits) at that position. Give a second text for a sentence pair. The checkpoint
must have an MLM head: one trained with `light-llm train --model bert`, or a HuggingFace
BertForMaskedLM folder (the packaged MiniLM is a sentence-embedding model without one).
Without --checkpoint: the newest encoder run under the current folder, else the small encoder
that ships with light-llm (trained by light-llm on Shakespeare; docs/bert.md); a line on
stderr says which.
"""

EXAMPLES = """\
examples:
  light-llm fill-mask "to be or not to [MASK]"       the encoder run here, or the shipped one
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
        "with a masked-LM head (default: the newest encoder run here, else the one that ships "
        "with light-llm)",
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


def run(args: argparse.Namespace) -> int:
    from light_llm.checkpoints import load, load_tokenizer, resolve_checkpoint_dir
    from light_llm.checkpoints.discovery import default_encoder
    from light_llm.errors import CheckpointError
    from light_llm.models.bert import predict_masked, tokens_left_out
    from light_llm.tokenizers import BertTokenizer

    chosen, origin = (args.checkpoint, None) if args.checkpoint else default_encoder(Path.cwd())
    folder = resolve_checkpoint_dir(chosen)
    model = load(folder, architecture="bert")
    tokenizer = load_tokenizer(folder, check_model=True)
    if not isinstance(tokenizer, BertTokenizer):
        raise CheckpointError(
            f"{folder} has a {tokenizer.name} tokenizer, not BERT's WordPiece with [MASK]."
        )
    if origin is not None:  # said once it has loaded, so that an error stays one line
        print(f"fill-mask: using {chosen}, {origin}.", file=sys.stderr, flush=True)
    predictions = predict_masked(model, tokenizer, args.text, args.text_pair, args.top_k)
    left_out = tokens_left_out(tokenizer, args.text, args.text_pair, model.config.block_size)
    if left_out:
        print(
            f"note: the model reads {model.config.block_size} positions, so {left_out} "
            f"token{'s' if left_out > 1 else ''} of the text (no [MASK] among them) "
            f"{'were' if left_out > 1 else 'was'} cut off and not seen by the predictions.",
            file=sys.stderr,
        )
    if args.json:
        print(json.dumps([[candidate._asdict() for candidate in row] for row in predictions]))
        return 0
    for number, candidates in enumerate(predictions, start=1):
        print(f"[MASK] {number} of {len(predictions)}:")
        width = max(len(candidate.token) for candidate in candidates)
        for candidate in candidates:
            print(f"  {candidate.token:<{width}}  {candidate.probability:7.2%}")
    return 0
