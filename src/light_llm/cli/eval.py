"""``light-llm eval``: a checkpoint's validation loss and perplexity on a corpus (a GPT's
next-token loss, or a BERT-style encoder's masked-LM loss)."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from light_llm.device import DEVICES

DESCRIPTION = """\
Print the mean next-token cross-entropy (nats per token) of a checkpoint on the validation
split (the last 10%) of a corpus, its perplexity exp(loss) (seed 002 §10.2, eq. 44), and the
same loss in bits per byte and per character of the split's text (loss x tokens / ln 2 /
bytes), which compares models with different tokenizers.

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
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object, the numbers unrounded"
    )
    parser.set_defaults(func=run_eval)


def run_eval(args: argparse.Namespace) -> int:
    import math
    import tempfile

    from light_llm.checkpoints import inspect_folder, load_tokenizer
    from light_llm.checkpoints.run import (
        CHECKPOINT_SUBFOLDER,
        DATA_SUBFOLDER,
        TRAINER_STATE_FILE,
        read_trainer_state,
    )
    from light_llm.config import check_batch_fits
    from light_llm.data import load_corpus, split_sizes
    from light_llm.device import resolve_device
    from light_llm.errors import CheckpointError
    from light_llm.limits import MAX_BATCH_SIZE, MAX_EVAL_BATCHES, check_integer
    from light_llm.train.evaluate import unigram_log_probabilities, unigram_loss
    from light_llm.train.metrics import bits_per_unit, perplexity

    for name, most in (("eval_iters", MAX_EVAL_BATCHES), ("batch_size", MAX_BATCH_SIZE)):
        value = getattr(args, name)
        if value is not None:
            check_integer(f"--{name.replace('_', '-')}", value, 1, most)
    model_folder = inspect_folder(args.checkpoint)
    folder = model_folder.path
    trained = {}
    if (folder / TRAINER_STATE_FILE).is_file():
        trained = read_trainer_state(folder)["resolved_config"]
    # realpath, not Path.resolve: a symlink loop is for load_corpus to report, not a RuntimeError
    data = os.path.realpath(args.data.expanduser()) if args.data else trained.get("data")
    device = resolve_device(args.device)
    encoder = model_folder.holds_encoder
    model = load_scored_model(folder, encoder, device)
    tokenizer = load_tokenizer(folder, check_model=True)
    text = load_corpus(data)
    with tempfile.TemporaryDirectory(prefix="light-llm-eval-") as scratch:
        cache = Path(scratch)
        if trained and data == trained.get("data") and folder.name == CHECKPOINT_SUBFOLDER:
            cache = folder.parent / DATA_SUBFOLDER  # the run's own token cache: reused, not rebuilt
        train_tokens, dataset = split_datasets(
            text, tokenizer, cache, model.config.block_size, encoder
        )
        val_size = split_sizes(cache)["val"]
        baseline = None
        if args.eval_iters is not None:
            loss, scored = sampled_validation_loss(model, dataset, args, trained, device)
            n_scored = val_size["tokens"]  # a sample's mean stands for every token's
        else:
            batch_size = args.batch_size or 32
            windows = dataset.tokens if encoder else dataset  # the TokenDataset cut up
            n_windows = max(1, (len(windows) - 1) // windows.block_size)
            check_batch_fits(model.config, min(batch_size, n_windows))
            loss, n_scored, scored = sequential_validation_loss(
                model, dataset, batch_size, device, encoder
            )
            log_p = unigram_log_probabilities(train_tokens, tokenizer.vocab_size)
            baseline = unigram_loss(log_p, dataset, batch_size=batch_size)
    if not math.isfinite(loss):
        raise CheckpointError(
            f"the validation loss of {folder} is {loss}: the model's outputs overflow or its "
            "weights are corrupt, so there is nothing meaningful to report."
        )
    corpus = data or "Shakespeare"
    bpb = bits_per_unit(loss, n_scored, val_size["bytes"])
    bpc = bits_per_unit(loss, n_scored, val_size["chars"])
    if args.json:
        report = {"val_loss": loss, "perplexity": perplexity(loss), "tokens_scored": n_scored}
        if not encoder:
            nats_per_char = bpc * math.log(2)
            report.update(bits_per_byte=bpb, bits_per_char=bpc, nats_per_char=nats_per_char)
            report.update(bytes=val_size["bytes"], chars=val_size["chars"])
        print(json.dumps({**report, "unigram_baseline": baseline, "checkpoint": str(folder)}))
        return 0
    loss_name = "masked-LM loss" if encoder else "loss"
    print(f"val {loss_name} {loss:.4f}, perplexity {perplexity(loss):.3f}")
    if not encoder:
        print(
            f"{bpb:.4f} bits per byte, {bpc:.4f} bits per character = "
            f"{bpc * math.log(2):.4f} nats per character (loss x "
            f"{n_scored:,} tokens / ln 2 over the split's {val_size['bytes']:,} "
            f"bytes, {val_size['chars']:,} characters)"
        )
    print(f"({scored}; validation split of {corpus}; checkpoint {folder})")
    if baseline is not None:
        print(
            f"unigram baseline {baseline:.4f} (each of those tokens predicted from its "
            "frequency in the training split, the context ignored)"
        )
    return 0


def load_scored_model(folder: Path, encoder: bool, device):
    """The GPT, or the encoder with its MLM head, in ``folder``, on ``device``."""
    from light_llm.checkpoints import load
    from light_llm.errors import CheckpointError

    if not encoder:
        return load(folder, device=device)
    model = load(folder, architecture="bert", device=device)
    if model.mlm_head is None:
        raise CheckpointError(
            f"{folder} holds an encoder without a masked-LM head (a sentence-embedding model), "
            "so it has no masked-LM loss to measure."
        )
    return model


def split_datasets(text: str, tokenizer, cache: Path, block_size: int, encoder: bool):
    """(training split's ids, validation dataset): next-token windows of ``block_size``, or
    for an encoder masked windows of ``block_size`` - 2 tokens in [CLS] ... [SEP]."""
    import numpy as np

    from light_llm.data import TokenDataset, encode_corpus, token_dtype
    from light_llm.train.mlm import mlm_datasets

    if encoder:
        train, val = mlm_datasets(text, tokenizer, cache, block_size)
        return train.tokens.tokens, val
    train_path, val_path = encode_corpus(text, tokenizer, cache)
    dtype = token_dtype(tokenizer.vocab_size)
    return np.fromfile(train_path, dtype=dtype), TokenDataset(val_path, dtype, block_size)


def sampled_validation_loss(model, dataset, args, trained: dict, device) -> tuple[float, str]:
    """The mean loss over ``--eval-iters`` batches drawn as the trainer's evaluations draw
    them (its seed and batch size), and what was scored."""
    from light_llm.config import check_batch_fits
    from light_llm.train.config import GENERAL_DEFAULTS
    from light_llm.train.evaluate import sampled_loss

    batch_size = args.batch_size or trained.get("batch_size", GENERAL_DEFAULTS["batch_size"])
    seed = trained.get("seed", GENERAL_DEFAULTS["seed"])
    check_batch_fits(model.config, batch_size)
    total = sampled_loss(
        model,
        dataset,
        "val",
        batch_size=batch_size,
        n_batches=args.eval_iters,
        seed=seed,
        device=device,
    )
    block_size = model.config.block_size
    scored = f"{args.eval_iters} random batches of {batch_size} x {block_size} tokens"
    return total.item() / args.eval_iters, scored


def sequential_validation_loss(
    model, dataset, batch_size: int, device, encoder: bool
) -> tuple[float, int, str]:
    """The mean loss over every window of the validation split (with a progress bar), the
    number of tokens scored (a GPT: every token of the split but the first, so that loss x
    that number is the split's total loss) and what was scored."""
    from tqdm.auto import tqdm

    from light_llm.train.evaluate import sequential_loss
    from light_llm.train.mlm import SEQUENTIAL_MASK_SEED

    windows = dataset.tokens if encoder else dataset  # the TokenDataset that is cut up
    n_windows = len(range(0, len(windows) - windows.block_size, windows.block_size))
    if not encoder and n_windows * windows.block_size < len(windows) - 1:
        n_windows += 1  # the tail window (TokenDataset.sequential_batches)
    with tqdm(
        total=-(-n_windows // batch_size), desc="evaluating", unit="batch", disable=None
    ) as progress:
        loss, n_tokens = sequential_loss(
            model, dataset, batch_size=batch_size, device=device, on_batch=progress.update
        )
    block_size = model.config.block_size
    if encoder:
        return (
            loss,
            n_tokens,
            f"{n_tokens:,} masked tokens in windows of {block_size}, masks drawn with seed "
            f"{SEQUENTIAL_MASK_SEED}",
        )
    return loss, n_tokens, f"{n_tokens:,} tokens in windows of {block_size}"
