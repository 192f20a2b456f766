"""Shuffled passes over the training split (light_llm.train.batches.pass_window_starts), and
the run's windows as TrainConfig numbers them: checked by counting tokens, not by restating
the formula."""

from __future__ import annotations

import numpy as np
import pytest

from light_llm.errors import ConfigError
from light_llm.train import TrainConfig
from light_llm.train.batches import pass_window_starts, windows_per_pass


def reads_per_token(starts: np.ndarray, n_tokens: int, block_size: int) -> np.ndarray:
    """How many times each token of the split is an input of the windows at ``starts``."""
    reads = np.zeros(n_tokens, dtype=np.int64)
    for start in starts:
        reads[start : start + block_size] += 1
    return reads


@pytest.mark.parametrize(("n_tokens", "block_size"), [(1000, 16), (1001, 7), (64, 64 - 31)])
def test_a_pass_reads_every_token_once_but_less_than_two_windows(n_tokens, block_size):
    per_pass = windows_per_pass(n_tokens, block_size)
    for seed, pass_index in [(0, 0), (1337, 3)]:
        starts = pass_window_starts(seed, n_tokens, block_size, pass_index * per_pass, per_pass)
        assert starts.min() >= 0 and starts.max() + block_size + 1 <= n_tokens  # (inputs, target)
        reads = reads_per_token(starts, n_tokens, block_size)
        assert reads.max() == 1  # no token twice in a pass
        assert (reads == 0).sum() < 2 * block_size  # and all but its ends once
        if per_pass > 2:
            assert not np.array_equal(starts, np.sort(starts))  # in a shuffled order


def test_a_split_shorter_than_two_windows_has_one_window_a_pass_at_every_start_it_allows():
    # 20 tokens, windows of 12 (+ 1 target): starts 0 .. 7
    starts = [pass_window_starts(5, 20, 12, j, 1)[0] for j in range(300)]
    assert windows_per_pass(20, 12) == 1 and set(starts) == set(range(8))


def test_passes_follow_one_another_and_each_has_its_own_offset_and_order():
    n_tokens, block_size = 5000, 10
    per_pass = windows_per_pass(n_tokens, block_size)
    run = pass_window_starts(3, n_tokens, block_size, 0, 4 * per_pass)
    pieces = [
        pass_window_starts(3, n_tokens, block_size, j, 37) for j in range(0, 4 * per_pass, 37)
    ]
    assert np.array_equal(np.concatenate(pieces)[: len(run)], run)  # a function of the index
    passes = run.reshape(4, per_pass)
    offsets = {int(p.min()) % block_size for p in passes}
    assert len(offsets) > 1  # a token sits at another place in its window pass after pass
    assert len({tuple(np.argsort(p)) for p in passes}) == 4
    reads = reads_per_token(run, n_tokens, block_size)
    assert reads.max() <= 4 and (reads == 4).sum() > n_tokens - 8 * block_size
    other_seed = pass_window_starts(4, n_tokens, block_size, 0, per_pass)
    assert not np.array_equal(other_seed, passes[0])


@pytest.mark.parametrize(
    "settings",
    [
        {"batch_size": 4, "grad_accum": 1},
        {"batch_size": 3, "grad_accum": 2},
        {"batch_size": 4, "grad_accum": 2, "batch_warmup": 3, "batch_warmup_size": 2},
    ],
)
def test_the_runs_micro_batches_take_its_windows_in_order(settings):
    """Iteration by iteration and slot by slot (through a batch-size warmup too), the
    micro-batches' windows are the run's windows 0, 1, 2, ... with none skipped or repeated."""
    config = TrainConfig(
        sampling="passes", seed=11, block_size=8, max_iters=12, **settings
    ).resolve()
    n_tokens = 300
    drawn = [
        config.pass_window_starts(n_tokens, 8, iteration, slot)
        for iteration in range(12)
        for slot in range(config.grad_accum)
    ]
    sizes = [len(starts) for starts in drawn]
    assert sizes == [
        config.batch_size_at(iteration) for iteration in range(12) for _ in range(config.grad_accum)
    ]
    expected = pass_window_starts(11, n_tokens, 8, 0, sum(sizes))
    assert np.array_equal(np.concatenate(drawn), expected)


def test_uniform_sampling_leaves_the_starts_to_the_generator():
    config = TrainConfig(sampling="uniform").resolve()
    assert config.pass_window_starts(1000, 64, 0, 0) is None


def test_a_sampling_that_does_not_exist_or_an_encoder_in_passes_is_refused():
    with pytest.raises(ConfigError, match="sampling must be uniform or passes, got 'epochs'"):
        TrainConfig(sampling="epochs").resolve()
    with pytest.raises(ConfigError, match="drop it with --model bert"):
        TrainConfig(model="bert", sampling="passes").resolve()
