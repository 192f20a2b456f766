"""Training speed on the CPU: light-llm's training step against HuggingFace transformers' GPT-2
of the same shape measured side by side in one process, against nanoGPT's own ``train.py``
in a subprocess, and against the machine: a CPU "MFU" (light_llm.train.mfu), the matmul
FLOP/s a step achieves (FLOPs a token from ModelCounts) over the peak of a large matmul
measured in this process in the same number format.

light-llm's step is the trainer's (``recipe_sweep.step_timer``: the preset's model and
optimizer, autocast and attention as ``light-llm train --dtype D`` runs them). transformers'
step, for the GPT-2-like shapes only: forward on a (B, T) batch, mean next-token
cross-entropy, backward, global-norm clipping at 1.0, AdamW with decay on matrices only
(light_llm.train.optim.configure_adamw), zero grads; in float32 and under bfloat16 autocast,
with its own attention kernel and with PyTorch's math kernel. transformers' GPT-2 has biases
in every Linear layer and LayerNorm, nanoGPT's recipe none (its train.py's bias=False, as
``--preset nanogpt-cpu``), so at nanogpt-cpu's shape light-llm runs twice: nanoGPT's model
(against nanoGPT) and GPT-2's (``char-baby``, the same shape with biases: against
transformers). bfloat16 is timed only where the CPU multiplies it in hardware
(:func:`light_llm.train.precision.cpu_has_native_bfloat16`); elsewhere it is emulated, far
slower than float32, and no trainer uses it. The variants take turns: every
round times ``--steps`` steps of each, and the median tokens/s over ``--rounds`` rounds is
reported, so load from other work on a shared machine hits all variants alike. The process
keeps freed memory for reuse (:func:`light_llm.train.cpu_allocator.keep_freed_memory`), as
``light-llm train`` does.

nanoGPT (``--nanogpt-dir DIR``, a checkout of github.com/karpathy/nanoGPT; nothing of it is
copied here): its ``train.py`` runs in a subprocess on the nanogpt-cpu shape with its README's
CPU settings (device=cpu, compile=False, 4 layers, 4 heads, 128 wide, context 64, batch 12,
dropout 0, float32 as nanoGPT always trains on a CPU) for ``--nanogpt-iters`` iterations on
the packaged Shakespeare (written as its character-level train.bin / val.bin / meta.pkl in
a temporary folder), once in every round after light-llm's variants, so that it takes turns
with them like the others; its "iter N: ... time X ms" lines give a run's tokens/s (the
median over the iterations after the first 5; its evaluation at iteration 0 is left out),
the median over the rounds is reported, and its MFU is counted with the same ModelCounts
and float32 peak. Its ``model.py`` also takes turns in this process ("nanoGPT model.py"): its
GPT and optimizer stepped as its ``train.py`` steps them, under this process's allocator
settings, so that the two ratios printed split light-llm's lead into what its step's code
gives (light-llm / nanoGPT's model step) and what nanoGPT's loop and allocator cost (its
model step / its ``train.py``). And light-llm's own loop takes its turn in every round:
``light-llm train --preset nanogpt-cpu`` for ``--loop-iters`` iterations in a subprocess (the
median of its logged tokens/s after its first 30 iterations), against nanoGPT's
``train.py`` loop for loop; and on 2 or more threads the same loop in ``--processes``, one
process of one thread a thread (as torchrun starts them), each computing its share of the
batch, the gradients averaged in shared memory (light_llm.train.shared_gradients): at
nanoGPT's small products two processes use two cores better than one process's two threads
do.

Shapes: nanoGPT's CPU recipe (nanogpt-cpu: 4 layers, 4 heads, 128 wide, context 64, batch
12, vocabulary 65), light-llm's default (qwen3-cpu: 96 wide, SwiGLU, batch 32, vocabulary
768), the default before it (bpe-cpu: ReLU² and a soft-cap) and
nanoGPT's shakespeare-char preset (6 layers, 6 heads, 384 wide, context 256, batch 64,
dropout 0.2, vocabulary 65).

    PYTHONPATH=src python benchmarks/bench_train.py [--shapes nanogpt-cpu qwen3-cpu bpe-cpu]
        [--rounds 5] [--steps 10] [--threads N] [--nanogpt-dir DIR] [--nanogpt-iters 40]
        [--loop-iters 200]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import os
import pickle
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
import transformers
from torch.nn.attention import SDPBackend, sdpa_kernel

from light_llm.checkpoints.run import MetricsLog, training_records
from light_llm.config import preset
from light_llm.shakespeare import shakespeare_text
from light_llm.train.config import PRESET_RECIPES
from light_llm.train.cpu_allocator import keep_freed_memory
from light_llm.train.mfu import (
    matmul_dtype,
    model_flops_utilisation,
    peak_matmul_flops,
    train_flops_per_token,
)
from light_llm.train.optim import clip_grad_norm, configure_adamw
from light_llm.train.precision import autocast, cpu_has_native_bfloat16, default_dtype

sys.path.insert(0, os.path.dirname(__file__))
from recipe_sweep import step_timer  # noqa: E402

VOCAB_SIZES = {"nanogpt-cpu": 65, "qwen3-cpu": 768, "bpe-cpu": 768, "shakespeare-char": 65}
GPT2_LIKE = ("nanogpt-cpu", "shakespeare-char")  # transformers' GPT-2 has their architecture
# the light-llm preset of transformers' GPT-2 where the shape's own has no biases
GPT2_TWINS = {"nanogpt-cpu": "char-baby"}
GPT2_LABEL = "light-llm GPT-2"  # the twin's variants
NANOGPT_LINE = re.compile(r"^iter (\d+): loss [-\d.naninf]+, time ([\d.]+)ms", re.MULTILINE)
NANOGPT_SKIPPED = 5  # its first iterations: allocator and kernels warming up
NANOGPT_LABEL = "nanoGPT train.py (float32)"
NANOGPT_MODEL_LABEL = "nanoGPT model.py float32"  # its model and optimizer in this process
TRAINER_LABEL = "light-llm train, whole loop"  # `light-llm train --preset nanogpt-cpu`
# the same in --processes: one process of one thread a thread, gradients in shared memory
PROCESSES_LABEL = "light-llm train, processes"
TRAINER_SKIPPED = 30  # its first iterations: warming up, and the thread governor's trial


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


def hf_step(config, dtype: str, math_attention: bool) -> Callable[[torch.Tensor], None]:
    """One training step of transformers' GPT-2 of ``config``'s shape on a (B, T + 1) batch;
    ``math_attention`` selects PyTorch's math attention kernel."""
    model = hf_gpt2_like(config)
    optimizer = configure_adamw(model, 0.1, 1e-3, (0.9, 0.99), "cpu")
    device = torch.device("cpu")
    model.train()

    def step(batch: torch.Tensor) -> None:
        kernels = sdpa_kernel([SDPBackend.MATH]) if math_attention else nullcontext()
        with autocast(device, dtype), kernels:
            logits = model(input_ids=batch[:, :-1]).logits
        loss = F.cross_entropy(
            logits.reshape(-1, logits.size(-1)).float(), batch[:, 1:].reshape(-1)
        )
        loss.backward()
        clip_grad_norm(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def nanogpt_model_step(checkout: Path) -> Callable[[torch.Tensor], None]:
    """One training step of nanoGPT's own ``model.py`` (imported from the checkout, nothing of
    it copied) at the nanogpt-cpu shape, as its ``train.py`` takes one on a CPU: its GPT
    without biases, its ``configure_optimizers`` (AdamW, decay 0.1 on matrices, rate 1e-3,
    betas 0.9 and 0.99; unfused on a CPU), forward with the targets, backward, global-norm
    clipping at 1.0, the step and zeroed gradients. In this process, under this process's
    allocator settings, so that its step and light-llm's differ only in their code."""
    sys.path.insert(0, str(checkout))
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # its parameter and optimizer counts
            nanogpt_model = importlib.import_module("model")
            torch.manual_seed(0)
            model = nanogpt_model.GPT(
                nanogpt_model.GPTConfig(
                    n_layer=4, n_head=4, n_embd=128, block_size=64, bias=False,
                    vocab_size=VOCAB_SIZES["nanogpt-cpu"], dropout=0.0,
                )
            )  # fmt: skip
            optimizer = model.configure_optimizers(0.1, 1e-3, (0.9, 0.99), "cpu")
    finally:
        sys.path.remove(str(checkout))

    def step(batch: torch.Tensor) -> None:
        inputs, targets = batch[:, :-1].contiguous(), batch[:, 1:].contiguous()  # as its get_batch
        _, loss = model(inputs, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def tokens_per_second(step, batch_size: int, block_size: int, vocab: int, steps: int, seed: int):
    generator = torch.Generator().manual_seed(seed)
    batches = [
        torch.randint(0, vocab, (batch_size, block_size + 1), generator=generator)
        for _ in range(steps)
    ]
    start = time.perf_counter()
    for batch in batches:
        step(batch)
    return steps * batch_size * block_size / (time.perf_counter() - start)


def timed_dtypes() -> tuple[str, ...]:
    """float32, and bfloat16 where this CPU multiplies it in hardware."""
    return ("float32", "bfloat16") if cpu_has_native_bfloat16() else ("float32",)


def variants_of(name: str, nanogpt: Path | None) -> dict[str, tuple[Callable, str]]:
    """label -> (step on a batch, dtype of its matmuls); with nanoGPT's checkout at its
    shape, its model's step too."""
    config = preset(name, vocab_size=VOCAB_SIZES[name])
    variants = {}
    dtypes = timed_dtypes()
    presets = {"light-llm": name}
    if name in GPT2_TWINS:
        presets[GPT2_LABEL] = GPT2_TWINS[name]
    for label, preset_name in presets.items():
        for dtype in dtypes:
            torch.manual_seed(0)
            light = step_timer(["--preset", preset_name, "--dtype", dtype], VOCAB_SIZES[name])
            variants[f"{label} {dtype}"] = (lambda batch, light=light: light(), dtype)
    if name in GPT2_LIKE:
        for label, dtype, math_attention in (
            ("transformers float32", "float32", False),
            ("transformers bfloat16", "bfloat16", False),
            ("transformers bf16+math", "bfloat16", True),
        ):
            if dtype in dtypes:
                torch.manual_seed(0)
                variants[label] = (hf_step(config, dtype, math_attention), dtype)
    if nanogpt is not None and name == "nanogpt-cpu":
        variants[NANOGPT_MODEL_LABEL] = (nanogpt_model_step(nanogpt), "float32")
    return variants


def bench_shape(
    name: str, rounds: int, steps: int, nanogpt: Path | None, iters: int, loop_iters: int
) -> None:
    config = preset(name, vocab_size=VOCAB_SIZES[name])
    batch_size = PRESET_RECIPES[name].get("batch_size", 12)
    shape = (batch_size, config.block_size, config.vocab_size)
    variants = variants_of(name, nanogpt)
    for step, _ in variants.values():  # warm-up: allocator, oneDNN kernels
        tokens_per_second(step, *shape, 2, seed=0)
    rates: dict[str, list[float]] = {label: [] for label in variants}
    dtypes = {label: dtype for label, (_, dtype) in variants.items()}
    with_nanogpt = nanogpt is not None and name == "nanogpt-cpu"
    trained = default_dtype(torch.device("cpu"))  # bfloat16 where the trainer takes it
    processes = torch.get_num_threads()  # in --processes, one a thread, if the batch divides
    with_processes = with_nanogpt and processes > 1 and batch_size % processes == 0
    if with_nanogpt:
        rates[NANOGPT_LABEL], rates[TRAINER_LABEL] = [], []
        dtypes[NANOGPT_LABEL], dtypes[TRAINER_LABEL] = "float32", trained
    if with_processes:
        rates[PROCESSES_LABEL], dtypes[PROCESSES_LABEL] = [], trained
    with tempfile.TemporaryDirectory() as folder:
        data = write_nanogpt_dataset(Path(folder)) if with_nanogpt else None
        for round_index in range(rounds):
            for label, (step, _) in variants.items():
                rates[label].append(tokens_per_second(step, *shape, steps, round_index))
            if with_nanogpt:  # its turn, after light-llm's variants in every round
                rates[NANOGPT_LABEL].append(nanogpt_tokens_per_second(nanogpt, data, iters))
                rates[TRAINER_LABEL].append(  # and light-llm's whole loop, as a user runs it
                    trainer_tokens_per_second(Path(folder), loop_iters, round_index)
                )
            if with_processes:
                rates[PROCESSES_LABEL].append(
                    trainer_tokens_per_second(Path(folder), loop_iters, round_index, processes)
                )
    medians = {label: statistics.median(values) for label, values in rates.items()}
    flops = train_flops_per_token(config)
    print(
        f"\n{name}: {config.n_layer} layers, {config.n_head} heads, {config.n_embd} wide, "
        f"context {config.block_size}, batch {batch_size}, vocabulary {config.vocab_size}, "
        f"dropout {config.dropout}; {flops / 1e6:.2f} MFLOPs a training token (ModelCounts); "
        f"{rounds} rounds x {steps} steps, median tokens/s"
    )
    for label, rate in medians.items():
        dtype = matmul_dtype(dtypes[label])
        peak = peak_matmul_flops(dtype, torch.get_num_threads())
        mfu = model_flops_utilisation(rate, flops, peak)
        spread = f"range {min(rates[label]):,.0f} .. {max(rates[label]):,.0f}"
        if label == NANOGPT_LABEL:
            spread += f"; a run of {iters} iterations a round"
        if label in (TRAINER_LABEL, PROCESSES_LABEL):
            spread += f"; {trained}, a run of {loop_iters} iterations a round"
        if label == PROCESSES_LABEL:
            spread += f"; {processes} processes of batch {batch_size // processes}"
        print(f"  {label:<28} {rate:>9,.0f} tokens/s  MFU {mfu:6.1%}   ({spread})")
    if nanogpt is None and name == "nanogpt-cpu":
        print("  nanoGPT: not measured (give --nanogpt-dir DIR, a checkout of karpathy/nanoGPT)")
    if "bfloat16" not in timed_dtypes():
        print(
            f"  bfloat16: not timed (this CPU, {torch.backends.cpu.get_cpu_capability()}, "
            "has no bfloat16 arithmetic: the trainer takes float32)"
        )
    gpt2 = GPT2_LABEL if f"{GPT2_LABEL} float32" in medians else "light-llm"
    comparisons = {
        "light-llm bfloat16 / float32": ("light-llm bfloat16", "light-llm float32"),
        f"{gpt2} / transformers, both float32": (f"{gpt2} float32", "transformers float32"),
        f"{gpt2} / transformers, both bfloat16, each with its attention": (
            f"{gpt2} bfloat16",
            "transformers bfloat16",
        ),
        f"{gpt2} bfloat16 / transformers bfloat16 with the math kernel": (
            f"{gpt2} bfloat16",
            "transformers bf16+math",
        ),
        f"{gpt2} bfloat16 / transformers float32 (its default)": (
            f"{gpt2} bfloat16",
            "transformers float32",
        ),
        "light-llm float32 / nanoGPT (float32)": ("light-llm float32", NANOGPT_LABEL),
        "light-llm float32 / nanoGPT's model step in this process": (
            "light-llm float32",
            NANOGPT_MODEL_LABEL,
        ),
        "nanoGPT's model step in this process / its train.py": (
            NANOGPT_MODEL_LABEL,
            NANOGPT_LABEL,
        ),
        "light-llm train / nanoGPT's train.py, loop for loop": (TRAINER_LABEL, NANOGPT_LABEL),
        "light-llm train in one-thread processes / nanoGPT's train.py, loop for loop": (
            PROCESSES_LABEL,
            NANOGPT_LABEL,
        ),
        "light-llm train in one-thread processes / in one process": (
            PROCESSES_LABEL,
            TRAINER_LABEL,
        ),
        f"light-llm {trained} (the trainer's arithmetic here) / nanoGPT": (
            f"light-llm {trained}",
            NANOGPT_LABEL,
        ),
    }
    if trained == "float32":  # the trainer's arithmetic here is the float32 line's above
        del comparisons[f"light-llm {trained} (the trainer's arithmetic here) / nanoGPT"]
    for what, (ours, theirs) in comparisons.items():
        if ours in medians and theirs in medians:
            print(f"  ratio {what}: {medians[ours] / medians[theirs]:.2f}x")


def trainer_tokens_per_second(folder: Path, iters: int, seed: int, processes: int = 1) -> float:
    """``light-llm train --preset nanogpt-cpu`` (nanoGPT's recipe on the packaged Shakespeare,
    character-level) for ``iters`` iterations in a subprocess with this process's threads and
    no evaluation, probe or sample inside the loop: the median of the tokens a second its
    metrics.jsonl logs (the figures of its progress lines) for every 10 iterations after the
    first :data:`TRAINER_SKIPPED` (warm-up, and the thread governor's trial of one thread), as
    nanoGPT's figure is the median of its iterations after its first few. With ``processes``
    > 1, with ``--processes`` instead (as torchrun starts them): that many processes of one
    thread each, each computing an equal share of the batch of 12 as one micro-batch
    (--grad-accum), their gradients averaged in shared memory
    (light_llm.train.shared_gradients)."""
    out = folder / f"light-llm-{seed}-{processes}"
    split: list[str] = []
    if processes > 1:
        split = ["--batch-size", str(12 // processes), "--grad-accum", str(processes)]
        split += ["--processes", str(processes)]
    command = [
        sys.executable, "-m", "light_llm", "train", "--preset", "nanogpt-cpu", *split,
        "--max-iters", str(iters), "--eval-interval", str(iters), "--probe-interval", "0",
        "--sample-tokens", "0", "--seed", str(seed), "--out", str(out),
    ]  # fmt: skip
    run_with_our_threads(command, "light-llm train", threads=torch.get_num_threads() // processes)
    rates = [
        record["tokens_per_s"]
        for record in training_records(MetricsLog(out).records())
        if record["iter"] > TRAINER_SKIPPED
    ]
    if not rates:
        sys.exit(f"light-llm train printed no tokens/s after iteration {TRAINER_SKIPPED}.")
    return statistics.median(rates)


def write_nanogpt_dataset(folder: Path) -> Path:
    """The packaged Shakespeare as nanoGPT's shakespeare_char dataset in ``folder``: its
    character-level train.bin / val.bin (uint16 ids, a 90/10 split) and meta.pkl."""
    data = folder / "shakespeare_char"
    data.mkdir()
    text = shakespeare_text()
    chars = sorted(set(text))
    stoi = {ch: i for i, ch in enumerate(chars)}
    ids = np.array([stoi[ch] for ch in text], dtype=np.uint16)
    cut = int(0.9 * len(ids))  # nanoGPT's prepare.py split
    ids[:cut].tofile(data / "train.bin")
    ids[cut:].tofile(data / "val.bin")
    meta = {"vocab_size": len(chars), "itos": dict(enumerate(chars)), "stoi": stoi}
    (data / "meta.pkl").write_bytes(pickle.dumps(meta))
    return data


def nanogpt_tokens_per_second(checkout: Path, data: Path, iters: int) -> float:
    """nanoGPT's train.py on the nanogpt-cpu shape and its README's CPU settings, on the
    dataset folder ``data``, in a subprocess with this process's threads: tokens/s from its
    per-iteration times."""
    command = [
        sys.executable, "train.py", "config/train_shakespeare_char.py",
        f"--dataset={data}", f"--out_dir={data.parent / 'out'}",  # absolute: beside cwd
        "--device=cpu", "--compile=False", "--eval_iters=1", "--log_interval=1",
        "--block_size=64", "--batch_size=12", "--n_layer=4", "--n_head=4",
        "--n_embd=128", f"--max_iters={iters}", f"--lr_decay_iters={iters}",
        "--dropout=0.0", "--eval_interval=100000", "--always_save_checkpoint=False",
    ]  # fmt: skip
    stdout = run_with_our_threads(command, "nanoGPT's train.py", cwd=checkout)
    times = [float(ms) / 1e3 for it, ms in NANOGPT_LINE.findall(stdout) if int(it) > 0]
    times = times[NANOGPT_SKIPPED:]
    if not times:
        sys.exit("nanoGPT's train.py printed no iteration times.")
    return 12 * 64 / statistics.median(times)


def run_with_our_threads(
    command: list[str], name: str, cwd: Path | None = None, threads: int | None = None
) -> str:
    """Run ``command`` in a subprocess with this process's torch threads (or ``threads``);
    its stdout, or exit with the end of its stderr when it fails."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads or torch.get_num_threads()))
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{name} failed:\n{done.stderr[-2000:]}")
    return done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--shapes", nargs="+", default=["nanogpt-cpu", "qwen3-cpu", "bpe-cpu"], choices=VOCAB_SIZES
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    parser.add_argument("--nanogpt-dir", type=Path, help="a checkout of karpathy/nanoGPT")
    parser.add_argument("--nanogpt-iters", type=int, default=40)
    parser.add_argument(
        "--loop-iters", type=int, default=200, help="iterations of light-llm train's loop a round"
    )
    args = parser.parse_args()
    checkout = args.nanogpt_dir
    if checkout and not ((checkout / "train.py").is_file() and (checkout / "model.py").is_file()):
        sys.exit(f"--nanogpt-dir {checkout} holds no nanoGPT train.py and model.py.")
    if args.nanogpt_iters <= NANOGPT_SKIPPED + 1:
        sys.exit(f"--nanogpt-iters must be more than {NANOGPT_SKIPPED + 1}: the first are skipped.")
    if args.loop_iters <= TRAINER_SKIPPED + 10:
        sys.exit(f"--loop-iters must be more than {TRAINER_SKIPPED + 10}: the first are skipped.")
    if args.threads:
        torch.set_num_threads(args.threads)
    keep_freed_memory()  # as light-llm's trainer does on the CPU; every model runs under it
    transformers.logging.set_verbosity_error()
    print(
        f"torch {torch.__version__}, transformers {transformers.__version__}, "
        f"{torch.get_num_threads()} threads, CPU capability "
        f"{torch.backends.cpu.get_cpu_capability()}"
    )
    for dtype in (getattr(torch, name) for name in timed_dtypes()):
        peak = peak_matmul_flops(dtype, torch.get_num_threads())
        print(f"peak matmul, {str(dtype)[6:]}: {peak / 1e9:.1f} GFLOP/s (1024x1024, ~1 s)")
    if args.nanogpt_dir is None:
        print("nanoGPT: no --nanogpt-dir given, so nanoGPT's train.py is not run")
    for name in args.shapes:
        bench_shape(
            name, args.rounds, args.steps, args.nanogpt_dir, args.nanogpt_iters, args.loop_iters
        )


if __name__ == "__main__":
    main()
