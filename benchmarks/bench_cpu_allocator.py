"""Training step time on the CPU with glibc's default allocator against
:func:`light_llm.train.cpu_allocator.keep_freed_memory` (what ``light-llm train`` uses).

The allocator's settings belong to a process, so each variant runs in a child process of
its own; the two take turns, ``--rounds`` times, each timing ``--steps`` training steps of
the recipe after a warm-up, and the median ratio is printed (load from other work on a
shared machine hits both alike). The step is the trainer's (``recipe_sweep.step_timer``).

    PYTHONPATH=src python benchmarks/bench_cpu_allocator.py [--preset char-cpu]
        [--rounds 5] [--steps 20] [--threads 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time


def child(preset: str, keep: bool, steps: int) -> None:
    if keep:
        from light_llm.train.cpu_allocator import keep_freed_memory

        assert keep_freed_memory(), "glibc did not take the allocator settings"
    sys.path.insert(0, os.path.dirname(__file__))
    from recipe_sweep import step_timer

    step = step_timer(["--preset", preset])
    for _ in range(5):
        step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    print((time.perf_counter() - start) / steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="char-cpu")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--child", choices=("default", "keep"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.preset, args.child == "keep", args.steps)
        return
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))

    def seconds_per_step(variant: str) -> float:
        command = [sys.executable, __file__, "--child", variant, "--preset", args.preset]
        command += ["--steps", str(args.steps)]
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
        return float(done.stdout.split()[-1])

    times: dict[str, list[float]] = {"default": [], "keep": []}
    for _ in range(args.rounds):
        for variant in times:
            times[variant].append(seconds_per_step(variant))
    ratios = [d / k for d, k in zip(times["default"], times["keep"], strict=True)]
    for variant, values in times.items():
        print(f"{variant:8s} {statistics.median(values) * 1e3:8.1f} ms per step (median)")
    print(
        f"{args.preset}, {args.threads} threads: keep_freed_memory makes a step "
        f"{statistics.median(ratios):.2f}x faster (median of {args.rounds} rounds)"
    )


if __name__ == "__main__":
    main()
