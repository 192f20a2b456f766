"""What the probes (light_llm.train.probes) cost the default main job: the default run (`light-llm
train` with no flags: bpe-cpu on Shakespeare) trained with its default probes and with
``--probe-interval 0``, alternating, in one process; the wall time of each training loop, the
seconds the probes took, their share, and the ratio of the two runs' times. Also the size of the
probe records written. Then one probe of the trained model timed on one thread (the trainer's
``PROBE_THREADS``) and on all, taking turns.

    PYTHONPATH=src python benchmarks/bench_probes.py [--repeats 1] [--max-iters 1200]

Run it on a quiet machine: on two cores, anything beside it changes the ratio.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch

from light_llm.train import TrainConfig
from light_llm.train.trainer import Trainer

PROBE_ROUNDS = 5  # turns of the thread comparison, each timing PROBES_A_ROUND probes
PROBES_A_ROUND = 3


def one_run(
    out: Path, probe_interval: int | None, max_iters: int | None
) -> tuple[float, float, Trainer]:
    """(seconds of the training loop, seconds the probes took, the trainer) of a default run
    in ``out``."""
    trainer = Trainer(
        TrainConfig(
            out=str(out), probe_interval=probe_interval, max_iters=max_iters, overwrite=True
        )
    )
    started = time.perf_counter()
    trainer.run()
    return time.perf_counter() - started, trainer.probes.seconds, trainer


def probe_seconds_by_threads(trainer: Trainer) -> dict[int, float]:
    """Median seconds of one probe of ``trainer``'s model on one thread and on all, the two
    taking turns (the probe is written again under the last iteration's name each time)."""
    run, recorder = trainer.prepared, trainer.probes
    everything = torch.get_num_threads()
    timings: dict[int, list[float]] = {1: [], everything: []}
    run.raw_model.eval()
    for _ in range(PROBE_ROUNDS):
        for threads, seconds in timings.items():
            torch.set_num_threads(threads)
            started = time.perf_counter()
            for _ in range(PROBES_A_ROUND):
                recorder.record(run.raw_model, run.progress.iteration, 0, 0.0)
            seconds.append((time.perf_counter() - started) / PROBES_A_ROUND)
    torch.set_num_threads(everything)
    return {threads: statistics.median(seconds) for threads, seconds in timings.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--max-iters", type=int, default=None, help="default: the recipe's")
    args = parser.parse_args()
    print(f"CPU kind: {torch.backends.cpu.get_cpu_capability()}, {torch.get_num_threads()} threads")
    with tempfile.TemporaryDirectory() as folder:
        runs: dict[str, list[float]] = {"probed": [], "unprobed": []}
        probe_seconds: list[float] = []
        sizes = []
        probed_trainer = None
        for _ in range(args.repeats):
            for name, interval in (("probed", None), ("unprobed", 0)):
                out = Path(folder) / name
                seconds, probing, trainer = one_run(out, interval, args.max_iters)
                runs[name].append(seconds)
                if name == "probed":
                    probed_trainer = trainer
                    probe_seconds.append(probing)
                    files = list((out / "probes").glob("iter-*.json"))
                    sizes.append((len(files), sum(f.stat().st_size for f in files)))
        probed, unprobed = statistics.median(runs["probed"]), statistics.median(runs["unprobed"])
        probing = statistics.median(probe_seconds)
        print(f"default run with probes:    {probed:7.1f} s (probes {probing:.2f} s)")
        print(f"default run without probes: {unprobed:7.1f} s")
        print(f"probes' share of the probed run: {100 * probing / probed:.1f}%")
        print(f"ratio probed / unprobed: {probed / unprobed:.3f}")
        count, total = sizes[-1]
        print(
            f"probe records: {count} files, {total / 1e6:.2f} MB "
            f"({total / count / 1e3:.0f} KB each)"
        )
        by_threads = probe_seconds_by_threads(probed_trainer)
        one, everything = by_threads[1], max(by_threads.items())
        print(
            f"one probe: {one * 1e3:.1f} ms on 1 thread, {everything[1] * 1e3:.1f} ms on "
            f"{everything[0]} (ratio 1/{everything[0]}: {one / everything[1]:.3f})"
        )


if __name__ == "__main__":
    main()
