"""The number format of training: float32, or mixed precision (seed 002 §13.2).

Mixed precision runs the matrix products of the forward and backward passes in a 16-bit
format while the weights, their gradients and AdamW's moments stay float32:

- bfloat16 has float32's exponent range (8 bits), so gradients neither overflow nor vanish
  and no loss scaling is needed; it works on recent GPUs and on CPUs with AVX-512 BF16.
- float16 has more mantissa but a range of only about 6e-5 .. 65504: small gradients
  underflow to 0. The loss is multiplied by a scale s before the backward pass and the
  gradients divided by s before the step (``torch.amp.GradScaler``), which also skips steps
  whose gradients overflowed and lowers s. CUDA only here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from light_llm.errors import ConfigError
from light_llm.nn.attention import fused_attention_dtype
from light_llm.train.config import CpuKind

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def cpu_has_native_bfloat16() -> bool:
    """Whether this CPU multiplies bfloat16 in hardware (AVX-512 BF16 or AMX tiles), as
    PyTorch's CPU capability checks report it, and PyTorch may use it: its kernels are not
    capped below AVX-512 (``ATEN_CPU_CAPABILITY=avx2``, which runs a machine as one with
    AVX2 only). Elsewhere bfloat16 is emulated, slowly: Muon's Newton-Schulz on a stack of
    four 256x96 matrices took 43 ms in bfloat16 against 1.6 ms in float32 under that cap on
    an AVX-512 BF16 machine."""
    if not torch.backends.cpu.get_cpu_capability().startswith("AVX512"):
        return False
    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(getattr(torch.cpu, check, lambda: False)() for check in checks)


def this_cpu() -> CpuKind:
    """This CPU's kind, as its training speed depends on it (:class:`CpuKind`)."""
    native = cpu_has_native_bfloat16()
    amx = native and getattr(torch.cpu, "_is_amx_tile_supported", lambda: False)()
    return CpuKind(torch.backends.cpu.get_cpu_capability(), native, amx)


def cpu_emulates(dtype: str) -> bool:
    """Whether this CPU only emulates ``dtype``'s products: bfloat16 without bfloat16
    arithmetic (:func:`cpu_has_native_bfloat16`)."""
    return dtype == "bfloat16" and not cpu_has_native_bfloat16()


def emulated_bfloat16_note(dtype: str, device: torch.device) -> str:
    """The warning for a bfloat16 run on a CPU without bfloat16 arithmetic ("" otherwise):
    PyTorch emulates it there: the default's training step took 1.33 s against 0.103 s in
    float32 on a 2-core AVX2 CPU (12.9x, the two taking turns in one process, nothing else
    running). So ``--dtype bfloat16`` is allowed (its numbers are right) but said to be slow
    before the first step."""
    if device.type != "cpu" or not cpu_emulates(dtype):
        return ""
    return (
        f"warning: this CPU ({torch.backends.cpu.get_cpu_capability()}) has no bfloat16 "
        "arithmetic, so PyTorch emulates it and every step takes over ten times as long as in "
        "float32, the default here: drop --dtype bfloat16 to train at full speed."
    )


def default_dtype(device: torch.device) -> str:
    """bfloat16 on a GPU that supports it and on a CPU with bfloat16 arithmetic; float32
    elsewhere.

    On the CPU the choice was measured (2-core AMD EPYC with AVX-512 BF16): nanoGPT's CPU
    recipe on 1 MB of Shakespeare ends at validation loss 1.9095 under bfloat16 autocast and
    1.9104 in float32, while a training step runs 1.2x (char-baby shape) to 1.85x
    (shakespeare-char shape) faster (benchmarks/bench_train.py); at the presets' shapes,
    with attention in float32 (:func:`attention_kernels`), 1.25x (qwen3-cpu) to 1.42x
    (nanogpt-cpu) on 2 threads (benchmarks/bench_precision.py, docs/benchmarks.md).
    """
    if device.type == "cuda":
        return "bfloat16" if torch.cuda.is_bf16_supported() else "float32"
    return "bfloat16" if cpu_has_native_bfloat16() else "float32"


def check_dtype(dtype: str, device: torch.device) -> None:
    """ConfigError when ``dtype`` is unknown or cannot be trained in on ``device``."""
    if dtype not in DTYPES:
        raise ConfigError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}.")
    if dtype == "float16" and device.type != "cuda":
        raise ConfigError(
            "float16 training needs a CUDA GPU (for its gradient scaler); use bfloat16 or "
            "float32 on the CPU."
        )
    if dtype == "bfloat16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise ConfigError("this GPU does not support bfloat16; use --dtype float16.")


def autocast(device: torch.device, dtype: str) -> contextlib.AbstractContextManager:
    """The autocast region of the forward pass: matmuls in ``dtype``, reductions in float32."""
    if dtype == "float32":
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=DTYPES[dtype])


def attention_kernels(device: torch.device, dtype: str) -> contextlib.AbstractContextManager:
    """How the fused attention of the forward pass runs.

    On the CPU under bfloat16 autocast, attention runs in float32 with the kernel PyTorch
    picks (flash attention), Q, K and V cast up: at the preset shapes the bfloat16 kernels
    lose. PyTorch's bfloat16 flash kernel has a backward pass several times slower than its
    float32 one, and the bfloat16 "math" kernel (the same softmax(QK^T/sqrt(d))V as separate
    matmuls) is still slower than float32 flash: attention forward + backward, one thread,
    2-core AMD EPYC with AVX-512 BF16 (benchmarks/bench_precision.py):

        shape (B, heads, T, d_head)   float32 flash   bfloat16 math   bfloat16 flash
        (32, 4, 64, 24)  bpe-cpu        5.4 ms          9.5 ms          19.2 ms
        (12, 4, 64, 32)  nanogpt-cpu    2.0 ms          3.2 ms           8.6 ms

    Everywhere else autocast and PyTorch choose.
    """
    if device.type == "cpu" and dtype == "bfloat16":
        return fused_attention_dtype(torch.float32)
    return contextlib.nullcontext()


@contextlib.contextmanager
def tensorfloat32_products(device: torch.device) -> Iterator[None]:
    """TensorFloat-32 for the float32 products and convolutions of a run on a CUDA GPU (10 bits
    of mantissa kept in the products, float32 in the sums: nanoGPT's setting), and the
    process's own settings back when the run ends, so that a script that trains and then
    computes goes on in the precision it had. Nothing changes on the CPU."""
    if device.type != "cuda":
        yield
        return
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def grad_scaler(device: torch.device, dtype: str) -> torch.amp.GradScaler:
    """A loss scaler, active only for float16 (a pass-through otherwise)."""
    return torch.amp.GradScaler(device.type, enabled=dtype == "float16")
