"""The default's length on a CPU where no count was measured: its training step timed against
nanoGPT's recipe's in the same process (issue 25, "a default that fits the machine").

The default's iteration count was fitted by whole runs taking turns with nanoGPT's CPU recipe
(``benchmarks/default_vs_nanogpt.py``) on the kinds of CPU measured: AVX2 in float32 and
AVX-512 BF16, with AMX and without, under bfloat16 autocast
(:data:`light_llm.train.config.FITTED_ON`). Elsewhere (AVX-512 without bfloat16, float32 on
an AVX-512 CPU, an ARM or an older x86 CPU) the two recipes' steps need not keep the
proportion they have there: on two cores of a 16-core AMX Xeon the AVX-512 BF16 count (890
bfloat16 iterations) ended in 0.74x nanoGPT's time, and with ATen's scalar kernels
(``ATEN_CPU_CAPABILITY=default`` on the AVX2 machine) nanoGPT's step took 0.568 of the
default's against 0.585 with AVX2's (medians; docs/recipe.md, "A CPU no count was fitted
on"). Both whole commands are, to first order, their iterations times their step (start-up,
the tokenizer and the evaluations are a few per cent of each), so the count that ends inside
nanoGPT's time scales with the ratio of the two steps:

    N = N_ref · r / r_ref - t_calibration / s,      r = s_nanoGPT / s

with N_ref and r_ref the count and the ratio of the machine the count was fitted on
(:data:`REFERENCE`), s the default's step here and t_calibration the seconds this measurement
took, which the run spends before its first step. That time leaves out the import of
``torch._dynamo``, PyTorch's compiler front end: building any PyTorch optimizer imports it
(1.6-1.8 s on the AVX2 machine), and the run's own optimizer would do so anyway. The ratio is
measured here as it was there (:func:`measure_step_ratio`): both steps built afresh on random
tokens (the run's own model, data and random state are not touched), taking turns step by
step, so that a slow phase of the machine falls on both.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from light_llm.config import ModelConfig
from light_llm.models.gpt import GPT
from light_llm.train.config import TRAINED_TOKENIZER_VOCAB, TrainConfig, fitted_vocab_run
from light_llm.train.optim import clip_grad_norm, configure_optimizer
from light_llm.train.precision import attention_kernels, autocast, default_dtype

NANOGPT_PRESET = "nanogpt-cpu"  # the recipe whose wall time the default's ends inside
NANOGPT_VOCAB = 65  # its characters: those of Shakespeare (nanoGPT's shakespeare_char)
WARMUP_STEPS = 2  # each, untimed: the allocator's and the kernels' first calls
TIMED_ROUNDS = 8  # a step of each, taking turns


@dataclass(frozen=True)
class Reference:
    """Where the default's count was fitted, and nanoGPT's step against the default's there
    (:func:`measure_step_ratio`'s median over repeated measurements)."""

    machine: str
    iterations: int
    ratio: float


# the default's 1200 float32 iterations, fitted on a 2-core AMD EPYC with AVX2 (docs/recipe.md,
# "1200 iterations in float32"); the ratio: the median of 12 measurements there, each in a
# process of its own, nothing else running (0.562-0.622; docs/recipe.md, "A CPU no count was
# fitted on")
REFERENCE = Reference(machine="a 2-core AVX2 CPU in float32", iterations=1200, ratio=0.585)
# a measurement upset (another program taking the CPU during one of the two steps) must not
# give a run of a tenth or ten times the length: the count stays within half and twice N_ref
LOWEST, HIGHEST = 0.5, 2.0


def training_step(
    cfg: TrainConfig, model_config: ModelConfig, device: torch.device, dtype: str, seed: int
) -> Callable[[], None]:
    """One training step of a fresh ``model_config`` model with ``cfg``'s optimizer, batch,
    gradient checkpointing and clipping, on random tokens, as the trainer runs it on ``device`` in
    ``dtype`` (forward under autocast, the loss in float32, backward, the optimizer's step):
    the work a step of that recipe costs, on weights that are thrown away."""
    model = GPT(model_config).to(device)
    model.gradient_checkpointing = cfg.gradient_checkpointing  # as the trainer sets it
    optimizer = configure_optimizer(model, cfg, device.type)
    generator = torch.Generator().manual_seed(seed)
    shape = (cfg.batch_size, model_config.block_size + 1)

    def step() -> None:
        for _ in range(cfg.grad_accum):
            tokens = torch.randint(0, model_config.vocab_size, shape, generator=generator)
            tokens = tokens.to(device)
            with autocast(device, dtype), attention_kernels(device, dtype):
                logits = model(tokens[:, :-1])[0]
            loss = model.next_token_loss(logits, tokens[:, 1:], 0.0)
            (loss / cfg.grad_accum).backward()
        if cfg.grad_clip > 0:
            clip_grad_norm(model.parameters(), cfg.grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def step_ratio(
    first: Callable[[], None],
    second: Callable[[], None],
    rounds: int = TIMED_ROUNDS,
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[float, float]:
    """r = (time of ``first``) / (time of ``second``) over ``rounds`` steps of each taking
    turns, after :data:`WARMUP_STEPS` untimed steps of each; and ``second``'s seconds a step."""
    for _ in range(WARMUP_STEPS):
        first()
        second()
    first_seconds = second_seconds = 0.0
    for _ in range(rounds):
        start = clock()
        first()
        middle = clock()
        second()
        end = clock()
        first_seconds += middle - start
        second_seconds += end - middle
    return first_seconds / second_seconds, second_seconds / rounds


def measure_step_ratio(
    cfg: TrainConfig, model_config: ModelConfig, device: torch.device, dtype: str
) -> tuple[float, float]:
    """r = s_nanoGPT / s for the run ``cfg`` of ``model_config`` in ``dtype`` against
    nanoGPT's CPU recipe in the arithmetic it takes on this machine by default, and s, the
    run's seconds a step. Its models and random tokens are its own, built inside a forked
    random state: the run's numbers do not change."""
    nanogpt = TrainConfig(preset=NANOGPT_PRESET).resolve()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        nanogpt_step = training_step(
            nanogpt,
            nanogpt.model_config(NANOGPT_VOCAB),
            device,
            default_dtype(device),
            seed=0,
        )
        run_step = training_step(cfg, model_config, device, dtype, seed=1)
        return step_ratio(nanogpt_step, run_step)


def calibrated_iterations(
    ratio: float, seconds_per_step: float, seconds_spent: float, reference: Reference = REFERENCE
) -> int:
    """N = N_ref r / r_ref - t_calibration / s (module docstring), kept within
    [:data:`LOWEST`, :data:`HIGHEST`] x N_ref and at least 1."""
    scaled = reference.iterations * ratio / reference.ratio
    iterations = round(scaled - seconds_spent / seconds_per_step)
    low, high = round(LOWEST * reference.iterations), round(HIGHEST * reference.iterations)
    return max(min(iterations, high), low, 1)


def default_run(preset: str) -> tuple[TrainConfig, ModelConfig]:
    """A new run of ``preset``'s recipe as it is, and its model (over the vocabulary its
    tokenizer learns): the run whose count was fitted, whatever flags this run changed (so
    that the count depends on the CPU, not on them, as the fitted counts do)."""
    recipe = TrainConfig(preset=preset).resolve()
    vocab_size = recipe.vocab_size or TRAINED_TOKENIZER_VOCAB[recipe.tokenizer]
    return recipe, recipe.model_config(vocab_size)


def steps_as_recipe(cfg: TrainConfig, model_config: ModelConfig) -> bool:
    """Whether a run of ``cfg`` training ``model_config`` steps as its preset's recipe does
    (:func:`default_run`): the same model, batch, context and accumulation, so that the
    length fitted or measured for the recipe takes it the same time."""
    recipe, recipe_model = default_run(cfg.preset)
    if fitted_vocab_run(cfg, model_config):  # the recipe's vocabulary on a large text
        recipe_model = recipe_model.replace(vocab_size=model_config.vocab_size)
    batch = (cfg.batch_size, cfg.block_size, cfg.grad_accum)
    return model_config == recipe_model and batch == (
        recipe.batch_size,
        recipe.block_size,
        recipe.grad_accum,
    )


def calibrated_length(
    preset: str,
    device: torch.device,
    dtype: str,
    machine: str,
    agree: Callable[[torch.Tensor], torch.Tensor] = lambda measured: measured,
) -> tuple[int, str]:
    """The iteration count of ``preset``'s run in ``dtype`` on a CPU no count was fitted on
    (module docstring; the preset's recipe and model as they are, :func:`default_run`) and
    the sentence that says how it was chosen; ``agree`` averages the measurements over the
    processes of a distributed run, so that all take the same count."""
    reference = REFERENCE
    # building a PyTorch optimizer imports torch._dynamo (1.6-1.8 s on the AVX2 machine); the
    # run's own optimizer would, so that time is not the measurement's (module docstring)
    import torch._dynamo  # noqa: F401

    start = time.perf_counter()
    recipe, model_config = default_run(preset)
    ratio, seconds_per_step = measure_step_ratio(recipe, model_config, device, dtype)
    measured = torch.tensor([ratio, seconds_per_step], dtype=torch.float64)
    ratio, seconds_per_step = agree(measured).tolist()
    spent = time.perf_counter() - start
    iterations = calibrated_iterations(ratio, seconds_per_step, spent, reference)
    return iterations, (
        f"{iterations} iterations: {dtype} on this CPU ({machine}), where no count was fitted: "
        f"a step of nanoGPT's CPU recipe took {ratio:.3f} of the default's here, against "
        f"{reference.ratio:.3f} on {reference.machine}, where {reference.iterations} "
        f"iterations end the default's run inside nanoGPT's wall time; so {iterations} do "
        f"here (measured in {spent:.1f} s; --max-iters or --time sets another length; "
        "docs/recipe.md)."
    )
