"""The CPU MFU of a run (light_llm.train.mfu): FLOPs a token from ModelCounts, the peak
measured once per process and number format, and kept per machine for the trainer."""

from __future__ import annotations

import re

import pytest
import torch

from light_llm.cache import cache_root
from light_llm.checkpoints import load_config
from light_llm.config import model_counts
from light_llm.decode_stats import machine_key, write_cache
from light_llm.train import TrainConfig, mfu, precision, train
from light_llm.train.mfu import machine_peak, model_flops_utilisation, peak_matmul_flops
from tests.train.helpers import TINY

SPEED = re.compile(
    r"speed: ([\d,]+) training tokens a second x ([\d.]+) MFLOPs a token = ([\d.]+) GFLOP/s, "
    r"([\d.]+)% of this CPU's (\w+) matmul peak \(([\d.]+) GFLOP/s on (\d+) threads?"
)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_end_of_a_run_says_its_flops_against_the_peak_of_its_number_format(
    corpus, tmp_path, capsys, monkeypatch, dtype
):
    # a CPU with bfloat16 arithmetic, whatever this one has, and a peak given (measuring it is
    # tested below; an emulated bfloat16 product takes seconds)
    monkeypatch.setattr(precision, "cpu_has_native_bfloat16", lambda: True)
    asked = []
    monkeypatch.setattr(mfu, "machine_peak", lambda kind, threads: asked.append(kind) or 5e10)
    out = tmp_path / "run"
    train(TrainConfig(**{**TINY, "data": str(corpus), "out": str(out), "dtype": dtype}))
    (match,) = [
        SPEED.search(line) for line in capsys.readouterr().out.splitlines() if "speed:" in line
    ]
    tokens, mflops, gflops, percent, name, peak, threads = match.groups()
    counted = model_counts(load_config(out / "checkpoint")).flops_train_per_token
    assert float(mflops) == pytest.approx(counted / 1e6, abs=0.006)
    rate = float(tokens.replace(",", ""))
    assert float(gflops) == pytest.approx(rate * counted / 1e9, rel=1e-2, abs=0.006)
    assert float(percent) == pytest.approx(100 * float(gflops) / float(peak), rel=0.05, abs=0.06)
    assert name == dtype and int(threads) == torch.get_num_threads()
    assert asked == [getattr(torch, dtype)] and float(peak) == 50.0


@pytest.mark.parametrize("native", [True, False])
def test_emulated_bfloat16_gets_no_mfu_and_no_peak_measured(monkeypatch, native):
    config = TrainConfig(**TINY).resolve().model_config(50)
    measured = []
    monkeypatch.setattr(mfu, "machine_peak", lambda dtype, threads: measured.append(dtype) or 2e9)
    monkeypatch.setattr(precision, "cpu_has_native_bfloat16", lambda: native)
    line = mfu.mfu_line(config, 1000.0, "bfloat16", flops_per_token=1e6)
    assert line.startswith("speed: 1,000 training tokens a second x 1.00 MFLOPs a token = 1.00")
    if native:
        assert measured == [torch.bfloat16] and "50.0% of this CPU's bfloat16 matmul peak" in line
    else:
        assert measured == [] and "%" not in line and "emulates bfloat16" in line
    # float32 is always compared with its peak
    line = mfu.mfu_line(config, 1000.0, "float32", flops_per_token=1e6)
    assert "50.0% of this CPU's float32 matmul peak" in line and measured[-1] == torch.float32


def test_a_context_warmups_tokens_are_counted_at_their_shorter_context():
    """--context-warmup 3 --context-warmup-size 8 (batch 4, context 16), iterations 1 .. 5:
    2 x 4 x 8 = 64 tokens at 8, 3 x 4 x 16 = 192 at 16, so F = (64 F(8) + 192 F(16)) / 256;
    the attention's share is what differs: F(8) < F(16)."""
    run = TrainConfig(**TINY, context_warmup=3, context_warmup_size=8).resolve()
    config = run.model_config(50)
    short, full = (model_counts(config, t).flops_train_per_token for t in (8, 16))
    assert short < full
    mean = mfu.mean_train_flops_per_token(config, run, 1, 6)
    assert mean == pytest.approx((64 * short + 192 * full) / 256, rel=1e-12)
    assert mfu.mean_train_flops_per_token(config, run, 3, 6) == full  # after the warmup
    plain = TrainConfig(**TINY).resolve()
    assert mfu.mean_train_flops_per_token(config, plain, 0, 6) == full


def test_the_peak_is_measured_once_per_number_format_and_thread_count():
    first = peak_matmul_flops(torch.float32, 1, seconds=0.05)
    hits = peak_matmul_flops.cache_info().hits
    assert peak_matmul_flops(torch.float32, 1, seconds=0.05) == first
    assert peak_matmul_flops.cache_info().hits == hits + 1
    assert first > 0


def test_mfu_is_the_counted_flops_over_the_peak():
    assert model_flops_utilisation(1000.0, 6_000_000, 1e10) == pytest.approx(1000 * 6e6 / 1e10)


def test_the_trainers_peak_is_measured_once_per_machine_and_kept_in_the_cache(monkeypatch):
    calls = []
    monkeypatch.setattr(
        mfu, "peak_matmul_flops", lambda dtype, threads, seconds: calls.append(seconds) or 1e9
    )
    short = mfu.FIRST_RUN_PEAK_SECONDS  # a first run's measurement, shorter than a benchmark's
    assert short < mfu.PEAK_SECONDS
    assert machine_peak(torch.float32, 3) == 1e9 and calls == [short]
    assert machine_peak(torch.float32, 3) == 1e9 and calls == [short]  # read back, not measured
    assert machine_peak(torch.bfloat16, 3) == 1e9 and len(calls) == 2  # another format
    (cache_root() / mfu.PEAK_FILE).write_text("{damaged")
    assert machine_peak(torch.float32, 3) == 1e9 and len(calls) == 3  # measured again


@pytest.mark.parametrize("threads", [1, 2])
def test_the_peaks_thread_count_reads_as_english(monkeypatch, threads):
    config = TrainConfig(**TINY).resolve().model_config(50)
    monkeypatch.setattr(mfu, "machine_peak", lambda dtype, count: 2e9)
    monkeypatch.setattr(torch, "get_num_threads", lambda: threads)
    line = mfu.mfu_line(config, 1000.0, "float32", flops_per_token=1e6)
    assert ("on 1 thread," if threads == 1 else f"on {threads} threads,") in line


def test_processes_side_by_side_share_a_peak_of_each_ones_times_their_count(monkeypatch):
    """Two torchrun processes on one CPU report the tokens of both: the fraction is of two
    processes' peaks, 1000 tokens/s x 1 MFLOP against 2 x 2 GFLOP/s = 25%."""
    config = TrainConfig(**TINY).resolve().model_config(50)
    monkeypatch.setattr(mfu, "machine_peak", lambda dtype, count: 2e9)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    line = mfu.mfu_line(config, 1000.0, "float32", flops_per_token=1e6, processes=2)
    assert "1.00 GFLOP/s, 25.0% of this CPU's float32" in line
    assert "(2 processes x 2 GFLOP/s, each on 1 thread," in line
    assert "50.0%" in mfu.mfu_line(config, 1000.0, "float32", flops_per_token=1e6)


def test_a_peak_cached_under_the_keys_first_spelling_is_read_back(monkeypatch):
    """matmul_peak.json keys each peak by "...; N threads", 1 included: a cache written before
    the line read "1 thread" is still read, not measured again."""
    calls = []
    monkeypatch.setattr(
        mfu, "peak_matmul_flops", lambda dtype, threads, seconds: calls.append(seconds) or 1e9
    )
    key = f"{machine_key()}; {torch.float32}; 1 threads"
    write_cache(mfu.PEAK_FILE, key, {"flops_per_s": 3e9, "size": mfu.PEAK_SIZE})
    assert machine_peak(torch.float32, 1) == 3e9 and calls == []
