"""Greedy decoding speed: light-llm against HuggingFace transformers' GPT-2, same weights, same
process; and light-llm with its KV cache against recomputing the whole context every step.

The model has the seed's shape (preset seed-30m: 6 layers, 6 heads, 384 wide, vocabulary
50257) with GPT-2's tanh GELU and random weights; it is exported with light-llm's GPT-2
interop and loaded by ``transformers.GPT2LMHeadModel``, so both run the very same numbers.
Every engine is warmed up, then the engines are timed in turn (interleaved, so that a busy
spell of a shared machine hits them alike) ``--repeats`` times with time.perf_counter; the
median and the best run are printed. Compare the ratios rather than the absolute figures.

    PYTHONPATH=src python benchmarks/bench_decode.py [--new-tokens 256] [--cache-tokens 512]

Decoding one token reads every weight once (the 50257 x 384 output head is two thirds of
them), so tokens/s x weight bytes is the memory bandwidth the decoder achieves; it is printed
next to each figure.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable

import torch
import transformers

from light_llm.config import preset
from light_llm.generate import generate
from light_llm.interop import export_hf_gpt2
from light_llm.models.gpt import GPT
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


def report(name: str, seconds: list[float], tokens: int, weight_bytes: int) -> float:
    """Print tokens/s (median and best run) and the implied bandwidth; return median tokens/s."""
    median = tokens / statistics.median(seconds)
    best = tokens / min(seconds)
    bandwidth = median * weight_bytes / 1e9
    print(
        f"  {name:<30} {median:8.1f} tokens/s (best {best:7.1f})  "
        f"{1000 / median:7.2f} ms/token   weights read at {bandwidth:5.1f} GB/s"
    )
    return median


def build_models(seed: int) -> tuple[GPT, GPT, torch.nn.Module]:
    """The seed-30m shape with random weights: light-llm in float32 and in bfloat16, and
    transformers' GPT-2 loaded from light-llm's export of the same weights."""
    torch.manual_seed(seed)
    config = preset("seed-30m", activation="gelu_tanh", dropout=0.0)
    ours = GPT(config).eval()
    ours_bf16 = GPT(config).eval()
    ours_bf16.load_state_dict(ours.state_dict())
    with tempfile.TemporaryDirectory() as folder:
        export_hf_gpt2(ours, folder)
        theirs = transformers.GPT2LMHeadModel.from_pretrained(folder).eval()
    return ours, ours_bf16.to(torch.bfloat16), theirs


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


def compare_with_transformers(ours, ours_bf16, theirs, idx, n: int, repeats: int) -> None:
    weights = ours.num_parameters() * 4
    print(f"greedy decoding of {n} new tokens, median of {repeats} rounds after a warm-up:")
    seconds, outputs = race(
        {
            "hf": lambda: hf_greedy(theirs, idx, n),
            "fp32": lambda: generate(ours, idx, n, temperature=0.0),
            "bf16": lambda: generate(ours_bf16, idx, n, temperature=0.0),
        },
        repeats,
    )
    hf_rate = report("transformers GPT-2, float32", seconds["hf"], n, weights)
    fp32_rate = report("light-llm, float32", seconds["fp32"], n, weights)
    bf16_rate = report("light-llm, bfloat16", seconds["bf16"], n, weights // 2)
    same = torch.equal(outputs["fp32"], outputs["hf"])
    print(f"  light-llm float32 tokens identical to transformers': {same}")
    print(f"  light-llm float32 / transformers:  {fp32_rate / hf_rate:5.2f}x  (target >= 2)")
    print(f"  light-llm bfloat16 / transformers: {bf16_rate / hf_rate:5.2f}x  (target >= 2)")


def compare_cache(ours, idx, total: int, repeats: int) -> None:
    """Decoding from the prompt to ``total`` tokens with and without the KV cache, and the
    cost of the single step that makes token ``total``: one cached token against a forward
    pass over all ``total`` tokens."""
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
    cached_rate = report("with KV cache", seconds["cache"], new, weights)
    uncached_rate = report("without (use_cache=False)", seconds["no cache"], new, weights)
    print(f"  same tokens: {torch.equal(outputs['cache'], outputs['no cache'])}")
    print(f"  whole decode, cache / no cache: {cached_rate / uncached_rate:5.1f}x  (target >= 10)")

    sequence = outputs["cache"][:, :total]  # (1, total)
    cache = ours.new_cache(1)
    with torch.no_grad():
        ours(sequence[:, :-1], cache=cache, last_only=True)  # fill the cache to total - 1

    def cached_step():
        cache.length = total - 1
        with torch.no_grad():
            return ours(sequence[:, -1:], cache=cache, last_only=True)

    def full_step():
        with torch.no_grad():
            return ours(sequence, last_only=True)

    seconds, _ = race({"cache": cached_step, "no cache": full_step}, repeats * 5)
    cached = statistics.median(seconds["cache"])
    full = statistics.median(seconds["no cache"])
    print(
        f"  the step making token {total}: {1000 * cached:.2f} ms cached, {1000 * full:.2f} ms "
        f"recomputed: {full / cached:5.1f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--new-tokens", type=int, default=256, help="tokens to decode (256)")
    parser.add_argument(
        "--cache-tokens", type=int, default=512, help="total length for cache vs no cache (512)"
    )
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds (3)")
    parser.add_argument(
        "--threads", type=int, help="torch.set_num_threads (default: leave PyTorch's choice)"
    )
    parser.add_argument("--skip-cache", action="store_true", help="only compare engines")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)

    ours, ours_bf16, theirs = build_models(args.seed)
    idx = torch.tensor([GPT2Tokenizer().encode(PROMPT)])
    print(
        f"torch {torch.__version__}, transformers {transformers.__version__}, "
        f"{torch.get_num_threads()} threads; seed-30m shape ({ours.num_parameters():,} "
        f"parameters, {ours.num_parameters() * 4 / 2**20:.1f} MiB in float32), batch 1, "
        f"prompt of {idx.size(1)} tokens"
    )
    compare_with_transformers(ours, ours_bf16, theirs, idx, args.new_tokens, args.repeats)
    if not args.skip_cache:
        compare_cache(ours, idx, args.cache_tokens, args.repeats)


if __name__ == "__main__":
    main()
