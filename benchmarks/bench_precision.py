"""float32 against bfloat16 autocast on the CPU, for the shapes the presets train: the whole
training step of each preset, then its parts (the matrix products of each shape, attention,
the output head with its soft-cap and loss, Muon's Newton-Schulz iteration), each also as
light-llm's bfloat16 training runs it: small products and small Newton-Schulz stacks in
float32 (light_llm.nn.linear.Linear, light_llm.train.muon.orthogonalisation_dtype), attention
in float32 (light_llm.train.precision.attention_kernels). The last column, float32's time over
light-llm's, is at least 1 where bfloat16 autocast costs no part more than float32 would.

The whole step is the trainer's (``recipe_sweep.step_timer``: the preset's model and
optimizer, autocast and attention as ``light-llm train --dtype D`` runs them); the parts are
timed forward + backward (Newton-Schulz: the batched iteration Muon runs on the stack of a
layer shape's matrices). Variants take turns, ``--rounds`` times; each is reported by its
fastest round (on a shared machine the least disturbed) and the ratios float32 / bfloat16 and
float32 / light-llm's of those, above 1 where the second is faster. Needs a CPU with bfloat16
arithmetic (AVX-512 BF16 or AMX) to say anything useful; elsewhere bfloat16 is emulated.

    PYTHONPATH=src python benchmarks/bench_precision.py [--presets bpe-cpu qwen3-cpu
        nanogpt-cpu] [--rounds 10] [--threads N] [--no-parts]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from light_llm.config import preset
from light_llm.nn.linear import Linear
from light_llm.nn.softcap import soft_cap
from light_llm.train.config import PRESET_RECIPES
from light_llm.train.cpu_allocator import keep_freed_memory
from light_llm.train.muon import newton_schulz, orthogonalisation_dtype

sys.path.insert(0, os.path.dirname(__file__))
from recipe_sweep import step_timer  # noqa: E402

PRESET_VOCAB = {"bpe-cpu": 768, "qwen3-cpu": 768, "nanogpt-cpu": 65}


def fastest(variants: dict[str, Callable[[], object]], rounds: int, calls: int) -> dict:
    """The fastest round's seconds per call of each variant, the variants taking turns."""
    for run in variants.values():  # warm-up: allocator, oneDNN kernels
        run()
        run()
    best = dict.fromkeys(variants, float("inf"))
    for _ in range(rounds):
        for name, run in variants.items():
            start = time.perf_counter()
            for _ in range(calls):
                run()
            best[name] = min(best[name], (time.perf_counter() - start) / calls)
    return best


def autocast_on(bf16: bool):
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16)


def linear_pass(rows: int, d_in: int, d_out: int, bf16: bool, light: bool = False) -> Callable:
    """x Wᵀ forward + backward: ``F.linear`` (autocast's choice), or with ``light`` light-llm's
    :class:`~light_llm.nn.linear.Linear` (float32 for a small product)."""
    x = torch.randn(rows, d_in, requires_grad=True)
    layer = Linear(d_in, d_out, bias=False)
    grad = torch.randn(rows, d_out)

    def run() -> None:
        with autocast_on(bf16):
            y = layer(x) if light else F.linear(x, layer.weight)
        y.backward(grad)

    return run


def attention_pass(shape: tuple[int, ...], bf16: bool, backend: SDPBackend) -> Callable:
    q, k, v = (torch.randn(*shape, requires_grad=True) for _ in range(3))
    grad = torch.randn(*shape)

    def run() -> None:
        with autocast_on(bf16), sdpa_kernel([backend]):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y.backward(grad)

    return run


def head_pass(
    rows: int, d: int, vocab: int, cap: float | None, bf16: bool, light: bool = False
) -> Callable:
    """The output head, the soft-cap and the float32 loss, as the GPT computes them (``light``:
    the head as light-llm's :class:`~light_llm.nn.linear.Linear`)."""
    x = torch.randn(rows, d, requires_grad=True)
    head = Linear(d, vocab, bias=False)
    targets = torch.randint(0, vocab, (rows,))

    def run() -> None:
        with autocast_on(bf16):
            logits = head(x) if light else F.linear(x, head.weight)
            if cap is not None:
                logits = soft_cap(logits, cap)
        F.cross_entropy(logits.float(), targets).backward()

    return run


def compare(title: str, pairs: dict[str, tuple[Callable, ...]], rounds: int) -> None:
    """Time each row's float32, bfloat16 and (where given) light-llm's variant, taking turns,
    and print their fastest rounds and float32's time over each of the others'."""
    formats = ("float32", "bfloat16", "light-llm")
    variants = {}
    for name, runs in pairs.items():
        for label, run in zip(formats, runs, strict=False):
            variants[name, label] = run
    best = fastest(variants, rounds, calls=3)
    print(f"\n{title}")
    for name, runs in pairs.items():
        times = [best[name, label] for label in formats[: len(runs)]]
        columns = " ".join(f"{t * 1e3:8.2f} ms" for t in times)
        ratios = " ".join(f"{times[0] / t:6.2f}x" for t in times[1:])
        print(f"  {name:<38} {columns} {ratios}")


def bench_parts(name: str, rounds: int) -> None:
    config = preset(name, vocab_size=PRESET_VOCAB[name])
    batch = PRESET_RECIPES[name].get("batch_size", 12)
    rows, d, heads = batch * config.block_size, config.n_embd, config.n_head
    d_ff = config.ffn_hidden
    matrices = {
        "QKV": (d, 3 * d),
        "attention output": (d, d),
        "FFN in" + (" (x2, SwiGLU)" if config.activation == "swiglu" else ""): (d, d_ff),
        "FFN out": (d_ff, d),
    }
    pairs = {
        f"{label} ({rows}x{d_in} @ {d_in}x{d_out})": (
            linear_pass(rows, d_in, d_out, False),
            linear_pass(rows, d_in, d_out, True),
            linear_pass(rows, d_in, d_out, True, light=True),
        )
        for label, (d_in, d_out) in matrices.items()
    }
    shape = (batch, heads, config.block_size, config.head_dim)
    flash, math_kernel = SDPBackend.FLASH_ATTENTION, SDPBackend.MATH
    pairs[f"attention {shape}, flash"] = (
        attention_pass(shape, False, flash),
        attention_pass(shape, True, flash),
        attention_pass(shape, False, flash),  # light-llm's: float32 flash under autocast
    )
    pairs["attention, float32 flash | bf16 math"] = (
        attention_pass(shape, False, flash),
        attention_pass(shape, True, math_kernel),
    )
    cap = config.logit_softcap
    pairs[f"head {d}x{config.vocab_size}, soft-cap {cap}, loss"] = (
        head_pass(rows, d, config.vocab_size, cap, False),
        head_pass(rows, d, config.vocab_size, cap, True),
        head_pass(rows, d, config.vocab_size, cap, True, light=True),
    )
    n = config.n_layer
    for d_out, d_in in {(3 * d, d), (d, d), (d_ff, d), (d, d_ff)}:
        stack = torch.randn(n, d_out, d_in)
        pairs[f"Newton-Schulz {n}x{d_out}x{d_in}"] = (
            lambda stack=stack: newton_schulz(stack, dtype=torch.float32),
            lambda stack=stack: newton_schulz(stack, dtype=torch.bfloat16),
            lambda stack=stack: newton_schulz(stack, dtype=orthogonalisation_dtype(stack)),
        )
    title = f"{name}, its parts, forward + backward: float32, bfloat16, light-llm's; f32 / each"
    compare(title, pairs, rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--presets", nargs="+", default=list(PRESET_VOCAB), choices=PRESET_VOCAB)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    parser.add_argument("--no-parts", action="store_true", help="time the whole steps only")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    keep_freed_memory()  # as light-llm's trainer does on the CPU
    print(
        f"torch {torch.__version__}, CPU capability "
        f"{torch.backends.cpu.get_cpu_capability()}, {torch.get_num_threads()} threads; "
        f"fastest of {args.rounds} rounds"
    )
    steps = {
        name: (
            step_timer(["--preset", name, "--dtype", "float32"], PRESET_VOCAB[name]),
            step_timer(["--preset", name, "--dtype", "bfloat16"], PRESET_VOCAB[name]),
        )
        for name in args.presets
    }
    compare("training step (light-llm train):   float32   bfloat16   ratio", steps, args.rounds)
    if not args.no_parts:
        for name in args.presets:
            bench_parts(name, args.rounds)


if __name__ == "__main__":
    main()
