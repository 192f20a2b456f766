"""How the CPU thread pool's idle threads wait: asleep, so that a busy laptop slows training
in proportion to the CPU it takes (issue 25, item 4).

PyTorch's CPU wheels run their parallel regions on GNU OpenMP (libgomp, shipped inside
torch). A thread that finishes its share of a region first waits at the barrier for the
others; by default libgomp makes it spin, polling for about 300,000 rounds (a millisecond or
so) before it sleeps. When another process keeps one of two cores busy, the spinning thread
holds a core that the late thread is waiting to be scheduled on, and every region of a
training step (hundreds of them) waits for the scheduler: measured on a shared 2-core AMD
EPYC (benchmarks/bench_busy.py, docs/benchmarks.md), one busy process made the default step
several times slower, far more than the half of the CPU it took. With
``OMP_WAIT_POLICY=PASSIVE`` a waiting thread sleeps at once (a futex), leaving the core to
whoever can use it. Waiting is scheduling only: the threads' shares of each region, and so
the numbers computed, are the same.

libgomp reads the variable once, when it is loaded, i.e. when torch is first imported, so
:func:`wait_passively` must run before that (``light-llm train`` calls it first thing). A
value the user set is kept.
"""

from __future__ import annotations

import os
import sys

WAIT_POLICY = "OMP_WAIT_POLICY"
PASSIVE = "PASSIVE"


def wait_passively(environ: dict[str, str] | None = None) -> bool:
    """Set ``OMP_WAIT_POLICY=PASSIVE`` in ``environ`` (default: this process's) unless a
    policy is set there already or torch is already loaded (too late to matter); True if
    this set it."""
    environ = os.environ if environ is None else environ
    if WAIT_POLICY in environ or "torch" in sys.modules:
        return False
    environ[WAIT_POLICY] = PASSIVE
    return True
