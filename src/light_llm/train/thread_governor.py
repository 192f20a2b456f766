"""Fewer threads while the CPU is busy: the trainer's answer to a busy laptop (issue 25,
item 4).

PyTorch's CPU wheels run their parallel regions on GNU OpenMP (libgomp, inside torch/lib).
A thread that finishes its share of a region first spins at the barrier for the others.
With one of two cores kept busy by another process, the late thread waits for the scheduler
at every region of the step, hundreds a step: measured on a 2-core AMD EPYC with AVX-512 BF16
(benchmarks/bench_busy.py, docs/benchmarks.md), the default step went from 58.5 ms to 224.9
ms (3.8x) beside one busy process, while on one thread it went from 92.3 to 97.6 ms. Waiting
passively (``OMP_WAIT_POLICY=PASSIVE``) made the busy step 106.5 ms but the quiet one 102.0 ms
(1.7x slower than spinning): no fixed setting is good for both, so the trainer watches.

The rule, over windows of ``WINDOW`` steps (their median step time, so that one slow step,
an evaluation's neighbour or a page fault, decides nothing):

- the first ``WINDOW`` steps are not read (the allocator and oneDNN's kernels warming up),
  nor, in a ``--time`` run, the warmup whose speed fixes its iteration count (so that a trial
  on one thread does not shorten the run of a quiet machine);
- the first window on all threads is followed by a trial window on one thread (a run that
  starts on a busy machine has no quiet best to compare with);
- on all threads, a window slower than ``STALL`` x the best window on all threads so far,
  and slower than the best window on one thread so far, starts a trial: the next window runs
  on one thread (a window that one thread has never beaten starts none: a two-core machine
  also has slow phases of its own with no other process, where a trial only costs time);
- after a trial, or after ``RETRY`` windows on one thread, the faster of the last window on
  one thread and the last on all threads decides where training goes on (all threads are
  tried again for one window first). Each retry that one thread still wins doubles the
  windows before the next, up to ``RETRY_MAX``; a retry that all threads win resets it to
  ``RETRY``. A retry costs a window of the stalled pool's steps (2-3x one thread's beside a
  busy process), so a process that stays busy is not paid for every 10 windows: on a 2-core
  AMD EPYC (AVX2) beside ``python -c "while True: pass"`` the default's whole run took
  213 s retrying every 10 windows and 193 s with the doubling (124 s with the machine to
  itself; docs/benchmarks.md, "A busy laptop").
- a trial that one thread loses makes the next wait: the windows on all threads before
  another trial double with every trial lost in a row (1, 2, 4, ... up to ``RETRY_MAX``), and
  a trial that one thread wins resets the wait. A machine's own slow phase can leave all
  threads slower than both bounds above for a whole run: on an Intel Xeon with AMX (2 of its
  16 cores pinned, bfloat16) a run of nanoGPT's recipe tried one thread 64 times, each a
  window at 44 ms a step against 32 ms on all threads, about 4 s of its 80.4 s (docs/recipe.md,
  "An AVX-512 machine with AMX").

On an AMD EPYC (AVX2 and AVX-512 BF16) the thread count does not change the numbers a step
computes (each thread's share of a product or a reduction is summed in the same order), so a
run that changed threads gives the losses of one that did not;
``tests/train/test_thread_governor.py`` checks that on the machine it runs on. On an Intel
Xeon with AMX, two runs of nanoGPT's recipe that changed threads at other steps ended 0.0003
apart in training loss. So the trainer first computes one forward and backward on all threads
and on one (``Trainer.threads_change_a_step``); where they differ by a bit, the governor
watches for a busy CPU only (``busy_only``, :data:`BUSY_ONLY_NOTE`): no first trial, and a
trial only for a window whose process got less CPU than its threads less half a core
(``process_time`` over wall time: 1.95-2.00 for two spinning threads on a quiet 2-core Xeon
with AMX, 1.03-1.04 beside ``python -c "while True: pass"``, where a step took 20-25x as
long; docs/benchmarks.md, "A busy laptop") and slower than ``STALL`` x the best on all
threads. A quiet run never changes threads and repeats bit for bit; a run that does says
that its numbers now differ from a quiet run's. (Until the twenty-third session such a CPU
kept all threads whatever happened: beside one busy process the default's step there took
29.6x as long.)
"""

from __future__ import annotations

import statistics

import torch

WINDOW = 5  # steps whose median step time is one reading
STALL = 1.4  # a window this much slower than the best on all threads: try one thread
RETRY = 10  # windows on one thread before all threads are tried again
RETRY_MAX = 40  # the most windows between retries that one thread keeps winning


BUSY_SHARE_MARGIN = 0.5  # cores: a window whose process got less than threads - this is busy

# said where the governor watches for a busy CPU only (Trainer.threads_change_a_step): {0}
# is the thread count
BUSY_ONLY_NOTE = (
    "threads: all {0}, one only while another process keeps the CPU busy: on this CPU one "
    "thread computes a training step's numbers differently from {0} (one forward and backward "
    "compared bit for bit), so a run on a quiet machine keeps {0} and repeats bit for bit."
)
CHANGED_NUMBERS_NOTE = "; from here this run's numbers differ from a quiet run's"


class ThreadGovernor:
    """Chooses between ``threads`` (all, the default: torch's) and one thread from the step
    times it is given (:meth:`observe`), setting ``torch.set_num_threads``."""

    def __init__(
        self, threads: int | None = None, warmup: int = WINDOW, busy_only: bool = False
    ) -> None:
        self.full = threads or torch.get_num_threads()
        self.warmup = warmup  # steps still to pass by unread
        # where the thread count changes a step's numbers: try one thread only when busy
        self.busy_only = busy_only
        self.current = self.full
        self.times: list[float] = []
        self.cpu_seconds = 0.0  # of this window, all the process's threads together
        self.numbers_changed = False  # busy_only: the run left its quiet numbers (said once)
        self.best_full = float("inf")
        self.best_one = float("inf")  # the best window on one thread so far
        self.last = {self.full: float("inf"), 1: float("inf")}
        self.windows_on_one = 0
        self.retry_after = RETRY  # windows on one thread before the next retry
        self.trial_wait = 0  # windows on all threads before a stall may start a trial
        self.windows_since_trial = 0  # on all threads, since the last trial ended
        self.trying = False
        self.probed = False  # the first trial on one thread is behind
        self.note: str | None = None  # what the last observe changed, for the run's log

    @property
    def active(self) -> bool:
        return self.full > 1

    def observe(self, seconds: float, cpu_seconds: float | None = None) -> None:
        """Record one step's wall time (and the CPU time the process spent in it, which
        ``busy_only`` needs); at the end of a window, maybe change the thread count."""
        self.note = None
        if not self.active:
            return
        if self.warmup > 0:
            self.warmup -= 1
            return
        self.times.append(seconds)
        self.cpu_seconds += cpu_seconds or 0.0
        if len(self.times) < WINDOW:
            return
        median = statistics.median(self.times)
        # the CPU the process got, in cores (all of them where no CPU times were given)
        cores = self.cpu_seconds / sum(self.times) if self.cpu_seconds else float(self.full)
        self.times, self.cpu_seconds = [], 0.0
        self.last[self.current] = median
        if self.current == self.full:
            self.best_full = min(self.best_full, median)
            self.windows_since_trial += 1
            if self.trying:  # the retry window on all threads: compare with one thread
                self.trying = False
                if self.last[1] < median:
                    self.retry_after = min(2 * self.retry_after, RETRY_MAX)
                    self.use(1)
                else:
                    self.retry_after = RETRY
            elif self.busy_only:  # one thread only for a process that got a core less
                busy = cores < self.full - BUSY_SHARE_MARGIN
                # slower than the best on all threads, or the best itself: busy from the start
                if busy and (median > STALL * self.best_full or median == self.best_full):
                    self.use(1)
            elif not self.probed or (
                median > max(STALL * self.best_full, self.best_one)
                and self.windows_since_trial > self.trial_wait
            ):
                self.probed = True
                self.use(1)
            return
        self.best_one = min(self.best_one, median)
        self.windows_on_one += 1
        if self.windows_on_one == 1 and self.last[1] >= self.last[self.full]:
            self.trial_wait = min(max(1, 2 * self.trial_wait), RETRY_MAX)
            self.windows_since_trial = 0
            self.use(self.full)  # the trial on one thread was no faster
            return
        if self.windows_on_one == 1:
            self.trial_wait = 0  # one thread won its trial: the machine is busy
        if self.windows_on_one >= self.retry_after:
            self.trying = True
            self.use(self.full)

    def restore(self) -> None:
        """All threads again (for what follows the training loop)."""
        if self.active and self.current != self.full:
            torch.set_num_threads(self.full)
            self.current = self.full

    def use(self, threads: int) -> None:
        if threads != self.current:
            why = (
                "trying one thread"
                if threads == 1
                else "back to all threads"
                if self.last[1] >= self.last[self.full]
                else "retrying all threads"
            )
            self.note = (
                f"threads {self.current} -> {threads} ({why}): a step took "
                f"{self.last[self.current]:.3g} s on {self.current} (the best on "
                f"{self.full}: {self.best_full:.3g} s)"
                + (CHANGED_NUMBERS_NOTE if self.busy_only and not self.numbers_changed else "")
            )
            self.numbers_changed = self.busy_only
            torch.set_num_threads(threads)
            self.current = threads
        if threads == 1:
            self.windows_on_one = 0
