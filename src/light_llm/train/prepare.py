"""Everything a PyTorch training run does before its first step, as one function that returns
the prepared run (:func:`prepare`): the configuration (a resumed run's own, extended or not),
what is trained (chosen once: :mod:`light_llm.train.subject`), the tokenizer, the model and
its optimizer, the data, the output folder claimed, the checkpoint restored, and every check
that must refuse the run before anything is written (memory, a ``--time`` budget too short
for its evaluations, a resume that differs from the saved run).
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from light_llm.checkpoints.folder import (
    names_before_manifests,
)
from light_llm.checkpoints.run import (
    TRAINER_STATE_FILE,
    MetricsLog,
    RunFolder,
)
from light_llm.config import ModelConfig, check_batch_fits, check_model_fits
from light_llm.data import encode_corpus, load_corpus, predicted_sizes
from light_llm.device import resolve_device
from light_llm.errors import CheckpointError, ConfigError
from light_llm.tokenizers import load_tokenizer
from light_llm.train.averaging import WeightAverage
from light_llm.train.batches import rank_slots
from light_llm.train.budget import parse_duration
from light_llm.train.calibration import calibrated_length, steps_as_recipe
from light_llm.train.config import (
    MODEL_SIZE_FLAGS,
    TrainConfig,
    calibrates_length,
    fitted_length,
    fitted_vocab_run,
    large_vocab_step_ratio,
    with_fitted_weight_decay,
)
from light_llm.train.cpu_allocator import keep_freed_memory
from light_llm.train.distributed import (
    DistributedContext,
    environment_world,
    init_distributed,
    shutdown_distributed,
)
from light_llm.train.finetune import FineTuning
from light_llm.train.mlm import EncoderSubject
from light_llm.train.optim import configure_optimizer
from light_llm.train.optimizer_state import (
    load_optimizer_state,
    load_raw_weights,
    restore_rng_states,
)
from light_llm.train.precision import (
    autocast,
    check_dtype,
    default_dtype,
    emulated_bfloat16_note,
    grad_scaler,
    this_cpu,
)
from light_llm.train.probes import given_prompt_ids
from light_llm.train.records import RunRecord
from light_llm.train.resume import (
    check_same_architecture,
    check_same_engine,
    corpus_change_note,
    model_differences,
    refuse_differences,
    resume_notes,
    run_device,
    saved_run,
    setting_differences,
)
from light_llm.train.run_tokenizer import check_enough_tokens
from light_llm.train.shared_gradients import SharedGradients, on_one_machine, shareable
from light_llm.train.subject import GPTSubject
from light_llm.train.zero_init import projection_names

TIMED_FORWARDS = 2  # forward passes timed to estimate an evaluation before a --time run
STEP_FORWARDS = 3  # a training step's cost in forward passes (the backward is about two)
MEASURING_SHARE = 0.25  # the share of a --time budget that measuring the speed may take
SUBJECTS = {GPTSubject.architecture: GPTSubject, EncoderSubject.architecture: EncoderSubject}


@dataclass
class Progress:
    """Where a run stands; saved in its trainer state and restored by a resume."""

    iteration: int = 0
    last_eval_iteration: int = -1
    best_val_loss: float = math.inf
    elapsed_before: float = 0.0  # seconds trained before this process started
    tokens_seen: int = 0


@dataclass
class PreparedRun:
    """A run ready for its loop (:class:`light_llm.train.trainer.Trainer`)."""

    given: TrainConfig  # the configuration as given (a --time run's max_iters fixed later)
    config: TrainConfig  # resolved: every default filled in
    subject: GPTSubject  # what is trained
    device: torch.device
    dist: DistributedContext
    folder: RunFolder
    dtype: str
    slots: list[int]  # this process's micro-batch slots of each step
    tokenizer: Any
    model_config: ModelConfig
    train_data: Any
    val_data: Any
    record: RunRecord
    raw_model: torch.nn.Module
    model: torch.nn.Module  # raw_model compiled and/or wrapped in DDP (not on one CPU)
    optimizer: torch.optim.Optimizer
    scaler: Any
    progress: Progress = field(default_factory=Progress)
    budget_s: float | None = None  # a --time run whose iteration count is not fixed yet
    eval_seconds: float = 0.0  # of the latest evaluation (with its checkpoint)
    schedule_note: str = ""  # how a resume beyond the run's end treats the schedule
    corpus_note: str = ""  # a resume over a corpus edited since the run started
    precision_note: str = ""  # bfloat16 asked for on a CPU that only emulates it
    length_note: str = ""  # how many iterations the default takes on this machine, and why
    decay_note: str = ""  # the weight decay fitted to the corpus's size, and why
    shared_gradients: SharedGradients | None = None  # torchrun on one machine's CPU, not DDP
    last_saved: tuple[Path, int] | None = None  # the checkpoint folder and its iteration
    average: WeightAverage | None = None  # --ema-beta's moving average (train.averaging)


def prepare(config: TrainConfig, architecture: str) -> PreparedRun:
    """The run ``config`` asks for, of ``architecture`` ("gpt" or "bert"), ready to train;
    the output folder is claimed (released again if preparing fails, and removed if the
    claim created it: :meth:`RunFolder.abandon`)."""
    if config.model not in (None, architecture) or config.engine != "torch":
        raise ConfigError(
            f"this trainer trains the PyTorch {architecture}, not model {config.model!r} on "
            f"engine {config.engine!r}."
        )
    _, _, local_rank = environment_world()
    device = resolve_device(run_device(config), local_rank)
    if device.type == "cpu":
        keep_freed_memory()  # no page faults for the next step's activations
    dist = init_distributed(device.type)
    folder = RunFolder(config.out)
    try:
        return prepare_in(config, architecture, device, dist, folder)
    except BaseException:
        folder.abandon()
        shutdown_distributed(dist)
        raise


def with_machine_length(
    given: TrainConfig,
    cfg: TrainConfig,
    model_config: ModelConfig,
    device: torch.device,
    dtype: str,
    dist: DistributedContext,
) -> tuple[TrainConfig, TrainConfig, str]:
    """A new run's configurations (as given, resolved) with the length chosen for this
    machine recorded as --max-iters (so that a rerun or a resume is the same run): fitted to
    its kind of CPU (:func:`fitted_length`) or measured against nanoGPT's step where no count
    was fitted (:func:`calibrated_length`); and the sentence that says which and why."""
    cpu = this_cpu()
    if calibrates_length(given, cfg, device.type, dtype, cpu):

        def agree(measured: torch.Tensor) -> torch.Tensor:  # the processes' mean
            return dist.all_reduce_sum(measured.to(device)).cpu() / dist.world_size

        if dist.is_main:  # a few seconds, up to a minute on a busy machine: say what runs
            print(
                f"timing this CPU ({cpu}): the default's step against nanoGPT's recipe's, to "
                "choose the default's length (--max-iters or --time skips this)...",
                file=sys.stderr,
                flush=True,
            )
        iterations, note = calibrated_length(cfg.preset, device, dtype, str(cpu), agree)
    else:
        iterations, note = fitted_length(given, cfg, device.type, dtype, cpu)
    if note and fitted_vocab_run(cfg, model_config):  # counted over 768 ids: as much time
        ratio = large_vocab_step_ratio(cpu.count_key(dtype))
        iterations = round((iterations or cfg.max_iters) / ratio)
        note += (
            f" Over {model_config.vocab_size} ids a step takes {ratio:.3f}x as long, so "
            f"{iterations} iterations take that time."
        )
    if note and not steps_as_recipe(cfg, model_config):
        note += (
            " That length is the default's: this run's model or batch differs, so it will "
            "take more or less time than nanoGPT's recipe (--time gives it a budget instead)."
        )
    if iterations is not None:
        given = dataclasses.replace(given, max_iters=iterations)
        cfg = given.resolve()
    return given, cfg, note


def prepare_in(
    config: TrainConfig,
    architecture: str,
    device: torch.device,
    dist: DistributedContext,
    folder: RunFolder,
) -> PreparedRun:
    """:func:`prepare` on a chosen device, in ``folder`` (claimed here)."""
    config.check_time_flags()
    saved, resume_folder = saved_run(config, folder)
    schedule_note = ""
    if saved:
        check_same_engine(saved, "torch", folder.out)
        check_same_architecture(saved, architecture, folder.out)
        config, schedule_note = resume_notes(config, saved)
        config = config.inherit(
            TrainConfig.from_dict(saved["config"]), TrainConfig.from_dict(saved["resolved_config"])
        )
    given = dataclasses.replace(config, model=architecture)
    cfg = given.resolve()
    budget_s = parse_duration(cfg.time) if given.awaits_budget_estimate() else None
    dtype = cfg.dtype or default_dtype(device)
    check_dtype(dtype, device)
    precision_note = emulated_bfloat16_note(dtype, device)
    metrics = MetricsLog(folder.out)

    text = load_corpus(cfg.data)
    if architecture == EncoderSubject.architecture:
        subject = EncoderSubject()
    elif cfg.init_from is not None:
        subject = FineTuning(cfg, resume_folder, saved)
    else:
        subject = GPTSubject()
    if saved:
        tokenizer = load_tokenizer(resume_folder)
    else:
        tokenizer = subject.tokenizer(cfg, text)
    model_config = subject.model_config(cfg, tokenizer)
    # weights, gradients and two optimizer moments; a micro-batch's activations
    check_model_fits(model_config, bytes_per_value=16, settings=MODEL_SIZE_FLAGS)
    check_batch_fits(model_config, cfg.batch_size, cfg.block_size, training=True)
    subject.check_model(model_config, tokenizer)
    length_note = ""
    if not saved:  # the length fitted to the machine, recorded as --max-iters (resumes keep it)
        given, cfg, length_note = with_machine_length(given, cfg, model_config, device, dtype, dist)
    if subject.takes_probes:
        given_prompt_ids(cfg, tokenizer)  # a --probe-prompt that cannot be probed: refused now
    eval_seconds = 0.0
    if budget_s is not None:
        eval_seconds = check_budget_holds_evaluations(
            subject, model_config, cfg, budget_s, device, dtype, dist
        )

    def claim() -> None:  # a fresh run's log waits for its first checkpoint (MetricsLog)
        folder.claim(cfg.overwrite, names_before_manifests, cfg.data)
        if saved is None:
            metrics.start_fresh()

    dist.on_main(claim, device)
    # the corpus encoded into OUT/data by rank 0 first; the others then reuse its files
    dist.on_main(lambda: encode_corpus(text, tokenizer, folder.data_dir), device)
    if not saved:  # a resumed run's tokenizer is its own
        check_enough_tokens(cfg, folder.data_dir)
    train_data, val_data = subject.datasets(text, tokenizer, folder.data_dir, cfg.block_size)
    sizes = predicted_sizes(folder.data_dir, tokenizer) if subject.reports_bits else None
    decay_note = ""
    if not saved:  # the decay fitted to the corpus (a resumed run keeps its recorded one)
        given, cfg, decay_note = with_fitted_weight_decay(given, cfg, len(train_data))
    corpus_note = ""
    if saved:
        check_same_run(saved, subject, model_config, cfg, resume_folder)
        corpus_note = corpus_change_note(saved, len(train_data), len(val_data))

    torch.manual_seed(cfg.seed + dist.rank)  # dropout differs between ranks
    np.random.seed(cfg.seed + dist.rank)
    raw_model = subject.build_model(model_config, train_data).to(device)
    if cfg.zero_init_projections and not saved:  # a resumed run's weights are its checkpoint's
        zero_projections(raw_model)
    raw_model.gradient_checkpointing = cfg.gradient_checkpointing
    optimizer = configure_optimizer(raw_model, cfg, device.type)
    run = PreparedRun(
        given=given,
        config=cfg,
        subject=subject,
        device=device,
        dist=dist,
        folder=folder,
        dtype=dtype,
        slots=rank_slots(dist.rank, dist.world_size, cfg.grad_accum),
        tokenizer=tokenizer,
        model_config=model_config,
        train_data=train_data,
        val_data=val_data,
        record=RunRecord(metrics, sizes, model_config.mtp_weight),
        raw_model=raw_model,
        model=raw_model,
        optimizer=optimizer,
        scaler=grad_scaler(device, dtype),
        budget_s=budget_s,
        eval_seconds=eval_seconds,
        schedule_note=schedule_note,
        corpus_note=corpus_note,
        precision_note=precision_note,
        length_note=length_note,
        decay_note=decay_note,
    )
    if cfg.ema_beta is not None:
        run.average = WeightAverage(cfg.ema_beta, cfg.ema_start, torch.clone)
        if not saved:  # a resumed run's average is its checkpoint's (restore)
            run.average.observe(trained_weights(raw_model), 0)
    if saved:
        restore(run, saved, resume_folder)
    if cfg.compile:
        run.model = torch.compile(raw_model)
    parameters = list(raw_model.parameters())
    shared = device.type == "cpu" and not run.scaler.is_enabled()  # (float16's scaler: DDP)
    if dist.enabled and shared and on_one_machine() and shareable(parameters):
        for tensor in [*parameters, *raw_model.buffers()]:  # rank 0's, as DDP's
            torch.distributed.broadcast(tensor.data, src=0)
        run.shared_gradients = SharedGradients(parameters, dist.rank, dist.world_size)
    elif dist.enabled:
        from torch.nn.parallel import DistributedDataParallel

        device_ids = [device.index] if device.type == "cuda" else None
        run.model = DistributedDataParallel(run.model, device_ids=device_ids)
    return run


def check_budget_holds_evaluations(
    subject: GPTSubject,
    model_config: ModelConfig,
    cfg: TrainConfig,
    budget_s: float,
    device: torch.device,
    dtype: str,
    dist: DistributedContext,
) -> float:
    """The seconds one evaluation should take (``2 * eval_iters`` forward passes, from
    :data:`TIMED_FORWARDS` timed ones of an untrained model of the run's shape, the
    generators left as they were); ConfigError, before anything is written, when the
    budget cannot hold the evaluations at the start and at the end."""
    with torch.random.fork_rng(devices=[]):
        model = subject.model_class(model_config).to(device).eval()
        shape = (cfg.batch_size, cfg.block_size)
        generator = torch.Generator().manual_seed(0)
        x = torch.randint(0, model_config.vocab_size, shape, generator=generator)
        x = x.to(device)  # (B, T)
        with torch.no_grad(), autocast(device, dtype):
            model(x, x)  # the first call pays for allocation
            tick = time.perf_counter()
            for _ in range(TIMED_FORWARDS):
                _, loss = model(x, x)
            loss.item()  # waits for the device
            seconds = (time.perf_counter() - tick) / TIMED_FORWARDS
    del model
    per_evaluation = 2 * cfg.eval_iters * seconds / dist.world_size
    if dist.any_rank(2 * per_evaluation >= budget_s, device):
        raise ConfigError(
            f"--time {cfg.time} is too short: the evaluations at the start and the end take "
            f"about {per_evaluation:.2g} s each here ({cfg.eval_iters} batches of each "
            "split); give more time or fewer --eval-iters."
        )
    # a step: forward and backward (about three forwards) of each of its micro-batches
    step_seconds = STEP_FORWARDS * seconds * cfg.grad_accum / dist.world_size
    note = measuring_note(cfg, budget_s, per_evaluation + cfg.warmup_iters * step_seconds)
    if note and dist.is_main:
        print(note, file=sys.stderr, flush=True)
    return per_evaluation


def measuring_note(cfg: TrainConfig, budget_s: float, measuring_s: float) -> str | None:
    """A warning when measuring the speed (the first evaluation and the warmup's
    iterations, :mod:`light_llm.train.budget`) would take more than
    :data:`MEASURING_SHARE` of the --time budget, naming the smallest budget that leaves
    most of the time to training after it; None when it fits."""
    if measuring_s <= MEASURING_SHARE * budget_s:
        return None
    smallest = max(math.ceil(measuring_s / MEASURING_SHARE / 60), 1)
    return (
        f"warning: --time {cfg.time}: measuring the speed (the first evaluation and "
        f"{cfg.warmup_iters} warmup iterations) takes about {measuring_s:.0f} s here, "
        f"{measuring_s / budget_s:.0%} of the budget, which leaves little for training; "
        f"give at least --time {smallest}m, or fewer --warmup-iters or --eval-iters."
    )


def check_same_run(
    saved: dict[str, Any],
    subject: GPTSubject,
    model_config: ModelConfig,
    config: TrainConfig,
    checkpoint: Path,
) -> None:
    """TrainingError naming every setting in which this run differs from the saved one
    in a way that continuing cannot honour (the model, the tokenizer, the corpus)."""
    stored_model = subject.stored_model_config(checkpoint).to_dict()
    differences = model_differences(stored_model, model_config.to_dict())
    differences += setting_differences(saved, config)
    refuse_differences(differences, checkpoint)


def restore(run: PreparedRun, saved: dict[str, Any], checkpoint: Path) -> None:
    """Weights, optimizer moments, progress, scaler and generators from the checkpoint."""
    run.subject.load_weights(run.raw_model, checkpoint)
    if run.average is not None:  # the model file holds the average, the raw weights beside it
        weights = trained_weights(run.raw_model)
        run.average.resume(weights, checkpoint, int(saved["iteration"]), load_raw_weights)
    load_optimizer_state(run.optimizer, checkpoint)
    run.progress = Progress(
        iteration=int(saved["iteration"]),
        last_eval_iteration=int(saved["last_eval_iteration"]),
        best_val_loss=float(saved["best_val_loss"]),
        elapsed_before=float(saved["elapsed_s"]),
        tokens_seen=int(saved["tokens_seen"]),
    )
    run.last_saved = (run.folder.checkpoint_dir, run.progress.iteration)
    run.dist.on_main(lambda: run.record.metrics.keep_until(run.progress.iteration), run.device)
    rng_states = saved["rng"]
    try:
        if saved["scaler"] and run.scaler.is_enabled():
            run.scaler.load_state_dict(saved["scaler"])
        if len(rng_states) == run.dist.world_size:
            restore_rng_states(rng_states[run.dist.rank])
    except (KeyError, TypeError, ValueError, IndexError, RuntimeError) as exc:
        raise CheckpointError(
            f"{checkpoint / TRAINER_STATE_FILE} is damaged: its scaler or random-number "
            f"states cannot be restored ({type(exc).__name__}: {exc})."
        ) from None
    if len(rng_states) != run.dist.world_size and run.dist.is_main:
        print(
            f"note: the checkpoint was written by {len(rng_states)} process(es) and this "
            f"run has {run.dist.world_size}, so dropout draws new random numbers.",
            file=sys.stderr,
        )


def zero_projections(model: torch.nn.Module) -> None:
    """Set the blocks' output projections W^O and W_2 of a new model to zero
    (``--zero-init-projections``, :mod:`light_llm.train.zero_init`); every other weight keeps
    its draw."""
    parameters = dict(model.named_parameters())
    with torch.no_grad():
        for name in projection_names(parameters):
            parameters[name].zero_()


def trained_weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The trainable parameters of ``model`` by name, as tensors sharing their storage
    without autograd (what ``--ema-beta``'s average follows and swaps in)."""
    return {name: p.detach() for name, p in model.named_parameters() if p.requires_grad}
