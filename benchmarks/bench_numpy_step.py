"""One training step of the ``char-baby`` preset, NumPy engine against PyTorch engine, on the CPU
in float32, measured side by side in one process.

A step is what the trainer does per iteration: forward with the loss, backward, global-norm
clipping at 1.0, one AdamW update (weight decay 0.1 on matrices, betas 0.9/0.99), with nanoGPT's
CPU recipe shape: batch 12, context 64. Both engines start from the same weights and see the
same batches. The engines run in alternation and the median of each is reported, so machine
noise hits both alike. Target: the NumPy step no more than 2x the PyTorch one.

    PYTHONPATH=src python benchmarks/bench_numpy_step.py [--steps 50] [--threads N]

``--threads N`` gives both engines N threads (torch's intra-op pool and NumPy's BLAS, through
threadpoolctl). On a machine shared with other work, spinning BLAS threads can slow either
engine many times over; --threads 1 then gives the fairer comparison.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from light_llm.config import preset
from light_llm.models.gpt import GPT
from light_llm.reference.model import NumpyGPT
from light_llm.reference.optim import AdamW, clip_grad_norm
from light_llm.train.optim import configure_adamw

BATCH, CONTEXT = 12, 64
LR, WEIGHT_DECAY, BETAS, GRAD_CLIP = 1e-3, 0.1, (0.9, 0.99), 1.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=50, help="timed steps per engine")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps per engine first")
    parser.add_argument(
        "--threads", type=int, default=None, help="threads for both engines (default: their own)"
    )
    args = parser.parse_args()
    if args.threads:
        from threadpoolctl import threadpool_limits

        torch.set_num_threads(args.threads)
        threadpool_limits(args.threads)

    config = preset("char-baby", block_size=CONTEXT)
    torch.manual_seed(0)
    torch_model = GPT(config)
    torch_model.train()
    torch_optimizer = configure_adamw(torch_model, WEIGHT_DECAY, LR, BETAS, "cpu")
    numpy_model = NumpyGPT.from_torch_state_dict(torch_model.state_dict(), config, np.float32)
    numpy_model.training = True
    numpy_optimizer = AdamW(numpy_model.params, LR, BETAS, weight_decay=WEIGHT_DECAY)

    rng = np.random.default_rng(0)

    def batch() -> tuple[np.ndarray, np.ndarray]:
        tokens = rng.integers(0, config.vocab_size, size=(BATCH, CONTEXT + 1))
        return tokens[:, :-1], tokens[:, 1:]

    def torch_step(x: np.ndarray, y: np.ndarray) -> float:
        _, loss = torch_model(torch.from_numpy(x), torch.from_numpy(y))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(torch_model.parameters(), GRAD_CLIP)
        torch_optimizer.step()
        torch_optimizer.zero_grad(set_to_none=True)
        return loss.item()

    def numpy_step(x: np.ndarray, y: np.ndarray) -> float:
        _, loss, cache = numpy_model.forward(x, y)
        grads = numpy_model.backward(cache)
        clip_grad_norm(grads, GRAD_CLIP)
        numpy_optimizer.step(grads)
        return loss

    times = {"pytorch": [], "numpy": []}
    for i in range(args.warmup + args.steps):
        x, y = batch()
        for name, step in (("pytorch", torch_step), ("numpy", numpy_step)):
            start = time.perf_counter()
            step(x, y)
            if i >= args.warmup:
                times[name].append(time.perf_counter() - start)

    torch_ms = 1000 * statistics.median(times["pytorch"])
    numpy_ms = 1000 * statistics.median(times["numpy"])
    blas_threads = max((pool["num_threads"] for pool in blas_pools()), default="?")
    print(
        f"char-baby train step (batch {BATCH}, context {CONTEXT}, float32, "
        f"{torch.get_num_threads()} torch threads, {blas_threads} numpy BLAS threads), "
        f"median of {args.steps}:"
    )
    print(f"  pytorch engine  {torch_ms:8.2f} ms/step")
    print(f"  numpy engine    {numpy_ms:8.2f} ms/step")
    print(f"  numpy / pytorch {numpy_ms / torch_ms:8.2f}x   (target <= 2x)")


def blas_pools() -> list[dict]:
    from threadpoolctl import threadpool_info

    return [pool for pool in threadpool_info() if pool["user_api"] == "blas"]


if __name__ == "__main__":
    main()
