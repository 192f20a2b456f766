"""What the probes (light_llm.train.probes) cost the default main job: the default run (`light-llm
train` with no flags: bpe-cpu on Shakespeare) trained with its default probes and with
``--probe-interval 0``, alternating, in one process; the wall time of each training loop, the
seconds the probes took, their share, and the ratio of the two runs' times. Also the size of the
probe records written.

    PYTHONPATH=src python benchmarks/bench_probes.py [--repeats 1] [--max-iters 820]

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


def one_run(out: Path, probe_interval: int | None, max_iters: int | None) -> tuple[float, float]:
    """(seconds of the training loop, seconds the probes took) of a default run in ``out``."""
    trainer = Trainer(
        TrainConfig(
            out=str(out), probe_interval=probe_interval, max_iters=max_iters, overwrite=True
        )
    )
    started = time.perf_counter()
    trainer.run()
    return time.perf_counter() - started, trainer.probes.seconds


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
        for _ in range(args.repeats):
            for name, interval in (("probed", None), ("unprobed", 0)):
                out = Path(folder) / name
                seconds, probing = one_run(out, interval, args.max_iters)
                runs[name].append(seconds)
                if name == "probed":
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


if __name__ == "__main__":
    main()
