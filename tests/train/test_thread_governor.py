"""The trainer's thread governor (light_llm.train.thread_governor): its rule on given step
times, and a run that changes threads mid-way gives the losses of one that never did."""

from __future__ import annotations

from itertools import pairwise

import pytest
import torch

import light_llm.train.trainer as trainer_module
from light_llm.models.gpt import GPT
from light_llm.train import TrainConfig, train
from light_llm.train.thread_governor import (
    BUSY_ONLY_NOTE,
    CHANGED_NUMBERS_NOTE,
    RETRY,
    RETRY_MAX,
    WINDOW,
    ThreadGovernor,
)
from tests.train.helpers import TINY


def windows(
    governor: ThreadGovernor,
    seconds_by_threads: dict[int, float],
    count: int,
    cores_by_threads: dict[int, float] | None = None,
):
    """Feed ``count`` windows of steps taking the time given for the governor's current
    thread count (and the CPU time of as many cores as given, if any); the thread counts it
    ran them on."""
    seen = []
    for _ in range(count):
        seen.append(governor.current)
        for _ in range(WINDOW):
            seconds = seconds_by_threads[governor.current]
            cores = (cores_by_threads or {}).get(governor.current)
            governor.observe(seconds, None if cores is None else seconds * cores)
    return seen


def test_where_threads_change_the_numbers_only_a_busy_cpu_moves_the_run_to_one_thread():
    """busy_only: no first trial, and none for the machine's own slow phases (the process
    still gets its cores), however slow; one thread when the process gets a core less and its
    step stalls, or from the first window read when the run starts busy; all threads again
    once the CPU frees. Times and shares as on a 2-core Xeon with AMX (docs/benchmarks.md)."""
    threads = torch.get_num_threads()
    quiet_cores, busy_cores = {2: 1.98, 1: 1.0}, {2: 1.04, 1: 1.0}
    try:
        governor = ThreadGovernor(threads=2, warmup=0, busy_only=True)
        assert windows(governor, {2: 0.054}, 3, quiet_cores) == [2, 2, 2]
        assert governor.note is None
        # a slow phase with the cores still the process's: no trial however slow
        assert windows(governor, {2: 0.2}, 3, quiet_cores) == [2, 2, 2]
        # a slow phase that takes some CPU away but no stall beyond STALL: none either
        assert windows(governor, {2: 0.07}, 2, {2: 1.3}) == [2, 2]
        # another process busy: the pool stalls and gets a core less
        busy = {2: 1.6, 1: 0.086}
        seen = windows(governor, busy, 3, busy_cores)
        assert seen == [2, 1, 1]
        # quiet again: the retry on all threads (after RETRY windows on one) wins, and stays
        seen = windows(governor, {2: 0.054, 1: 0.086}, RETRY + 4, quiet_cores)
        assert seen == [1] * (RETRY - 2) + [2] * 6
        # busy from the start: one thread after the first window read
        governor = ThreadGovernor(threads=2, warmup=0, busy_only=True)
        assert windows(governor, busy, 3, busy_cores) == [2, 1, 1]
        # no CPU times given: no window reads as busy
        governor = ThreadGovernor(threads=2, warmup=0, busy_only=True)
        assert windows(governor, busy, 3) == [2, 2, 2]
    finally:
        torch.set_num_threads(threads)


def test_a_busy_only_change_of_threads_says_that_the_numbers_now_differ():
    threads = torch.get_num_threads()
    try:
        governor = ThreadGovernor(threads=2, warmup=0, busy_only=True)
        notes = []
        for _ in range(WINDOW):
            governor.observe(1.6, 1.6 * 1.04)
            notes.append(governor.note)
        assert notes[:-1] == [None] * (WINDOW - 1)
        assert notes[-1].startswith("threads 2 -> 1 (trying one thread)")
        assert notes[-1].endswith(CHANGED_NUMBERS_NOTE)
        for _ in range(RETRY * WINDOW):  # one thread until the retry on all threads
            governor.observe(0.086, 0.086)
        assert governor.current == 2 and CHANGED_NUMBERS_NOTE not in governor.note  # said once
        plain = ThreadGovernor(threads=2, warmup=0)
        for _ in range(WINDOW):
            plain.observe(0.06)
        assert plain.note.startswith("threads 2 -> 1") and CHANGED_NUMBERS_NOTE not in plain.note
    finally:
        torch.set_num_threads(threads)


def test_a_stalled_pool_drops_to_one_thread_and_comes_back_when_the_cpu_frees():
    threads = torch.get_num_threads()
    try:
        governor = ThreadGovernor(threads=2, warmup=0)
        # quiet: one trial window on one thread, then all threads
        assert windows(governor, {2: 0.06, 1: 0.09}, 4) == [2, 1, 2, 2]
        busy = {2: 0.22, 1: 0.10}  # another process takes a core
        seen = windows(governor, busy, 2 + RETRY + 1)
        assert seen[:3] == [2, 1, 1] and 2 in seen[3:]  # drops, stays, retries all threads
        assert seen[-1] == 1  # the retry was slower: back to one thread
        # quiet again: the next retry comes after twice as many windows, and stays
        seen = windows(governor, {2: 0.06, 1: 0.09}, 2 * RETRY + 2)
        assert seen[: 2 * RETRY - 1] == [1] * (2 * RETRY - 1)
        assert seen[-2:] == [2, 2] and torch.get_num_threads() == 2
        # a trial on one thread that is no faster goes back at once
        governor = ThreadGovernor(threads=2, warmup=0)
        assert windows(governor, {2: 0.06, 1: 0.5}, 3) == [2, 1, 2]
        # all threads slower now, but still faster than that trial: none again
        assert windows(governor, {2: 0.2, 1: 0.5}, 3) == [2, 2, 2]
        # a run that starts on a busy machine finds one thread faster at once
        governor = ThreadGovernor(threads=2, warmup=0)
        assert windows(governor, {2: 0.22, 1: 0.10}, 4) == [2, 1, 1, 1]
    finally:
        torch.set_num_threads(threads)


def retry_windows(seen: list[int]) -> list[int]:
    """The indices of the windows on all threads that follow a window on one thread."""
    return [i for i in range(1, len(seen)) if seen[i] == 2 and seen[i - 1] == 1]


def doubling(first: int, count: int) -> list[int]:
    """first, 2 first, 4 first, ... capped at RETRY_MAX: ``count`` of them."""
    expected = [first]
    while len(expected) < count:
        expected.append(min(2 * expected[-1], RETRY_MAX))
    return expected


def test_retries_that_one_thread_keeps_winning_come_ever_less_often_and_reset_when_lost():
    threads = torch.get_num_threads()
    try:
        governor = ThreadGovernor(threads=2, warmup=0)
        busy = {2: 0.22, 1: 0.10}
        seen = windows(governor, busy, 400)  # a machine busy from the start
        retries = retry_windows(seen)
        # windows on one thread before each retry: RETRY, then doubling, then RETRY_MAX
        gaps = [b - a - 1 for a, b in pairwise([0, *retries])]
        assert gaps == doubling(RETRY, len(gaps)) and gaps[-1] == RETRY_MAX and RETRY_MAX > RETRY
        # the CPU frees: the next retry finds all threads faster, which resets the interval
        seen = windows(governor, {2: 0.06, 1: 0.09}, RETRY_MAX + 2)
        assert seen[-1] == 2
        seen = windows(governor, busy, 2 + RETRY + 2)  # busy again: retried after RETRY
        assert retry_windows(seen) == [1 + RETRY]
    finally:
        torch.set_num_threads(threads)


def test_a_slow_phase_that_one_thread_never_beat_starts_no_trial():
    threads = torch.get_num_threads()
    try:
        governor = ThreadGovernor(threads=2, warmup=0)
        assert windows(governor, {2: 0.06, 1: 0.09}, 4) == [2, 1, 2, 2]
        # all threads 1.5x their best, as in a two-core machine's slow phase, yet faster
        # than one thread ever was: no window is spent on one thread
        assert windows(governor, {2: 0.088, 1: 0.12}, 5) == [2] * 5
        # slower than one thread's best: a trial, which finds one thread faster
        assert windows(governor, {2: 0.095, 1: 0.092}, 3) == [2, 1, 1]
    finally:
        torch.set_num_threads(threads)


def trial_windows(seen: list[int]) -> list[int]:
    """The indices of the windows on one thread that follow a window on all threads."""
    return [i for i in range(1, len(seen)) if seen[i] == 1 and seen[i - 1] == 2]


def test_trials_that_one_thread_keeps_losing_come_ever_less_often_and_reset_when_won():
    threads = torch.get_num_threads()
    try:
        governor = ThreadGovernor(threads=2, warmup=0)
        # a lucky first window sets a best that all threads never reach again, and one
        # thread once had a good window: every later window on all threads is past both
        # bounds, yet one thread is slower each time it is tried (a machine's slow phase)
        assert windows(governor, {2: 0.019, 1: 0.028}, 2) == [2, 1]
        seen = windows(governor, {2: 0.031, 1: 0.047}, 400)
        trials = trial_windows(seen)
        # windows on all threads between two trials: 1, 2, 4, ... up to RETRY_MAX
        gaps = [b - a - 2 for a, b in pairwise([-1, *trials])]
        assert gaps == doubling(1, len(gaps)) and gaps[-1] == RETRY_MAX
        assert len(trials) < 20  # against 200 with a trial after every window
        # another process takes a core: the next trial, at most RETRY_MAX windows on, wins,
        # and one thread stays until its retry
        seen = windows(governor, {2: 0.09, 1: 0.05}, RETRY_MAX + RETRY + 1)
        first = seen.index(1)
        assert first <= RETRY_MAX and seen[first : first + RETRY] == [1] * RETRY
        # the CPU frees (the retry finds all threads faster); once a trial has won, the next
        # stall is tried at once
        windows(governor, {2: 0.02, 1: 0.047}, RETRY_MAX + 2)
        assert governor.current == 2
        seen = windows(governor, {2: 0.09, 1: 0.05}, 3)
        assert seen == [2, 1, 1]
    finally:
        torch.set_num_threads(threads)


def test_the_warmup_steps_are_not_read():
    threads = torch.get_num_threads()
    try:
        governor = ThreadGovernor(threads=2)  # a slow first window: kernels being built
        assert windows(governor, {2: 0.5, 1: 0.5}, 1) == [2] and governor.current == 2
        assert windows(governor, {2: 0.06, 1: 0.09}, 4) == [2, 1, 2, 2]
    finally:
        torch.set_num_threads(threads)


class Alternating(ThreadGovernor):
    """Switches between 2 threads and 1 every 3 steps, whatever the times."""

    def observe(self, seconds: float, cpu_seconds: float | None = None) -> None:
        self.note = None
        self.times.append(seconds)
        if len(self.times) % 3 == 0:
            self.use(1 if self.current == 2 else 2)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_changing_threads_mid_run_leaves_the_losses_bit_identical(
    corpus, tmp_path, monkeypatch, dtype
):
    settings = {**TINY, "data": str(corpus), "max_iters": 12, "n_embd": 32, "batch_size": 8}
    settings["dtype"] = dtype
    torch.set_num_threads(2)  # the one_thread fixture restores the count
    fixed = train(TrainConfig(**settings, out=str(tmp_path / "fixed")))
    monkeypatch.setattr(trainer_module, "ThreadGovernor", Alternating)
    switching = train(TrainConfig(**settings, out=str(tmp_path / "switching")))
    assert switching.losses == fixed.losses
    assert torch.get_num_threads() == 2  # restored after the loop


def test_a_run_stopped_by_an_error_on_one_thread_gives_the_process_all_its_threads_back(
    corpus, tmp_path, monkeypatch
):
    settings = {**TINY, "data": str(corpus), "max_iters": 12, "n_embd": 32, "batch_size": 8}
    torch.set_num_threads(2)  # the one_thread fixture restores the count
    monkeypatch.setattr(trainer_module, "ThreadGovernor", Alternating)
    step = trainer_module.Trainer.step

    def failing_on_one_thread(self, stop):
        if torch.get_num_threads() == 1:
            raise OSError(28, "No space left on device")
        return step(self, stop)

    monkeypatch.setattr(trainer_module.Trainer, "step", failing_on_one_thread)
    with pytest.raises(OSError):
        train(TrainConfig(**settings, out=str(tmp_path / "run")))
    assert torch.get_num_threads() == 2


def test_a_cpu_whose_thread_count_changes_a_step_keeps_all_threads_when_quiet_and_says_so(
    corpus, tmp_path, monkeypatch, capsys
):
    settings = {**TINY, "data": str(corpus), "max_iters": 20, "n_embd": 32, "batch_size": 8}
    torch.set_num_threads(2)  # the one_thread fixture restores the count
    made: list[ThreadGovernor] = []

    class Recorded(ThreadGovernor):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(trainer_module, "ThreadGovernor", Recorded)
    plain = train(TrainConfig(**settings, out=str(tmp_path / "plain")))
    out = capsys.readouterr().out
    # this machine computes a step alike on any thread count (the test above): governed
    assert len(made) == 1 and "threads 2 -> 1 (trying one thread)" in out
    assert BUSY_ONLY_NOTE.format(2) not in out and not made[0].busy_only

    # a loss that depends on the thread count, as a step did on a Xeon with AMX
    next_token_loss = GPT.next_token_loss

    def loss_by_threads(logits, targets, label_smoothing, reduction="mean"):
        loss = next_token_loss(logits, targets, label_smoothing, reduction)
        return loss + 1e-3 * torch.get_num_threads()

    monkeypatch.setattr(GPT, "next_token_loss", staticmethod(loss_by_threads))
    # a quiet CPU whatever else runs beside this test: no window counts as busy
    monkeypatch.setattr("light_llm.train.thread_governor.BUSY_SHARE_MARGIN", 2.0)
    fixed = train(TrainConfig(**settings, out=str(tmp_path / "fixed")))
    out = capsys.readouterr().out
    # a governor for a busy CPU only: on this quiet machine, no trial
    assert len(made) == 2 and made[1].busy_only and "threads 2 -> 1" not in out
    assert BUSY_ONLY_NOTE.format(2) in out
    # the check left the run alone: the same steps, each loss 2e-3 above (2 threads)
    assert fixed.losses.keys() == plain.losses.keys()
    assert all(abs(fixed.losses[i] - plain.losses[i] - 2e-3) < 1e-6 for i in plain.losses)
    assert torch.get_num_threads() == 2
