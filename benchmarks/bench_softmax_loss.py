"""The training step with the softmax loss of bfloat16 logits (light_llm.nn.softmax_loss)
against the same step with PyTorch's float32 cross-entropy (the logits copied up, as
``GPT.next_token_loss`` computed every loss before), for the default's model (qwen3-cpu) over
several vocabulary sizes.

The two losses take turns in one process, ``--rounds`` times, each round timing ``--steps``
steps of ``recipe_sweep.step_timer`` (the trainer's model, optimizer and autocast, with the
trainer's allocator settings); the median of each round's ratio, new over old, is printed with
its range (below 1: the new loss is faster). Needs a CPU with bfloat16 arithmetic (AVX-512 BF16
or AMX), where the trainer runs under bfloat16 autocast; elsewhere both steps take the float32
path and the ratio is 1.

    PYTHONPATH=src python benchmarks/bench_softmax_loss.py [--vocab-sizes 768 1536 4096]
        [--rounds 10] [--steps 8]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

import torch
import torch.nn.functional as F

from light_llm.models.gpt import GPT
from light_llm.train.cpu_allocator import keep_freed_memory

sys.path.insert(0, os.path.dirname(__file__))
from recipe_sweep import seconds_per_step, step_timer  # noqa: E402


def float32_loss(logits, targets, label_smoothing, reduction="mean"):
    """The baseline: PyTorch's cross-entropy on the logits copied to float32."""
    return F.cross_entropy(
        logits.reshape(-1, logits.size(-1)).float(),
        targets.reshape(-1),
        ignore_index=-1,
        label_smoothing=label_smoothing,
        reduction=reduction,
    )


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
    softmax_loss = GPT.__dict__["next_token_loss"]
    losses = {"float32 cross-entropy": staticmethod(float32_loss), "softmax loss": softmax_loss}
    try:
        for vocab_size in args.vocab_sizes:
            step = step_timer([], vocab_size)
            times = {name: [] for name in losses}
            for round_ in range(args.rounds + 1):
                for name, loss in losses.items():
                    GPT.next_token_loss = loss
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
        GPT.next_token_loss = softmax_loss


if __name__ == "__main__":
    main()
