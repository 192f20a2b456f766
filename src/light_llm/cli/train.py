"""``light-llm train``: train a model on a text, with progress, checkpoints and a loss curve.

With no flags it trains the ``qwen3-cpu`` GPT (a modern recipe measured against nanoGPT's at
equal wall time; ``--preset nanogpt-cpu`` is nanoGPT's) on Shakespeare, over a byte-level BPE
it first learns from the training split;
``--model bert`` trains a BERT-style encoder by masked-LM instead. Every flag left out
keeps its default: the preset's recipe, or on ``--resume`` the value the run was started with
(see :class:`light_llm.train.config.TrainConfig`).
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from light_llm.checkpoints.run import CHECKPOINT_SUBFOLDER, TRAINER_STATE_FILE
from light_llm.cli.model_flags import add_model_flags
from light_llm.cli.train_processes import check_inside, check_processes, run_processes
from light_llm.config import PRESETS
from light_llm.device import DEVICES
from light_llm.errors import ConfigError
from light_llm.muon_spec import MUON_SCALES, ORTHOGONALISERS
from light_llm.schedule import COOLDOWN_SHAPES, SCHEDULES
from light_llm.train.batches import SAMPLINGS
from light_llm.train.config import (
    DEFAULT_COOLDOWN,
    DEFAULT_COOLDOWN_SHAPE,
    DEFAULT_MODEL,
    DEFAULT_PRESETS,
    FINETUNE_RECIPE,
    FITTED_MAX_ITERS,
    FITTED_ON,
    GENERAL_DEFAULTS,
    LORA_DEFAULTS,
    LORA_RECIPE,
    OPTIMIZERS,
    PRESET_RECIPES,
    TRAINED_TOKENIZER_VOCAB,
)

DEFAULT_PRESET = DEFAULT_PRESETS[DEFAULT_MODEL]
# every setting of a run with no flags: the default preset's recipe over the general defaults;
# the help quotes these, so that it states the defaults that really apply
R = {**GENERAL_DEFAULTS, **PRESET_RECIPES[DEFAULT_PRESET]}
M = PRESETS[DEFAULT_PRESET]
V = TRAINED_TOKENIZER_VOCAB
# the default's length on a CPU, which follows the machine (train.config.fitted_length on the
# kinds of CPU its counts were fitted on, train.calibration elsewhere)
FITTED = {"float32": R["max_iters"], **FITTED_MAX_ITERS.get(DEFAULT_PRESET, {})}
LENGTH = "; ".join(
    f"{n} iterations in {key.split()[0]} on {FITTED_ON[key]}" for key, n in FITTED.items()
)
LENGTH += "; on another CPU, a count measured against nanoGPT's step at the start"


def default(key: str) -> str:
    """ "default X" for a flag's help: the value of a run with no flags, and when presets'
    recipes set other values, that they do."""
    values = {repr({**GENERAL_DEFAULTS, **recipe}.get(key)) for recipe in PRESET_RECIPES.values()}
    value = R[key]
    shown = (
        "--lr"
        if key == "embedding_lr" and value is None
        else f"{value:g}"
        if isinstance(value, float)
        else str(value)
    )
    others = "; each --preset's recipe sets its own" if len(values) > 1 else ""
    return f"default {shown}{others}"


# Muon's and AdamW's updates are normalised already: the default clips no gradient
CLIPPING = f"clipping at {R['grad_clip']:g}" if R["grad_clip"] else "no gradient clipping"
DESCRIPTION = f"""\
Train a GPT on a text file, or with no --data on all of Shakespeare's plays; with --model bert,
a BERT-style encoder by masked-LM (15% of the WordPiece tokens chosen; of those 80% [MASK],
10% a random token, 10% unchanged; the loss on the chosen ones only).

Defaults (no flags, --preset qwen3-cpu): a byte-level BPE of {V["bpe"]} ids learned from
the training split; {M.n_layer} layers, {M.n_head} heads, {M.n_embd} wide, context
{M.block_size} tokens, with rotary positions, RMSNorm, SwiGLU, QK-norm, an untied output
head and no biases (the model Qwen3 computes: light-llm export writes it as a Qwen3
folder); Muon for the matrices inside the blocks (peak lr {R["muon_lr"]}) and AdamW for the
rest (peak lr {R["lr"]}, the embedding tables {R["embedding_lr"]}; betas ({R["beta1"]},
{R["beta2"]})), warmed up over {R["warmup_iters"]} iterations, held for
{1 - R["cooldown_fraction"]:.0%} of the rest, then decayed in a straight line to
{R["min_lr"]:g} (--lr-schedule {R["lr_schedule"]}); batch
{R["batch_size"]}, a length fitted to the machine ({LENGTH}), weight decay
{R["weight_decay"]} (raised on a small corpus to average the weights over
{R["weight_decay_epochs"]} passes), windows read in shuffled passes over the text
(--sampling {R["sampling"]}), {CLIPPING}. It takes about
the wall time of nanoGPT's CPU recipe, --preset nanogpt-cpu
(128 wide, learned positions, LayerNorm, GELU and AdamW; batch 12, 2000 iterations, lr 1e-3,
cosine to 1e-4, betas (0.9, 0.99)), and ends far lower (benchmarks/recipe_sweep.py,
benchmarks/tokenizer_sweep.py). --preset bpe-cpu, the default before it, has ReLU² in place
of SwiGLU, logits soft-capped at 15, 4 layers of 4 heads, weight decay 0.1, a cosine decay, Muon at
0.02, betas (0.9, 0.99) and clipping at 1 (no HuggingFace architecture computes it),
--preset char-cpu is that one on characters. Other
presets bring their own recipe (--preset shakespeare-char: batch 64, 5000 iterations,
dropout 0.2); any flag overrides it. GPT
presets: {", ".join(PRESETS)}. BERT presets: bert-shakespeare (the default with
--model bert), minilm-l6 (the shape of the packaged MiniLM).

Writes to --out: checkpoint/ (model, tokenizer, optimizer and trainer state, replaced as a
unit), metrics.jsonl (the training loss every --log-interval steps, "kind": "train", and one
line per evaluation, "kind": "eval"; losses also in bits per byte and per character),
loss_curve.png, data/ (the token cache). Ctrl-C stops after the current iteration and saves;
--resume continues exactly, on the engine that started the run (the NumPy engine too); an
optimizer or schedule flag given with it (--lr, --weight-decay...) is taken from there on, and
said.
--resume --max-iters beyond the run's end goes on at the final learning rate, or at --min-lr
(--restretch-schedule stretches the schedule instead); a final rate of 0, the default's, is refused.
Under torchrun the same command trains data-parallel: on one machine's CPU the processes
average their gradients in shared memory, each taking the optimizer's step for its share of
the parameters, elsewhere with DistributedDataParallel. --processes N starts the N processes
itself, as torchrun --standalone --nproc_per_node N would, each with an N-th of the cores (at
small shapes one process of one thread a core beats one process's threads: light-llm train
--preset nanogpt-cpu --batch-size 6 --grad-accum 2 --processes 2).
"""

EXAMPLES = """\
examples:
  light-llm train                                   # Shakespeare, about two minutes
  light-llm train --data my.txt --max-iters 500 --out out-mine
  light-llm train --preset shakespeare-char --dtype bfloat16
  light-llm train --resume --max-iters 4000         # continue (and extend) the run in --out
  light-llm train --time 5m --out out-5m            # as many iterations as fit in 5 minutes
  light-llm train --model bert --out out-bert       # masked-LM encoder on Shakespeare
  light-llm train --tokenizer bpe --vocab-size 1024 --out out-bpe   # your own BPE
  light-llm train --init-from out-light-llm --data hamlet.txt --out out-ft   # fine-tune
  light-llm train --init-from out-light-llm --data hamlet.txt --lora-rank 8 --out out-lora
  light-llm merge --checkpoint out-lora --out merged   # adapters folded into the weights
  light-llm fill-mask --checkpoint out-bert "to be or not to [MASK]"
  light-llm train --preset nanogpt-cpu --batch-size 6 --grad-accum 2 --processes 2
  torchrun --nproc_per_node=2 -m light_llm train --grad-accum 2   # processes by torchrun
"""

# (model, engine) -> "module:function" of the trainer taking a TrainConfig.
TRAINERS = {
    ("gpt", "torch"): "light_llm.train.trainer:train",
    ("gpt", "numpy"): "light_llm.train.numpy_trainer:train_numpy",
    ("bert", "torch"): "light_llm.train.trainer:train_mlm",
}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "train",
        help="train a GPT (default: Shakespeare, over a BPE learned from it)",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    data = parser.add_argument_group("data")
    data.add_argument("--data", metavar="PATH", help="a UTF-8 text file (default: Shakespeare)")
    data.add_argument(
        "--tokenizer",
        metavar="NAME|DIR",
        help="GPT: bpe (byte-level BPE learned from the training split; the default), char or "
        "gpt2 (GPT-2's byte-level BPE); BERT: bert (the packaged WordPiece) or wordpiece "
        "(learned); or a folder written by `light-llm tokenizer train`",
    )
    data.add_argument(
        "--vocab-size",
        type=int,
        metavar="N",
        help=f"ids of the bpe or wordpiece tokenizer to learn (default {V['bpe']} for bpe, "
        f"{V['wordpiece']} for wordpiece, or fewer if a small text cannot give that many; "
        "bpe: at least 257, the 256 bytes and <|endoftext|>)",
    )

    tune = parser.add_argument_group(
        "fine-tuning (a trained model's shape and tokenizer; AdamW from a fresh state, "
        f"lr {FINETUNE_RECIPE['lr']:g}, {FINETUNE_RECIPE['max_iters']} iterations; "
        f"LoRA lr {LORA_RECIPE['lr']:g}, no weight decay)"
    )
    tune.add_argument(
        "--init-from",
        metavar="DIR",
        help="start from this model folder (a light-llm checkpoint or training output, or a "
        "HuggingFace GPT-2, Llama or Qwen3 folder) on --data",
    )
    tune.add_argument(
        "--lora-rank",
        type=int,
        metavar="R",
        help="train LoRA adapters W' = W + (alpha/R) B A of rank R on a frozen base "
        "(the checkpoint then holds only the adapters)",
    )
    tune.add_argument("--lora-alpha", type=float, metavar="A", help="LoRA scale alpha (R)")
    tune.add_argument(
        "--lora-dropout", type=float, metavar="P", help="dropout on the LoRA input (0)"
    )
    tune.add_argument(
        "--lora-targets",
        metavar="NAMES",
        help="comma-separated layers to adapt: c_attn, c_proj, c_fc, c_v, lm_head, or a longer "
        f"suffix such as mlp.c_proj (default {LORA_DEFAULTS['lora_targets']}, and c_v with "
        "SwiGLU)",
    )

    model = parser.add_argument_group("model")
    model.add_argument(
        "--model",
        choices=sorted({name for name, _ in TRAINERS}),
        help="architecture: gpt (default) or bert (masked-LM encoder); --resume: the run's",
    )
    model.add_argument(
        "--engine",
        choices=sorted({engine for _, engine in TRAINERS}),
        default=None,
        help="implementation to train with (default torch; a resumed run goes on with its own)",
    )
    model.add_argument(
        "--preset",
        help="model shape and its recipe (default qwen3-cpu; with --model bert, bert-shakespeare)",
    )
    add_model_flags(model)
    model.add_argument(
        "--zero-init-projections",
        action="store_const",
        const=True,
        help="start each block's output projections (attention's W^O, the MLP's W_2) at zero, "
        "so that every block starts as the identity (modded-nanogpt's zero-init; the other "
        "weights are drawn as without it; a new model only, not with --init-from)",
    )

    optim = parser.add_argument_group("optimisation")
    optim.add_argument(
        "--batch-size",
        type=int,
        metavar="B",
        help=f"sequences per micro-batch ({default('batch_size')})",
    )
    optim.add_argument(
        "--grad-accum",
        type=int,
        metavar="G",
        help=f"micro-batches per step, over all processes ({default('grad_accum')})",
    )
    optim.add_argument(
        "--sampling",
        choices=SAMPLINGS,
        help="where the training windows start: uniform, each drawn at random (nanoGPT's), or "
        "passes, shuffled passes over the training split that read every token once a pass "
        f"({default('sampling')})",
    )
    optim.add_argument(
        "--batch-warmup",
        type=int,
        metavar="N",
        help="batch-size warmup: the first N iterations draw micro-batches of "
        "--batch-warmup-size sequences, then --batch-size ones; tokens are counted at each "
        f"iteration's size (0 = off, {default('batch_warmup')}; not with --time)",
    )
    optim.add_argument(
        "--batch-warmup-size",
        type=int,
        metavar="B0",
        help="the sequences of each micro-batch during --batch-warmup, from 1 to --batch-size - 1",
    )
    optim.add_argument(
        "--context-warmup",
        type=int,
        metavar="N",
        help="sequence-length warmup: the first N iterations train on windows of "
        "--context-warmup-size tokens, then of the model's context (--block-size); evaluations "
        f"always read whole blocks (0 = off, {default('context_warmup')}; not with --time, "
        "GPT only)",
    )
    optim.add_argument(
        "--context-warmup-size",
        type=int,
        metavar="T0",
        help="the tokens of each training window during --context-warmup, from 1 to "
        "--block-size - 1",
    )
    optim.add_argument(
        "--max-iters",
        type=int,
        metavar="N",
        help=f"optimiser steps ({default('max_iters')}; the default preset's: {LENGTH})",
    )
    optim.add_argument("--lr", type=float, help=f"peak learning rate ({default('lr')})")
    optim.add_argument(
        "--min-lr",
        type=float,
        help=f"learning rate at the end of the decay ({default('min_lr')})",
    )
    optim.add_argument(
        "--warmup-iters",
        type=int,
        metavar="N",
        help=f"linear warmup steps ({default('warmup_iters')})",
    )
    optim.add_argument(
        "--lr-decay-iters", type=int, metavar="N", help="step where the decay ends (max-iters)"
    )
    optim.add_argument(
        "--lr-schedule",
        choices=SCHEDULES,
        help="after warmup: cosine decay, or wsd: the peak held, then a cooldown "
        f"({default('lr_schedule')})",
    )
    optim.add_argument(
        "--cooldown-fraction",
        type=float,
        metavar="F",
        help="wsd: the share of the steps after warmup spent cooling down "
        f"({default('cooldown_fraction')}; {DEFAULT_COOLDOWN} when a preset sets none)",
    )
    optim.add_argument(
        "--cooldown-shape",
        choices=COOLDOWN_SHAPES,
        help="wsd: the cooldown falls from the peak to the floor in a straight line, or as "
        f"1 - sqrt of its progress (Hägele et al. 2024), faster at first (default "
        f"{DEFAULT_COOLDOWN_SHAPE})",
    )
    optim.add_argument("--beta1", type=float, help=f"AdamW beta1 ({default('beta1')})")
    optim.add_argument("--beta2", type=float, help=f"AdamW beta2 ({default('beta2')})")
    optim.add_argument(
        "--weight-decay", type=float, help=f"AdamW decay on matrices ({default('weight_decay')})"
    )
    optim.add_argument(
        "--weight-decay-epochs",
        type=float,
        metavar="E",
        help="raise the weight decay of a new run to 1 / (lr E M), M the steps of one pass over "
        "the training split, so that the weights average over E >= 1 passes (Wang & "
        f"Aitchison 2025; {default('weight_decay_epochs')}; --weight-decay alone turns it off)",
    )
    optim.add_argument(
        "--grad-clip",
        type=float,
        help=f"global gradient norm bound, 0 = off ({default('grad_clip')})",
    )
    optim.add_argument(
        "--label-smoothing", type=float, metavar="A", help=f"alpha ({default('label_smoothing')})"
    )
    optim.add_argument(
        "--optimizer",
        choices=OPTIMIZERS,
        help="adamw, or muon: Muon for the matrices inside the blocks, AdamW (--lr, --beta1, "
        f"--beta2) for embeddings, head, norms and biases ({default('optimizer')})",
    )
    optim.add_argument(
        "--muon-lr",
        type=float,
        metavar="LR",
        help=f"peak lr of Muon's matrices ({default('muon_lr')}); the schedule scales it",
    )
    optim.add_argument(
        "--muon-momentum",
        type=float,
        metavar="MU",
        help=f"Muon momentum ({default('muon_momentum')})",
    )
    optim.add_argument(
        "--muon-orthogonaliser",
        choices=ORTHOGONALISERS,
        help="how Muon orthogonalises its momentum: Keller Jordan's quintic Newton-Schulz, 5 "
        "times, or Polar Express's 5 quintics, one per step "
        f"({default('muon_orthogonaliser')})",
    )
    optim.add_argument(
        "--muon-scale",
        choices=MUON_SCALES,
        help="the shape scale s of Muon's step -η s O on a (d_out, d_in) matrix: keller, "
        "sqrt(max(1, d_out/d_in)) (Keller Jordan's); aspect, sqrt(longer side / shorter), "
        f"which raises a wide matrix as much as its transpose ({default('muon_scale')})",
    )
    optim.add_argument(
        "--cautious-weight-decay",
        action="store_const",
        const=True,
        help="decay only the weights whose update agrees with them in sign (Cautious Weight "
        "Decay; Muon + AdamW only)",
    )
    optim.add_argument(
        "--normuon",
        action="store_const",
        const=True,
        help="NorMuon: divide each output neuron's row of Muon's update by the root of its "
        "running mean square, then scale the update back to its norm (Muon + AdamW only)",
    )
    optim.add_argument(
        "--muon-momentum-warmup",
        type=int,
        metavar="N",
        help="raise Muon's momentum linearly from 0.85 to --muon-momentum over the first N "
        f"steps, 0 = off ({default('muon_momentum_warmup')}; Muon + AdamW only)",
    )
    optim.add_argument(
        "--ema-beta",
        type=float,
        metavar="B",
        help="keep a moving average of the weights, avg = B avg + (1 - B) weights after every "
        "step (0 < B < 1), and evaluate, save and sample it; the optimizer trains the raw "
        "weights, which the checkpoint keeps beside it (default: no average)",
    )
    optim.add_argument(
        "--ema-start",
        type=int,
        metavar="N",
        help="start the --ema-beta average at the weights after N steps (default 0)",
    )
    optim.add_argument(
        "--embedding-lr",
        type=float,
        metavar="LR",
        help=f"peak AdamW lr of the token and position tables ({default('embedding_lr')}); the "
        "schedule scales it, and their weight decay per step stays --lr times --weight-decay",
    )

    length = parser.add_argument_group("length of the run and its log")
    length.add_argument(
        "--time",
        metavar="DURATION",
        help="train for this wall-clock time (90 or 90s, 5m, 1h, 1h30m) instead of --max-iters: "
        "the speed measured during the warmup fixes the iteration count, which the checkpoint "
        "records, and the learning-rate schedule decays to it",
    )
    length.add_argument(
        "--log-interval",
        type=int,
        metavar="N",
        help="record the training loss every N steps in metrics.jsonl; outside a terminal also "
        f"print a line ({default('log_interval')})",
    )
    length.add_argument(
        "--restretch-schedule",
        action="store_true",
        help="with --resume --max-iters beyond the run's end: stretch the decay to the new end "
        "(the learning rate rises again) instead of going on at the final learning rate",
    )

    run = parser.add_argument_group("evaluation, output and running")
    run.add_argument(
        "--eval-interval",
        type=int,
        metavar="N",
        help=f"evaluate every N steps ({default('eval_interval')})",
    )
    run.add_argument(
        "--eval-iters",
        type=int,
        metavar="N",
        help=f"batches per evaluation ({default('eval_iters')})",
    )
    run.add_argument(
        "--sample-tokens",
        type=int,
        metavar="N",
        help="tokens of the final sample (BERT: N > 0 prints fill-mask predictions; 0: none; "
        f"{default('sample_tokens')})",
    )
    run.add_argument(
        "--probe-interval",
        type=int,
        metavar="N",
        help="record probes (next token, attention, logit lens, head roles and importance, a "
        "sample) in OUT/probes every N steps and at every evaluation, for the explorer to "
        "replay (default: a fifth of --eval-interval; 0: none)",
    )
    run.add_argument(
        "--probe-prompt",
        metavar="TEXT",
        help="the prompt the probes read (default: 'It is the east, and Juliet is the' on "
        "Shakespeare, else the first 32 tokens of the validation split)",
    )
    run.add_argument(
        "--serve",
        nargs="?",
        const=8000,
        type=int,
        metavar="PORT",
        help="start the explorer beside the run once its first checkpoint is written (port "
        "8000 unless given) and print its address: the curves, probes and sample grow as it "
        "trains; it stays up after the run until Ctrl-C",
    )
    run.add_argument("--out", metavar="DIR", help="output folder (default ./out-light-llm)")
    run.add_argument(
        "--device", choices=DEVICES, help="default auto; on --resume, the one the run began on"
    )
    run.add_argument(
        "--dtype",
        choices=["float32", "bfloat16", "float16"],
        help="default: bfloat16 autocast where the GPU or CPU has bfloat16 arithmetic, else "
        "float32; float16 (with loss scaling) needs CUDA",
    )
    run.add_argument("--seed", type=int, help=f"random seed ({default('seed')})")
    run.add_argument("--compile", action="store_true", help="torch.compile the model")
    run.add_argument(
        "--gradient-checkpointing",
        action="store_true",
        help="recompute block activations in the backward pass to save memory",
    )
    run.add_argument(
        "--processes",
        type=int,
        default=1,
        metavar="N",
        help="train in N processes, each with an N-th of the cores and of the --grad-accum "
        "micro-batches (a multiple of N), as torchrun --standalone --nproc_per_node N would "
        "start them; on a CPU their gradients meet in shared memory (at small shapes faster "
        "than one process's threads: --preset nanogpt-cpu --batch-size 6 --grad-accum 2 "
        "--processes 2; default 1)",
    )
    run.add_argument("--resume", action="store_true", help="continue the run saved in --out")
    run.add_argument(
        "--overwrite", action="store_true", help="start afresh even if --out holds a run"
    )
    parser.set_defaults(func=run_train)


def config_from_args(args: argparse.Namespace):
    """A TrainConfig holding exactly the flags given (the rest None: defaults apply later)."""
    from light_llm.train.config import TrainConfig

    values = {
        key: value
        for key, value in vars(args).items()
        if key in TrainConfig.__dataclass_fields__ and value is not None
    }
    return TrainConfig(**values)


def run_train(args: argparse.Namespace) -> int:
    from light_llm.train.config import DEFAULT_MODEL
    from light_llm.train.resume import resumable_checkpoint, saved_run_config

    config = config_from_args(args)
    saved = saved_run_config(config.out) if config.resume else None
    if config.model is None:  # a resumed run goes on with its own architecture
        config.model = (saved and saved.model) or DEFAULT_MODEL
    if args.engine is None:  # and with its own engine
        config.engine = (saved and saved.engine) or "torch"
    target = TRAINERS.get((config.model, config.engine))
    if target is None:
        available = ", ".join(f"{model} on {engine}" for model, engine in TRAINERS)
        raise ConfigError(
            f"there is no trainer for {config.model} on the {config.engine} engine; "
            f"available: {available}."
        )
    module_name, function_name = target.split(":")
    check_inside(args.processes)
    if args.processes != 1 and "WORLD_SIZE" not in os.environ:  # this command starts them
        if config.resume:  # nothing to go on from is said before the batch it would keep
            resumable_checkpoint(config.out)
        resolved = (saved or config).resolve()  # a resumed run keeps its batch
        check_processes(
            args.processes,
            resolved.batch_size,
            resolved.grad_accum,
            config.engine,
            resumed=saved is not None,
        )  # (so more than one from here)
        return beside_the_run(args, config, lambda: run_processes(args.argv, args.processes))
    trainer = getattr(importlib.import_module(module_name), function_name)

    def train() -> int:
        return 130 if trainer(config).interrupted else 0

    return beside_the_run(args, config, train)


def serves_here(args: argparse.Namespace) -> bool:
    """Whether this process starts the explorer --serve asks for: the command the learner ran,
    not a process it started (under torchrun, process 0 alone)."""
    if args.serve is None:
        return False
    if "WORLD_SIZE" not in os.environ:
        return True
    started_by_processes = args.processes != 1  # the command's --processes serves beside them
    return not started_by_processes and os.environ.get("RANK", "0") == "0"


def beside_the_run(args: argparse.Namespace, config, train: Callable[[], int]) -> int:
    """``train()``'s exit code, with the explorer beside the run where --serve asks for it."""
    if not serves_here(args):
        return train()
    beside = ExplorerBeside(Path(config.out), args.serve)
    try:
        code = train()
    except BaseException:
        beside.stop()
        raise
    return beside.stay(code)


class ExplorerBeside:
    """``light-llm serve --checkpoint OUT`` in a process of its own (its own session: the
    trainer's Ctrl-C is not its), started by a watcher thread as soon as the run's first
    checkpoint is there, or at the run's end if the run ended before the watcher looked. A
    lock keeps the watcher's start and the end's stop apart, so that no explorer is started
    after the command has chosen to end (it would outlive it). The explorer reads a pipe from
    this process and ends when it closes, so that it ends with the command even when the
    command is killed outright (kill -9), which no handler sees."""

    POLL_S = 0.5
    STOP_GRACE_S = 5.0  # the explorer's time to shut down on its own before it is killed

    def __init__(self, out: Path, port: int) -> None:
        from light_llm.cli.serve import listening_socket

        listening_socket("127.0.0.1", port, "--serve").close()  # a taken port: before the run
        self.out, self.port = out, port
        self.process: subprocess.Popen | None = None
        self.stopped = threading.Event()
        self.lock = threading.Lock()
        threading.Thread(target=self.watch, daemon=True).start()

    def start_if_ready(self) -> bool:
        """Start the explorer if the run has a checkpoint and none runs yet (the caller holds
        the lock); whether there is one."""
        if (
            self.process is None
            and (self.out / CHECKPOINT_SUBFOLDER / TRAINER_STATE_FILE).is_file()
        ):
            command = [sys.executable, "-m", "light_llm", "serve", "--checkpoint"]
            command += [str(self.out), "--port", str(self.port), "--end-with-stdin"]
            self.process = subprocess.Popen(command, start_new_session=True, stdin=subprocess.PIPE)
        return self.process is not None

    def watch(self) -> None:
        while not self.stopped.wait(self.POLL_S):
            with self.lock:
                if self.stopped.is_set() or self.start_if_ready():
                    return

    def stop(self) -> None:
        """Stop the explorer: asked to end (SIGTERM), killed if it has not after
        ``STOP_GRACE_S`` seconds, so that Ctrl-C ends the command promptly on a busy machine."""
        with self.lock:
            self.stopped.set()
            process = self.process
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=self.STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process is not None and process.stdin is not None:
            process.stdin.close()

    def stay(self, status: int) -> int:
        """After the run: keep the explorer up until Ctrl-C or SIGTERM, which stop it (or
        until it stops); ``status``, the run's exit status."""
        with self.lock:
            self.stopped.set()
            self.start_if_ready()  # a run that ended before the watcher saw its checkpoint
            process = self.process
        if process is None or process.poll() is not None:
            return status
        on_main_thread = threading.current_thread() is threading.main_thread()
        if on_main_thread:  # SIGTERM (kill, timeout, a service manager) ends it as Ctrl-C does
            previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
        try:  # a sleep, not a blocking wait for the process: Ctrl-C is handled within POLL_S
            print(
                "training has ended; the explorer stays up with its history (Ctrl-C stops it)",
                flush=True,
            )
            while process.poll() is None:
                time.sleep(self.POLL_S)
        except KeyboardInterrupt:
            self.stop()
        finally:
            if on_main_thread:
                signal.signal(signal.SIGTERM, previous)
        return status
