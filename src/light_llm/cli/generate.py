"""``light-llm generate``: continue prompts with a trained model, streaming the text.

Sampling (greedy, temperature, top-k, top-p) and KV-cache decoding are
:func:`light_llm.generate.generate_text`; this module reads the options, loads the checkpoint
and its tokenizer, and prints.
"""

from __future__ import annotations

import argparse
import json
import sys

from light_llm.cli.quantize import add_quantize_flag, quantize_if_asked
from light_llm.device import DEVICES
from light_llm.errors import ConfigError
from light_llm.limits import MAX_BATCH_SIZE
from light_llm.sampling_options import DEFAULT_TEMPERATURE
from light_llm.terminal import for_terminal

DESCRIPTION = """\
Continue each PROMPT with text sampled from a model: P(x_t | x_<t) = softmax(logits / τ),
optionally cut to the top-k tokens or to the nucleus of mass top-p (seed 000 §8), decoded
with a KV cache (seed 002 §11.2). A single prompt is streamed to the terminal as the tokens
arrive; several prompts are decoded together as one batch and printed one after the other.
--checkpoint takes a light-llm checkpoint, a training output folder, or a HuggingFace GPT-2
folder (config.json + model.safetensors; it implies the GPT-2 tokenizer), or a Llama or Qwen3
folder that light-llm exported (its tokenizer beside it).
"""

EXAMPLES = """\
examples:
  light-llm generate --checkpoint out --prompt "ROMEO:"
  light-llm generate --checkpoint out --prompt "To be" --temperature 0 --max-new-tokens 50
  light-llm generate --checkpoint out --prompt "Once" --prompt "Upon" --top-p 0.9 --seed 1
  light-llm generate --checkpoint gpt2-folder --prompt "Hello" --dtype float16 --json
  light-llm generate --checkpoint out --prompt "ROMEO:" --max-new-tokens 5 --show-probs 3
"""

DTYPES = ("float32", "bfloat16", "float16", "float64")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "generate",
        help="continue prompts with a trained model (greedy, temperature, top-k, top-p)",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--checkpoint",
        required=True,
        metavar="DIR",
        help="light-llm checkpoint, training output folder, or HuggingFace GPT-2, Llama or "
        "Qwen3 folder",
    )
    parser.add_argument(
        "--prompt",
        action="append",
        required=True,
        metavar="TEXT",
        help=f"text to continue; repeat for a batch of prompts (at most {MAX_BATCH_SIZE:,})",
    )
    parser.add_argument(
        "--max-new-tokens", type=int, default=200, metavar="N", help="tokens to add (default 200)"
    )
    parser.add_argument(
        "--temperature",
        type=float,
        default=DEFAULT_TEMPERATURE,
        metavar="T",
        help=f"divide the logits by T before sampling; 0 = greedy (default {DEFAULT_TEMPERATURE})",
    )
    parser.add_argument(
        "--top-k", type=int, metavar="K", help="sample only among the K most likely tokens"
    )
    parser.add_argument(
        "--top-p",
        type=float,
        metavar="P",
        help="sample only from the smallest set of tokens whose probability reaches P, in (0, 1]",
    )
    parser.add_argument("--seed", type=int, help="random seed, for reproducible samples")
    parser.add_argument(
        "--ignore-eos", action="store_true", help="keep going past the end-of-text token"
    )
    parser.add_argument(
        "--no-stream", action="store_true", help="print the text once it is complete"
    )
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="recompute the whole context at every step instead of using the KV cache (slow)",
    )
    parser.add_argument(
        "--device",
        choices=DEVICES,
        default="auto",
        help="where to run (default auto: cuda if available, else cpu)",
    )
    parser.add_argument(
        "--dtype",
        choices=DTYPES,
        default="float32",
        help="number format of the weights and activations (default float32; on a CPU, "
        "float16 decodes about 1.7x faster: benchmarks/bench_decode.py)",
    )
    parser.add_argument(
        "--threads",
        default="auto",
        metavar="N",
        help="CPU threads for PyTorch; auto (the default, on a CPU) times decoding on 1, 2, "
        "4 ... cores once for this machine and model shape and keeps the fastest (cached in "
        "~/.cache/light-llm or $LIGHT_LLM_CACHE)",
    )
    add_quantize_flag(parser)
    parser.add_argument(
        "--stats",
        action="store_true",
        help="after the text, print tokens/s, time to first token, bytes of weights and KV "
        "cache read per token, and the model bandwidth utilisation (MBU) against this "
        "machine's memory bandwidth (measured once, cached)",
    )
    parser.add_argument(
        "--engine",
        choices=["torch", "numpy"],
        default="torch",
        help="torch (fast, default) or numpy (the hand-written engine, CPU, float32/float64)",
    )
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object with every completion"
    )
    parser.add_argument(
        "--show-probs",
        type=int,
        nargs="?",
        const=5,
        metavar="K",
        help="at each step, print the K most likely next tokens (default 5) with their "
        "probabilities before and after temperature / top-k / top-p, the drawn one marked "
        '(with --json: a "steps" list per completion)',
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from light_llm.decode_stats import check_threads
    from light_llm.generate import generate_text
    from light_llm.reference.quantize import check_quantization
    from light_llm.sampling_options import validate_sampling

    validate_sampling(args.temperature, args.top_k, args.top_p)  # before the slow loading
    if len(args.prompt) > MAX_BATCH_SIZE:
        raise ConfigError(
            f"--prompt is given {len(args.prompt):,} times, more than the {MAX_BATCH_SIZE:,} "
            "prompts of one batch; generate in several runs."
        )
    threads = check_threads(args.threads)
    if args.quantize is not None:
        check_quantization(args.quantize)
    if args.stats and args.engine == "numpy":
        raise ConfigError("--stats measures the torch engine: drop --engine numpy.")
    if threads is not None and args.engine == "numpy":  # else set for PyTorch and not used
        raise ConfigError(
            "--threads sets PyTorch's threads; the numpy engine's products run on NumPy's BLAS "
            "(set OMP_NUM_THREADS before the command instead)."
        )
    if threads is not None:
        import torch

        torch.set_num_threads(threads)
    if args.show_probs is not None and args.show_probs < 1:
        raise ConfigError(f"--show-probs must be 1 or more, got {args.show_probs}.")
    if args.show_probs is not None and args.engine == "numpy":
        raise ConfigError("--show-probs works with the torch engine: drop --engine numpy.")
    shown = not (args.no_stream or args.json or args.show_probs is not None)
    printer = StreamPrinter(args.prompt[0]) if len(args.prompt) == 1 and shown else None
    options = {
        "temperature": args.temperature,
        "top_k": args.top_k,
        "top_p": args.top_p,
        "seed": args.seed,
        "stop_at_eos": not args.ignore_eos,
        "use_cache": not args.no_cache,
    }
    if args.engine == "numpy":
        completions = generate_with_numpy(args, printer, options)
    else:
        model, tokenizer = load_torch_model(args)
        note_cropped_prompts(tokenizer, args.prompt, model.config.block_size)
        threads_how = pick_threads(model, threads)
        steps = None
        if args.show_probs is not None:
            steps = StepRecorder(tokenizer, len(args.prompt), args.show_probs, options)
        clock = StepClock(steps)
        completions = generate_text(
            model,
            tokenizer,
            args.prompt,
            args.max_new_tokens,
            on_text=printer,
            on_step=clock,
            **options,
        )
    if printer is not None:
        printer.finish()
    elif args.json:
        pairs = zip(args.prompt, completions, strict=True)
        documents = [{"prompt": p, "completion": c} for p, c in pairs]
        if args.show_probs is not None:
            for document, row_steps in zip(documents, steps.rows, strict=True):
                document["steps"] = row_steps
        print(json.dumps({"completions": documents}, ensure_ascii=False))
    elif args.show_probs is not None:
        for number, (prompt, completion) in enumerate(zip(args.prompt, completions, strict=True)):
            if number:
                print()
            if len(args.prompt) > 1:
                print(f"=== prompt {number + 1} ===")
            print(steps.table(number))
            print(for_terminal(prompt + completion))
    elif len(completions) == 1:
        print(for_terminal(args.prompt[0] + completions[0]))
    else:
        for number, (prompt, completion) in enumerate(zip(args.prompt, completions, strict=True)):
            if number:
                print()
            print(f"=== prompt {number + 1} ===")
            print(for_terminal(prompt + completion))
    if args.stats:
        print_stats(model, tokenizer, args.prompt, clock, threads_how, not args.no_cache)
    return 0


def note_cropped_prompts(tokenizer, prompts: list[str], context: int) -> None:
    """A note on stderr for each prompt longer than the model's context: the model reads its
    last ``context`` tokens (seed 000 §7's window), so the start of it is not seen."""
    for number, prompt in enumerate(prompts, start=1):
        length = len(tokenizer.encode(prompt))
        if length > context:
            which = "the prompt" if len(prompts) == 1 else f"prompt {number}"
            print(
                f"note: {which} is {length:,} tokens and the model reads {context} at a time, "
                f"so its first {length - context:,} are not seen: the text goes on from the "
                f"last {context}.",
                file=sys.stderr,
            )


class StepClock:
    """``on_step`` that notes when each step's token was ready (seconds since it was made),
    then hands the step on to ``then`` (the --show-probs recorder) if any."""

    def __init__(self, then=None) -> None:
        import time

        self.clock = time.perf_counter
        self.start = self.clock()
        self.times: list[float] = []
        self.then = then

    def __call__(self, logits, ids) -> None:
        self.times.append(self.clock() - self.start)
        if self.then is not None:
            self.then(logits, ids)


def pick_threads(model, threads: int | None) -> str:
    """Set the decoding threads: those given, or on a CPU the fastest measured for this
    machine and model shape (:func:`light_llm.decode_stats.decode_threads`); says how."""

    if threads is not None:
        return "given with --threads"
    if model.device.type != "cpu":
        return "PyTorch's default"
    from light_llm.decode_stats import decode_threads

    return decode_threads(model)[1]


def print_stats(
    model, tokenizer, prompts, clock: StepClock, threads_how: str, cached: bool
) -> None:
    """The --stats lines (:class:`light_llm.decode_stats.DecodeStats`), on stderr: stdout
    holds the text alone. Without the KV cache (``cached`` False) no cache is read."""
    import torch

    from light_llm.decode_stats import (
        DecodeStats,
        kv_bytes_per_token,
        memory_bandwidth,
        weight_bytes_per_token,
    )

    sys.stdout.flush()  # the text, its last newline included, before the lines on stderr
    if not clock.times:
        print("stats: no token was generated.", file=sys.stderr)
        return
    prompt_tokens = max(len(tokenizer.encode(prompt)) for prompt in prompts)
    n = len(clock.times)
    mean_cached = min(prompt_tokens + (n - 1) / 2, model.config.block_size)
    stats = DecodeStats(
        prompt_tokens=prompt_tokens,
        batch_size=len(prompts),
        step_times=clock.times,
        weight_bytes=weight_bytes_per_token(model),
        kv_bytes=kv_bytes_per_token(model, mean_cached, len(prompts)) if cached else 0,
        bandwidth=memory_bandwidth(),
        threads=torch.get_num_threads(),
        threads_how=threads_how,
    )
    for line in stats.lines():
        print("stats: " + line, file=sys.stderr)


class StreamPrinter:
    """Prints the prompt, then each newly decoded piece of text as soon as it arrives. The
    prompt waits for the first piece, so that an error in the prompt is printed alone."""

    def __init__(self, prompt: str) -> None:
        self.prompt: str | None = prompt

    def __call__(self, row: int, text: str) -> None:
        if self.prompt is not None:
            text, self.prompt = self.prompt + text, None
        sys.stdout.write(for_terminal(text))  # the model's text: no command to a terminal
        sys.stdout.flush()

    def finish(self) -> None:
        print(for_terminal(self.prompt or ""))


class StepRecorder:
    """``on_step`` for :func:`generate_text`: keeps, for each prompt and step, the drawn token
    and the ``k`` most likely ones with P = softmax(logits) and the probability they are drawn
    with after the filters (:func:`light_llm.generate.sampling_distribution`)."""

    def __init__(self, tokenizer, n_rows: int, k: int, options: dict) -> None:
        self.tokenizer, self.k = tokenizer, min(k, tokenizer.vocab_size)  # no more than there are
        self.sampling = {key: options[key] for key in ("temperature", "top_k", "top_p")}
        self.eos_id = tokenizer.eos_id if options["stop_at_eos"] else None
        self.rows: list[list[dict]] = [[] for _ in range(n_rows)]
        self.finished = [False] * n_rows

    def __call__(self, logits, ids) -> None:
        import torch

        from light_llm.generate import sampling_distribution

        before = torch.softmax(logits, dim=-1)  # (B, V)
        after = sampling_distribution(logits, **self.sampling)
        top = before.topk(min(self.k, before.size(-1)), dim=-1).indices  # (B, k)
        for row, drawn in enumerate(ids.tolist()):
            if self.finished[row]:
                continue
            self.finished[row] = drawn == self.eos_id
            self.rows[row].append(
                {
                    "token": self.token(drawn),
                    "id": drawn,
                    "probability": after[row, drawn].item(),
                    "top": [
                        {
                            "token": self.token(candidate),
                            "id": candidate,
                            "probability": before[row, candidate].item(),
                            "filtered_probability": after[row, candidate].item(),
                        }
                        for candidate in top[row].tolist()
                    ],
                }
            )

    def token(self, token_id: int) -> str:
        return self.tokenizer.decode([token_id])

    def table(self, row: int) -> str:
        """One line per step: the drawn token and its probability, then the top k as
        token P (P after the filters)."""
        lines = [f"step    drawn  p drawn | top {self.k}: token P (P after the filters)"]
        for number, step in enumerate(self.rows[row], start=1):
            top = "  ".join(
                f"{c['token']!r} {c['probability']:.3f} ({c['filtered_probability']:.3f})"
                for c in step["top"]
            )
            lines.append(f"{number:>4} {step['token']!r:>8} p={step['probability']:.3f} | {top}")
        return "\n".join(lines)


def generate_with_numpy(args: argparse.Namespace, printer, options: dict) -> list[str]:
    """The NumPy engine (light_llm.reference): one prompt at a time, on the CPU."""
    import numpy as np

    from light_llm.checkpoints import inspect_folder, load, load_tokenizer
    from light_llm.reference.quantize import dequantize_params, quantize_params
    from light_llm.reference.sampling import generate_text as generate_text_numpy

    if args.device == "cuda":
        raise ConfigError("the numpy engine runs on the CPU only: drop --device cuda.")
    if args.dtype not in ("float32", "float64"):
        raise ConfigError(f"the numpy engine computes in float32 or float64, not {args.dtype}.")
    folder = inspect_folder(args.checkpoint)  # its config.json read once, for both
    model = load(folder, engine="numpy", dtype=np.dtype(args.dtype))
    if args.quantize is not None:  # W_hat = q s, the int8 model's weights, in float
        params = quantize_params(model.params, model.config)
        model.load_state_dict(dequantize_params(params, model.config), source="--quantize")
    tokenizer = load_tokenizer(folder, check_model=True)
    note_cropped_prompts(tokenizer, args.prompt, model.config.block_size)
    on_text = (lambda piece: printer(0, piece)) if printer is not None else None
    return [
        generate_text_numpy(
            model, tokenizer, prompt, args.max_new_tokens, on_text=on_text, **options
        )
        for prompt in args.prompt
    ]


def load_torch_model(args: argparse.Namespace):
    """The PyTorch engine: the checkpoint's GPT on --device in --dtype, and its tokenizer."""
    import torch

    from light_llm.checkpoints import inspect_folder, load, load_tokenizer
    from light_llm.device import resolve_device

    folder = inspect_folder(args.checkpoint)  # its config.json read once, for both
    model = load(folder, device=resolve_device(args.device))
    model = quantize_if_asked(model, args.quantize).to(getattr(torch, args.dtype))
    tokenizer = load_tokenizer(folder, check_model=True)
    return model, tokenizer
