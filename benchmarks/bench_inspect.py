"""Looking inside the default model: how long each analysis of ``light_llm.inspect`` takes, and
what the instrumented forward costs over the plain one.

Targets (issue 22), on 2 cores: every analysis of a 64-token prompt under 0.5 s; the
head-importance table over 32k validation tokens under 30 s; the instrumented forward with
nothing recorded at most 1.05x the plain forward. The plain and instrumented forwards are
timed alternately in the same process, so that machine noise falls on both; the ratio is
printed.

    PYTHONPATH=src python benchmarks/bench_inspect.py --checkpoint out-light-llm [--threads 2]

Without --checkpoint, a model of bpe-cpu's shape (the default before qwen3-cpu: 4 layers, 4
heads, 96 wide, context 64, 768 ids) with its initial weights and random tokens stands in
(the time of an analysis does not depend on the weights' values).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from light_llm import inspect as look
from light_llm.checkpoints import load, load_tokenizer
from light_llm.config import preset
from light_llm.inspect.instrumented import run_instrumented
from light_llm.inspect.tokens import validation_ids
from light_llm.models.gpt import GPT

PROMPT_SECONDS, TABLE_SECONDS, OVERHEAD = 0.5, 30.0, 1.05


def seconds(work, repeats: int) -> float:
    """The median wall time of ``work()`` over ``repeats`` calls, after one warm-up call."""
    work()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def model_and_text(checkpoint: str | None, n_tokens: int):
    if checkpoint is None:
        torch.manual_seed(0)
        model = GPT(preset("bpe-cpu").replace(vocab_size=768)).eval()
        ids = np.random.default_rng(0).integers(0, 768, n_tokens)
        return model, ids, f"{n_tokens:,} random tokens"
    model = load(checkpoint).eval()
    folder = model_folder(checkpoint)
    ids, what = validation_ids(folder, load_tokenizer(checkpoint), None, n_tokens)
    return model, ids, what


def model_folder(checkpoint: str):
    from light_llm.checkpoints import inspect_folder

    return inspect_folder(checkpoint).path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", help="a trained model (default: the bpe-cpu shape)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--table-tokens", type=int, default=32_768)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model, text, what = model_and_text(args.checkpoint, args.table_tokens)
    if len(text) < 32 * model.config.block_size:  # the forward timed below is 32 windows
        parser.error(
            f"--table-tokens {args.table_tokens} gives {len(text):,} tokens; the timed forward "
            f"needs 32 windows of the context, {32 * model.config.block_size:,} at least."
        )
    config = model.config
    prompt = text[: min(64, config.block_size)]
    corrupt = prompt.copy()
    corrupt[len(prompt) // 2] = (corrupt[len(prompt) // 2] + 1) % config.vocab_size
    print(
        f"{config.n_layer} layers, {config.n_head} heads, {config.n_embd} wide, context "
        f"{config.block_size}, {config.vocab_size} ids; {args.threads} threads, CPU "
        f"{torch.backends.cpu.get_cpu_capability()}; prompt of {len(prompt)} tokens"
    )
    analyses = {
        "logit lens": lambda: look.logit_lens(model, prompt),
        "direct logit attribution": lambda: look.direct_logit_attribution(
            model, prompt, 5, versus=7
        ),
        "ablate heads (prompt, Δp)": lambda: look.ablate_prompt(model, prompt, ["L0H1", "L1MLP"]),
        "activation patching": lambda: look.activation_patching(model, prompt, corrupt, 5, 7),
        "head roles": lambda: look.head_roles(model, prompt),
        "neuron contexts (prompt)": lambda: look.top_activations(model, prompt, 1, 3),
        "surprise (prompt)": lambda: look.surprise(model, prompt),
        "importance table (prompt)": lambda: look.head_importance(model, prompt),
    }
    worst = 0.0
    for name, work in analyses.items():
        taken = seconds(work, args.repeats)
        worst = max(worst, taken)
        print(f"  {name:<28} {taken * 1000:8.1f} ms")
    print(
        f"slowest prompt analysis {worst:.3f} s (target < {PROMPT_SECONDS} s): "
        f"{'met' if worst < PROMPT_SECONDS else 'NOT met'}"
    )
    start = time.perf_counter()
    table = look.head_importance(model, text)
    taken = time.perf_counter() - start
    print(
        f"importance table over {what} ({table.n_tokens:,} scored): {taken:.1f} s "
        f"(target < {TABLE_SECONDS:.0f} s): {'met' if taken < TABLE_SECONDS else 'NOT met'}"
    )
    batch = torch.as_tensor(text[: 32 * config.block_size].reshape(32, config.block_size))
    plain, instrumented = [], []
    with torch.no_grad():
        for _ in range(4 * args.repeats):
            start = time.perf_counter()
            model(batch)
            plain.append(time.perf_counter() - start)
            start = time.perf_counter()
            run_instrumented(model, batch)
            instrumented.append(time.perf_counter() - start)
    ratio = statistics.median(instrumented) / statistics.median(plain)
    print(
        f"forward of 32 x {config.block_size} tokens: plain {statistics.median(plain) * 1000:.1f} "
        f"ms, instrumented with nothing asked {statistics.median(instrumented) * 1000:.1f} ms: "
        f"{ratio:.3f}x (target <= {OVERHEAD}x): {'met' if ratio <= OVERHEAD else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
