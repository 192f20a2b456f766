"""The size warmups of light_llm.schedule (batch size, sequence length) and the tokens they
count, against values worked out by hand (the learning rate and momentum schedules are tested
in tests/train/test_optim.py)."""

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


def test_tokens_before_count_the_shorter_windows_of_a_sequence_length_warmup():
    """grad_accum 2, batch 8, windows of 16 tokens for 4 iterations then 64:
    4 x 2 x 8 x 16 = 1024 tokens in the warmup, 2 x 8 x 64 = 1024 an iteration after it."""
    assert tokens_before(4, 2, 64, 8, 0, None, 4, 16) == 1024
    assert tokens_before(10, 2, 64, 8, 0, None, 4, 16) == 1024 + 6 * 1024


def test_tokens_before_with_both_warmups_counts_each_stretch():
    """Batch 16 for 100 iterations then 32; windows of 32 for 50 then 64 (grad_accum 1):
    16 x 32 = 512 tokens an iteration to 50, 16 x 64 = 1024 to 100, 32 x 64 = 2048 after."""

    def count(i):
        return tokens_before(i, 1, 64, 32, 100, 16, 50, 32)

    assert count(50) == 50 * 512 == 25_600
    assert count(100) == 25_600 + 50 * 1024 == 76_800
    assert count(150) == 76_800 + 50 * 2048 == 179_200
    assert count(30) == 30 * 512
