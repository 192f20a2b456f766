"""Training speed on the CPU: light-llm's GPT against HuggingFace transformers' GPT-2 of the
same shape, with the same optimiser, measured side by side in one process.

One training step, for both models: forward on a (B, T) batch, mean next-token
cross-entropy (computed the same way from the logits), backward, global-norm clipping at 1.0,
AdamW with decay on matrices only (light_llm.train.optim.configure_adamw for both), zero
grads. Each model runs in float32 and under bfloat16 autocast; light-llm's bfloat16 step
uses the attention kernel its trainer picks on the CPU (PyTorch's math kernel, see
light_llm.train.precision.attention_kernels), and transformers runs under bfloat16 both with
its own choice and with that same kernel, so every ratio can be read like for like. The
variants take turns: every round times ``--steps`` steps of each, and the median tokens/s
over ``--rounds`` rounds is reported, so load from other work on a shared machine hits all
variants alike. The process keeps freed memory for reuse
(:func:`light_llm.train.cpu_allocator.keep_freed_memory`), as ``light-llm train`` does.

Shapes: nanoGPT's CPU recipe (the char-baby preset: 4 layers, 4 heads, 128 wide, context 64,
batch 12) and its shakespeare-char preset (6 layers, 6 heads, 384 wide, context 256, batch
64, dropout 0.2), vocabulary 65.

    PYTHONPATH=src python benchmarks/bench_train.py [--shapes char-baby shakespeare-char]
        [--rounds 5] [--steps 10] [--threads N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from contextlib import nullcontext

import torch
import torch.nn.functional as F
import transformers

from light_llm.config import preset
from light_llm.models.gpt import GPT
from light_llm.train.cpu_allocator import keep_freed_memory
from light_llm.train.optim import clip_grad_norm, configure_adamw
from light_llm.train.precision import attention_kernels, autocast

BATCH_SIZES = {"char-baby": 12, "shakespeare-char": 64}
VOCAB_SIZE = 65


def hf_gpt2_like(config) -> torch.nn.Module:
    """transformers' GPT2LMHeadModel with the shape, activation and dropout of ``config``."""
    hf_config = transformers.GPT2Config(
        vocab_size=config.vocab_size,
        n_positions=config.block_size,
        n_embd=config.n_embd,
        n_layer=config.n_layer,
        n_head=config.n_head,
        activation_function="gelu",  # exact erf GELU, as the light-llm presets
        resid_pdrop=config.dropout,
        embd_pdrop=config.dropout,
        attn_pdrop=config.dropout,
        layer_norm_epsilon=config.norm_eps,
        tie_word_embeddings=True,
    )
    model = transformers.GPT2LMHeadModel(hf_config)
    model.config._attn_implementation = "sdpa"  # its fastest attention on the CPU
    return model


def light_logits(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    return model(x)[0]


def hf_logits(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    return model(input_ids=x).logits


def make_step(
    model: torch.nn.Module,
    logits_of: Callable[[torch.nn.Module, torch.Tensor], torch.Tensor],
    dtype: str,
    math_attention: bool,
) -> Callable[[torch.Tensor, torch.Tensor], float]:
    """One training step of ``model``; ``math_attention`` selects PyTorch's math attention
    kernel (what light-llm's trainer does under bfloat16 on the CPU)."""
    optimizer = configure_adamw(model, 0.1, 1e-3, (0.9, 0.99), "cpu")
    device = torch.device("cpu")
    kernels = (lambda: attention_kernels(device, dtype)) if math_attention else nullcontext
    model.train()

    def step(x: torch.Tensor, y: torch.Tensor) -> float:
        with autocast(device, dtype), kernels():
            logits = logits_of(model, x)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), y.reshape(-1))
        loss.backward()
        clip_grad_norm(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.item()

    return step


def tokens_per_second(step, batch_size: int, block_size: int, steps: int, seed: int) -> float:
    generator = torch.Generator().manual_seed(seed)
    batches = [
        torch.randint(0, VOCAB_SIZE, (batch_size, block_size + 1), generator=generator)
        for _ in range(steps)
    ]
    start = time.perf_counter()
    for batch in batches:
        step(batch[:, :-1], batch[:, 1:])
    return steps * batch_size * block_size / (time.perf_counter() - start)


def bench_shape(name: str, rounds: int, steps: int) -> dict[str, float]:
    config = preset(name, vocab_size=VOCAB_SIZE)
    batch_size = BATCH_SIZES[name]
    builders = {
        # label: (model factory, logits function, dtype, math attention kernel)
        "light-llm float32": (lambda: GPT(config), light_logits, "float32", False),
        "light-llm bfloat16": (lambda: GPT(config), light_logits, "bfloat16", True),
        "transformers float32": (lambda: hf_gpt2_like(config), hf_logits, "float32", False),
        "transformers bfloat16": (lambda: hf_gpt2_like(config), hf_logits, "bfloat16", False),
        "transformers bf16+math": (lambda: hf_gpt2_like(config), hf_logits, "bfloat16", True),
    }
    variants = {}
    for label, (build, logits_of, dtype, math_attention) in builders.items():
        torch.manual_seed(0)
        variants[label] = make_step(build(), logits_of, dtype, math_attention)
    for step in variants.values():  # warm-up: allocator, oneDNN kernels
        tokens_per_second(step, batch_size, config.block_size, 2, seed=0)
    rates: dict[str, list[float]] = {label: [] for label in variants}
    for round_index in range(rounds):
        for label, step in variants.items():
            rate = tokens_per_second(step, batch_size, config.block_size, steps, round_index)
            rates[label].append(rate)
    medians = {label: statistics.median(values) for label, values in rates.items()}
    print(
        f"\n{name}: {config.n_layer} layers, {config.n_head} heads, {config.n_embd} wide, "
        f"context {config.block_size}, batch {batch_size}, dropout {config.dropout} "
        f"({rounds} rounds x {steps} steps, median tokens/s)"
    )
    for label, rate in medians.items():
        spread = f"{min(rates[label]):,.0f} .. {max(rates[label]):,.0f}"
        print(f"  {label:<24} {rate:>10,.0f} tokens/s   (range {spread})")
    comparisons = {
        "both float32": ("light-llm float32", "transformers float32"),
        "both bfloat16, each with its attention kernel": (
            "light-llm bfloat16",
            "transformers bfloat16",
        ),
        "both bfloat16 with the math attention kernel": (
            "light-llm bfloat16",
            "transformers bf16+math",
        ),
        "light-llm bfloat16 vs transformers float32 (its default)": (
            "light-llm bfloat16",
            "transformers float32",
        ),
    }
    for what, (ours, theirs) in comparisons.items():
        print(f"  ratio light-llm / transformers, {what}: {medians[ours] / medians[theirs]:.2f}x")
    return medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", nargs="+", default=list(BATCH_SIZES), choices=BATCH_SIZES)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    keep_freed_memory()  # as light-llm's trainer does on the CPU; both models run under it
    transformers.logging.set_verbosity_error()
    print(
        f"torch {torch.__version__}, transformers {transformers.__version__}, "
        f"{torch.get_num_threads()} threads"
    )
    for name in args.shapes:
        bench_shape(name, args.rounds, args.steps)


if __name__ == "__main__":
    main()
