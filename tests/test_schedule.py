"""The size warmups of light_llm.schedule against values worked out by hand (the learning
rate and momentum schedules are tested in tests/train/test_optim.py)."""

import pytest

from light_llm.errors import ConfigError
from light_llm.schedule import tokens_before, warmup_size


def test_the_batch_size_warmup_is_its_start_for_n_iterations_then_the_batch_size():
    """Issue 25's prototype: 16 sequences for the first 200 iterations, then 32."""
    assert [warmup_size(t, 32, 200, 16) for t in (0, 1, 199)] == [16, 16, 16]
    assert [warmup_size(t, 32, 200, 16) for t in (200, 201, 5000)] == [32, 32, 32]
    assert [warmup_size(t, 32, 0, None) for t in (0, 7)] == [32, 32]  # off


def test_a_size_warmup_rejects_a_negative_length():
    with pytest.raises(ConfigError, match="must last >= 0 iterations, got -1"):
        warmup_size(0, 32, -1, 16)


def test_tokens_before_count_the_warmups_smaller_batches():
    """grad_accum 2, context 64, 16 sequences for 200 iterations then 32: an iteration of the
    warmup is 2 x 16 x 64 = 2048 tokens, one after it 4096."""

    def count(i):
        return tokens_before(i, 2, 64, 32, 200, 16)

    assert count(0) == 0
    assert count(1) == 2048
    assert count(100) == 204_800
    assert count(200) == 409_600
    assert count(201) == 409_600 + 4096
    assert count(250) == 409_600 + 50 * 4096
    assert tokens_before(250, 2, 64, 32) == 250 * 4096  # no warmup: B T G each iteration
    # a warmup longer than the run counts the small batches only
    assert tokens_before(10, 1, 8, 4, 100, 3) == 10 * 3 * 8
