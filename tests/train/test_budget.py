"""The time budget's arithmetic against brute force: durations, evaluations counted one by one,
the largest iteration count that fits found by trying every count."""

import pytest

from light_llm.errors import ConfigError
from light_llm.train.budget import (
    evaluations_after,
    format_seconds,
    iterations_for_budget,
    parse_duration,
    seconds_left,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90),
        ("90s", 90),
        ("5m", 300),
        ("1h", 3600),
        ("1.5h", 5400),
        ("1h30m", 5400),
        (" 2M ", 120),
        ("0.5", 0.5),
        ("1m30s", 90),
    ],
)
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "abc", "5 min", "5mm", "m5", "1h1h", "-3s", "1e3", "inf"])
def test_unparsable_durations_are_one_sentence(text):
    with pytest.raises(ConfigError, match="is not a duration"):
        parse_duration(text)


@pytest.mark.parametrize("text", ["0", "0s", "0m0s"])
def test_a_zero_duration_is_refused(text):
    with pytest.raises(ConfigError, match="longer than 0 seconds"):
        parse_duration(text)


def evaluations_one_by_one(done, end, interval):
    return sum(1 for i in range(done + 1, end + 1) if i % interval == 0 or i == end)


@pytest.mark.parametrize("interval", [1, 3, 7, 250])
def test_evaluations_after_counts_every_multiple_and_the_end(interval):
    for done in range(0, 30):
        for end in range(0, 40):
            expected = evaluations_one_by_one(done, end, interval)
            assert evaluations_after(done, end, interval) == expected, (done, end)


@pytest.mark.parametrize(
    ("done", "available", "per_iteration", "eval_seconds", "interval"),
    [
        (100, 90.0, 0.04, 1.5, 250),
        (5, 3.0, 0.01, 0.2, 10),
        (5, 0.05, 0.01, 0.2, 10),
        (0, 10.0, 0.1, 0.0, 1),
        (7, -1.0, 0.1, 0.5, 5),
        (20, 60.0, 0.3, 2.0, 3),
    ],
)
def test_the_estimate_is_the_largest_count_that_fits(
    done, available, per_iteration, eval_seconds, interval
):
    costs = {done: 0.0}  # the cost of every end, added up iteration by iteration
    for end in range(done + 1, done + int(max(available, 0) / per_iteration) + 3):
        ran = costs[end - 1] + per_iteration + (eval_seconds if end % interval == 0 else 0.0)
        costs[end] = ran

    def cost(end):  # the evaluation at the end is due whether or not end is a multiple
        return costs[end] + (eval_seconds if end > done and end % interval else 0.0)

    fitting = [end for end in costs if cost(end) <= available]
    expected = max(fitting, default=done)
    end = iterations_for_budget(done, available, per_iteration, eval_seconds, interval)
    assert end == expected
    assert seconds_left(done, end, per_iteration, eval_seconds, interval) == pytest.approx(
        cost(end)
    )


@pytest.mark.parametrize(
    ("seconds", "text"), [(0, "0s"), (42.4, "42s"), (185, "3m05s"), (3720, "1h02m")]
)
def test_time_left_is_written_short(seconds, text):
    assert format_seconds(seconds) == text


def test_measuring_that_would_take_most_of_the_budget_is_warned_about():
    from light_llm.train.config import TrainConfig
    from light_llm.train.prepare import measuring_note

    config = TrainConfig(time="3m", warmup_iters=60)
    assert measuring_note(config, 180.0, 30.0) is None  # a sixth of the budget: fine
    note = measuring_note(config, 180.0, 110.0)  # the BERT run
    assert note.startswith("warning: --time 3m") and "61%" in note
    assert "--time 8m" in note  # 110 s is at most a quarter of it
