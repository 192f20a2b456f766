"""Training runs as the explorer replays them: each run folder's records (``metrics.jsonl``) and
probes (``probes/``, :mod:`light_llm.train.probes`), read again on a request when the files
have changed since the last (a run still training in another process grows on the page
without a reload; the page's poll every 2 s of a finished run reads nothing).

    GET /api/runs                        every run shown: name, whether it is still training,
                                         its curves and the iterations it has probes of
    GET /api/runs/{index}/probes/{iter}  one probe record, as the trainer wrote it

A run's curves (``train``: the logged batches; ``val`` and ``train_eval``: the evaluations;
``probe``: the probes' slice of validation text, often on a short run) hold, per point, the
iteration, the training tokens seen by then, the wall time, the loss (nats per token) and the
same loss in bits per byte of the split's text, which compares runs of different tokenizers (a
loss not recorded is None; a non-finite one is named, ``"NaN"`` or ``"Infinity"``). A
run's ``objective`` says what its loss predicts (``next-token``, or ``masked-LM`` for an encoder,
whose records have no bits per byte; None when its checkpoint cannot be read), and its
``vocabulary`` is a digest of its checkpoint's tokenizer files: two runs of one kind of
tokenizer (two BPEs, or characters of two corpora) compare token for token only when theirs are
equal, and the page says when they are not. A run folder that disappears while it is watched
keeps showing what was read, with a sentence saying so; a damaged probe record is one sentence
too.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from light_llm.checkpoints.probes import PROBES_SUBFOLDER, probe_iterations, read_probe
from light_llm.checkpoints.run import (
    CHECKPOINT_SUBFOLDER,
    METRICS_FILE,
    TRAINER_STATE_FILE,
    MetricsLog,
    evaluation_records,
    held_by_live_process,
    probe_records,
    read_trainer_state,
    training_records,
)
from light_llm.errors import CheckpointError, ConfigError, LightLLMError
from light_llm.schedule import tokens_before
from light_llm.tokenizers.base import TOKENIZER_FILE
from light_llm.tokenizers.bert import VOCAB_FILE
from light_llm.untrusted import JSON_LIMIT, read_regular_file


class UnknownRecord(LightLLMError):
    """A run or a probe record that is not there (the page asked for what it was not offered)."""


# what a run's loss predicts, by its trainer's model: a GPT's next token, an encoder's masked
# tokens (seen from both sides); two runs' losses compare only when these are equal
OBJECTIVES = {"gpt": "next-token", "bert": "masked-LM"}


def is_run_folder(folder: Path) -> bool:
    """Whether ``folder`` is a training run's output folder (it has its records)."""
    return (folder / METRICS_FILE).is_file() or (folder / CHECKPOINT_SUBFOLDER).is_dir()


def vocabulary_digest(checkpoint: Path) -> str | None:
    """A short SHA-256 of the tokenizer files in ``checkpoint`` (``light_tokenizer.json``, and
    ``vocab.txt`` for WordPiece): equal exactly when two runs' tokens are the same; None when
    they cannot be read."""
    digest = hashlib.sha256()
    try:
        for name in (TOKENIZER_FILE, VOCAB_FILE):
            if name == TOKENIZER_FILE or (checkpoint / name).is_file():
                digest.update(
                    name.encode() + b"\0" + read_regular_file(checkpoint / name, JSON_LIMIT)
                )
    except CheckpointError:
        return None
    return digest.hexdigest()[:16]


def finite(value: object) -> float | None:
    """``value`` when it is a finite number, else None."""
    return value if isinstance(value, (int, float)) and math.isfinite(value) else None


def loss_value(value: object) -> float | str | None:
    """A recorded loss as JSON can carry it: a finite number as it is, a non-finite one by
    name (``"NaN"``, ``"Infinity"``, ``"-Infinity"``, as JavaScript spells them), and None
    only for one not recorded (an encoder's bits per byte), so that a run whose weights went
    bad is still told from a run that records no such value."""
    if isinstance(value, (int, float)) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return finite(value)


class RunHistory:
    """One run folder, read on a :meth:`summary` when its files changed since the last; the
    last good reading is kept, for the next summary of an unchanged run and for when the
    folder goes away."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        if not self.folder.is_dir() or not is_run_folder(self.folder):
            raise ConfigError(
                f"{self.folder} is not a training run's folder (no {METRICS_FILE} or "
                f"{CHECKPOINT_SUBFOLDER}/ in it): give the --out of a light-llm train run."
            )
        self.name = self.folder.resolve().name
        self.last: dict[str, Any] | None = None
        self.last_files: tuple | None = None  # the files_read() of the last reading

    def files_read(self) -> tuple:
        """What a reading depends on, cheaply: the size, modification time and inode of the
        log, the trainer state, the tokenizer files and the probes folder (a new probe
        changes it); None for one that is not there."""
        checkpoint = self.folder / CHECKPOINT_SUBFOLDER
        paths = (
            self.folder / METRICS_FILE,
            checkpoint / TRAINER_STATE_FILE,
            checkpoint / TOKENIZER_FILE,
            checkpoint / VOCAB_FILE,
            self.folder / PROBES_SUBFOLDER,
        )
        stamps = []
        for path in paths:
            try:
                status = path.stat()
            except OSError:
                stamps.append(None)
            else:
                stamps.append((status.st_mtime_ns, status.st_size, status.st_ino))
        return tuple(stamps)

    def state_facts(self) -> tuple[Callable[[int], int] | None, str | None, str | None]:
        """The training tokens before an iteration (:func:`light_llm.schedule.tokens_before`,
        the smaller steps of a batch-size or sequence-length warmup counted), the
        tokenizer's name and what the loss predicts (:data:`OBJECTIVES`), from the
        checkpoint's state."""
        try:
            state = read_trainer_state(self.folder / CHECKPOINT_SUBFOLDER)
            config = state["resolved_config"]
            sizes = [config[key] for key in ("grad_accum", "block_size", "batch_size")]
            for warmup in ("batch_warmup", "context_warmup"):  # 0 and None before there were
                sizes += [config.get(warmup) or 0, config.get(warmup + "_size")]

            def counter(iteration: int) -> int:
                return int(tokens_before(iteration, *sizes))

            counter(max(sizes[3], sizes[5]) + 1)  # a damaged config fails here, not in a point
            objective = OBJECTIVES.get(config.get("model") or "gpt")
            return counter, str(state["data"]["tokenizer"]), objective
        except (CheckpointError, ConfigError, KeyError, TypeError, ValueError):
            return None, None, None

    def summary(self) -> dict[str, Any]:
        """The run as the page draws it (module docstring); when its folder has gone or its
        log cannot be read, the last good reading with a sentence saying so (a
        LightLLMError when there is none)."""
        if not self.folder.is_dir():
            trouble = UnknownRecord(f"the run folder {self.folder} has gone.")
        else:
            try:
                return self.read()
            except LightLLMError as exc:
                trouble = exc
        if self.last is None:
            raise trouble
        return {
            **self.last,
            "live": False,
            "warning": f"{str(trouble).removesuffix('.')}; what was read before is still shown.",
        }

    def read(self) -> dict[str, Any]:
        """The run as its folder holds it now (kept as the last good reading): read again
        only when :meth:`files_read` differs from the last reading's."""
        files = self.files_read()
        if self.last is not None and files == self.last_files:
            return {**self.last, "live": held_by_live_process(self.folder)}
        counter, tokenizer, objective = self.state_facts()
        records = [r for r in MetricsLog(self.folder).records() if isinstance(r.get("iter"), int)]

        def point(record: dict[str, Any], loss: str, bpb: str) -> list:
            tokens = counter(record["iter"]) if counter else None
            return [
                record["iter"],
                tokens,
                finite(record.get("elapsed_s")),
                loss_value(record.get(loss)),
                loss_value(record.get(bpb)),
            ]

        self.last = {
            "name": self.name,
            "live": held_by_live_process(self.folder),
            "tokenizer": tokenizer,
            "objective": objective,
            "vocabulary": vocabulary_digest(self.folder / CHECKPOINT_SUBFOLDER),
            "curves": {
                "train": [point(r, "loss", "bpb") for r in training_records(records)],
                "val": [point(r, "val_loss", "val_bpb") for r in evaluation_records(records)],
                "train_eval": [
                    point(r, "train_loss", "train_bpb") for r in evaluation_records(records)
                ],
                "probe": [point(r, "loss", "bpb") for r in probe_records(records)],
            },
            "probes": probe_iterations(self.folder),
            "warning": None,
        }
        self.last_files = files
        return self.last

    def probe(self, iteration: int) -> dict[str, Any]:
        """The probe record of ``iteration``; UnknownRecord when there is none, CheckpointError
        when it is damaged."""
        if iteration not in probe_iterations(self.folder):
            raise UnknownRecord(
                f"the run {self.name} has no probe record of iteration {iteration}."
            )
        return read_probe(self.folder, iteration)


def runs_shown(served: Path | None, compared: list[RunHistory] | tuple) -> list[RunHistory]:
    """The runs the page replays: the served model's run (when it comes from one), then the
    ``compared`` ones. ConfigError for a run given twice; runs of one folder name (a/run,
    b/run) are called by as many of their path's last parts as tell them apart."""
    runs = ([RunHistory(served)] if served else []) + list(compared)
    seen: dict[Path, RunHistory] = {}
    for run in runs:
        where = run.folder.resolve()
        if where in seen:
            raise ConfigError(
                f"the run {run.folder} is shown twice (served and compared, or compared twice): "
                "give --compare other runs."
            )
        seen[where] = run
    for depth in range(2, max((len(where.parts) for where in seen), default=0) + 1):
        counts = Counter(run.name for run in runs)
        clashing = [run for run in runs if counts[run.name] > 1]
        if not clashing:
            break
        for run in clashing:
            run.name = "/".join(run.folder.resolve().parts[-depth:])
    return runs
