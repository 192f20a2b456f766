"""Which tokenizer trains the best model in the same wall time: char vs BPE vs GPT-2.

Every candidate trains the default recipe (``light-llm train`` with no preset: its shape, Muon
+ AdamW, batch 32) on the same corpus; only the tokenizer differs, and with it the vocabulary size V
(the token table and the untied head are V x 96 each, and the softmax is over V). A larger
V makes a step slower but puts more text in each 64-token window. Two ways to give each
the same wall time:

1. ``train NAMES --time 90s``: each run gets the same wall-clock budget (``light-llm train
   --time``: the trainer measures its own speed after warmup and fixes the iteration count
   that fits, evaluations included). Honest on an idle machine; run them one after another.
2. ``speed``, then ``train NAMES --iters N ...``: the time of one training step of every
   candidate relative to the char model's, measured in one process, taking turns, median
   over rounds (load from other work hits all alike), gives each candidate
   ``round(ITERS * t_char / t_candidate)`` iterations. The score at a fixed iteration count
   does not depend on the machine's load, so this is the way on a shared machine.

Each run is scored by ``light-llm eval`` over the whole validation split, in bits per byte
and nats per character (which compare tokenizers: nats per token do not). ``pretokenizer``
measures bytes per validation token of byte-level BPE learned with and without GPT-2's
pre-tokenisation regex, the rule ``light_llm.tokenizers.bpe`` uses, and the time each took.
``encode`` times the two engines of ``light_llm.tokenizers.bpe`` on the corpus, in the pieces a
run encodes it in: tiktoken (what encodes) against HuggingFace ``tokenizers``' BPE model with
the same merges (what encoded before), taking turns, and checks that their ids are equal.

    PYTHONPATH=src python benchmarks/tokenizer_sweep.py train --data shakespeare --time 90s NAME...
    PYTHONPATH=src python benchmarks/tokenizer_sweep.py speed --data SLICE
    PYTHONPATH=src python benchmarks/tokenizer_sweep.py train --data SLICE --iters N NAME...
    PYTHONPATH=src python benchmarks/tokenizer_sweep.py pretokenizer --data SLICE
    PYTHONPATH=src python benchmarks/tokenizer_sweep.py encode --data shakespeare

(``--data shakespeare`` is the whole corpus, the main job's; without ``--data``, its first
megabyte, ``shakespeare.shakespeare_slice()``; both written to a temporary file.)
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

DEFAULT_ITERS = 820  # the char model's length (the default recipe's was 820 when this ran)
WARMUP_FRACTION = 20 / 820  # the default recipe's warmup of 20, kept in proportion to the run
CANDIDATES: dict[str, list[str]] = {
    "char": ["--tokenizer", "char"],
    "bpe-512": ["--tokenizer", "bpe", "--vocab-size", "512"],
    "bpe-768": ["--tokenizer", "bpe", "--vocab-size", "768"],
    "bpe-1024": ["--tokenizer", "bpe", "--vocab-size", "1024"],
    "bpe-2048": ["--tokenizer", "bpe", "--vocab-size", "2048"],
    "bpe-4096": ["--tokenizer", "bpe", "--vocab-size", "4096"],
    "gpt2": ["--tokenizer", "gpt2"],
}


def corpus_path(data: str | None) -> str:
    """``data``; "shakespeare": the whole corpus (the main job's), or by default its first
    megabyte, written to a temporary file."""
    from light_llm.shakespeare import shakespeare_slice, shakespeare_text

    if data and data != "shakespeare":
        return data
    name, text = ("all", shakespeare_text()) if data else ("1mb", shakespeare_slice())
    path = os.path.join(tempfile.gettempdir(), f"light-llm-shakespeare-{name}.txt")
    with open(path, "w", encoding="utf-8") as file:
        file.write(text)
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


def train_and_score(
    name: str, data: str, budget: int | str, seed: int, threads: int, root: str
) -> dict:
    """Train candidate ``name`` for ``budget``: an iteration count (warmup in the default's
    proportion, one evaluation at the end) or a ``--time`` wall-clock budget such as "85s"
    (the default recipe as it is, the trainer fixing the iteration count from its speed);
    then score it with ``light-llm eval`` over the whole validation split."""
    out = os.path.join(root, f"{name}-{budget}-{seed}")
    if isinstance(budget, int):
        length = ["--max-iters", str(budget), "--eval-interval", str(budget)]
        length += ["--warmup-iters", str(max(1, round(budget * WARMUP_FRACTION)))]
    else:
        length = ["--time", budget]
    start = time.perf_counter()
    log = run_cli(
        "train",
        "--data",
        data,
        "--out",
        out,
        *CANDIDATES[name],
        *length,
        "--seed",
        str(seed),
        "--sample-tokens",
        "300",
        "--overwrite",
        threads=threads,
    )
    seconds = time.perf_counter() - start
    iters = int(re.search(r"done: (\d+) iterations", log).group(1))
    report = run_cli("eval", "--checkpoint", out, threads=threads)
    with open(os.path.join(out, "data", "meta.json"), encoding="utf-8") as file:
        meta = json.load(file)
    # the text after the trainer's "sample: ... :" heading, up to its speed or done line
    sample = re.search(r"^sample: [^\n]*:\n(.*?)\n(?:speed|done): ", log, re.S | re.M).group(1)
    return {
        "name": name,
        "iters": iters,
        "seed": seed,
        "val_loss": float(re.search(r"loss ([0-9.]+)", report).group(1)),
        "val_bpb": float(re.search(r"([0-9.]+) bits per byte", report).group(1)),
        "val_nats_per_char": float(re.search(r"([0-9.]+) nats per character", report).group(1)),
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


def encoding_seconds(text: str, vocab_size: int, rounds: int) -> dict[str, float]:
    """Seconds to encode ``text`` (in :func:`light_llm.tokenizers.base.text_chunks` pieces,
    as a run's corpus is) with a BPE of ``vocab_size`` ids learned from its training split:
    tiktoken and HuggingFace's engine taking turns, medians over ``rounds``, and their ratio;
    the ids must be equal."""
    from light_llm.data import split_train_val
    from light_llm.tokenizers.base import text_chunks
    from light_llm.tokenizers.bpe import train_bpe

    tokenizer = train_bpe(split_train_val(text)[0], vocab_size)
    if tokenizer.encoded_by != "tiktoken":
        raise SystemExit("tiktoken does not encode this vocabulary (bpe.merges_are_tiktoken_safe)")
    chunks = list(text_chunks(text))
    engines = {
        "tiktoken": lambda: tokenizer.encode_batch(chunks),
        "huggingface": lambda: [
            encoding.ids
            for encoding in tokenizer.engine.encode_batch_fast(chunks, add_special_tokens=False)
        ],
    }
    seconds: dict[str, list[float]] = {name: [] for name in engines}
    ids = {}
    for _ in range(rounds):
        for name, encode in engines.items():
            start = time.perf_counter()
            ids[name] = encode()
            seconds[name].append(time.perf_counter() - start)
    if ids["tiktoken"] != ids["huggingface"]:
        raise SystemExit("the two engines' ids differ")
    medians = {f"{name}_seconds": statistics.median(times) for name, times in seconds.items()}
    return {
        "vocab_size": vocab_size,
        "tokens": sum(map(len, ids["tiktoken"])),
        **medians,
        "ranges": {name: [min(times), max(times)] for name, times in seconds.items()},
        "tiktoken_over_huggingface": medians["tiktoken_seconds"] / medians["huggingface_seconds"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    speed = sub.add_parser("speed")
    speed.add_argument("--data")
    speed.add_argument("--rounds", type=int, default=5)
    speed.add_argument("--steps", type=int, default=5)
    speed.add_argument("--iters", type=int, default=DEFAULT_ITERS, help="the char model's")
    run = sub.add_parser("train")
    run.add_argument("names", nargs="+", choices=list(CANDIDATES))
    run.add_argument("--data")
    length = run.add_mutually_exclusive_group(required=True)
    length.add_argument("--iters", type=int, nargs="+", help="one count, or one per name")
    length.add_argument("--time", help='a wall-clock budget for each, e.g. "85s"')
    run.add_argument("--seed", type=int, default=1337)
    run.add_argument("--threads", type=int, default=2)
    run.add_argument("--root", default="sweep-runs")
    pre = sub.add_parser("pretokenizer")
    pre.add_argument("--data")
    pre.add_argument("--vocab-size", type=int, nargs="+", default=[1024, 4096])
    encode = sub.add_parser("encode")
    encode.add_argument("--data")
    encode.add_argument("--vocab-size", type=int, default=768)
    encode.add_argument("--rounds", type=int, default=5)
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
        budgets = args.iters * len(args.names) if args.iters else [args.time] * len(args.names)
        for name, budget in zip(args.names, budgets, strict=False):
            result = train_and_score(name, data, budget, args.seed, args.threads, args.root)
            print(json.dumps(result), flush=True)
    elif args.command == "encode":
        with open(data, encoding="utf-8") as file:
            text = file.read()
        print(json.dumps(encoding_seconds(text, args.vocab_size, args.rounds)), flush=True)
    else:
        with open(data, encoding="utf-8") as file:
            text = file.read()
        for vocab_size in args.vocab_size:
            print(json.dumps(pretokenizer_bytes_per_token(text, vocab_size)), flush=True)


if __name__ == "__main__":
    main()
