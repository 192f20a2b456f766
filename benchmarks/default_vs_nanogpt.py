"""The default against nanoGPT's CPU recipe, as a user runs them: the whole ``light-llm train``
command (start-up, learning the tokenizer, encoding, training, evaluations, probes, the sample)
timed by the wall clock, then ``light-llm eval`` over the whole validation split in nats per
character (the unit that compares a BPE model with a character model).

The two take turns so that load from other work on the machine hits both alike, and which of
a pair runs first alternates (nanoGPT then the default, then the default then nanoGPT, ...)
so that a drift in the machine's speed favours neither; every pair is one seed on one corpus.
Each run prints a JSON line as it ends, each pair a line with the default's time as a
fraction of nanoGPT's and its loss below nanoGPT's, and the end the two recipes' total times,
their ratio and how many pairs the default took longer. Every training command runs as a
first run on a new machine: with a user cache of its own, empty (``LIGHT_LLM_CACHE``), so the
default learns its tokenizer and both recipes encode their corpus inside the time
(``--warm-cache`` lets them share the user's cache instead, as a second run would). The CPU kind
(``torch.backends.cpu.get_cpu_capability()``) and the load average before and after are
printed with them: timings need a quiet machine.

Corpora: ``shakespeare`` (all of it, the main job), ``first`` (its first megabyte,
``shakespeare.shakespeare_slice()``), ``last`` (its last megabyte, the slice of
``tests/train/test_quality.py``), or a path to a text file. On a machine with a GPU both
recipes train there (``--device auto``): ``--flags "--device cpu"`` compares them on its CPU.

    PYTHONPATH=src python benchmarks/default_vs_nanogpt.py [--data shakespeare first last]
        [--seeds 1337 2] [--flags "--dtype float32"] [--default-flags "..."] [--out DIR]
        [--warm-cache] [--cpus 0,1]

``--cpus 0,1`` pins every command to those CPUs with as many threads, so that two cores of a
larger machine stand in for a 2-core one (the Intel Xeon of docs/recipe.md, "An AVX-512
machine with AMX", was measured so, by a script doing the same).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from light_llm.cache import CACHE_ENV
from light_llm.shakespeare import shakespeare_slice, shakespeare_tail

RECIPES = {"nanogpt-cpu": ["--preset", "nanogpt-cpu"], "default": []}


def corpus_file(name: str, folder: Path) -> Path | None:
    """The text file of a corpus name (None: the trainer's own default, all of Shakespeare)."""
    if name == "shakespeare":
        return None
    texts = {"first": shakespeare_slice, "last": shakespeare_tail}
    if name in texts:
        path = folder / f"{name}.txt"
        path.write_text(texts[name](), encoding="utf-8")
        return path
    return Path(name)


def run_child(
    command: list[str], folder: Path, cache: Path | None, cpus: list[int] | None
) -> subprocess.CompletedProcess:
    """Run ``command`` in ``folder``, its output captured: with ``cache`` as its user cache if
    given, and with ``cpus``, pinned to those CPUs with as many OpenMP threads (a 2-core
    machine stood in for by two cores of a larger one)."""
    env = dict(os.environ)
    if cache is not None:
        env[CACHE_ENV] = str(cache)
    if cpus:
        env["OMP_NUM_THREADS"] = str(len(cpus))
    pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    return subprocess.run(
        command, capture_output=True, text=True, cwd=folder, env=env, preexec_fn=pin
    )


def light_llm(
    *arguments: str, folder: Path, cache: Path | None = None, cpus: list[int] | None = None
) -> str:
    """Run ``light-llm ARGUMENTS`` in ``folder`` (:func:`run_child`) and return its output;
    stop the benchmark if it fails."""
    command = [sys.executable, "-m", "light_llm", *arguments]
    done = run_child(command, folder, cache, cpus)
    if done.returncode != 0:
        raise SystemExit(f"light-llm {' '.join(arguments)} failed:\n{done.stderr[-2000:]}")
    return done.stdout


def train_and_score(
    recipe: str,
    data: Path | None,
    seed: int,
    folder: Path,
    out: str,
    flags: list[str],
    warm_cache: bool,
    cpus: list[int] | None = None,
) -> dict:
    """One run into ``folder/out`` (named relative to ``folder``, as a user would): the whole
    training command's wall time (with an empty user cache of its own unless ``warm_cache``;
    pinned to ``cpus`` if given, and so is its evaluation), its iterations, and its whole-split
    validation loss in nats per character."""
    data_flags = ["--data", str(data.resolve())] if data else []
    arguments = ["train", *RECIPES[recipe], *data_flags, "--seed", str(seed), "--out", out]
    with tempfile.TemporaryDirectory(prefix="cache-", dir=folder) as empty:
        cache = None if warm_cache else Path(empty)
        start = time.perf_counter()
        light_llm(*arguments, *flags, "--overwrite", folder=folder, cache=cache, cpus=cpus)
        seconds = time.perf_counter() - start
    report = light_llm("eval", "--checkpoint", out, *data_flags, folder=folder, cpus=cpus)
    nats = float(re.search(r"([0-9.]+) nats per character", report).group(1))
    state = json.loads((folder / out / "checkpoint" / "trainer_state.json").read_text())
    return {"recipe": recipe, "seconds": seconds, "nats": nats, "iters": state["iteration"]}


def cpu_list(parser: argparse.ArgumentParser, given: str | None) -> list[int] | None:
    """The CPUs of ``--cpus`` (None when not given); the parser's error (exit 2) for a list
    that is not numbers or names a CPU this process may not run on."""
    if given is None:
        return None
    try:
        cpus = sorted({int(cpu) for cpu in given.split(",")})
    except ValueError:
        parser.error(f"--cpus takes CPU numbers separated by commas (e.g. 0,1), not {given!r}.")
    allowed = os.sched_getaffinity(0)
    if not set(cpus) <= allowed:
        parser.error(
            f"--cpus {given}: this process may run on CPUs "
            f"{','.join(map(str, sorted(allowed)))} only."
        )
    return cpus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", nargs="+", default=["shakespeare"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1337])
    parser.add_argument("--flags", default="", help="given to both recipes (e.g. --dtype)")
    parser.add_argument("--default-flags", default="", help="given to the default only")
    parser.add_argument("--out", help="where the runs go (default: a temporary folder)")
    parser.add_argument(
        "--warm-cache",
        action="store_true",
        help="share the user cache (a learned tokenizer, an encoded corpus) as a second run "
        "would, instead of timing every training command as a first run",
    )
    parser.add_argument(
        "--cpus",
        help="pin every command to these CPUs (e.g. 0,1), with as many threads: a 2-core "
        "machine stood in for by two cores of a larger one",
    )
    args = parser.parse_args()
    cpus = cpu_list(parser, args.cpus)
    folder = Path(args.out or tempfile.mkdtemp(prefix="default-vs-nanogpt-"))
    folder.mkdir(parents=True, exist_ok=True)
    cache = "the user's cache, shared" if args.warm_cache else "an empty cache each run"
    pinned = f"; pinned to CPUs {args.cpus}" if cpus else ""
    print(
        f"CPU kind {torch.backends.cpu.get_cpu_capability()}; load {os.getloadavg()}; {cache}"
        f"{pinned}"
    )
    shared = shlex.split(args.flags)
    extra = {"nanogpt-cpu": shared, "default": [*shared, *shlex.split(args.default_flags)]}
    pairs = 0
    seconds = {"nanogpt-cpu": [], "default": []}
    for name in args.data:
        data = corpus_file(name, folder)
        for seed in args.seeds:
            pair = {}
            order = list(RECIPES) if pairs % 2 == 0 else list(reversed(RECIPES))
            pairs += 1
            for recipe in order:
                out = f"{recipe}-{Path(name).stem}-{seed}"
                pair[recipe] = train_and_score(
                    recipe, data, seed, folder, out, extra[recipe], args.warm_cache, cpus
                )
                row = {"data": name, "seed": seed, **pair[recipe]}
                print(json.dumps(row), flush=True)
            nano, ours = pair["nanogpt-cpu"], pair["default"]
            for recipe, run in pair.items():
                seconds[recipe].append(run["seconds"])
            print(
                f"{name} seed {seed}: default {ours['nats']:.4f} vs nanoGPT {nano['nats']:.4f} "
                f"nats per character ({nano['nats'] - ours['nats']:+.4f} below), in "
                f"{ours['seconds']:.1f} s vs {nano['seconds']:.1f} s "
                f"({ours['seconds'] / nano['seconds']:.2f}x nanoGPT's time)",
                flush=True,
            )
    ours, nano = sum(seconds["default"]), sum(seconds["nanogpt-cpu"])
    over = sum(a > b for a, b in zip(seconds["default"], seconds["nanogpt-cpu"], strict=True))
    print(
        f"in all: the default {ours:.1f} s vs nanoGPT {nano:.1f} s ({ours / nano:.3f}x its "
        f"time); over nanoGPT's time in {over} of {pairs} pairs"
    )
    print(f"load {os.getloadavg()}")


if __name__ == "__main__":
    main()
