"""The training step with the softmax loss (light_llm.nn.softmax_loss) against the same step
with PyTorch's float32 cross-entropy (bfloat16 logits copied up: the path
``GPT.next_token_loss`` keeps for every other loss, and took for all before), for the
default's model (qwen3-cpu) over several vocabulary sizes, in the trainer's dtype on this CPU.

The two losses take turns in one process, ``--rounds`` times, each round timing ``--steps``
steps of ``recipe_sweep.step_timer`` (the trainer's model, optimizer and autocast, with the
trainer's allocator settings); the median of each round's ratio, new over old, is printed with
its range (below 1: the new loss is faster). On a CPU with bfloat16 arithmetic (AVX-512 BF16 or AMX)
the trainer runs under bfloat16 autocast and the logits are bfloat16; elsewhere (AVX2) they
are float32, and the two steps differ by the passes the softmax loss leaves out.

    PYTHONPATH=src python benchmarks/bench_softmax_loss.py [--vocab-sizes 768 1536 4096]
        [--rounds 10] [--steps 8]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

import torch

import light_llm.models.gpt as gpt_module
from light_llm.train.cpu_allocator import keep_freed_memory

sys.path.insert(0, os.path.dirname(__file__))
from recipe_sweep import seconds_per_step, step_timer  # noqa: E402


def never(*_args) -> bool:
    """The baseline: no loss takes the softmax loss, so GPT.next_token_loss takes its float32
    ``F.cross_entropy``, as every loss did before."""
    return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab-sizes", type=int, nargs="+", default=[768, 1536, 4096])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--steps", type=int, default=8)
    args = parser.parse_args()
    keep_freed_memory()
    print(
        f"CPU kind {torch.backends.cpu.get_cpu_capability()}, {torch.get_num_threads()} threads,"
        f" PyTorch {torch.__version__}"
    )
    applies = gpt_module.softmax_loss_applies
    losses = {"float32 cross-entropy": never, "softmax loss": applies}
    try:
        for vocab_size in args.vocab_sizes:
            step = step_timer([], vocab_size)
            times = {name: [] for name in losses}
            for round_ in range(args.rounds + 1):
                for name, rule in losses.items():
                    gpt_module.softmax_loss_applies = rule
                    seconds = seconds_per_step(step, args.steps)
                    if round_:  # the first round warms both up
                        times[name].append(seconds)
            ratios = [new / old for old, new in zip(*times.values(), strict=True)]
            old, new = (statistics.median(t) * 1e3 for t in times.values())
            print(
                f"qwen3-cpu over {vocab_size} ids: float32 cross-entropy {old:.1f} ms a step,"
                f" softmax loss {new:.1f} ms; ratio {statistics.median(ratios):.3f}"
                f" (rounds {min(ratios):.3f}-{max(ratios):.3f})"
            )
    finally:
        gpt_module.softmax_loss_applies = applies


if __name__ == "__main__":
    main()
