"""``light-llm eval``: a checkpoint's validation loss and perplexity on a corpus."""

from __future__ import annotations

import argparse
from pathlib import Path

DESCRIPTION = """\
Print the mean next-token cross-entropy (nats per token) of a checkpoint on the validation
split (the last 10%) of a corpus, and its perplexity exp(loss) (seed 002 §10.2, eq. 44).

The corpus is --data, else the one the checkpoint was trained on (recorded by light-llm
train), else Shakespeare. By default every validation token is scored once, in consecutive
windows of the model's context length; --eval-iters N instead scores N batches at the same
random offsets the trainer's evaluations use, reproducing its val_loss (to bfloat16 rounding
when it trained under bfloat16 autocast: eval computes in float32).
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
        help="validation loss and perplexity of a checkpoint",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--checkpoint",
        required=True,
        type=Path,
        metavar="DIR",
        help="a checkpoint folder, a training output folder, or a HuggingFace GPT-2 folder",
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
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.set_defaults(func=run_eval)


def run_eval(args: argparse.Namespace) -> int:
    import tempfile

    from tqdm.auto import tqdm

    from light_llm.checkpoint import CHECKPOINT_SUBFOLDER, load_model, resolve_checkpoint_dir
    from light_llm.data import TokenDataset, encode_corpus, load_corpus, token_dtype
    from light_llm.errors import ConfigError
    from light_llm.tokenizers import load_tokenizer
    from light_llm.train.config import GENERAL_DEFAULTS
    from light_llm.train.evaluate import sampled_loss, sequential_loss
    from light_llm.train.metrics import perplexity
    from light_llm.train.precision import resolve_device
    from light_llm.train.state import TRAINER_STATE_FILE, read_trainer_state

    for name in ("eval_iters", "batch_size"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise ConfigError(f"--{name.replace('_', '-')} must be at least 1, got {value}.")
    folder = resolve_checkpoint_dir(args.checkpoint)
    trained = {}
    if (folder / TRAINER_STATE_FILE).is_file():
        trained = read_trainer_state(folder)["resolved_config"]
    data = str(args.data.expanduser().resolve()) if args.data else trained.get("data")
    device = resolve_device(args.device)
    model = load_model(folder, device=device)
    tokenizer = load_tokenizer(folder)
    text = load_corpus(data)
    block_size = model.config.block_size
    with tempfile.TemporaryDirectory(prefix="light-llm-eval-") as scratch:
        cache = Path(scratch)
        training_cache = folder.parent / "data"
        if trained and data == trained.get("data") and folder.name == CHECKPOINT_SUBFOLDER:
            cache = training_cache  # the run's own token cache: reused, not rebuilt
        _, val_path = encode_corpus(text, tokenizer, cache)
        dataset = TokenDataset(val_path, token_dtype(tokenizer.vocab_size), block_size)
        if args.eval_iters is not None:
            batch_size = args.batch_size or trained.get(
                "batch_size", GENERAL_DEFAULTS["batch_size"]
            )
            seed = trained.get("seed", GENERAL_DEFAULTS["seed"])
            total = sampled_loss(
                model,
                dataset,
                "val",
                batch_size=batch_size,
                n_batches=args.eval_iters,
                seed=seed,
                device=device,
            )
            loss = total.item() / args.eval_iters
            scored = f"{args.eval_iters} random batches of {batch_size} x {block_size} tokens"
        else:
            batch_size = args.batch_size or 32
            n_windows = len(range(0, len(dataset) - block_size, block_size))
            with tqdm(
                total=-(-n_windows // batch_size), desc="evaluating", unit="batch", disable=None
            ) as progress:
                loss, n_tokens = sequential_loss(
                    model,
                    dataset,
                    batch_size=batch_size,
                    device=device,
                    on_batch=lambda: progress.update(1),
                )
            scored = f"{n_tokens:,} tokens in windows of {block_size}"
    corpus = data or "Shakespeare"
    print(f"val loss {loss:.4f}, perplexity {perplexity(loss):.3f}")
    print(f"({scored}; validation split of {corpus}; checkpoint {folder})")
    return 0
