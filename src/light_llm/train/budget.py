"""Training for a wall-clock budget (``light-llm train --time 90s``) and the time left.

A run given ``--time`` does not know its length in iterations at the start, yet its learning
rate must decay to its end. The trainer therefore measures its speed while the learning rate
warms up (the warmup does not depend on the end: ``learning_rate`` of
:mod:`light_llm.train.optim`), leaving out the first ``SKIPPED_ITERATIONS`` (compilation,
allocation); at the end of the warmup it turns the budget left into an iteration count with
:func:`iterations_for_budget` and fixes it: from then on the run is the one ``--max-iters N``
would give, and its checkpoint records N.

The cost model, shared with the "time left" of the progress lines (:func:`seconds_left`):

    seconds(i -> N) = (N - i) s + e(i, N) t_eval

with s the seconds of one iteration, t_eval those of one evaluation (with its checkpoint)
and e(i, N) the number of evaluations after iteration i up to and including the one at N.
"""

from __future__ import annotations

import math
import re

from light_llm.errors import ConfigError

SKIPPED_ITERATIONS = 2  # left out of the speed measurement
MEASURED_ITERATIONS = 3  # at least this many are timed before the estimate
MIN_WARMUP_FOR_BUDGET = SKIPPED_ITERATIONS + MEASURED_ITERATIONS

_UNIT_SECONDS = {"s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)([hms])")


MAX_DURATION_S = 365 * 86400  # a year: the longest --time budget


def parse_duration(text: str) -> float:
    """Seconds in a duration written ``90``, ``90s``, ``5m``, ``1.5h`` or ``1h30m``; ConfigError
    for anything else or a duration that is not positive."""
    cleaned = str(text).strip().lower()
    seconds = None
    if re.fullmatch(r"\d+(?:\.\d+)?", cleaned):
        seconds = float(cleaned)
    elif cleaned and _DURATION_PART.sub("", cleaned) == "":
        parts = _DURATION_PART.findall(cleaned)
        units = [unit for _, unit in parts]
        if len(set(units)) == len(units):  # "5m5m" is a typo, not 10 minutes
            seconds = sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts)
    if seconds is None or not math.isfinite(seconds):
        raise ConfigError(
            f"--time {text!r} is not a duration; write it as seconds (90 or 90s), minutes "
            "(5m), hours (1h) or a sum of them (1h30m)."
        )
    if seconds <= 0:
        raise ConfigError(f"--time must be longer than 0 seconds, got {text!r}.")
    if seconds > MAX_DURATION_S:
        raise ConfigError(
            f"--time must be at most {MAX_DURATION_S // 86400:.0f} days, got {text!r}; for a "
            "longer run give --max-iters."
        )
    return seconds


def evaluations_after(done: int, end: int, eval_interval: int) -> int:
    """e(i, N): evaluations at iterations in (done, end]: every multiple of ``eval_interval``
    and the end itself."""
    if end <= done:
        return 0
    at_multiples = end // eval_interval - done // eval_interval
    return at_multiples + (0 if end % eval_interval == 0 else 1)


def seconds_left(
    done: int, end: int, seconds_per_iteration: float, eval_seconds: float, eval_interval: int
) -> float:
    """(N - i) s + e(i, N) t_eval: the time the rest of the run takes (module docstring)."""
    evaluations = evaluations_after(done, end, eval_interval)
    return max(end - done, 0) * seconds_per_iteration + evaluations * eval_seconds


def iterations_for_budget(
    done: int,
    seconds_available: float,
    seconds_per_iteration: float,
    eval_seconds: float,
    eval_interval: int,
) -> int:
    """The largest end N >= ``done`` whose remaining cost :func:`seconds_left` fits in
    ``seconds_available`` (N = ``done`` when nothing more fits). The cost grows with N, so a
    bisection between ``done`` and the end that ignores evaluations finds it."""
    if seconds_per_iteration <= 0:
        raise ValueError("seconds_per_iteration must be positive.")
    low = done
    high = done + max(int(seconds_available / seconds_per_iteration), 0)
    while low < high:
        middle = (low + high + 1) // 2
        cost = seconds_left(done, middle, seconds_per_iteration, eval_seconds, eval_interval)
        if cost <= seconds_available:
            low = middle
        else:
            high = middle - 1
    return low


def format_seconds(seconds: float) -> str:
    """``42s``, ``3m05s`` or ``1h02m``: a duration for a progress line."""
    seconds = max(int(round(seconds)), 0)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
