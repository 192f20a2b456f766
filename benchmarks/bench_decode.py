"""Greedy decoding speed: light-llm against HuggingFace transformers' GPT-2, same weights, same
process; and light-llm with its KV cache against recomputing the whole context every step.

The model has the seed's shape (preset seed-30m: 6 layers, 6 heads, 384 wide, vocabulary
50257) with GPT-2's tanh GELU and random weights; it is exported with light-llm's GPT-2
interop and loaded by ``transformers.GPT2LMHeadModel``, so both run the very same numbers.
Every engine is warmed up, then the engines are timed in turn (interleaved, so that a busy
spell of a shared machine hits them alike) ``--repeats`` times with time.perf_counter; the
median and the best run are printed. Compare the ratios rather than the absolute figures.

    PYTHONPATH=src python benchmarks/bench_decode.py [--new-tokens 256] [--threads 1 2]

Decoding one token reads every weight once (the 50257 x 384 output head is two thirds of
them) and the KV cache so far, so tokens/s x those bytes is the memory bandwidth the decoder
achieves; over the machine's bandwidth (a plain copy of a 256 MiB buffer, measured here) it is
the MBU printed next to each figure. Every dtype (float32, bfloat16, float16, int8 weights with
per-row scales) races transformers' float32 at each thread count (1, 2, all by default), and a
table of the ratios ends the run; then int8's agreement with float32 and, unless --skip-cache,
the KV cache against recomputation.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable

import torch
import transformers

from light_llm.checkpoints.hf_gpt2 import export_hf_gpt2
from light_llm.config import preset
from light_llm.decode_stats import (
    COPY_BYTES,
    decode_threads,
    kv_bytes_per_token,
    machine_key,
    measure_bandwidth,
    weight_bytes_per_token,
)
from light_llm.generate import generate
from light_llm.models.gpt import GPT
from light_llm.models.quantize import quantize_gpt
from light_llm.tokenizers import GPT2Tokenizer

PROMPT = "The meaning of life is"


def race(
    runs: dict[str, Callable[[], object]], repeats: int
) -> tuple[dict[str, list[float]], dict[str, object]]:
    """Warm each run up once, then time them in turn, ``repeats`` rounds: the seconds of each
    run's every round, and each run's last output."""
    outputs = {name: run() for name, run in runs.items()}
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            start = time.perf_counter()
            outputs[name] = run()
            seconds[name].append(time.perf_counter() - start)
    return seconds, outputs


def report(
    name: str, seconds: list[float], tokens: int, read_bytes: float, bandwidth: float
) -> float:
    """Print tokens/s (median and best run), the bandwidth the bytes read per token imply and
    the MBU (that over the machine's); return median tokens/s."""
    median = tokens / statistics.median(seconds)
    best = tokens / min(seconds)
    achieved = median * read_bytes
    print(
        f"  {name:<30} {median:8.1f} tokens/s (best {best:7.1f})  "
        f"{1000 / median:7.2f} ms/token  reads {read_bytes / 2**20:6.1f} MiB/token at "
        f"{achieved / 1e9:5.1f} GB/s = MBU {100 * achieved / bandwidth:4.0f}%"
    )
    return median


DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def build_models(seed: int) -> tuple[dict[str, GPT], torch.nn.Module]:
    """The seed-30m shape with random weights: light-llm in float32, bfloat16, float16 and int8
    (weight-only, per-row scales), and transformers' GPT-2 loaded from light-llm's export of the
    same weights."""
    torch.manual_seed(seed)
    config = preset("seed-30m", activation="gelu_tanh", dropout=0.0)
    ours = GPT(config).eval()
    models = {"float32": ours}
    for name in ("bfloat16", "float16", "int8"):
        models[name] = GPT(config).eval()
        models[name].load_state_dict(ours.state_dict())
        if name == "int8":
            quantize_gpt(models[name])
        else:
            models[name].to(DTYPES[name])
    with tempfile.TemporaryDirectory() as folder:
        export_hf_gpt2(ours, folder)
        theirs = transformers.GPT2LMHeadModel.from_pretrained(folder).eval()
    return models, theirs


def hf_greedy(model, idx: torch.Tensor, new_tokens: int) -> torch.Tensor:
    """transformers' greedy decoding with its KV cache, never stopping early."""
    with torch.no_grad():
        return model.generate(
            idx,
            attention_mask=torch.ones_like(idx),
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            do_sample=False,
            use_cache=True,
            eos_token_id=None,
            pad_token_id=0,
        )


def bytes_per_token(model: GPT, prompt: int, n: int) -> float:
    """Weights plus the mean KV cache one step reads while decoding n tokens after the prompt."""
    return weight_bytes_per_token(model) + kv_bytes_per_token(model, prompt + (n - 1) / 2)


def compare_with_transformers(
    models: dict[str, GPT], theirs, idx, n: int, repeats: int, bandwidth: float
) -> dict[str, float]:
    """Greedy decoding of ``n`` tokens on PyTorch's current threads: transformers in float32
    against light-llm in each dtype; returns tokens/s by name ("hf" for transformers)."""
    print(
        f"{torch.get_num_threads()} thread(s): greedy decoding of {n} new tokens, median of "
        f"{repeats} rounds after a warm-up:"
    )
    runs = {"hf": lambda: hf_greedy(theirs, idx, n)}
    for name, model in models.items():
        runs[name] = lambda model=model: generate(model, idx, n, temperature=0.0)
    seconds, outputs = race(runs, repeats)
    prompt = idx.size(1)
    rates = {
        "hf": report(
            "transformers GPT-2, float32",
            seconds["hf"],
            n,
            bytes_per_token(models["float32"], prompt, n),
            bandwidth,
        )
    }
    for name, model in models.items():
        rates[name] = report(
            f"light-llm, {name}", seconds[name], n, bytes_per_token(model, prompt, n), bandwidth
        )
    reference = outputs["float32"][0, prompt:]
    print(
        "  light-llm float32 tokens identical to transformers': "
        f"{torch.equal(outputs['float32'], outputs['hf'])}"
    )
    for name in ("bfloat16", "float16", "int8"):
        first_difference = (outputs[name][0, prompt:] != reference).nonzero()
        agree = int(first_difference[0]) if len(first_difference) else n
        print(f"  light-llm {name}: the first {agree} of {n} tokens equal float32's")
    for name in models:
        target = "(target >= 4)" if name == "int8" else "(target >= 2)"
        print(f"  light-llm {name:<8} / transformers: {rates[name] / rates['hf']:5.2f}x  {target}")
    return rates


def int8_quality(models: dict[str, GPT], idx, n: int) -> None:
    """int8 against float32 on the float32 model's own greedy text of ``n`` tokens: top-1
    agreement of every position and the largest logit difference (relative to the largest
    logit), from the full forward (the dequantised product) and from cached decoding steps
    (the int8 kernel)."""
    text = generate(models["float32"], idx, n, temperature=0.0)  # (1, prompt + n)
    with torch.no_grad():
        reference, _ = models["float32"](text)  # (1, T, V)
        full, _ = models["int8"](text)
        cache = models["int8"].new_cache(1)
        models["int8"](text[:, :-n], kv_cache=cache)
        steps = torch.cat(
            [
                models["int8"](text[:, t : t + 1], kv_cache=cache)[0]
                for t in range(text.size(1) - n, text.size(1))
            ],
            dim=1,
        )
    tail = reference[:, -n:]
    scale = tail.abs().max()
    print(
        f"int8 against float32 on float32's greedy text ({n} tokens, seed-30m shape, random "
        "weights):"
    )
    for name, logits in (("full forward", full[:, -n:]), ("decoding steps", steps)):
        agree = (logits.argmax(-1) == tail.argmax(-1)).float().mean()
        diff = (logits - tail).abs().max()
        print(
            f"  {name:<15}: top-1 agreement {100 * agree:5.1f}%, largest logit difference "
            f"{diff:.4f} ({100 * diff / scale:.2f}% of the largest logit {scale:.2f})"
        )


def compare_cache(models: dict[str, GPT], idx, total: int, repeats: int, bandwidth: float) -> None:
    """Decoding from the prompt to ``total`` tokens with and without the KV cache (float32),
    and, in each dtype, the cost of the single step that makes token ``total``: one cached
    token against a forward pass over all ``total`` tokens."""
    ours = models["float32"]
    weights = ours.num_parameters() * 4
    new = total - idx.size(1)
    print(f"light-llm float32, KV cache vs recomputing the context, {new} new tokens to {total}:")
    seconds, outputs = race(
        {
            "cache": lambda: generate(ours, idx, new, temperature=0.0),
            "no cache": lambda: generate(ours, idx, new, temperature=0.0, use_cache=False),
        },
        1,
    )
    cached_rate = report("with KV cache", seconds["cache"], new, weights, bandwidth)
    uncached_rate = report(
        "without (use_cache=False)", seconds["no cache"], new, weights, bandwidth
    )
    print(f"  same tokens: {torch.equal(outputs['cache'], outputs['no cache'])}")
    print(f"  whole decode, cache / no cache: {cached_rate / uncached_rate:5.1f}x")

    sequence = outputs["cache"][:, :total]  # (1, total)
    print(f"the step making token {total}, median of {repeats * 5} (target >= 10x):")
    for name, model in models.items():
        cached, full = time_one_step(model, sequence, repeats * 5)
        print(
            f"  {name:<8}: {1000 * cached:7.2f} ms with the cache, {1000 * full:7.2f} ms "
            f"recomputing all {total} tokens: {full / cached:5.1f}x"
        )


def time_one_step(model: GPT, sequence: torch.Tensor, repeats: int) -> tuple[float, float]:
    """Median seconds of the last token of ``sequence`` (1, T) from a cache holding the
    T - 1 before it, and of a forward pass over all T tokens."""
    total = sequence.size(1)
    cache = model.new_cache(1)
    with torch.no_grad():
        model(sequence[:, :-1], kv_cache=cache, last_only=True)  # fill the cache to total - 1

    def cached_step():
        cache.length = total - 1
        with torch.no_grad():
            return model(sequence[:, -1:], kv_cache=cache, last_only=True)

    def full_step():
        with torch.no_grad():
            return model(sequence, last_only=True)

    seconds, _ = race({"cache": cached_step, "no cache": full_step}, repeats)
    return statistics.median(seconds["cache"]), statistics.median(seconds["no cache"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--new-tokens", type=int, default=256, help="tokens to decode (256)")
    parser.add_argument(
        "--cache-tokens", type=int, default=512, help="total length for cache vs no cache (512)"
    )
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds (3)")
    parser.add_argument(
        "--threads",
        type=int,
        nargs="+",
        help="thread counts to race on (default: 1, 2 and every core)",
    )
    parser.add_argument("--skip-cache", action="store_true", help="only compare engines")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    thread_counts = args.threads or sorted({1, min(2, cores), cores})

    models, theirs = build_models(args.seed)
    ours = models["float32"]
    idx = torch.tensor([GPT2Tokenizer().encode(PROMPT)])
    torch.set_num_threads(cores)
    bandwidth = measure_bandwidth()
    print(
        f"torch {torch.__version__}, transformers {transformers.__version__}; {machine_key()}; "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the start; "
        f"seed-30m shape ({ours.num_parameters():,} parameters, "
        f"{ours.num_parameters() * 4 / 2**20:.1f} MiB in float32), batch 1, prompt of "
        f"{idx.size(1)} tokens"
    )
    print(
        f"memory bandwidth {bandwidth / 1e9:.1f} GB/s (copy of {COPY_BYTES / 2**20:.0f} MiB, "
        f"{cores} threads; read + write bytes over the fastest of 5); the floor of each dtype is "
        "that over the bytes it reads per token"
    )
    ratios = {}
    for threads in thread_counts:
        torch.set_num_threads(threads)
        rates = compare_with_transformers(
            models, theirs, idx, args.new_tokens, args.repeats, bandwidth
        )
        ratios[threads] = {name: rate / rates["hf"] for name, rate in rates.items()}
    print("light-llm / transformers float32, by thread count:")
    print("  threads " + "".join(f"{name:>10}" for name in models))
    for threads, row in ratios.items():
        print(f"  {threads:>7} " + "".join(f"{row[name]:9.2f}x" for name in models))
    for name in ("float32", "int8"):
        picked, how = decode_threads(models[name])
        print(f"generate --threads auto for {name} here: {picked} thread(s) ({how})")
    torch.set_num_threads(thread_counts[-1])
    int8_quality(models, idx, args.new_tokens)
    if not args.skip_cache:
        compare_cache(models, idx, args.cache_tokens, args.repeats, bandwidth)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end")


if __name__ == "__main__":
    main()
