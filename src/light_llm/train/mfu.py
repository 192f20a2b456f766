"""How close to the machine a run trains: its matrix-multiply throughput as a fraction of the
CPU's peak (a CPU "MFU", model FLOPs utilisation).

    MFU = tokens/s x FLOPs a token / peak FLOP/s

FLOPs a token are :class:`light_llm.config.ModelCounts`'s ``flops_train_per_token`` (6 N
plus attention: every weight used once forward, twice backward). The peak is measured in the
same way as the run's matrix products (float32, or bfloat16 under autocast) and with the same
threads: the FLOP rate of a large square product ``PEAK_SIZE`` x ``PEAK_SIZE``, repeated for
about a second. A benchmark measures it in its own process (:func:`peak_matmul_flops`); the
trainer's end line takes it from the user cache, measured once per machine, format and thread
count (:func:`machine_peak`, as :func:`light_llm.decode_stats.memory_bandwidth` keeps the
memory bandwidth), so that a run does not spend wall time on it each time; the first run on a
machine measures it for a quarter of a second (``FIRST_RUN_PEAK_SECONDS``), inside the wall
time that the default's length is fitted to.
"""

from __future__ import annotations

import functools
import time

import torch

from light_llm.config import ModelConfig, model_counts
from light_llm.decode_stats import machine_key, read_cache, write_cache
from light_llm.train.precision import DTYPES, cpu_emulates

PEAK_FILE = "matmul_peak.json"  # in the user cache (light_llm.cache)
PEAK_SIZE = 1024  # 2 x 1024³ FLOPs a product: tens of milliseconds on a laptop core
PEAK_SECONDS = 1.0
# a first run's measurement: on a 2-core Xeon with AMX five peaks of 0.25 s read 1248-1466
# GFLOP/s in bfloat16 and 338-401 in float32, as spread as five of 1 s (1325-1403, 364-407;
# nothing else running), for 0.75 s less of the run's wall time
FIRST_RUN_PEAK_SECONDS = 0.25


@functools.cache
def peak_matmul_flops(dtype: torch.dtype, threads: int, seconds: float = PEAK_SECONDS) -> float:
    """The CPU's matrix-multiply rate in FLOP/s: 2 n³ FLOPs per n x n product (n multiply-adds
    for each of the n² outputs), the fastest of the batches of products timed over about
    ``seconds``; measured once per process for each ``dtype`` and thread count (``threads``
    is the key: the caller's ``torch.get_num_threads()``)."""
    n = PEAK_SIZE
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=generator).to(dtype)
    b = torch.randn(n, n, generator=generator).to(dtype)
    out = torch.empty(n, n, dtype=dtype)
    torch.mm(a, b, out=out)  # warm-up: oneDNN picks and builds its kernel
    best, deadline = 0.0, time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        start = time.perf_counter()
        for _ in range(3):
            torch.mm(a, b, out=out)
        best = max(best, 3 * 2 * n**3 / (time.perf_counter() - start))
    return best


def machine_peak(dtype: torch.dtype, threads: int) -> float:
    """:func:`peak_matmul_flops` of this machine for ``dtype`` on ``threads`` threads, measured
    once and kept in ``matmul_peak.json`` of the user cache (measured again when absent or
    damaged, or when caching is off)."""
    # "1 threads" too: the key of the peaks already kept (only the printed line says "1 thread")
    key = f"{machine_key()}; {dtype}; {threads} threads"
    found = read_cache(PEAK_FILE).get(key, {}).get("flops_per_s")
    if isinstance(found, (int, float)) and found > 0:
        return float(found)
    peak = peak_matmul_flops(dtype, threads, FIRST_RUN_PEAK_SECONDS)
    write_cache(PEAK_FILE, key, {"flops_per_s": peak, "size": PEAK_SIZE})
    return peak


def train_flops_per_token(config: ModelConfig, context: int | None = None) -> int:
    """FLOPs of one training token of ``config`` at ``context`` tokens (default T_max):
    :func:`light_llm.config.model_counts`'s ``flops_train_per_token``."""
    return model_counts(config, context).flops_train_per_token


def mean_train_flops_per_token(config: ModelConfig, run, first: int, end: int) -> float:
    """FLOPs a training token of ``config``, averaged over the tokens of iterations ``first``
    .. ``end`` - 1 of ``run`` (a resolved TrainConfig): under a sequence-length warmup its N
    iterations' tokens cost F(T0), the rest F(T_max), attention's share being shorter:

        F = (n_short F(T0) + (n - n_short) F(T_max)) / n

    with n the tokens of those iterations and n_short those inside the warmup
    (``run.tokens_before``). F(T_max) when there are none."""
    total = run.tokens_before(end) - run.tokens_before(first)
    full = train_flops_per_token(config)
    if total <= 0 or not run.context_warmup:
        return full
    warmup = run.context_warmup
    short = run.tokens_before(min(end, warmup)) - run.tokens_before(min(first, warmup))
    shorter = train_flops_per_token(config, run.context_warmup_size)
    return (short * shorter + (total - short) * full) / total


def model_flops_utilisation(tokens_per_s: float, flops_per_token: float, peak: float) -> float:
    """MFU = tokens/s x FLOPs a token / peak FLOP/s (module docstring)."""
    return tokens_per_s * flops_per_token / peak if peak > 0 else float("nan")


def matmul_dtype(dtype: str) -> torch.dtype:
    """The number format a run's matrix products take: bfloat16 or float16 under autocast,
    float32 otherwise."""
    return DTYPES.get(dtype, torch.float32)


def mfu_line(
    config: ModelConfig,
    tokens_per_s: float,
    dtype: str,
    flops_per_token: float | None = None,
    processes: int = 1,
) -> str:
    """One line saying a CPU run's training tokens a second as matmul FLOP/s and as a
    fraction of this CPU's peak in the run's number format (:func:`machine_peak`); FLOPs a
    token are ``flops_per_token`` (a run's mean, :func:`mean_train_flops_per_token`), by
    default those at the full context. ``processes`` training side by side on this machine
    (torchrun on one CPU; ``tokens_per_s`` is all of theirs) make a peak of that many times
    this process's, each on threads of its own. A bfloat16 run on a CPU that only emulates
    bfloat16 gets no fraction, and no peak is measured for it."""
    flops = train_flops_per_token(config) if flops_per_token is None else flops_per_token
    kind = matmul_dtype(dtype)
    achieved = tokens_per_s * flops
    name = str(kind).removeprefix("torch.")
    speed = (
        f"speed: {tokens_per_s:,.0f} training tokens a second x {flops / 1e6:.2f} MFLOPs a token = "
        f"{achieved / 1e9:.2f} GFLOP/s"
    )
    if cpu_emulates(dtype):
        # an emulated product's rate is no peak of the hardware (0.48 GFLOP/s on a 2-core AVX2
        # CPU, whose 1024x1024 products then took 18 s to time)
        return (
            f"{speed}; no MFU: this CPU ({torch.backends.cpu.get_cpu_capability()}) emulates "
            "bfloat16, so it has no bfloat16 peak to compare with (a float32 run reports one)"
        )
    threads = torch.get_num_threads()
    peak = machine_peak(kind, threads)
    on_threads = f"{threads} thread{'' if threads == 1 else 's'}"
    where = (
        f"{peak / 1e9:.4g} GFLOP/s on {on_threads}"
        if processes == 1
        else f"{processes} processes x {peak / 1e9:.4g} GFLOP/s, each on {on_threads}"
    )
    return (
        f"{speed}, {model_flops_utilisation(tokens_per_s, flops, processes * peak):.1%} "
        f"of this CPU's {name} matmul peak ({where}, a {PEAK_SIZE}x{PEAK_SIZE} product)"
    )
