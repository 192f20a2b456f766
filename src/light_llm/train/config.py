"""``TrainConfig``: every setting of a training run, one field per ``light-llm train`` flag.

A field left at None means "not given": it is filled in by :meth:`TrainConfig.resolve`, in
this order: the value given; on ``--resume``, the value the run was started with; the
recipe of the model preset (nanoGPT's recipes for its shapes, ``PRESET_RECIPES``); the
general defaults (``GENERAL_DEFAULTS``, with the seed's AdamW betas 0.9 / 0.95).

Two exceptions to "a resumed run goes on as it was started": a ``time`` run records the
iteration count its budget gave as ``max_iters`` (:mod:`light_llm.train.budget`), and a
resume that extends a run beyond its end pins ``lr_decay_iters`` (at the old end, or with
``restretch_schedule`` at the new one) so that the schedule says what it does.

The defaults as a whole are the main job: ``light-llm train`` with no flags trains the
``qwen3-cpu`` preset on Shakespeare: nanoGPT's CPU shape made narrower and shallower (3 layers, 2
heads, 96 wide, context 64) with rotary positions, RMSNorm, SwiGLU, QK-norm, an untied head and no
biases (the model Qwen3 computes, so that ``light-llm export`` writes it as one), over a
byte-level BPE learned from the training split (768 ids; 1536 from a large text,
:func:`fitted_vocab_size`), trained by Muon + AdamW at batch 32 for no longer than nanoGPT's
CPU recipe takes. ``bpe-cpu`` is the default before it (ReLU² and
soft-capped logits: as good, docs/recipe.md, but no HuggingFace architecture computes it), and
``char-cpu`` that one on characters. nanoGPT's recipe stays one flag away as
``nanogpt-cpu`` (nanoGPT's model: no biases, as its train.py's bias=False; ``char-baby`` is the
same shape and recipe with GPT-2's biases, under light-llm's older name): batch 12, 2000
iterations, lr 1e-3 after 100 warmup iterations, cosine to 1e-4 at 2000,
beta2 0.99, weight decay 0.1, clipping at 1.0, dropout 0. ``benchmarks/recipe_sweep.py``
and ``benchmarks/tokenizer_sweep.py`` measure them against each other.

``init_from`` fine-tunes a trained GPT (a light-llm checkpoint or training output, or a
HuggingFace GPT-2 folder): the model's shape and tokenizer are then the checkpoint's (only
``dropout`` may change), the optimizer and schedule start afresh, and the recipe layer is
``FINETUNE_RECIPE`` instead of a preset's. ``lora_rank`` trains LoRA adapters on it instead
of every weight (:mod:`light_llm.nn.lora`), with ``LORA_RECIPE``: AdamW at a higher lr, no
weight decay.

``model`` picks the architecture and with it the table of presets: the GPT's
(:data:`light_llm.config.PRESETS`) or the encoder's
(:data:`light_llm.models.bert.ENCODER_PRESETS`, trained by masked-LM with the ``bert``
WordPiece tokenizer; default ``bert-shakespeare``).
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from light_llm.config import PRESETS, ModelConfig
from light_llm.errors import ConfigError, flag
from light_llm.limits import (
    MAX_BATCH_SIZE,
    MAX_EVAL_BATCHES,
    MAX_VOCAB_SIZE,
    check_flag,
    check_integer,
    check_real,
    check_seed,
    is_integer,
    is_real,
)
from light_llm.muon_spec import MUON_SCALE_BEFORE_CHOICE, MUON_SCALES, ORTHOGONALISERS
from light_llm.schedule import (
    COOLDOWN_SHAPES,
    SCHEDULES,
    learning_rate,
    muon_momentum,
    tokens_before,
    warmup_size,
)
from light_llm.train.batches import SAMPLINGS, pass_window_starts
from light_llm.train.budget import MIN_WARMUP_FOR_BUDGET, parse_duration

MODELS = ("gpt", "bert")
# warmup-stable-decay's cooldown when --lr-schedule wsd comes without --cooldown-fraction
DEFAULT_COOLDOWN = 0.5
# and its shape when it comes without --cooldown-shape (docs/recipe.md, "A cooldown of 1 -
# sqrt": sqrt is lower at 840 iterations and higher at 1200, so no preset takes it yet)
DEFAULT_COOLDOWN_SHAPE = "linear"
# the schedule of every run from before the schedule was a setting
SCHEDULE_BEFORE_CHOICE = "cosine"
# how every run from before the sampling was a setting drew its windows
SAMPLING_BEFORE_CHOICE = "uniform"
DEFAULT_MODEL = "gpt"
DEFAULT_PRESETS = {"gpt": "qwen3-cpu", "bert": "bert-shakespeare"}
# The tokenizers each architecture trains with: masked-LM needs WordPiece's [MASK], and a
# GPT generates text that a lower-casing WordPiece tokenizer could not give back. "bpe" and
# "wordpiece" are learned from the training split, with --vocab-size ids; a folder written
# by `light-llm tokenizer train` may be given instead of a name.
MODEL_TOKENIZERS = {"gpt": ("char", "gpt2", "bpe"), "bert": ("bert", "wordpiece")}
# The default --vocab-size (no flag: this many, or as many as a small training split gives).
# BPE's is the default preset's, the size that trained the best model in its budget
# (docs/tokenizers.md, "Which vocabulary size, at equal wall time").
TRAINED_TOKENIZER_VOCAB = {"bpe": PRESETS[DEFAULT_PRESETS["gpt"]].vocab_size, "wordpiece": 2048}
DEFAULT_OUT = "out-light-llm"
OPTIMIZERS = ("adamw", "muon")


@dataclass(frozen=True)
class SizeWarmup:
    """A step warmup of a size (light_llm.schedule.warmup_size): the fields ``name`` (its
    length N) and ``name``_size (S_0), the size ``sized`` it warms up to, and the words of
    its errors."""

    name: str
    sized: str
    draws: str
    measure: str
    symbol: str
    units: str
    kind: str
    counted: str
    smaller: str


SIZE_WARMUPS = (
    SizeWarmup(
        name="batch_warmup",
        sized="batch_size",
        draws="draws smaller batches",
        measure="size",
        symbol="B0",
        units="batches",
        kind="batch-size warmup",
        counted="sequences",
        smaller="smaller",
    ),
    SizeWarmup(
        name="context_warmup",
        sized="block_size",
        draws="trains on shorter windows",
        measure="length",
        symbol="T0",
        units="windows",
        kind="sequence-length warmup",
        counted="tokens",
        smaller="shorter",
    ),
)

GENERAL_DEFAULTS: dict[str, Any] = {
    "tokenizer": "char",
    "batch_size": 12,
    "grad_accum": 1,
    "batch_warmup": 0,  # iterations of batch_warmup_size sequences (light_llm.schedule)
    "batch_warmup_size": None,  # the micro-batches' sequences during the batch-size warmup
    "context_warmup": 0,  # iterations of windows of context_warmup_size tokens
    "context_warmup_size": None,  # the windows' tokens during the sequence-length warmup
    "sampling": "uniform",  # or passes: shuffled passes over the split (train.batches)
    "max_iters": 2000,
    "lr": 6e-4,
    "min_lr": 6e-5,
    "warmup_iters": 100,
    "lr_schedule": "cosine",  # or wsd (light_llm.schedule)
    "cooldown_fraction": None,  # wsd's share of the steps after warmup: DEFAULT_COOLDOWN
    "cooldown_shape": None,  # wsd's cooldown: linear or sqrt: DEFAULT_COOLDOWN_SHAPE
    "beta1": 0.9,  # seed 000 §7
    "beta2": 0.95,  # seed 000 §7
    "weight_decay": 0.1,
    # None: weight_decay as it is; E: raised so that the weights average over at most E passes
    # over the training split (fitted_weight_decay)
    "weight_decay_epochs": None,
    "grad_clip": 1.0,
    "label_smoothing": 0.0,
    "optimizer": "adamw",
    "muon_lr": 0.02,  # Keller Jordan's Muon
    "muon_momentum": 0.95,
    "muon_orthogonaliser": "newton-schulz",  # or polar-express (light_llm.muon_spec)
    "muon_scale": "keller",  # or aspect: the shape scale of Muon's update (light_llm.muon_spec)
    "cautious_weight_decay": False,
    "muon_momentum_warmup": 0,  # steps from μ = 0.85 to muon_momentum (light_llm.schedule)
    "normuon": False,  # NorMuon's per-neuron normalisation of Muon's update (light_llm.muon_spec)
    "embedding_lr": None,  # None: the embedding tables take lr like every AdamW parameter
    "zero_init_projections": False,  # blocks' output projections start at 0 (train.zero_init)
    "ema_beta": None,  # None: no weight average; β of θ̄ = β θ̄ + (1 - β) θ (train.averaging)
    "ema_start": 0,  # the optimiser step at which the weight average starts
    "eval_interval": 250,
    "eval_iters": 20,
    "log_interval": 10,
    "seed": 1337,
    "sample_tokens": 300,
}

# Training recipes that go with a preset's shape (nanoGPT's configs for these shapes):
# small character models with small batches train better with beta2 = 0.99 and lr 1e-3.
NANOGPT_CPU_RECIPE = {"lr": 1e-3, "min_lr": 1e-4, "beta2": 0.99}
CHAR_CPU_RECIPE = {
    "optimizer": "muon",
    "muon_lr": 0.02,
    "lr": 3e-3,
    "embedding_lr": 0.3,
    "min_lr": 0.0,
    "warmup_iters": 20,
    "beta2": 0.99,
    "batch_size": 32,
    "max_iters": 820,
    # evaluations as large as nanoGPT's recipe's (20 batches of 12 sequences): 8 of 32
    "eval_iters": 8,
}
# The default's length fitted to the machine (issue 25), per preset and arithmetic (none
# given: the recipe's max_iters). The recipes' iterations end the whole command inside the
# wall time of nanoGPT's CPU recipe in float32, the arithmetic of a CPU without bfloat16
# (measured on AVX2: bpe-cpu's 820; qwen3-cpu's 2 heads make its step 0.92x as long, so 890,
# and its 3 layers 0.79x as long again, so 1125; on a real AVX2 machine those 1125 took
# 0.82-0.93x nanoGPT's time over six pairs taken in turn, and Newton-Schulz's sums inside its
# products made the step 2-3% shorter, so 1200, under the bfloat16 count's rule below (at
# most 0.98x in every pair): measured again, 0.92-0.98x over six pairs; docs/recipe.md).
# Under bfloat16 autocast (a CPU with AVX-512 BF16 or AMX) both run faster, nanoGPT's small
# matrices more so (1.42x against 1.25x a step), so fewer fit: measured there on all of
# Shakespeare, the main job (docs/recipe.md, "The default's length"): nanoGPT's recipe 68.4 s,
# bpe-cpu's model 6.9 s + 85.5 ms an iteration. 700 iterations took 0.73-1.05x nanoGPT's time
# over fourteen pairs taken in turn (the machine's slow phases fall on either), three of them
# over; 650 take 0.94x of that: at most 0.98x in all fourteen. qwen3-cpu with 2 heads: 650 /
# 0.92 = 705 in the same time; with 3 layers: 705 / 0.79 = 890.
# On a 2-core Intel Xeon with AMX (twenty-third session), where the default's step gains less
# from bfloat16 than nanoGPT's (AMX's tiles fill with nanoGPT's 128-wide matrices), the
# measured count (light_llm.train.calibration) ended 1.05x nanoGPT's time over seven pairs
# taken in turn; the counts that would have ended each pair at nanoGPT's time were 832-907
# (mean 872), so 840: at most 1.01x in each, 0.97x in all (docs/recipe.md, "A 2-core Xeon
# with AMX"). With a step 4% shorter (Q and K kept in float32, twenty-fourth session) 840 took
# 0.88x over six pairs, but 900 took up to 1.07x in another six, so 840 stays (docs/recipe.md,
# "Q and K kept in float32"). A kind with no count of its own under bfloat16 takes the
# "bfloat16" one.
FITTED_MAX_ITERS: dict[str, dict[str, int]] = {
    "bpe-cpu": {"bfloat16": 650},
    "qwen3-cpu": {"bfloat16": 890, "bfloat16 with AMX": 840},
}
# The default's vocabulary fitted to the corpus (issue 25, thirty-first session; docs/recipe.md,
# "The rates again at 840, and a larger vocabulary"): at equal time a BPE of 1536 ids ended
# 0.010-0.020 nats per character below 768's on texts of 512,000 characters to all of
# Shakespeare, and 0.017-0.066 above it on 384,000 and 256,000, where each of 1536 ids has too
# few examples. So a new run of these presets that gives no --vocab-size learns 1536 ids from a
# training split of at least LARGE_TEXT_CHARACTERS, and 768 (the preset's) below it.
FITTED_VOCAB_PRESETS = ("qwen3-cpu",)
LARGE_TEXT_CHARACTERS = 400_000
LARGE_TEXT_VOCAB = 1536
# A step over 1536 ids against one over 768, per kind's count key (FITTED_MAX_ITERS): the
# default's step taking turns with the larger vocabulary's in one process (2 threads, the
# trainer's allocator settings, medians of 12-16 rounds of 8 steps): the fitted counts are
# divided by it, so that the run takes the time the count was fitted to. Under AMX's bfloat16,
# with the loss taken from one bfloat16 softmax (nn/softmax_loss.py) whose backward writes
# the targets' entries by index, 1.042, 1.037 and 1.056 against the step over 768 ids the
# count was fitted with (their mean; 1.075 when the backward wrote them with scatter_, 1.12
# with the float32 loss); in float32 with AVX2's kernels (on the AVX-512 machine) 1.154, 1.112
# and 1.146 (the largest: the AVX2 count had the least margin), and on a real AVX2 CPU (a
# 2-core AMD EPYC, thirty-fourth session) 1.116, 1.109 and 1.129, where the 1040 iterations
# it gives ended six pairs at 0.84-0.96x nanoGPT's time (docs/recipe.md, "The default over
# 1536 ids on a real AVX2 CPU"). A kind with no ratio of its own takes float32's.
LARGE_VOCAB_STEP_RATIO = {"float32": 1.154, "bfloat16 with AMX": 1.045}


def fits_vocabulary_to_text(config: TrainConfig) -> bool:
    """Whether a new run of ``config`` (resolved) learns a vocabulary sized to its text: a BPE
    of a preset of :data:`FITTED_VOCAB_PRESETS`, no --vocab-size given, not fine-tuning."""
    return (
        config.vocab_size is None
        and config.init_from is None
        and config.tokenizer == "bpe"
        and config.preset in FITTED_VOCAB_PRESETS
    )


def fitted_vocab_size(config: TrainConfig, training_characters: int) -> int | None:
    """The vocabulary a new run of ``config`` learns when it gives no --vocab-size:
    :data:`LARGE_TEXT_VOCAB` ids when it fits its vocabulary to its text
    (:func:`fits_vocabulary_to_text`) and has at least :data:`LARGE_TEXT_CHARACTERS`
    characters of training text; None: the kind's default (``TRAINED_TOKENIZER_VOCAB``)."""
    large = training_characters >= LARGE_TEXT_CHARACTERS
    return LARGE_TEXT_VOCAB if large and fits_vocabulary_to_text(config) else None


def fitted_vocab_run(config: TrainConfig, model_config: ModelConfig) -> bool:
    """Whether ``model_config`` is a run of ``config`` whose BPE learned
    :data:`LARGE_TEXT_VOCAB` ids because its training text is large
    (:func:`fitted_vocab_size`), where the counts fitted over 768 ids are scaled by the step's
    ratio (:func:`large_vocab_step_ratio`)."""
    return fits_vocabulary_to_text(config) and model_config.vocab_size == LARGE_TEXT_VOCAB


def large_vocab_step_ratio(count_key: str) -> float:
    """:data:`LARGE_VOCAB_STEP_RATIO` of a kind's count key, float32's for a kind without."""
    return LARGE_VOCAB_STEP_RATIO.get(count_key, LARGE_VOCAB_STEP_RATIO["float32"])


PRESET_RECIPES: dict[str, dict[str, Any]] = {
    "char-baby": NANOGPT_CPU_RECIPE,
    "nanogpt-cpu": NANOGPT_CPU_RECIPE,
    # measured, not guessed: benchmarks/recipe_sweep.py and its table in docs/recipe.md
    "char-cpu": CHAR_CPU_RECIPE,
    # the same with a byte-level BPE of 768 ids learned from the training split
    # (benchmarks/tokenizer_sweep.py and its table in docs/tokenizers.md)
    # (a sample of 150 tokens is about as much text as nanoGPT's 300 characters)
    "bpe-cpu": {**CHAR_CPU_RECIPE, "tokenizer": "bpe", "sample_tokens": 150},
    # the default: bpe-cpu's model made exportable as Qwen3 (light_llm.config.PRESETS), with
    # bpe-cpu's recipe (as good as bpe-cpu at equal iterations and time), and since round two
    # (issue 25) its peak held for half the steps after warmup, then a linear cooldown to 0
    # in place of the cosine: 0.009 nats per character lower at 700 iterations (docs/recipe.md);
    # then the weight decay fitted to the corpus's size: the weights' averaging timescale at
    # most 1.7 passes over the training split (fitted_weight_decay): 0.28 nats per character
    # lower on a 256 kB corpus and 1.3 on a 32 kB one; on the 1 MB slices (0.002) and all of
    # Shakespeare (the recipe's 0.1 doubled) it changes the loss by less than the seeds do;
    # then its windows read in shuffled passes over the split, not at random starts: lower on
    # every corpus and seed measured, 0.013 nats per character on average (docs/recipe.md);
    # then AdamW's β1 0.8 (the NanoGPT speedrun's), Muon's peak lr 0.025 and no gradient
    # clipping (Muon's and AdamW's updates are normalised already): 0.017 nats per character
    # lower on the 1 MB slices, 0.003 on all of Shakespeare, at 650 iterations; then its model
    # with 2 heads and 3 layers (light_llm.config.PRESETS), whose faster step fits 1200
    # iterations in float32; then Muon's update scaled by both sides' ratio (muon_scale
    # "aspect": the feed-forward W_2 stepped as its transpose): lower on all four 1 MB runs,
    # 0.006 nats per character on average at 1200 iterations (docs/recipe.md)
    "qwen3-cpu": {
        **CHAR_CPU_RECIPE,
        "tokenizer": "bpe",
        "sample_tokens": 150,
        "lr_schedule": "wsd",
        "cooldown_fraction": 0.5,
        "weight_decay_epochs": 1.7,
        "sampling": "passes",
        "beta1": 0.8,
        "muon_lr": 0.025,
        "muon_scale": "aspect",
        "grad_clip": 0.0,
        "max_iters": 1200,  # in float32; FITTED_MAX_ITERS under bfloat16
    },
    "shakespeare-char": {
        "batch_size": 64,
        "max_iters": 5000,
        "lr": 1e-3,
        "min_lr": 1e-4,
        "beta2": 0.99,
        "eval_iters": 200,
    },
    "seed-30m": {"tokenizer": "gpt2", "batch_size": 8, "max_iters": 5000},
    "gpt2-124m": {
        "tokenizer": "gpt2",
        "batch_size": 12,
        "grad_accum": 40,
        "max_iters": 600_000,
        "warmup_iters": 2000,
        "eval_interval": 2000,
        "eval_iters": 200,
    },
}
# Fine-tuning a trained model (--init-from): AdamW from a fresh state at a third of the
# char recipes' lr, a short warmup and a short run (a held-out play is ~150K characters).
# LoRA's adapters start at B = 0 and take larger steps (Hu et al. 2021 train them with
# AdamW at 2e-4 to 2e-3); decaying A and B would only pull the update towards 0.
FINETUNE_RECIPE: dict[str, Any] = {
    "optimizer": "adamw",
    "lr": 3e-4,
    "min_lr": 3e-5,
    "beta2": 0.99,
    "warmup_iters": 20,
    "max_iters": 200,
    "eval_interval": 50,
}
LORA_RECIPE: dict[str, Any] = {**FINETUNE_RECIPE, "lr": 2e-3, "min_lr": 2e-4, "weight_decay": 0.0}
# the targets: every matrix of a GELU/ReLU block (the fused QKV, both output projections, W_1)
# and of a SwiGLU block also its value matrix c_v (default_lora_targets)
LORA_DEFAULTS: dict[str, Any] = {"lora_dropout": 0.0, "lora_targets": "c_attn,c_proj,c_fc"}


def default_lora_targets(activation: str) -> str:
    """The layers LoRA adapts when --lora-targets is not given: every matrix of a block, so
    for SwiGLU its gate c_fc and its value c_v both."""
    return LORA_DEFAULTS["lora_targets"] + (",c_v" if activation == "swiglu" else "")


LORA_FIELDS = ("lora_rank", "lora_alpha", "lora_dropout", "lora_targets")

# Masked-LM recipes (light_llm.train.mlm): AdamW with RoBERTa's beta2 0.98 and BERT's weight
# decay 0.01; the 6-layer, 384-wide MiniLM shape takes half the small encoder's lr.
ENCODER_RECIPE: dict[str, Any] = {
    "tokenizer": "bert",
    "lr": 1e-3,
    "min_lr": 1e-4,
    "beta2": 0.98,
    "weight_decay": 0.01,
}
PRESET_RECIPES["bert-shakespeare"] = {
    **ENCODER_RECIPE,
    "batch_size": 16,
    "max_iters": 1200,
    "warmup_iters": 60,
    "eval_interval": 200,
}
PRESET_RECIPES["minilm-l6"] = {**ENCODER_RECIPE, "lr": 5e-4, "min_lr": 5e-5}

# --mtp-weight's largest w in loss + w x the token after next's: multi-token prediction's
# runs weigh it 0.1 to 1 (DeepSeek-V3's 0.3 then 0.1; docs/recipe.md's 0.5), and a w far above
# 1 trains the second head instead of the next token (at 1e39 the loss overflows float32).
MAX_MTP_WEIGHT = 10

# Fields that describe the model; they override the preset's shape.
MODEL_FIELDS = (
    "n_layer",
    "n_head",
    "n_embd",
    "n_inner",
    "block_size",
    "dropout",
    "positions",
    "position_base",
    "norm",
    "activation",
    "block_order",
    "attention",
    "qk_norm",
    "logit_softcap",
    "mtp_weight",
    "value_embeddings",
    "embedding_skip",
    "smear",
    "tie_embeddings",
    "bias",
)
# The settings whose size a model's weights grow with, as a run's refusal names them
MODEL_SIZE_FLAGS = "--vocab-size, --n-layer, --n-embd or --block-size"
# Fields a resumed run takes from the stored run when not given again.
INHERITED_FIELDS = (
    "data",
    "vocab_size",
    "init_from",
    *LORA_FIELDS,
    "model",
    "preset",
    "lr_decay_iters",
    "time",
    "device",
    "dtype",
    "probe_interval",
    "probe_prompt",
    *MODEL_FIELDS,
    *GENERAL_DEFAULTS,
)

# Inherited fields whose default a recipe decides: a resumed run takes the values its start
# resolved them to (TrainConfig.inherit). Not lr_decay_iters, which follows max_iters, nor a
# fine-tuning run's shape and tokenizer, which its base model decides.
RECIPE_FIELDS = frozenset(("preset", *MODEL_FIELDS, *GENERAL_DEFAULTS))


@dataclass
class TrainConfig:
    """All settings of a run. None = not given (see the module docstring)."""

    # what to train on
    data: str | None = None  # a UTF-8 text file; None = the Shakespeare corpus
    tokenizer: str | None = None  # char | gpt2 | bpe (GPT); bert | wordpiece (encoder); a folder
    vocab_size: int | None = None  # of a trained tokenizer (bpe, wordpiece)
    # which model
    init_from: str | None = None  # fine-tune this model folder instead of a new model
    lora_rank: int | None = None  # train rank-r LoRA adapters (only with init_from)
    lora_alpha: float | None = None  # None: the rank (a scale α/r of 1)
    lora_dropout: float | None = None
    lora_targets: str | None = None  # comma-separated layer names; None: LORA_DEFAULTS
    model: str | None = None  # architecture, gpt | bert (the CLI dispatches on it)
    engine: str = "torch"  # implementation (the CLI dispatches on it)
    preset: str | None = None
    n_layer: int | None = None
    n_head: int | None = None
    n_embd: int | None = None
    n_inner: int | None = None  # the feed-forward width d_ff; None: the preset's
    block_size: int | None = None
    dropout: float | None = None
    positions: str | None = None
    position_base: float | None = None  # θ_i's base B for rotary and sinusoidal; None: 10000
    norm: str | None = None
    activation: str | None = None
    block_order: str | None = None
    attention: str | None = None
    qk_norm: bool | None = None
    logit_softcap: float | None = None  # None: the preset's (no capping)
    mtp_weight: float | None = None  # multi-token prediction's loss weight; None: 0 (off)
    value_embeddings: bool | None = None  # a second token table in every layer's values
    embedding_skip: bool | None = None  # every block reads λ x + μ x_0
    smear: bool | None = None  # x_t += λ σ(w · x_t[:k]) x_{t-1} on the embedding
    tie_embeddings: bool | None = None
    bias: bool | None = None
    # optimisation
    batch_size: int | None = None  # sequences per micro-batch
    grad_accum: int | None = None  # micro-batches per optimiser step (over all processes)
    batch_warmup: int | None = None  # the first N iterations draw smaller batches (0 = off)
    batch_warmup_size: int | None = None  # sequences per micro-batch during that warmup
    context_warmup: int | None = None  # the first N iterations train on shorter windows
    context_warmup_size: int | None = None  # tokens per window during that warmup
    sampling: str | None = None  # uniform (random starts) | passes (shuffled passes)
    max_iters: int | None = None  # optimiser steps
    time: str | None = None  # a wall-clock budget ("90s", "5m") instead of max_iters
    lr: float | None = None
    min_lr: float | None = None
    warmup_iters: int | None = None
    lr_schedule: str | None = None  # cosine | wsd (warmup, stable, cooldown)
    cooldown_fraction: float | None = None  # wsd: the share of post-warmup steps decaying
    cooldown_shape: str | None = None  # wsd: linear | sqrt (light_llm.schedule)
    lr_decay_iters: int | None = None  # None: max_iters (or warmup_iters, if longer)
    beta1: float | None = None
    beta2: float | None = None
    weight_decay: float | None = None
    weight_decay_epochs: float | None = None  # raise weight_decay to a timescale of E passes
    grad_clip: float | None = None  # 0 = no clipping
    label_smoothing: float | None = None
    optimizer: str | None = None  # adamw | muon (Muon for the block matrices, AdamW the rest)
    muon_lr: float | None = None  # peak lr of the Muon group (the schedule scales it)
    muon_momentum: float | None = None
    muon_orthogonaliser: str | None = None  # newton-schulz | polar-express
    muon_scale: str | None = None  # keller | aspect (light_llm.muon_spec.update_scale)
    cautious_weight_decay: bool | None = None  # decay where update and weight agree in sign
    muon_momentum_warmup: int | None = None  # steps of μ rising from 0.85 (0 = off)
    normuon: bool | None = None  # NorMuon: Muon's update normalised per output neuron
    embedding_lr: float | None = None  # peak lr of the embedding tables (None: lr)
    zero_init_projections: bool | None = None  # a new model's W^O and W_2 start at 0
    ema_beta: float | None = None  # evaluate and save a moving average of the weights
    ema_start: int | None = None  # the step at which that average starts (None: 0)
    # evaluation and output
    eval_interval: int | None = None
    eval_iters: int | None = None
    log_interval: int | None = None  # a training-loss record (and a plain line) every N steps
    sample_tokens: int | None = None
    probe_interval: int | None = None  # probes every N iterations (light_llm.train.probes)
    probe_prompt: str | None = None  # the probes' prompt; None: light_llm.train.probes's
    out: str = DEFAULT_OUT
    # how to run
    device: str | None = None  # auto | cpu | cuda; None: auto (on --resume: the run's own)
    dtype: str | None = None  # float32 | bfloat16 | float16; None: the device's default
    seed: int | None = None
    compile: bool = False
    gradient_checkpointing: bool = False
    resume: bool = False
    restretch_schedule: bool = False  # on extending a run: stretch the decay to the new end
    overwrite: bool = False

    def __post_init__(self) -> None:
        for key in ("data", "init_from"):  # absolute, so that --resume works from anywhere
            if getattr(self, key) is not None:
                setattr(self, key, os.path.abspath(Path(getattr(self, key)).expanduser()))
        if self.tokenizer is not None and tokenizer_folder(self.tokenizer):
            self.tokenizer = os.path.abspath(Path(self.tokenizer).expanduser())

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """The config in ``data`` (unknown keys ignored), its types checked."""
        if not isinstance(data, dict):
            raise ConfigError(f"a training config is a JSON object, not {type(data).__name__}.")
        known = {f.name for f in dataclasses.fields(cls)}
        try:
            config = cls(**{key: value for key, value in data.items() if key in known})
        except TypeError as exc:
            raise ConfigError(f"the training config is damaged ({exc}).") from None
        config.check_types()
        return config

    def inherit(self, stored: TrainConfig, stored_resolved: TrainConfig) -> TrainConfig:
        """A copy whose unset fields take the values ``stored`` (the configuration, as
        given, of the run being resumed) had: a resumed run goes on as it was started. A
        recipe setting left to its default there (the preset, the recipe's fields) takes the
        value it resolved to (``stored_resolved``), so that a run started under an older
        default recipe resumes with its own, not today's."""
        values = self.to_dict()
        for key in INHERITED_FIELDS:
            if values[key] is None:
                values[key] = getattr(stored, key)
            budgeted = key == "max_iters" and stored.time is not None  # fixed by its budget
            base_decides = stored.init_from is not None and key in (*MODEL_FIELDS, "tokenizer")
            if values[key] is None and key in RECIPE_FIELDS and not (budgeted or base_decides):
                values[key] = getattr(stored_resolved, key)
        if values["lr_schedule"] is None:  # a run started before the schedule was a setting
            values["lr_schedule"] = SCHEDULE_BEFORE_CHOICE
        if values["sampling"] is None:  # and before the sampling was
            values["sampling"] = SAMPLING_BEFORE_CHOICE
        if values["muon_scale"] is None:  # and before Muon's scale was
            values["muon_scale"] = MUON_SCALE_BEFORE_CHOICE
        # what goes only with a setting the resume changes is not carried over: the change is
        # then honoured, or refused under its own name (resume.setting_differences)
        if self.lr_schedule not in (None, "wsd") and self.cooldown_fraction is None:
            values["cooldown_fraction"] = None  # a wsd run's cooldown, not the new schedule's
        if self.lr_schedule not in (None, "wsd") and self.cooldown_shape is None:
            values["cooldown_shape"] = None
        for warmup in SIZE_WARMUPS:  # --batch-warmup 0: the saved warmup's size goes with it
            if getattr(self, warmup.name) == 0 and getattr(self, warmup.name + "_size") is None:
                values[warmup.name + "_size"] = None
        if self.optimizer not in (None, "muon"):  # Muon's own switches stay with Muon
            for key in ("cautious_weight_decay", "muon_momentum_warmup", "normuon"):
                if getattr(self, key) is None:
                    values[key] = GENERAL_DEFAULTS[key]
        return TrainConfig(**values)

    def resolve(self) -> TrainConfig:
        """A copy with every None filled in from the preset's recipe and the general
        defaults (``data`` stays None for Shakespeare, ``dtype`` for the device's default),
        validated."""
        values = self.to_dict()
        model = values["model"] = values["model"] or DEFAULT_MODEL
        values["device"] = values["device"] or "auto"
        if self.zero_init_projections and self.init_from is not None:
            raise ConfigError(
                "--zero-init-projections sets how a new model's weights start, and --init-from "
                "starts from the base model's weights: drop one of them."
            )
        if self.init_from is not None:
            defaults = self._fine_tuning_defaults(values)
        else:
            if any(values[key] is not None for key in LORA_FIELDS):
                raise ConfigError(
                    "LoRA adapts a trained model: give --init-from with the --lora-* flags."
                )
            presets = model_presets(model)
            preset = values["preset"] = values["preset"] or DEFAULT_PRESETS[model]
            if preset not in presets:
                raise ConfigError(unknown_preset_message(preset, model))
            defaults = {**GENERAL_DEFAULTS, **PRESET_RECIPES.get(preset, {})}
            base_model = presets[preset]
            for key in MODEL_FIELDS:
                defaults[key] = getattr(base_model, key)
        for key, value in defaults.items():
            if values[key] is None:
                values[key] = value
        if values["lr_schedule"] == "wsd" and values["cooldown_fraction"] is None:
            values["cooldown_fraction"] = DEFAULT_COOLDOWN
        if values["lr_schedule"] == "wsd" and values["cooldown_shape"] is None:
            values["cooldown_shape"] = DEFAULT_COOLDOWN_SHAPE
        if values["lr_schedule"] != "wsd":  # a recipe's cooldown is its wsd's
            if self.cooldown_fraction is None:
                values["cooldown_fraction"] = None
            if self.cooldown_shape is None:
                values["cooldown_shape"] = None
        if values["lr_decay_iters"] is None:  # decay until the end (after any warmup)
            values["lr_decay_iters"] = max(values["max_iters"], values["warmup_iters"])
        resolved = TrainConfig(**values)
        resolved.validate()
        # (a resumed run's settings are its start's, which resolved them: checked then)
        muon_given = [
            flag(name)
            for name in ("muon_lr", "muon_momentum", "muon_orthogonaliser", "muon_scale")
            if getattr(self, name) is not None
        ]
        if muon_given and resolved.optimizer != "muon" and not self.resume:
            verb = "sets" if len(muon_given) == 1 else "set"
            raise ConfigError(
                f"{' and '.join(muon_given)} {verb} light-llm's Muon optimizer, but this run "
                f"uses {resolved.optimizer}; add --optimizer muon."
            )
        if self.cautious_weight_decay and resolved.optimizer != "muon":
            raise ConfigError(
                "cautious weight decay is written into light-llm's Muon + AdamW optimizer, and "
                f"this run uses PyTorch's {resolved.optimizer}; add --optimizer muon."
            )
        if self.muon_momentum_warmup and resolved.optimizer != "muon":
            raise ConfigError(
                "--muon-momentum-warmup warms up the momentum of light-llm's Muon + AdamW "
                f"optimizer, and this run uses PyTorch's {resolved.optimizer}; add --optimizer "
                "muon."
            )
        if self.normuon and resolved.optimizer != "muon":
            raise ConfigError(
                "NorMuon normalises the update of light-llm's Muon + AdamW optimizer, and this "
                f"run uses PyTorch's {resolved.optimizer}; add --optimizer muon."
            )
        if self.ema_start and resolved.ema_beta is None:  # (a resume inherits a 0)
            raise ConfigError(
                "--ema-start says when the weight average begins, and no --ema-beta sets one: "
                "add --ema-beta B, or drop it."
            )
        if self.cautious_weight_decay and resolved.weight_decay == 0:
            raise ConfigError(
                "cautious weight decay chooses which weights the decay shrinks, but "
                "weight_decay is 0: give --weight-decay above 0, or leave the switch out."
            )
        return resolved

    def _fine_tuning_defaults(self, values: dict[str, Any]) -> dict[str, Any]:
        """The defaults of an ``init_from`` run (see the module docstring), after checking
        that no flag asks for what the checkpoint decides: its shape and tokenizer."""
        from light_llm.checkpoints import inspect_folder, load_config, load_tokenizer
        from light_llm.checkpoints.folder import check_trainable

        if values["model"] != "gpt":
            raise ConfigError("--init-from fine-tunes a GPT; --model bert trains from scratch.")
        fixed = [
            key for key in ("preset", "tokenizer", "vocab_size", *MODEL_FIELDS) if key != "dropout"
        ]
        given = [key for key in fixed if values[key] is not None]
        if given:
            flags = ", ".join(flag(key) for key in given)
            raise ConfigError(
                f"the model's shape and tokenizer come from --init-from {self.init_from}; "
                f"drop {flags}."
            )
        if values["lora_rank"] is None and any(values[key] is not None for key in LORA_FIELDS):
            raise ConfigError("the --lora-* flags need --lora-rank R to train LoRA adapters.")
        check_trainable(inspect_folder(self.init_from), "fine-tuned (--init-from)")
        base = load_config(self.init_from)
        values["tokenizer"] = load_tokenizer(self.init_from).name
        recipe = LORA_RECIPE if values["lora_rank"] is not None else FINETUNE_RECIPE
        defaults = {**GENERAL_DEFAULTS, **recipe}
        for key in MODEL_FIELDS:
            defaults[key] = getattr(base, key)
        if values["lora_rank"] is not None:
            defaults.update(
                LORA_DEFAULTS,
                lora_targets=default_lora_targets(base.activation),
                lora_alpha=float(values["lora_rank"]),
            )
        return defaults

    def model_config(self, vocab_size: int) -> ModelConfig:
        """The model this (resolved) config trains, for a tokenizer of ``vocab_size`` ids;
        with ``init_from``, the checkpoint's model (its vocabulary) with this ``dropout``."""
        if self.init_from is not None:
            from light_llm.checkpoints import load_config

            return load_config(self.init_from).replace(dropout=self.dropout)
        shape = {key: getattr(self, key) for key in MODEL_FIELDS}
        return model_presets(self.model)[self.preset].replace(vocab_size=vocab_size, **shape)

    def learning_rate(self, step: int) -> float:
        """The learning rate of optimiser step ``step`` under this (resolved) config's linear
        warmup and cosine decay (seed 000 §7, seed 002 §4.2), or warmup, stable phase and
        cooldown (``lr_schedule`` "wsd", linear or 1 - sqrt):
        :func:`light_llm.schedule.learning_rate`."""
        cooldown = self.cooldown_fraction if self.lr_schedule == "wsd" else None
        shape = self.cooldown_shape or DEFAULT_COOLDOWN_SHAPE
        return learning_rate(
            step, self.lr, self.min_lr, self.warmup_iters, self.lr_decay_iters, cooldown, shape
        )

    def muon_momentum_at(self, step: int) -> float:
        """Muon's momentum at optimiser step ``step`` under this (resolved) config: rising
        from 0.85 to ``muon_momentum`` over ``muon_momentum_warmup`` steps, or
        ``muon_momentum`` throughout (:func:`light_llm.schedule.muon_momentum`)."""
        return muon_momentum(step, self.muon_momentum, self.muon_momentum_warmup)

    def batch_size_at(self, iteration: int) -> int:
        """The sequences of each micro-batch of iteration ``iteration`` under this (resolved)
        config: ``batch_warmup_size`` for the first ``batch_warmup`` iterations, then
        ``batch_size`` (:func:`light_llm.schedule.warmup_size`)."""
        return warmup_size(iteration, self.batch_size, self.batch_warmup, self.batch_warmup_size)

    def context_at(self, iteration: int) -> int:
        """The tokens of each training window of iteration ``iteration`` under this (resolved)
        config: ``context_warmup_size`` for the first ``context_warmup`` iterations, then
        ``block_size`` (:func:`light_llm.schedule.warmup_size`)."""
        return warmup_size(
            iteration, self.block_size, self.context_warmup, self.context_warmup_size
        )

    def pass_window_starts(
        self, n_tokens: int, block_size: int, iteration: int, slot: int
    ) -> np.ndarray | None:
        """Under ``--sampling passes``, the starts of micro-batch ``slot``'s windows at
        ``iteration`` in a training split of ``n_tokens`` cut into windows of ``block_size``:
        windows j .. j + B_t - 1 of the run's shuffled passes, j = G sum_(t < i) B_t + slot B_t
        (:func:`light_llm.train.batches.pass_window_starts`); None under ``uniform``, whose
        starts the micro-batch's generator draws."""
        if self.sampling != "passes":
            return None
        batch_size = self.batch_size_at(iteration)
        before = tokens_before(
            iteration,
            self.grad_accum,
            1,
            self.batch_size,
            self.batch_warmup,
            self.batch_warmup_size,
        )  # windows, not tokens: each counted as one
        return pass_window_starts(
            self.seed, n_tokens, block_size, before + slot * batch_size, batch_size
        )

    def tokens_in(self, iteration: int) -> int:
        """The training tokens of iteration ``iteration``: grad_accum x B_t x T_t."""
        return self.grad_accum * self.batch_size_at(iteration) * self.context_at(iteration)

    def tokens_before(self, iteration: int) -> int:
        """The training tokens of iterations 0 .. ``iteration`` - 1
        (:func:`light_llm.schedule.tokens_before`)."""
        return tokens_before(
            iteration,
            self.grad_accum,
            self.block_size,
            self.batch_size,
            self.batch_warmup,
            self.batch_warmup_size,
            self.context_warmup,
            self.context_warmup_size,
        )

    def mean_tokens_from(self, iteration: int) -> float:
        """The mean training tokens of iterations ``iteration`` .. max_iters - 1 (those of
        ``iteration`` when none is left): the rest of the run's time at a rate in tokens/s."""
        left = self.max_iters - iteration
        if left <= 0:
            return self.tokens_in(iteration)
        return (self.tokens_before(self.max_iters) - self.tokens_before(iteration)) / left

    def check_types(self) -> None:
        """ConfigError for a setting of the wrong type (a number given as text, a count as a
        float, a flag as "no"): a configuration read back from a trainer_state.json is as
        untrusted as one typed by hand."""
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is None:
                continue
            if field.type.startswith("float") and not is_real(value):
                raise ConfigError(f"{field.name} must be a number, got {value!r}.")
            if field.type.startswith("int"):
                check_integer(field.name, value, low=None)
            elif field.type.startswith("bool"):
                check_flag(field.name, value)
            elif field.type.startswith("str") and not isinstance(value, (str, os.PathLike)):
                raise ConfigError(f"{field.name} must be text, got {value!r}.")

    def validate(self) -> None:
        """ConfigError, in one sentence, for the first setting that cannot work, naming the
        settings by their flags (--max-iters, not max_iters), as a run sets them."""
        try:
            self.check_settings()
        except ConfigError as exc:
            raise ConfigError(flagged_settings(str(exc))) from None

    def check_settings(self) -> None:
        """:meth:`validate`'s checks, naming the settings as the dataclass does."""
        self.check_types()
        if not str(self.out).strip():  # Path("") is the current folder
            raise ConfigError(f"--out is empty: give the folder the run writes to ({DEFAULT_OUT}).")
        check_seed(self.seed)
        self.check_resume_or_overwrite()
        if self.model not in MODEL_TOKENIZERS:
            raise ConfigError(
                f"model must be one of {', '.join(MODEL_TOKENIZERS)}, got {self.model!r}."
            )
        # a resumed run reads its tokenizer from its checkpoint (the folder it was learned in
        # may be gone), and a --tokenizer other than its own is refused by name on resuming
        # (resume.setting_differences)
        if not self.resume:
            self.check_tokenizer()
        positive_ints = ("batch_size", "grad_accum", "eval_interval", "eval_iters", "log_interval")
        for key in positive_ints:
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{key} must be a positive integer, got {value!r}.")
        check_integer("batch_size", self.batch_size, 1, MAX_BATCH_SIZE)
        check_integer("eval_iters", self.eval_iters, 1, MAX_EVAL_BATCHES)
        if self.vocab_size is not None:
            check_integer(flag("vocab_size"), self.vocab_size, 1, MAX_VOCAB_SIZE)
        if self.probe_interval is not None:
            check_integer("probe_interval (0 = no probes)", self.probe_interval, 0)
        if self.model == "bert" and (self.probe_prompt is not None or self.probe_interval):
            raise ConfigError(
                "an encoder (--model bert) records no probes (they read a GPT's next token): "
                "drop --probe-prompt and --probe-interval."
            )
        if self.probe_prompt is not None and not self.probe_prompt.strip():
            raise ConfigError(
                "--probe-prompt is empty: give the text the probes should read (or "
                "--probe-interval 0 to take none)."
            )
        for key in ("max_iters", "warmup_iters", "lr_decay_iters", "seed", "sample_tokens"):
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"{key} must be a non-negative integer, got {value!r}.")
        check_real("lr", self.lr, 0, low_open=True)  # finite: inf and NaN are no rate
        if not is_real(self.min_lr) or not 0 <= self.min_lr <= self.lr:
            raise ConfigError(f"min_lr must lie between 0 and lr ({self.lr}), got {self.min_lr}.")
        if self.lr_decay_iters < self.warmup_iters:
            raise ConfigError(
                f"lr_decay_iters ({self.lr_decay_iters}) must not be less than warmup_iters "
                f"({self.warmup_iters})."
            )
        if self.lr_schedule not in SCHEDULES:
            raise ConfigError(
                f"lr_schedule must be {' or '.join(SCHEDULES)}, got {self.lr_schedule!r}."
            )
        if self.cooldown_fraction is not None:
            check_real("cooldown_fraction", self.cooldown_fraction, 0, 1, low_open=True)
            if self.lr_schedule != "wsd":
                raise ConfigError(
                    "--cooldown-fraction sets how much of the wsd schedule decays, and this "
                    f"run's schedule is {self.lr_schedule}: add --lr-schedule wsd, or drop it."
                )
        if self.cooldown_shape is not None:
            if self.cooldown_shape not in COOLDOWN_SHAPES:
                raise ConfigError(
                    f"cooldown_shape must be {' or '.join(COOLDOWN_SHAPES)}, got "
                    f"{self.cooldown_shape!r}."
                )
            if self.lr_schedule != "wsd":
                raise ConfigError(
                    "--cooldown-shape sets how the wsd schedule's cooldown falls, and this "
                    f"run's schedule is {self.lr_schedule}: add --lr-schedule wsd, or drop it."
                )
        for key in ("beta1", "beta2", "label_smoothing"):
            check_real(key, getattr(self, key), 0, 1, high_open=True)
        check_real("weight_decay", self.weight_decay, 0)
        if self.weight_decay_epochs is not None:
            epochs = self.weight_decay_epochs
            if not is_real(epochs) or not math.isfinite(epochs) or epochs < 1:
                raise ConfigError(
                    "weight_decay_epochs must be a number of at least 1 (the weights average "
                    f"over at least one pass over the training split), got {epochs!r}."
                )
        check_real("grad_clip (0 = off)", self.grad_clip, 0)
        if is_real(self.mtp_weight) and self.mtp_weight > MAX_MTP_WEIGHT:
            raise ConfigError(
                f"--mtp-weight must be at most {MAX_MTP_WEIGHT}, got {self.mtp_weight!r}: w "
                "weighs the token after next's loss against the next token's, the one the model "
                "is evaluated on (runs use 0.1 to 1), and a larger w drowns it."
            )
        self.check_size_warmups()
        if self.time is not None:
            parse_duration(self.time)
            if self.warmup_iters < MIN_WARMUP_FOR_BUDGET:
                raise ConfigError(
                    f"--time measures the speed during the learning-rate warmup, so it needs "
                    f"--warmup-iters of at least {MIN_WARMUP_FOR_BUDGET}, got {self.warmup_iters}."
                )
        if self.optimizer not in OPTIMIZERS:
            raise ConfigError(
                f"optimizer must be {' or '.join(OPTIMIZERS)}, got {self.optimizer!r}."
            )
        check_real("muon_lr", self.muon_lr, 0, low_open=True)
        check_real("muon_momentum", self.muon_momentum, 0, 1, high_open=True)
        check_integer("muon_momentum_warmup (0 = off)", self.muon_momentum_warmup, 0)
        if self.muon_orthogonaliser not in ORTHOGONALISERS:
            raise ConfigError(
                f"muon_orthogonaliser must be {' or '.join(ORTHOGONALISERS)}, got "
                f"{self.muon_orthogonaliser!r}."
            )
        if self.muon_scale not in MUON_SCALES:
            raise ConfigError(
                f"muon_scale must be {' or '.join(MUON_SCALES)}, got {self.muon_scale!r}."
            )
        if self.embedding_lr is not None:
            check_real("embedding_lr", self.embedding_lr, 0, low_open=True)
        if self.ema_beta is not None:
            check_real("ema_beta", self.ema_beta, 0, 1, low_open=True, high_open=True)
        check_integer("ema_start", self.ema_start, 0)
        if self.ema_beta is not None and self.time is None and self.ema_start > self.max_iters:
            raise ConfigError(
                f"--ema-start {self.ema_start} is past the run's end (max_iters "
                f"{self.max_iters}), so the weight average would never begin: give at most "
                f"{self.max_iters}."
            )
        # LoRA's settings are checked by light_llm.nn.lora.add_lora, also before any write
        # the model settings too, before any file is written (the vocabulary comes later;
        # ModelConfig's messages name its fields, which validate names by their flags)
        if self.init_from is not None:
            self.model_config(0)
        else:
            self.model_config(model_presets(self.model)[self.preset].vocab_size)

    def check_size_warmups(self) -> None:
        """ConfigError for a batch-size or sequence-length warmup that cannot work: a length
        without a size or a size without a length, a size not below the run's (batch size,
        block size), a sequence-length warmup of the encoder, or either with ``--time``, which
        is refused rather than estimated: its budget fixes the run's length from the speed of
        the first iterations, which a warmup makes smaller than the rest."""
        for warmup in SIZE_WARMUPS:
            switch = flag(warmup.name)
            length, size = getattr(self, warmup.name), getattr(self, warmup.name + "_size")
            full = getattr(self, warmup.sized)
            check_integer(f"{warmup.name} (0 = off)", length, 0)
            if length and size is None:
                raise ConfigError(
                    f"{switch} {length} {warmup.draws} for its first iterations and needs their "
                    f"{warmup.measure}: add {switch}-size {warmup.symbol}."
                )
            if size is None:
                continue
            if not length:
                raise ConfigError(
                    f"{switch}-size sizes the {warmup.units} of a {warmup.kind}, and no {switch} N "
                    f"sets one: add it, or drop {switch}-size."
                )
            if not is_integer(size) or not 1 <= size < full:
                sized = flag(warmup.sized)
                raise ConfigError(
                    f"{switch}-size must be a number of {warmup.counted} below {sized} {full}, "
                    f"from 1 to {full - 1}, got {size!r}."
                )
            if self.time is not None:
                raise ConfigError(
                    "--time fixes the run's length from the speed of its first iterations, "
                    f"which {switch} makes {warmup.smaller} than the rest: give --max-iters "
                    f"instead, or drop {switch}."
                )
        if self.sampling not in SAMPLINGS:
            raise ConfigError(f"sampling must be {' or '.join(SAMPLINGS)}, got {self.sampling!r}.")
        if self.sampling == "passes" and self.model == "bert":
            raise ConfigError(
                "--sampling passes reads a GPT's windows in shuffled passes, and an encoder's "
                "masked examples are drawn uniformly: drop it with --model bert."
            )
        if self.context_warmup and self.model == "bert":
            raise ConfigError(
                "--context-warmup shortens a GPT's windows, and an encoder's examples are whole "
                "blocks between [CLS] and [SEP]: drop it with --model bert."
            )
        shortest = self.context_warmup_size if self.context_warmup else self.block_size
        if self.mtp_weight and shortest is not None and shortest < 2:
            raise ConfigError(
                f"--mtp-weight predicts the token after next, which a window of {shortest} "
                "token does not have: give windows of at least 2 tokens, or drop --mtp-weight."
            )

    def awaits_budget_estimate(self) -> bool:
        """Whether this is a ``--time`` run whose iteration count is still to be fixed (see
        :mod:`light_llm.train.budget`): it is then recorded as ``max_iters``."""
        return self.time is not None and self.max_iters is None

    def check_tokenizer(self) -> None:
        """ConfigError unless ``tokenizer`` is a kind the model trains with, or a folder, and
        ``vocab_size`` is given only for a tokenizer learned from the corpus."""
        tokenizers = MODEL_TOKENIZERS[self.model]
        if self.tokenizer not in tokenizers and not tokenizer_folder(self.tokenizer):
            named = ", ".join(tokenizers[:-1]) + " or " + tokenizers[-1]
            raise ConfigError(
                f"a {self.model} model trains with the {named} tokenizer, not "
                f"{self.tokenizer!r}"
                + (" (masked-LM needs WordPiece's [MASK])" if self.model == "bert" else "")
                + ", or with a folder written by `light-llm tokenizer train`."
            )
        if self.tokenizer not in TRAINED_TOKENIZER_VOCAB and self.vocab_size is not None:
            raise ConfigError(
                f"--vocab-size sizes a tokenizer learned from the corpus (--tokenizer "
                f"{' or '.join(TRAINED_TOKENIZER_VOCAB)}); {self.tokenizer!r} has its own."
            )

    def check_resume_or_overwrite(self) -> None:
        """ConfigError for --resume or --overwrite other than true or false ("no" is not
        false), and for both at once: one continues OUT's run, the other replaces it."""
        check_flag("resume", self.resume)
        check_flag("overwrite", self.overwrite)
        if self.resume and self.overwrite:
            raise ConfigError(
                "--resume continues the run in --out and --overwrite replaces it: give one of them."
            )

    def check_time_flags(self) -> None:
        """ConfigError when ``--time`` comes with what it cannot go with, or --resume with
        --overwrite or --init-from (the flags as given, before a resumed run's settings are
        inherited: a resumed fine-tuning run inherits its own init_from)."""
        self.check_resume_or_overwrite()
        if self.resume and self.init_from is not None:
            raise ConfigError(
                "--resume continues the run in --out and --init-from starts a new one from "
                f"{self.init_from}: give one of them."
            )
        if self.time is None:
            return
        parse_duration(self.time)  # a duration, and at most MAX_DURATION_S
        if self.resume:
            raise ConfigError(
                "--time starts a run; a resumed run keeps the iteration count its budget gave "
                "(extend it with --max-iters)."
            )
        if self.max_iters is not None:
            raise ConfigError("give --time or --max-iters, not both.")


# the settings a message of TrainConfig.validate (or ModelConfig's, within it) names as the
# dataclass does, each to be named by its flag: those of two or more words, and lr, beta1,
# beta2, dropout (the longest first; not a word of a flag already, as the lr of
# --lr-schedule, nor of a path)
FLAGGED_SETTINGS = re.compile(
    r"(?<![-\w/.])("
    + "|".join(
        sorted(
            [*(f.name for f in dataclasses.fields(TrainConfig) if "_" in f.name), "lr"]
            + ["beta1", "beta2", "dropout"],
            key=len,
            reverse=True,
        )
    )
    + r")(?![-\w/])"
)


def flagged_settings(message: str) -> str:
    """``message`` with every setting it names by the dataclass's name named by its flag."""
    return FLAGGED_SETTINGS.sub(lambda match: flag(match[0]), message)


@dataclass(frozen=True)
class CpuKind:
    """What decides a CPU's training speed here: PyTorch's kernels
    (``torch.backends.cpu.get_cpu_capability()``: AVX2, AVX512, DEFAULT...), bfloat16
    arithmetic (AVX-512 BF16 or AMX) and AMX's tiles."""

    capability: str
    native_bfloat16: bool = False
    amx: bool = False

    def __str__(self) -> str:
        return self.capability + (" with AMX" if self.amx else "")

    def fitted(self, dtype: str) -> bool:
        """Whether the counts for ``dtype`` were fitted on this kind of CPU (:data:`FITTED_ON`):
        float32 on AVX2, bfloat16 on AVX-512 BF16 (with AMX or without)."""
        if dtype == "float32":
            return self.capability == "AVX2"
        return dtype == "bfloat16" and self.native_bfloat16

    def count_key(self, dtype: str) -> str:
        """The key of this kind's counts in ``dtype`` in :data:`FITTED_MAX_ITERS`: "bfloat16
        with AMX" on a CPU with AMX's tiles, the dtype's name elsewhere."""
        return f"{dtype} with AMX" if dtype == "bfloat16" and self.amx else dtype


# the kinds of CPU the counts were measured on, by whole runs taking turns with nanoGPT's CPU
# recipe: the recipes' max_iters in float32, FITTED_MAX_ITERS under bfloat16 autocast
FITTED_ON = {
    "float32": "AVX2",
    "bfloat16": "AVX-512 BF16 without AMX",
    "bfloat16 with AMX": "AVX-512 BF16 with AMX",
}


def fitted_count(preset: str | None, dtype: str, cpu: CpuKind) -> int | None:
    """The iteration count fitted for ``preset`` in ``dtype`` on ``cpu``'s kind
    (:data:`FITTED_MAX_ITERS`: this kind's own, else the dtype's); None: the recipe's own."""
    counts = FITTED_MAX_ITERS.get(preset or "", {})
    return counts.get(cpu.count_key(dtype), counts.get(dtype))


# the presets whose length is measured against nanoGPT's step on any other kind of CPU
# (light_llm.train.calibration: its reference ratio was measured for this one)
CALIBRATED_PRESETS = ("qwen3-cpu",)


def length_follows_machine(
    given: TrainConfig, resolved: TrainConfig, device_type: str, dtype: str, cpu: CpuKind
) -> bool:
    """Whether a run's length is chosen for the machine: a new run that gave neither
    --max-iters nor --time, not fine-tuning, of a preset with a fitted length, on a CPU, and
    not in bfloat16 on a CPU that only emulates it (whose steps are far slower than any count
    was fitted to: ``precision.emulated_bfloat16_note`` says so)."""
    new_run = given.max_iters is None and given.time is None and given.init_from is None
    fitted_preset = resolved.preset in FITTED_MAX_ITERS or resolved.preset in CALIBRATED_PRESETS
    emulated = dtype == "bfloat16" and not cpu.native_bfloat16
    return new_run and fitted_preset and device_type == "cpu" and not emulated


def calibrates_length(
    given: TrainConfig, resolved: TrainConfig, device_type: str, dtype: str, cpu: CpuKind
) -> bool:
    """Whether a run's length is measured at its start (:mod:`light_llm.train.calibration`):
    one whose length follows the machine, of a calibrated preset, on a CPU its counts were not
    fitted on."""
    return (
        length_follows_machine(given, resolved, device_type, dtype, cpu)
        and resolved.preset in CALIBRATED_PRESETS
        and not cpu.fitted(dtype)
    )


def fitted_length(
    given: TrainConfig, resolved: TrainConfig, device_type: str, dtype: str, cpu: CpuKind
) -> tuple[int | None, str]:
    """The iteration count fitted to the machine's arithmetic for a run whose length follows
    the machine (``FITTED_MAX_ITERS``; None: the recipe's), and the sentence that says what
    was chosen and why; (None, "") for a run whose length is given, not fitted
    (:func:`length_follows_machine`) or measured at its start (:func:`calibrates_length`)."""
    if not length_follows_machine(given, resolved, device_type, dtype, cpu):
        return None, ""
    if calibrates_length(given, resolved, device_type, dtype, cpu):
        return None, ""
    recipe = resolved.max_iters
    iterations = fitted_count(resolved.preset, dtype, cpu)
    if iterations is None:
        return None, (
            f"{recipe} iterations: {dtype} on this CPU ({cpu}), the length that ends the run "
            "inside the wall time of nanoGPT's CPU recipe (--max-iters or --time sets another)."
        )
    return iterations, (
        f"{iterations} iterations, not the recipe's {recipe}: this CPU ({cpu}) trains under "
        f"{dtype} autocast, and there {iterations} end the run inside the wall time of nanoGPT's "
        f"CPU recipe, as {recipe} do in float32 (measured, docs/recipe.md; --max-iters or --time "
        "sets another length)."
    )


def fitted_weight_decay(
    given: TrainConfig, resolved: TrainConfig, train_tokens: int
) -> tuple[float | None, str]:
    """The weight decay λ of a new run whose recipe (or ``--weight-decay-epochs``) gives a
    timescale of E passes over the training split, and the sentence that says why; (None,
    "") when there is none, or when ``--weight-decay`` alone was given (that λ is kept).

    Decoupled weight decay makes the weights an exponential moving average of the updates,
    w_t = (1 - ηλ) w_{t-1} + ..., whose timescale is τ = 1 / (ηλ) steps (Wang & Aitchison
    2025, "How to set AdamW's weight decay as you scale model and dataset size"; η the peak
    lr, by which every group's decay per step is scaled here, Muon's included). A pass over
    N training tokens takes M = N / (B T G) steps (tokens per step: batch x context x
    accumulation), so τ = E M asks for

        λ = max(λ_0, 1 / (η E max(M, 1)))

    the recipe's (or the given) λ_0 raised where the corpus is small and the run goes over it
    many times, so that the weights forget what they learnt more than E passes ago rather
    than memorise it (E >= 1, so ηλ <= 1/E <= 1 even for a corpus smaller than one step)."""
    epochs = resolved.weight_decay_epochs
    if epochs is None or (given.weight_decay is not None and given.weight_decay_epochs is None):
        return None, ""
    tokens_per_step = resolved.batch_size * resolved.block_size * resolved.grad_accum
    steps_per_pass = max(train_tokens / tokens_per_step, 1.0)
    decay = 1.0 / (resolved.lr * epochs * steps_per_pass)
    if decay <= resolved.weight_decay:
        return None, ""
    a_pass = (
        f"the {train_tokens:,} training tokens are fewer than a step's {tokens_per_step:,}, so "
        "a pass counts as one step"
        if train_tokens < tokens_per_step
        else f"a pass over the {train_tokens:,} training tokens takes {steps_per_pass:,.0f} steps"
    )
    return decay, (
        f"weight decay {decay:.3g}, not {resolved.weight_decay:g}: {a_pass}, and decay "
        f"{decay:.3g} at lr {resolved.lr:g} makes the weights average over {epochs:g} passes, "
        "as they learn best on a corpus they see many times (--weight-decay-epochs sets the "
        "passes, --weight-decay alone the decay itself; docs/recipe.md)."
    )


def with_fitted_weight_decay(
    given: TrainConfig, resolved: TrainConfig, train_tokens: int
) -> tuple[TrainConfig, TrainConfig, str]:
    """A new run's configurations (as given, resolved) with the weight decay
    :func:`fitted_weight_decay` fits to its ``train_tokens`` recorded as ``--weight-decay``
    (so that a rerun or a resume keeps it), and the sentence that says why; unchanged, with
    "", when nothing is fitted. Both engines' trainers call it once the corpus is encoded."""
    decay, note = fitted_weight_decay(given, resolved, train_tokens)
    if decay is None:
        return given, resolved, note
    given = dataclasses.replace(given, weight_decay=decay)
    return given, given.resolve(), note


def tokenizer_folder(tokenizer: str) -> bool:
    """Whether ``--tokenizer`` names a folder (one written by ``light-llm tokenizer train``,
    or a checkpoint) rather than a kind of tokenizer."""
    known = {name for names in MODEL_TOKENIZERS.values() for name in names}
    return tokenizer not in known and Path(tokenizer).expanduser().is_dir()


def model_presets(model: str) -> dict[str, ModelConfig]:
    """The preset table of an architecture: the GPT's or the encoder's."""
    if model == "gpt":
        return PRESETS
    if model == "bert":
        from light_llm.models.bert import ENCODER_PRESETS

        return ENCODER_PRESETS
    raise ConfigError(f"unknown model {model!r}; known models: {', '.join(MODELS)}.")


def unknown_preset_message(preset: str, model: str) -> str:
    """Why ``preset`` is not one of ``model``'s: another architecture's shape, or unknown."""
    known = ", ".join(model_presets(model))
    for other in MODELS:
        if other != model and preset in model_presets(other):
            return (
                f"preset {preset!r} is a {other} shape, not a {model} one; "
                f"{model} presets: {known}."
            )
    return f"unknown preset {preset!r}; {model} presets: {known}."
