"""The sweep behind ``light-llm train``'s default recipe: validation loss at equal wall time.

Every candidate is a list of ``light-llm train`` flags. Wall time on a shared 2-core machine
is noisy, so it is measured in two independent parts:

1. ``speed``: the time of one training step of every candidate relative to nanoGPT's CPU
   recipe (``--preset nanogpt-cpu``), measured in one process, taking turns, median over
   rounds (load from other work hits both alike). A candidate then gets
   ``round(2000 * t_nanogpt / t_candidate)`` iterations: the same wall time as nanoGPT's
   2000 (evaluations excluded on both sides).
2. ``train``: each candidate trains for its iteration count on a corpus slice
   (``light-llm train --data SLICE --max-iters N ...``, one thread, so two can run side by
   side) and is scored by ``light-llm eval`` over the whole validation split. The loss at a
   fixed iteration count does not depend on the machine's load.

    PYTHONPATH=src python benchmarks/recipe_sweep.py speed [NAME ...] [--against NAME]
    PYTHONPATH=src python benchmarks/recipe_sweep.py train --data SLICE --iters N NAME [--seed S]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

MODERN = ["--preset", "nanogpt-cpu", "--positions", "rotary", "--norm", "rmsnorm", "--no-bias"]
MUON = ["--optimizer", "muon"]
FULL = ["--activation", "relu2", "--qk-norm", "--untie-embeddings", "--logit-softcap", "15"]
CANDIDATES: dict[str, list[str]] = {
    "nanogpt-cpu": ["--preset", "nanogpt-cpu"],
    # light-llm train with no flags (--preset qwen3-cpu, a 768-id BPE; `speed` times every
    # candidate at the character vocabulary unless given --vocab-size: tokenizer_sweep.py
    # compares vocabularies)
    "default": [],
    "bpe-cpu": ["--preset", "bpe-cpu"],
    # the default's heads (2 of 48 since round two; 4 of 24 before), on the 4 layers they were
    # measured with: the step's time and, at equal time, its loss (docs/recipe.md, "Two heads
    # at equal time")
    "heads-1": ["--n-layer", "4", "--n-head", "1"],
    "heads-3": ["--n-layer", "4", "--n-head", "3"],
    "heads-4": ["--n-layer", "4", "--n-head", "4"],
    # the default's layers (3 since round two; 4 before): docs/recipe.md, "Three layers at
    # equal time"
    "layers-2": ["--n-layer", "2"],
    "layers-4": ["--n-layer", "4"],
    "layers-5": ["--n-layer", "5"],
    # round two (issue 25): Muon's orthogonaliser and the weight decay
    "polar-express": ["--muon-orthogonaliser", "polar-express"],
    "cautious-wd": ["--cautious-weight-decay"],
    "pe-cautious": ["--muon-orthogonaliser", "polar-express", "--cautious-weight-decay"],
    # round two's Muon tries as switches (the prototypes' mmwarm: 300 steps from 0.85)
    "muon-momentum-warmup": ["--muon-momentum-warmup", "300"],
    "normuon": ["--normuon"],
    # issue 25's list: the blocks' output projections start at zero (modded-nanogpt)
    "zero-init-projections": ["--zero-init-projections"],
    # evaluate and save a moving average of the weights (about the last 100 steps)
    "ema": ["--ema-beta", "0.99"],
    # issue 25's list: the model's tries (a second token table in the values, the embedding
    # mixed into every block's input, a one-token look-back on the embedding, a second head
    # for the token after next)
    "value-embeddings": ["--value-embeddings"],
    "embedding-skip": ["--embedding-skip"],
    "smear": ["--smear"],
    "multi-token": ["--mtp-weight", "0.5"],
    # batch-size warmup (issue 25's measured prototype: batch 16 for 200 steps, then 32)
    "batch-warmup": ["--batch-warmup", "200", "--batch-warmup-size", "16"],
    # sequence-length warmup: windows of half the default's context for the first 200 steps
    "context-warmup": ["--context-warmup", "200", "--context-warmup-size", "32"],
    "char-cpu": ["--preset", "char-cpu"],
    "modern-adamw": [*MODERN, "--activation", "swiglu"],
    "muon-relu2": [*MODERN, *MUON, "--activation", "relu2"],
    "muon-full": [*MODERN, *MUON, *FULL],
    "muon-full-b32": [*MODERN, *MUON, *FULL, "--batch-size", "32"],
    "muon-full-b32-t128": [*MODERN, *MUON, *FULL, "--batch-size", "32", "--block-size", "128"],
    "muon-full-b16-t256": [*MODERN, *MUON, *FULL, "--batch-size", "16", "--block-size", "256"],
    "b32-mlr04-w30-min0": [
        *MODERN,
        *MUON,
        *FULL,
        "--batch-size",
        "32",
        "--muon-lr",
        "0.04",
        "--warmup-iters",
        "30",
        "--min-lr",
        "0",
    ],
    "b32-lr6e3-w30-min0": [
        *MODERN,
        *MUON,
        *FULL,
        "--batch-size",
        "32",
        "--lr",
        "6e-3",
        "--warmup-iters",
        "30",
        "--min-lr",
        "0",
    ],
    "muon-full-b16-t128": [*MODERN, *MUON, *FULL, "--batch-size", "16", "--block-size", "128"],
    "adamw-full-b32": [*MODERN, *FULL, "--batch-size", "32", "--lr", "2e-3"],
    "muon-full-b64": [*MODERN, *MUON, *FULL, "--batch-size", "64"],
    "muon-full-b32-d192": [
        *MODERN,
        *MUON,
        *FULL,
        "--batch-size",
        "32",
        "--n-embd",
        "192",
        "--n-head",
        "6",
    ],
    "muon-full-b32-l3": [*MODERN, *MUON, *FULL, "--batch-size", "32", "--n-layer", "3"],
    "muon-full-b32-d96": [*MODERN, *MUON, *FULL, "--batch-size", "32", "--n-embd", "96"],
    "muon-full-b64-d96": [*MODERN, *MUON, *FULL, "--batch-size", "64", "--n-embd", "96"],
    "muon-full-b32-l6-d96": [
        *MODERN,
        *MUON,
        *FULL,
        "--batch-size",
        "32",
        "--n-embd",
        "96",
        "--n-layer",
        "6",
    ],
    "muon-full-b48": [*MODERN, *MUON, *FULL, "--batch-size", "48"],
    "muon-full-b32-d64": [*MODERN, *MUON, *FULL, "--batch-size", "32", "--n-embd", "64"],
    "muon-full-b24-d96": [*MODERN, *MUON, *FULL, "--batch-size", "24", "--n-embd", "96"],
    "muon-full-b48-d96": [*MODERN, *MUON, *FULL, "--batch-size", "48", "--n-embd", "96"],
    "muon-full-b32-d96-l3": [
        *MODERN,
        *MUON,
        *FULL,
        "--batch-size",
        "32",
        "--n-embd",
        "96",
        "--n-layer",
        "3",
    ],
}


def step_timer(flags: list[str], vocab_size: int = 65):
    """A function running one training step of the candidate's model and optimizer on a
    random batch, as the trainer does it on the CPU (bfloat16 autocast where native):
    ``light_llm.train.calibration.training_step`` for the config ``light-llm train FLAGS``
    resolves to."""
    import torch

    from light_llm.cli import build_parser
    from light_llm.cli.train import config_from_args
    from light_llm.train.calibration import training_step
    from light_llm.train.precision import default_dtype

    cfg = config_from_args(build_parser().parse_args(["train", *flags])).resolve()
    device = torch.device("cpu")
    dtype = cfg.dtype or default_dtype(device)
    return training_step(cfg, cfg.model_config(vocab_size), device, dtype, seed=0)


def seconds_per_step(step, steps: int) -> float:
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - start) / steps


def measure_speed(
    names: list[str],
    rounds: int,
    steps: int,
    dtype: str | None = None,
    vocab_size: int = 65,
    against: str = "nanogpt-cpu",
) -> dict[str, float]:
    """Median over rounds of t_candidate / t_against (one step each, taking turns), both in
    ``dtype`` (default: the trainer's on this machine); the candidates over ``vocab_size``
    ids, as ``against`` is unless it is nanoGPT's recipe (65 characters)."""
    dtype_flags = ["--dtype", dtype] if dtype else []
    baseline_vocab = 65 if against == "nanogpt-cpu" else vocab_size
    baseline = step_timer([*CANDIDATES[against], *dtype_flags], baseline_vocab)
    timers = {name: step_timer([*CANDIDATES[name], *dtype_flags], vocab_size) for name in names}
    for step in (baseline, *timers.values()):
        seconds_per_step(step, 5)  # warm up
    ratios: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(rounds):
        for name, step in timers.items():
            base = seconds_per_step(baseline, steps)
            ratios[name].append(seconds_per_step(step, steps) / base)
    return {name: statistics.median(values) for name, values in ratios.items()}


def run_cli(*arguments: str, threads: int) -> str:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MPLBACKEND="Agg")
    command = [sys.executable, "-m", "light_llm", *arguments]
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(arguments)} failed:\n{done.stderr[-2000:]}")
    return done.stdout


def train_and_score(name: str, data: str, iters: int, seed: int, threads: int, root: str) -> dict:
    out = os.path.join(root, f"{name}-{os.path.basename(data)}-{iters}-{seed}")
    start = time.perf_counter()
    flags = [*CANDIDATES[name], "--max-iters", str(iters), "--seed", str(seed)]
    run_cli(
        "train",
        "--data",
        data,
        "--out",
        out,
        *flags,
        "--sample-tokens",
        "0",
        "--eval-interval",
        str(iters),
        "--probe-interval",
        "0",
        "--overwrite",
        threads=threads,
    )
    seconds = time.perf_counter() - start
    report = run_cli("eval", "--checkpoint", out, "--data", data, threads=threads)
    per_character = re.search(r"([0-9.]+) nats per character", report)  # a BPE model's
    loss = float((per_character or re.search(r"loss[^0-9]*([0-9.]+)", report)).group(1))
    return {
        "name": name,
        "data": os.path.basename(data),
        "iters": iters,
        "seed": seed,
        "val_loss": loss,
        "seconds": round(seconds, 1),
        "flags": " ".join(CANDIDATES[name]),
        "eval": report.strip(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    speed = sub.add_parser("speed")
    speed.add_argument("names", nargs="*", metavar="NAME", help="candidates (default: all)")
    speed.add_argument("--rounds", type=int, default=5)
    speed.add_argument("--steps", type=int, default=10)
    speed.add_argument("--dtype", choices=("float32", "bfloat16"), help="default: the trainer's")
    speed.add_argument("--vocab-size", type=int, default=65, help="of the candidates (65)")
    speed.add_argument(
        "--against", default="nanogpt-cpu", choices=CANDIDATES, help="the step timed in turn"
    )
    run = sub.add_parser("train")
    run.add_argument("names", nargs="+")
    run.add_argument("--data", required=True)
    run.add_argument("--iters", type=int, nargs="+", required=True)
    run.add_argument("--seed", type=int, default=1337)
    run.add_argument("--threads", type=int, default=1)
    run.add_argument("--root", default="sweep-runs")
    args = parser.parse_args()
    unknown = [name for name in args.names if name not in CANDIDATES]
    if unknown:
        parser.error(f"unknown candidate {unknown[0]!r}; the candidates: {', '.join(CANDIDATES)}.")
    if args.command == "speed":
        from light_llm.train.cpu_allocator import keep_freed_memory

        keep_freed_memory()  # as light-llm's trainer does on the CPU
        names = args.names or [name for name in CANDIDATES if name != args.against]
        measured = measure_speed(
            names, args.rounds, args.steps, args.dtype, args.vocab_size, args.against
        )
        for name, ratio in measured.items():
            equal_time = (
                f"-> {round(2000 / ratio)} iterations in nanogpt-cpu's 2000"
                if args.against == "nanogpt-cpu"
                else f"-> {1 / ratio:.3f}x {args.against}'s iterations in its time"
            )
            print(f"{name:28s} step time / {args.against}'s = {ratio:.3f}  {equal_time}")
    else:
        for name, iters in zip(args.names, args.iters * len(args.names), strict=False):
            print(
                json.dumps(
                    train_and_score(name, args.data, iters, args.seed, args.threads, args.root)
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
