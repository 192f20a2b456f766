"""How fast decoding is against how fast it could be: the memory-bandwidth floor.

Sampling one token at batch 1 reads every weight once (and the KV cache of the tokens so far),
and does ~2 flops per weight byte or less, so its speed is bounded by memory bandwidth:

    tokens/s <= bandwidth / (weight bytes + KV-cache bytes read per token)
    MBU = (weight bytes + KV bytes) x tokens/s / bandwidth     (model bandwidth utilisation)

``bandwidth`` is this machine's, measured by a plain copy of a buffer larger than the caches
(bytes read + bytes written over the seconds, STREAM's "copy" convention) and cached per machine
in ``bandwidth.json`` of the user cache folder (:func:`light_llm.cache.cache_root`). The
number of threads decoding runs fastest on is measured the same way, once per machine and model
shape (:func:`decode_threads`): a tiny model's steps are too small to share between cores.
"""

from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import dataclass

import torch

from light_llm.atomic import atomic_file
from light_llm.cache import cache_root
from light_llm.errors import ConfigError
from light_llm.models.quantize import is_quantized

BANDWIDTH_FILE = "bandwidth.json"
THREADS_FILE = "decode_threads.json"
COPY_BYTES = 256 * 2**20  # 8x a 32 MiB L3; the copy reads and writes this many bytes
COPY_REPEATS = 5
THREAD_STEPS = 16  # decoding steps timed per thread count


def machine_key() -> str:
    """This machine as the caches know it: processor, cores, PyTorch's CPU capability."""
    name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as file:
            name = next(line.split(":", 1)[1].strip() for line in file if "model name" in line)
    except (OSError, StopIteration):
        pass
    capability = torch.backends.cpu.get_cpu_capability()
    return f"{name}, {os.cpu_count()} cores, {capability}"


def read_cache(name: str) -> dict:
    """The entries of the cache file ``name`` in the user cache (light_llm.cache); {} when
    absent, damaged, or caching is off."""
    root = cache_root()
    if root is None:
        return {}
    try:
        with open(root / name, encoding="utf-8") as file:
            found = json.load(file)
        return found if isinstance(found, dict) else {}
    except (OSError, ValueError):
        return {}  # absent or damaged: measured again


def write_cache(name: str, key: str, value: dict) -> None:
    """Add ``key: value`` to the cache file ``name`` (written whole, atomically); a cache that
    cannot be written is only a measurement repeated next time."""
    root = cache_root()
    if root is None:
        return
    entries = read_cache(name)
    entries[key] = value
    try:
        root.mkdir(parents=True, exist_ok=True)
        with atomic_file(root / name) as file:
            file.write(json.dumps(entries, indent=1).encode("utf-8"))
    except OSError:
        pass


def measure_bandwidth(n_bytes: int | None = None, repeats: int = COPY_REPEATS) -> float:
    """Memory bandwidth in bytes/s: 2 x n_bytes (read + write) over the fastest of ``repeats``
    copies of an ``n_bytes`` buffer (default COPY_BYTES) into another, with PyTorch's
    threads."""
    n_bytes = n_bytes or COPY_BYTES
    source = torch.ones(n_bytes // 4)
    target = torch.empty_like(source)
    target.copy_(source)  # the pages touched once before timing
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        target.copy_(source)
        best = min(best, time.perf_counter() - start)
    return 2 * n_bytes / best


def memory_bandwidth(refresh: bool = False) -> float:
    """This machine's bandwidth in bytes/s (:func:`measure_bandwidth`), measured once and cached
    in ``bandwidth.json`` of the user cache; ``refresh`` measures again."""
    key = machine_key()
    found = read_cache(BANDWIDTH_FILE).get(key, {}).get("bytes_per_s")
    if not refresh and isinstance(found, (int, float)) and found > 0:
        return float(found)
    bandwidth = measure_bandwidth()
    write_cache(BANDWIDTH_FILE, key, {"bytes_per_s": bandwidth, "copy_bytes": COPY_BYTES})
    return bandwidth


def tensor_bytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


def weight_bytes_per_token(model) -> int:
    """Bytes of weights one decoding step reads: every parameter and buffer (an int8 model's
    q and scales) once, a tied matrix once, less the tables of which it reads one row (an
    untied token table, learned positions, rotary tables, the value embeddings' E_v) and
    the multi-token head W_mtp, which only training reads."""
    seen: set[int] = set()
    total = 0
    for tensor in [*model.parameters(), *model.buffers()]:
        if tensor.data_ptr() in seen:
            continue
        seen.add(tensor.data_ptr())
        total += tensor_bytes(tensor)
    lookups = []
    if not model.config.tie_embeddings:
        table = model.transformer.wte
        lookups += [table.weight, getattr(table, "weight_scale", None)]
    if "wpe" in model.transformer:
        lookups += list(model.transformer.wpe.parameters()) + list(model.transformer.wpe.buffers())
    if model.rope is not None:
        lookups += list(model.rope.buffers())
    if "wve" in model.transformer:
        lookups.append(model.transformer.wve.weight)
    if model.config.multi_token:
        lookups.append(model.mtp_proj.weight)
    return total - sum(tensor_bytes(t) for t in lookups if t is not None)


def kv_bytes_per_token(model, cached_tokens: int, batch_size: int = 1) -> int:
    """Bytes of KV cache one decoding step reads when ``cached_tokens`` are cached: K and V,
    (B, nh, T, hs) each, in every layer (linear attention's state is d_k x d_v a head)."""
    config = model.config
    itemsize = torch.empty((), dtype=model.dtype).element_size()
    if config.attention == "linear":
        per_layer = config.n_head * config.head_dim * (config.head_dim + 1)
    else:
        per_layer = 2 * cached_tokens * config.n_embd
    return batch_size * config.n_layer * per_layer * itemsize


def shape_key(model) -> str:
    """The model as the thread cache knows it: its shape, dtype and quantisation."""
    c = model.config
    weights = "int8" if is_quantized(model) else "float"
    dtype = str(model.dtype).removeprefix("torch.")
    return (
        f"L{c.n_layer} d{c.n_embd} h{c.n_head} ff{c.ffn_hidden} V{c.vocab_size} "
        f"{c.attention} {dtype} {weights}"
    )


def thread_candidates() -> list[int]:
    """1, 2, 4, ... up to the cores, and the cores."""
    cores = os.cpu_count() or 1
    counts = [1]
    while counts[-1] * 2 < cores:
        counts.append(counts[-1] * 2)
    return sorted({*counts, cores})


@torch.no_grad()
def time_decode_step(model, steps: int = THREAD_STEPS) -> float:
    """Median seconds of one decoding step at batch 1 (one token into an emptied cache, so that
    any context length will do), after one warm-up step."""
    cache = model.new_cache(1)
    token = torch.zeros((1, 1), dtype=torch.long, device=model.device)
    model(token, kv_cache=cache, last_only=True)
    seconds = []
    for _ in range(steps):
        cache.clear()
        start = time.perf_counter()
        model(token, kv_cache=cache, last_only=True)
        seconds.append(time.perf_counter() - start)
    return sorted(seconds)[len(seconds) // 2]


def decode_threads(model, refresh: bool = False) -> tuple[int, str]:
    """The thread count decoding ``model`` runs fastest on here, and how it was known
    ("measured now" or "measured before"): each of :func:`thread_candidates` timed on a few
    cached steps, once per machine and model shape, cached in ``decode_threads.json``. Leaves
    PyTorch set to that count."""
    key = f"{machine_key()} | {shape_key(model)}"
    found = read_cache(THREADS_FILE).get(key, {})
    threads = found.get("threads")
    if not refresh and isinstance(threads, int) and threads in thread_candidates():
        torch.set_num_threads(threads)
        return threads, "measured before"
    timings = {}
    for count in thread_candidates():
        torch.set_num_threads(count)
        timings[count] = time_decode_step(model)
    threads = min(timings, key=timings.get)
    write_cache(THREADS_FILE, key, {"threads": threads, "step_seconds": timings})
    torch.set_num_threads(threads)
    return threads, "measured now"


@dataclass
class DecodeStats:
    """What ``generate --stats`` prints, from the moments each step's token was ready."""

    prompt_tokens: int
    batch_size: int
    step_times: list[float]  # seconds since the call began, one per generated step
    weight_bytes: int
    kv_bytes: float  # mean KV-cache bytes read per decoding step
    bandwidth: float  # bytes/s
    threads: int
    threads_how: str

    @property
    def time_to_first_token(self) -> float:
        return self.step_times[0]

    @property
    def tokens_per_s(self) -> float:
        """Decoding speed after the first token: (n - 1) steps over their seconds (x batch)."""
        if len(self.step_times) < 2:
            return float("nan")
        elapsed = max(self.step_times[-1] - self.step_times[0], 1e-9)
        return self.batch_size * (len(self.step_times) - 1) / elapsed

    @property
    def mbu(self) -> float:
        """(weight bytes + KV bytes) per step x steps/s over the machine's bandwidth."""
        steps_per_s = self.tokens_per_s / self.batch_size
        return (self.weight_bytes + self.kv_bytes) * steps_per_s / self.bandwidth

    def lines(self) -> list[str]:
        n = len(self.step_times)
        read = self.weight_bytes + self.kv_bytes
        floor = self.bandwidth / read
        return [
            f"{n} steps x {self.batch_size} prompt(s) of {self.prompt_tokens} tokens; "
            f"{self.threads} thread(s) ({self.threads_how})",
            f"time to first token {1000 * self.time_to_first_token:.1f} ms; then "
            f"{self.tokens_per_s:.1f} tokens/s",
            f"read per step: weights {self.weight_bytes / 2**20:.1f} MiB + KV cache "
            f"{self.kv_bytes / 2**20:.2f} MiB (mean)",
            f"memory bandwidth {self.bandwidth / 1e9:.1f} GB/s (copy, cached in "
            f"{cache_root() or 'no cache'}): "
            f"floor {floor:.0f} steps/s, MBU {100 * self.mbu:.0f}%",
        ]


def check_threads(value: str) -> int | None:
    """--threads: a count from 1 to the machine's CPUs, or "auto" (None: :func:`decode_threads`
    decides)."""
    if value == "auto":
        return None
    try:
        count = int(value)
    except ValueError:
        count = 0
    if count < 1:
        raise ConfigError(f"--threads must be 1 or more, or auto, got {value}.")
    cores = os.cpu_count() or 1
    if count > cores:
        raise ConfigError(
            f"--threads {count} is more than this machine's {cores} CPUs: threads beyond the "
            f"cores only wait for each other; give at most {cores}, or auto."
        )
    return count
