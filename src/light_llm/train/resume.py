"""Reading a saved training run for ``--resume``, torch-free so that both engines use it (the
PyTorch trainer through :mod:`light_llm.train.prepare`, the NumPy one in
:mod:`light_llm.train.numpy_trainer`): the trainer state to continue from, the engine and
architecture that wrote it, the schedule of a run extended beyond its end, and the settings a
resumed run cannot change.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from light_llm.atomic import check_replaceable, existing_folder
from light_llm.checkpoints.folder import check_trainable, inspect_folder, names_before_manifests
from light_llm.checkpoints.run import (
    CHECKPOINT_SUBFOLDER,
    OPTIMIZER_TENSORS_FILE,
    TRAINER_STATE_FILE,
    RunFolder,
    read_trainer_state,
)
from light_llm.errors import CheckpointError, TrainingError, flag
from light_llm.limits import is_integer
from light_llm.train.config import LORA_FIELDS, SAMPLING_BEFORE_CHOICE, TrainConfig
from light_llm.train.state import check_fields


def saved_run_config(out: str | Path) -> TrainConfig | None:
    """The configuration, as given, of the training run saved in ``out``; None when ``out``
    holds no training checkpoint."""
    folder = existing_folder(Path(out) / CHECKPOINT_SUBFOLDER)
    if folder is None or not (folder / TRAINER_STATE_FILE).is_file():
        return None
    state = read_trainer_state(folder)
    check_fields(state, folder / TRAINER_STATE_FILE)
    return TrainConfig.from_dict(state["config"])


def run_device(config: TrainConfig) -> str:
    """The device a run trains on, as ``--device`` names it: the one given; else, on
    ``--resume``, the one the run was started with, so that it goes on as it began (a run
    started with ``--device cpu`` on a machine with a GPU stays on the CPU, bit for bit);
    else ``auto``."""
    if config.device is None and config.resume:
        saved = saved_run_config(config.out)
        if saved is not None and saved.device is not None:
            return saved.device
    return config.device or "auto"


def resumable_checkpoint(out: str | Path) -> Path:
    """The checkpoint folder that ``--resume --out OUT`` continues from; a TrainingError or
    CheckpointError, one sentence, where ``out`` holds none that a run can go on from exactly
    (none at all, a model that does not train, no optimizer state)."""
    checkpoint = existing_folder(Path(out) / CHECKPOINT_SUBFOLDER)
    if checkpoint is None:
        raise TrainingError(f"--resume found no checkpoint in {out} to continue from.")
    check_trainable(inspect_folder(checkpoint), "resumed (--resume)")
    check_fields(read_trainer_state(checkpoint), checkpoint / TRAINER_STATE_FILE)  # all it restores
    if not (checkpoint / OPTIMIZER_TENSORS_FILE).exists():
        raise CheckpointError(
            f"{checkpoint} holds no optimizer state ({OPTIMIZER_TENSORS_FILE}), only the "
            "weights and the record of a run, so the run cannot be continued exactly (the "
            "runs that ship with light-llm, and NumPy runs saved before that engine "
            "resumed, keep no more); train afresh with another --out."
        )
    return checkpoint


def saved_run(config: TrainConfig, folder: RunFolder) -> tuple[dict[str, Any] | None, Path | None]:
    """The trainer state to resume from and the checkpoint folder holding it, or (None, None)
    for a fresh run (which must not overwrite another run's checkpoint unless asked to)."""
    config.check_resume_or_overwrite()  # "no" would resume: it is true
    if config.resume:
        checkpoint = resumable_checkpoint(folder.out)
        return read_trainer_state(checkpoint), checkpoint
    checkpoint = existing_folder(folder.checkpoint_dir)
    check_replaceable(folder.checkpoint_dir, config.overwrite, names_before_manifests)
    if checkpoint is not None and not config.overwrite:
        raise TrainingError(
            f"{folder.out} already holds a training checkpoint; continue it with --resume, "
            "or start afresh with --overwrite or another --out."
        )
    return None, None


def schedule_of_extension(asked: TrainConfig, saved: dict[str, Any]) -> tuple[TrainConfig, str]:
    """``asked`` (the flags of a resume) with the end of the decay pinned when it extends
    the saved run beyond its end: at the saved run's end (the new iterations run at min_lr,
    the resume's ``--min-lr`` if it gives one), or with ``restretch_schedule`` at the new end;
    and a note saying which ("" otherwise). An extension at a final rate of 0, which would
    change no weight (the default's schedule decays to 0), is a TrainingError; a run that
    ended inside its warmup goes on along its own schedule."""
    stored = TrainConfig.from_dict(saved["resolved_config"])
    stored_given = TrainConfig.from_dict(saved["config"])
    if (
        asked.max_iters is None
        or asked.max_iters <= stored.max_iters
        or asked.lr_decay_iters is not None
        or stored_given.awaits_budget_estimate()  # a --time run stopped before its estimate
    ):
        return asked, ""
    if asked.restretch_schedule:
        note = (
            f"extending the run from {stored.max_iters} to {asked.max_iters} iterations "
            f"with the schedule re-stretched to end at {asked.max_iters} "
            "(--restretch-schedule): the learning rate rises again."
        )
        return dataclasses.replace(asked, lr_decay_iters=asked.max_iters), note
    final_lr = stored.min_lr if asked.min_lr is None else asked.min_lr  # the resume's --min-lr
    pinned = dataclasses.replace(asked, lr_decay_iters=stored.lr_decay_iters)
    if stored.max_iters < stored.lr_decay_iters:  # ended inside its warmup: the schedule goes on
        note = (
            f"extending the run from {stored.max_iters} to {asked.max_iters} iterations on its "
            f"own schedule, whose decay ends at {stored.lr_decay_iters} (then the final "
            f"learning rate {final_lr:g}); --restretch-schedule stretches it to "
            f"{asked.max_iters} instead."
        )
        return pinned, note
    if final_lr == 0:
        raise TrainingError(
            f"the run's schedule ends at iteration {stored.lr_decay_iters} at a learning rate "
            f"of 0, so iterations {stored.max_iters} to {asked.max_iters} at it would change no "
            "weight; "
            f"--restretch-schedule stretches the schedule to end at {asked.max_iters} (the "
            "learning rate rises again), or --min-lr gives the new iterations a rate."
        )
    note = (
        f"extending the run from {stored.max_iters} to {asked.max_iters} iterations at its "
        f"final learning rate {final_lr:g} (its decay ended at "
        f"{stored.lr_decay_iters}); --restretch-schedule stretches the schedule to "
        f"{asked.max_iters} instead."
    )
    return pinned, note


# the optimizer's and the schedule's settings, which a resume may change (a lower rate for the
# rest of a run, say) but never without a word: the run is then no longer the one it continues
CHANGEABLE_ON_RESUME = (
    *("lr", "min_lr", "warmup_iters", "lr_schedule", "cooldown_fraction", "cooldown_shape"),
    *("beta1", "beta2", "weight_decay", "weight_decay_epochs", "grad_clip", "label_smoothing"),
    *("muon_lr", "muon_momentum", "muon_orthogonaliser", "muon_scale", "muon_momentum_warmup"),
    *("cautious_weight_decay", "normuon", "embedding_lr", "dropout", "dtype"),
)


def resume_notes(asked: TrainConfig, saved: dict[str, Any]) -> tuple[TrainConfig, str]:
    """:func:`schedule_of_extension`, its note followed by :func:`changed_settings_note`'s."""
    asked, schedule_note = schedule_of_extension(asked, saved)
    notes = (schedule_note, changed_settings_note(asked, saved))
    return asked, " ".join(note for note in notes if note)


def changed_settings_note(asked: TrainConfig, saved: dict[str, Any]) -> str:
    """A sentence naming each of :data:`CHANGEABLE_ON_RESUME` that the flags of a resume
    (``asked``, as given) set to another value than the saved run resolved it to, old and new;
    "" when none does (a resume without such flags continues the run exactly)."""
    stored = dataclasses.asdict(TrainConfig.from_dict(saved["resolved_config"]))
    # the dtype a run trained in is its state's (its config keeps None for "the device's")
    stored["dtype"] = saved.get("dtype") or stored["dtype"]
    changes = [
        f"{flag(key)} {stored[key]!r} -> {getattr(asked, key)!r}"
        for key in CHANGEABLE_ON_RESUME
        if getattr(asked, key) is not None and getattr(asked, key) != stored[key]
    ]
    if not changes:
        return ""
    return (
        f"this resume changes {', '.join(changes)}: the run goes on with them, so it is no "
        "longer the run an uninterrupted one would have been (drop those flags to continue it "
        "exactly)."
    )


def last_good_checkpoint(last_saved: tuple[Path, int] | None) -> str:
    """Where a run that failed can be taken up (either engine): the checkpoint folder it
    last wrote and its iteration, or that none was written yet."""
    if last_saved is None:
        return "no checkpoint had been written yet"
    folder, iteration = last_saved
    return f"the last good checkpoint is {folder} (iteration {iteration})"


def stopped_line(iteration: int, checkpoint: Path, out: Path, processes: int = 1) -> str:
    """What a run stopped by Ctrl-C says last (either engine): where it stopped, where its
    checkpoint is, and the command that continues it (in as many processes)."""
    more = f" --processes {processes}" if processes > 1 else ""
    return (
        f"stopped at iteration {iteration}; the checkpoint is saved in {checkpoint}. Continue "
        f"with: light-llm train --resume --out {out}{more}"
    )


def resume_line(iteration: int, max_iters: int | None, budgeted: bool) -> str:
    """What a resumed run says first: the iteration it goes on from and to, or that it
    already has as many iterations as asked and trains none ("" for a new run)."""
    if not iteration:
        return ""
    if budgeted:
        return f"resuming at iteration {iteration} of a --time budget"
    if iteration >= max_iters:
        return (
            f"the run already has {iteration} iterations (--max-iters {max_iters}): nothing "
            f"to train (--max-iters above {iteration} extends it)"
        )
    return f"resuming at iteration {iteration} of {max_iters}"


def corpus_change_note(saved: dict[str, Any], train_tokens: int, val_tokens: int) -> str:
    """On a resume, a sentence when the corpus's splits are not the sizes the run recorded
    (its text was edited since: more text appended, say), which a resume allows, as training on
    more text is a reason to go on; "" when they are, or when the state records no sizes."""
    data = saved.get("data")
    then = (data.get("train_tokens"), data.get("val_tokens")) if isinstance(data, dict) else ()
    if not all(is_integer(count) for count in then) or then == (train_tokens, val_tokens):
        return ""
    corpus = data.get("corpus") if isinstance(data.get("corpus"), str) else "the corpus"
    return (
        f"{corpus} has changed since this run started ({then[0]:,} training and {then[1]:,} "
        f"validation tokens then, {train_tokens:,} and {val_tokens:,} now): the run goes on "
        "over the text as it is now, so it is not the run an uninterrupted one would have "
        "been, and its evaluations from here on score the new validation split."
    )


def check_same_architecture(saved: dict[str, Any], architecture: str, out: Path) -> None:
    """TrainingError when the run to resume trained another architecture."""
    saved_model = saved["resolved_config"].get("model") or architecture
    if saved_model != architecture:
        raise TrainingError(
            f"{out} holds a {saved_model} training run, not a {architecture} one; continue it "
            f"with --model {saved_model}."
        )


def check_same_engine(saved: dict[str, Any], engine: str, out: Path) -> None:
    """TrainingError when the run to resume was trained by the other engine (a run of the
    PyTorch trainer records no engine): its optimizer state is not this engine's."""
    saved_engine = saved.get("engine", "torch")
    if saved_engine != engine:
        raise TrainingError(
            f"{out} holds a run of the {saved_engine} engine, which the {engine} engine cannot "
            f"continue; resume it with --engine {saved_engine}."
        )


def model_differences(stored: dict[str, Any], asked: dict[str, Any]) -> list[str]:
    """The model settings in which the run asked for (a model config's dict) differs from
    the checkpoint's, as "key (saved, asked)"."""
    return [
        f"{key} ({stored.get(key)!r} saved, {value!r} asked)"
        for key, value in asked.items()
        if stored.get(key) != value
    ]


def setting_differences(saved: dict[str, Any], config: TrainConfig) -> list[str]:
    """The training settings (not the model's) in which the resolved ``config`` differs
    from the saved run in a way that continuing cannot honour, as "key (saved, asked)"."""
    differences = []
    # runs saved before --optimizer existed trained with AdamW, and before the weight average,
    # the size warmups and the zero-initialised projections existed, without them; before
    # --sampling, on windows at uniformly drawn starts
    before = {
        "optimizer": "adamw",
        "ema_start": 0,
        "batch_warmup": 0,
        "context_warmup": 0,
        "zero_init_projections": False,
        "sampling": SAMPLING_BEFORE_CHOICE,
    }
    stored = TrainConfig.from_dict({**before, **saved["resolved_config"]})
    fixed = (
        *("data", "tokenizer", "vocab_size", "optimizer", "init_from", "ema_beta", "ema_start"),
        # the tokens already counted (tokens_seen, the explorer's axis) follow the size warmups
        *("batch_warmup", "batch_warmup_size", "context_warmup", "context_warmup_size"),
        "sampling",  # the passes' windows are counted from the run's first
        # the windows read so far and the tokens counted are the batch's multiples, and the
        # passes' order and every batch are drawn from the seed: another would re-read windows
        # of the pass under way and skip others, and miscount the run's tokens
        *("batch_size", "grad_accum", "seed"),
        "zero_init_projections",  # how the weights started: the checkpoint's say it
    )
    for key in (*fixed, *LORA_FIELDS):
        if getattr(stored, key) != getattr(config, key):
            saved_value, asked = getattr(stored, key), getattr(config, key)
            differences.append(f"{key} ({saved_value!r} saved, {asked!r} asked)")
    return differences


def refuse_differences(differences: list[str], checkpoint: Path) -> None:
    """TrainingError naming every difference (of :func:`setting_differences` and the
    model's) between a resumed run and its checkpoint; nothing when there is none."""
    if differences:
        raise TrainingError(
            f"cannot resume from {checkpoint}: this run differs from the saved one in "
            f"{', '.join(differences)}; drop those flags to continue it, or train afresh with "
            "another --out."
        )
