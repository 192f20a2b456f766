"""Which tokenizer trains the best model in the same wall time: char vs BPE vs GPT-2.

Every candidate trains the default recipe (``--preset char-cpu``: its shape, Muon + AdamW,
batch 32) on the same corpus slice; only the tokenizer differs, and with it the vocabulary
size V (the token table and the untied head are V x 128 each, and the softmax is over V).
A larger V makes a step slower but puts more text in each 64-token window. Wall time on a
shared 2-core machine is noisy, so it is measured as ``recipe_sweep.py`` measures it:

1. ``speed``: the time of one training step of every candidate relative to the char model's,
   measured in one process, taking turns, median over rounds (load from other work hits all
   alike). A candidate gets ``round(ITERS * t_char / t_candidate)`` iterations, ITERS being
   the char model's (default 580, the default recipe's count, which takes the wall time of
   nanoGPT's 2000 CPU iterations).
2. ``train``: each candidate trains for its iteration count (``light-llm train --data SLICE
   --tokenizer ... --max-iters N``) and is scored by ``light-llm eval`` over the whole
   validation split, in bits per byte (which compares tokenizers: nats per token do not).
   The score at a fixed iteration count does not depend on the machine's load.
3. ``pretokenizer``: bytes per validation token of byte-level BPE learned with and without
   GPT-2's pre-tokenisation regex, the rule ``light_llm.tokenizers.bpe`` uses, and the time
   each took to learn.

    PYTHONPATH=src python benchmarks/tokenizer_sweep.py speed --data SLICE
    PYTHONPATH=src python benchmarks/tokenizer_sweep.py train --data SLICE --iters N NAME
    PYTHONPATH=src python benchmarks/tokenizer_sweep.py pretokenizer --data SLICE

(``--data`` defaults to the first megabyte of Shakespeare, ``data.shakespeare_slice()``,
written to a file.)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from recipe_sweep import run_cli, seconds_per_step, step_timer  # noqa: E402

DEFAULT_ITERS = 580  # the char-cpu recipe's max_iters
WARMUP_FRACTION = 100 / 580  # the char-cpu recipe's warmup, kept in proportion to the run
CANDIDATES: dict[str, list[str]] = {
    "char": ["--tokenizer", "char"],
    "bpe-512": ["--tokenizer", "bpe", "--vocab-size", "512"],
    "bpe-1024": ["--tokenizer", "bpe", "--vocab-size", "1024"],
    "bpe-2048": ["--tokenizer", "bpe", "--vocab-size", "2048"],
    "bpe-4096": ["--tokenizer", "bpe", "--vocab-size", "4096"],
    "gpt2": ["--tokenizer", "gpt2"],
}


def corpus_path(data: str | None) -> str:
    """``data``, or the first megabyte of Shakespeare written to a temporary file."""
    if data:
        return data
    from light_llm.data import shakespeare_slice

    path = os.path.join(tempfile.gettempdir(), "light-llm-shakespeare-1mb.txt")
    with open(path, "w", encoding="utf-8") as file:
        file.write(shakespeare_slice())
    return path


def vocab_size_of(name: str, text: str) -> int:
    """The vocabulary size the candidate's tokenizer has on this corpus."""
    flags = CANDIDATES[name]
    if "--vocab-size" in flags:
        return int(flags[flags.index("--vocab-size") + 1])
    if name == "gpt2":
        return 50257
    return len(set(text))


def measure_speed(text: str, rounds: int, steps: int) -> dict[str, float]:
    """Median over rounds of t_candidate / t_char (one default-recipe step each, the model
    sized for the candidate's vocabulary)."""
    timers = {name: step_timer([], vocab_size_of(name, text)) for name in CANDIDATES}
    for step in timers.values():
        seconds_per_step(step, 3)  # warm up
    ratios: dict[str, list[float]] = {name: [] for name in CANDIDATES if name != "char"}
    for _ in range(rounds):
        for name in ratios:
            base = seconds_per_step(timers["char"], steps)
            ratios[name].append(seconds_per_step(timers[name], steps) / base)
    return {name: statistics.median(values) for name, values in ratios.items()}


def train_and_score(name: str, data: str, iters: int, seed: int, threads: int, root: str) -> dict:
    out = os.path.join(root, f"{name}-{iters}-{seed}")
    start = time.perf_counter()
    log = run_cli(
        "train",
        "--data",
        data,
        "--out",
        out,
        *CANDIDATES[name],
        "--max-iters",
        str(iters),
        "--warmup-iters",
        str(max(1, round(iters * WARMUP_FRACTION))),
        "--seed",
        str(seed),
        "--sample-tokens",
        "300",
        "--eval-interval",
        str(iters),
        "--overwrite",
        threads=threads,
    )
    seconds = time.perf_counter() - start
    report = run_cli("eval", "--checkpoint", out, threads=threads)
    with open(os.path.join(out, "data", "meta.json"), encoding="utf-8") as file:
        meta = json.load(file)
    sample = log.split("sample:\n", 1)[1].rsplit("\ndone:", 1)[0]
    return {
        "name": name,
        "iters": iters,
        "seed": seed,
        "val_loss": float(re.search(r"loss ([0-9.]+)", report).group(1)),
        "val_bpb": float(re.search(r"([0-9.]+) bits per byte", report).group(1)),
        "bytes_per_token": round(meta["val_bytes"] / meta["val_tokens"], 3),
        "seconds": round(seconds, 1),
        "sample": sample,
        "eval": report.strip(),
    }


def pretokenizer_bytes_per_token(text: str, vocab_size: int) -> dict[str, float]:
    """Bytes per validation token of byte-level BPE learned on the training split, with GPT-2's
    regex (light-llm's rule) and without any pre-tokenisation (merges may cross words)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from light_llm.data import split_train_val
    from light_llm.tokenizers.bpe import train_bpe

    train_text, val_text = split_train_val(text)
    n_bytes = len(val_text.encode("utf-8"))
    start = time.perf_counter()
    with_regex = train_bpe(train_text, vocab_size)
    regex_seconds = time.perf_counter() - start
    engine = Tokenizer(models.BPE())
    engine.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    engine.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    start = time.perf_counter()
    engine.train_from_iterator([train_text], trainer)
    no_regex_seconds = time.perf_counter() - start
    return {
        "vocab_size": vocab_size,
        "gpt2_regex": n_bytes / len(with_regex.encode(val_text)),
        "none": n_bytes / len(engine.encode(val_text).ids),
        "gpt2_regex_training_seconds": regex_seconds,
        "none_training_seconds": no_regex_seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    speed = sub.add_parser("speed")
    speed.add_argument("--data")
    speed.add_argument("--rounds", type=int, default=5)
    speed.add_argument("--steps", type=int, default=5)
    speed.add_argument("--iters", type=int, default=DEFAULT_ITERS, help="the char model's")
    run = sub.add_parser("train")
    run.add_argument("names", nargs="+", choices=list(CANDIDATES))
    run.add_argument("--data")
    run.add_argument("--iters", type=int, nargs="+", required=True)
    run.add_argument("--seed", type=int, default=1337)
    run.add_argument("--threads", type=int, default=2)
    run.add_argument("--root", default="sweep-runs")
    pre = sub.add_parser("pretokenizer")
    pre.add_argument("--data")
    pre.add_argument("--vocab-size", type=int, nargs="+", default=[1024, 4096])
    args = parser.parse_args()
    data = corpus_path(args.data)
    if args.command == "speed":
        with open(data, encoding="utf-8") as file:
            text = file.read()
        print(f"char: 1.000 -> {args.iters} iterations")
        for name, ratio in measure_speed(text, args.rounds, args.steps).items():
            iters = round(args.iters / ratio)
            print(f"{name}: step time / char's = {ratio:.3f} -> {iters} iterations")
    elif args.command == "train":
        for name, iters in zip(args.names, args.iters * len(args.names), strict=False):
            result = train_and_score(name, data, iters, args.seed, args.threads, args.root)
            print(json.dumps(result), flush=True)
    else:
        with open(data, encoding="utf-8") as file:
            text = file.read()
        for vocab_size in args.vocab_size:
            print(json.dumps(pretokenizer_bytes_per_token(text, vocab_size)), flush=True)


if __name__ == "__main__":
    main()
