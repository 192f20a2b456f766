"""``light-llm eval``: a checkpoint's validation loss and perplexity on a corpus (a GPT's
next-token loss, or a BERT-style encoder's masked-LM loss)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from light_llm.cli.quantize import add_quantize_flag
from light_llm.device import DEVICES

DESCRIPTION = """\
Print the mean next-token cross-entropy (nats per token) of a checkpoint on the validation
split (the last 10%) of a corpus, its perplexity exp(loss) (seed 002 §10.2, eq. 44), and the
same loss in bits per byte and per character of the text the predicted tokens cover (loss x
tokens / ln 2 / bytes; the split's first token is not predicted, so neither it nor its text
counts), which compares models with different tokenizers.

The corpus is --data, else the one the checkpoint was trained on (recorded by light-llm
train), else Shakespeare. By default every validation token is scored once, in consecutive
windows of the model's context length; --eval-iters N instead scores N batches at the same
random offsets the trainer's evaluations use, reproducing its val_loss (to bfloat16 rounding
when it trained under bfloat16 autocast: eval computes in float32).

A BERT-style encoder (light-llm train --model bert) is scored by its masked-LM loss instead:
the mean cross-entropy over the masked tokens (15% of each window, BERT's 80/10/10 rule, seed
003 §29), windows of its context length with [CLS] and [SEP], masked with a fixed seed so
that the number is the same at every call.
"""

EXAMPLES = """\
examples:
  light-llm eval --checkpoint out-light-llm
  light-llm eval --checkpoint out-light-llm --data other.txt
  light-llm eval --checkpoint out-light-llm --eval-iters 20 --batch-size 12
  light-llm eval --checkpoint out-light-llm --quantize int8    # what int8 weights cost
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "eval",
        help="validation loss and perplexity of a checkpoint (GPT, or BERT's masked-LM loss)",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--checkpoint",
        required=True,
        type=Path,
        metavar="DIR",
        help="a checkpoint folder, a training output folder, or a HuggingFace GPT-2, Llama or "
        "Qwen3 folder",
    )
    parser.add_argument("--data", type=Path, metavar="PATH", help="a UTF-8 text file")
    parser.add_argument(
        "--eval-iters",
        type=int,
        metavar="N",
        help="score N random batches (as the trainer does) instead of the whole split",
    )
    parser.add_argument(
        "--batch-size", type=int, metavar="B", help="sequences per batch (default 32)"
    )
    parser.add_argument("--device", choices=DEVICES, default="auto")
    add_quantize_flag(parser)
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object, the numbers unrounded"
    )
    parser.set_defaults(func=run_eval)


def run_eval(args: argparse.Namespace) -> int:
    from tqdm.auto import tqdm

    from light_llm.train.score import score_checkpoint

    bars: list[tqdm] = []  # a progress bar, once a whole-split score knows its batches

    def expect(batches: int) -> None:
        bars.append(tqdm(total=batches, desc="evaluating", unit="batch", disable=None))

    try:
        score = score_checkpoint(
            args.checkpoint,
            args.data,
            eval_iters=args.eval_iters,
            batch_size=args.batch_size,
            device=args.device,
            quantize=args.quantize,
            on_batch=lambda: bars[0].update(),
            batches_expected=expect,
        )
    finally:
        for bar in bars:
            bar.close()
    if args.json:
        report = {
            "val_loss": score.val_loss,
            "perplexity": score.perplexity,
            "tokens_scored": score.tokens_scored,
        }
        if not score.encoder:
            report.update(
                bits_per_byte=score.bits_per_byte,
                bits_per_char=score.bits_per_char,
                nats_per_char=score.nats_per_char,
            )
            report.update(bytes=score.val_bytes, chars=score.val_chars)
        report.update(unigram_baseline=score.unigram_baseline, checkpoint=str(score.checkpoint))
        print(json.dumps(report))
        return 0
    loss_name = "masked-LM loss" if score.encoder else "loss"
    print(f"val {loss_name} {score.val_loss:.4f}, perplexity {score.perplexity:.3f}")
    if not score.encoder:
        print(
            f"{score.bits_per_byte:.4f} bits per byte, {score.bits_per_char:.4f} bits per "
            f"character = {score.nats_per_char:.4f} nats per character (loss x "
            f"{score.tokens_scored:,} tokens / ln 2 over the {score.val_bytes:,} bytes, "
            f"{score.val_chars:,} characters they cover: the split's but its first token's)"
        )
    corpus = score.corpus or "Shakespeare"
    print(f"({score.scored}; validation split of {corpus}; checkpoint {score.checkpoint})")
    if score.corpus is None and not score.corpus_recorded:
        print(
            f"note: {score.checkpoint} records no corpus of its own (export, quantize and merge "
            "write none), so Shakespeare's was scored; --data FILE scores the text it learned."
        )
    if score.unigram_baseline is not None:
        print(
            f"unigram baseline {score.unigram_baseline:.4f} (each of those tokens predicted from "
            "its frequency in the training split, the context ignored)"
        )
    return 0
