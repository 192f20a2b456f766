"""Training speed on a busy laptop: the default training step with the machine to itself and
with one core kept busy by another process, for each number of threads and OpenMP waiting
policy.

PyTorch's CPU wheels run their thread pool on GNU OpenMP (libgomp, bundled with torch). A
thread that reaches the end of a parallel region first waits for the others; libgomp makes
it spin (by default for about 300,000 polls, ``GOMP_SPINCOUNT``) before it sleeps. On two
cores with a third busy process, the spinning thread takes the core that the late thread
needs, so every region waits for the scheduler: the step slows far more than the CPU share
lost. The waiting policy is read when libgomp loads (when torch is imported), so each
variant runs in a child process of its own, its environment set before ``import torch``:

    default           libgomp's own (spin, then sleep)
    passive           OMP_WAIT_POLICY=PASSIVE: a waiting thread sleeps at once
    spin-10k          GOMP_SPINCOUNT=10000: spin briefly, then sleep
    governor          libgomp's own, with the trainer's thread governor watching the steps
                      (light_llm.train.thread_governor: one thread while the pool stalls)
    busy-governor     the same in the governor's mode for a CPU whose thread count changes
                      a step's numbers: one thread only while the process gets a core less
    bound-governor    the same with the threads bound to the cores, one each
                      (OMP_PROC_BIND=close, OMP_PLACES=cores)

The step is the trainer's (``recipe_sweep.step_timer``: ``--preset``, default ``bpe-cpu``
as in docs/benchmarks.md, ``qwen3-cpu`` being the same size; vocabulary 768, bfloat16
autocast where the CPU has it). The "busy" process is
``python -c "while True: pass"``, started before and killed after each busy measurement.
Variants take turns over ``--rounds`` rounds; the median seconds per step is printed with the
ratio busy / idle (proportional to the CPU lost would be 2x for a 2-thread step on 2 cores,
which loses half its CPU, and 1x for a 1-thread step, which loses none) and each variant's
speed against the first variant idle. The load average (what else ran) is printed before and
after: on a shared machine "idle" means "without the busy process".

    PYTHONPATH=src python benchmarks/bench_busy.py [--preset bpe-cpu] [--rounds 3]
        [--steps 20] [--variants 2:default 2:governor 1:default 2:passive]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

POLICIES = {
    "default": {},
    "passive": {"OMP_WAIT_POLICY": "PASSIVE"},
    "spin-10k": {"GOMP_SPINCOUNT": "10000"},
    "governor": {},
    "busy-governor": {},
    "bound-governor": {"OMP_PROC_BIND": "close", "OMP_PLACES": "cores"},
}
DEFAULT_VARIANTS = ["2:default", "2:governor", "1:default", "2:passive"]
VOCAB_SIZE = 768


def child(preset: str, steps: int, governed: bool, busy_only: bool = False) -> None:
    """Print the seconds per training step of ``preset``, after a warm-up; ``governed``: the
    trainer's thread governor sees every step's time (and its CPU time), as in ``light-llm
    train``; ``busy_only``: in its mode for a CPU whose thread count changes a step's
    numbers."""
    import torch

    from light_llm.train.cpu_allocator import keep_freed_memory
    from light_llm.train.thread_governor import ThreadGovernor

    keep_freed_memory()
    sys.path.insert(0, os.path.dirname(__file__))
    from recipe_sweep import step_timer

    step = step_timer(["--preset", preset], vocab_size=VOCAB_SIZE)
    for _ in range(3):
        step()
    governor = ThreadGovernor(busy_only=busy_only) if governed else None
    start = time.perf_counter()
    for _ in range(steps):
        tick, cpu_tick = time.perf_counter(), time.process_time()
        step()
        if governor is not None:
            governor.observe(time.perf_counter() - tick, time.process_time() - cpu_tick)
    print(torch.get_num_threads(), (time.perf_counter() - start) / steps)


def seconds_per_step(variant: str, preset: str, steps: int, busy: bool) -> float:
    threads, policy = variant.split(":")
    settings = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_PROC_BIND", "OMP_PLACES")
    env = {k: v for k, v in os.environ.items() if k not in settings}
    env.update(POLICIES[policy], OMP_NUM_THREADS=threads)
    hog = None
    if busy:
        hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        command = [sys.executable, __file__, "--child", policy, "--preset", preset]
        command += ["--steps", str(steps)]
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()
    return float(done.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="bpe-cpu")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--variants", nargs="+", default=DEFAULT_VARIANTS)
    parser.add_argument("--child", choices=POLICIES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(
            args.preset, args.steps, args.child.endswith("governor"), args.child == "busy-governor"
        )
        return
    for variant in args.variants:
        threads, _, policy = variant.partition(":")
        if not threads.isdigit() or policy not in POLICIES:
            parser.error(f"a variant is THREADS:POLICY with POLICY one of {', '.join(POLICIES)}")
    import torch

    print(
        f"{args.preset} training step, {os.cpu_count()} cores, CPU capability "
        f"{torch.backends.cpu.get_cpu_capability()}; {args.rounds} rounds x {args.steps} steps"
    )
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    times = {(v, busy): [] for v in args.variants for busy in (False, True)}
    for _ in range(args.rounds):
        for variant, busy in times:
            times[variant, busy].append(seconds_per_step(variant, args.preset, args.steps, busy))
    median = {key: statistics.median(values) for key, values in times.items()}
    reference = median[args.variants[0], False]
    print(f"{'threads:policy':<16}{'idle ms':>9}{'busy ms':>9}{'busy/idle':>11}  idle, busy speed")
    print(f"{'':<16}{'':>9}{'':>9}{'':>11}  vs {args.variants[0]} idle")
    for variant in args.variants:
        idle, busy = median[variant, False], median[variant, True]
        print(
            f"{variant:<16}{idle * 1e3:>9.1f}{busy * 1e3:>9.1f}{busy / idle:>10.2f}x  "
            f"{reference / idle:.2f}x, {reference / busy:.2f}x"
        )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
