"""The output folder of a training run (``--out``): the one place that names its files, and
the code that claims it, writes its log and reads its records. Both engines' loops, ``light-llm
eval`` and the explorer use it.

    OUT/checkpoint/           the latest checkpoint (a model folder, see the package docstring),
                              with trainer_state.json (and the PyTorch engine's optimizer files)
    OUT/data/                 the token cache of the corpus (train.bin, val.bin, meta.json)
    OUT/metrics.jsonl         the run's records, one JSON object a line
    OUT/loss_curve.png        the loss curve drawn from them
    OUT/.light-llm.lock       held while a run trains there

``metrics.jsonl`` has two kinds of line, each appended and flushed like a log (a run killed at
any moment keeps every line written before; a resumed run goes on appending to the same file):

- ``{"kind": "train", "iter", "loss", "bpb", "bpc", "lr", "tokens_per_s", "elapsed_s"}``
  every ``log_interval`` iterations: the training loss of that iteration's batch;
- ``{"kind": "eval", "iter", "train_loss", "val_loss", "val_perplexity", "train_bpb", ...,
  "val_bpb", ..., "lr", "tokens_per_s", "elapsed_s"}`` at every evaluation (a line without
  "kind", as older runs wrote them, is an evaluation);
- ``{"kind": "probe", "iter", "loss", "bpb", "elapsed_s"}`` at every probe
  (:mod:`light_llm.train.probes`): the loss of the probe's slice of validation text.

Losses are in nats per token; ``bpb`` / ``bpc`` are the same losses in bits per byte / per
character of the split's text, comparable across tokenizers.

The lock is an advisory lock on ``OUT/.light-llm.lock`` (``fcntl.flock``): the system drops it
when the process ends however it ends (``kill -9`` included), so a crash never leaves a folder
locked; a run that ends normally removes the file. The file names its holder (process id,
machine, start time), which a second run reports instead of the two corrupting each other's
``metrics.jsonl``.

``trainer_state.json``, inside the checkpoint, is what a run needs besides the weights and the
optimizer to continue exactly where it stopped: iteration, losses so far, the configuration,
the random-number generator states of every rank, the data position, the fp16 scaler. Both
engines write it (no torch needed); nothing is unpickled.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import stat
import tempfile
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import IO, Any

from light_llm.atomic import (
    FOLDER_MANIFEST,
    append_line,
    atomic_file,
    check_replaceable,
    existing_folder,
    make_folder,
    process_alive,
    why_not,
    write_atomically,
    written_names,
)
from light_llm.checkpoints.probes import PROBES_SUBFOLDER
from light_llm.data import META_FILE, TRAIN_FILE, VAL_FILE
from light_llm.errors import CheckpointError, OutputError, TrainingError, reason
from light_llm.limits import is_integer, is_real
from light_llm.untrusted import read_json_object, read_regular_file

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; runs are not guarded against each other
    fcntl = None

CHECKPOINT_SUBFOLDER = "checkpoint"  # where training writes its checkpoint inside OUT
DATA_SUBFOLDER = "data"  # the token cache inside OUT
METRICS_FILE = "metrics.jsonl"
LOSS_CURVE_FILE = "loss_curve.png"
LOCK_FILE = ".light-llm.lock"
TRAINER_STATE_FILE = "trainer_state.json"  # inside the checkpoint
# a model folder's config and weights (light-llm's and HuggingFace's names)
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
SHARDED_WEIGHTS_INDEX = "model.safetensors.index.json"
OPTIMIZER_TENSORS_FILE = "optimizer.safetensors"  # beside it, either engine's
TRAINER_STATE_FORMAT = "light-llm-trainer"
TRAINER_STATE_VERSION = 1
HOLDER_LIMIT = 4096  # bytes of a lock file worth reading
# what a lock file says of its holder, and how it is read back (held_by_live_process)
HOLDER_LINE = "process {pid} on {host}, since {since}"
HOLDER = re.compile(r"process (\d+) on (\S+),")
METRICS_LIMIT = 2**30  # bytes of a metrics.jsonl worth reading (a line an iteration: millions)


# --------------------------------------------------------------------------- the records
NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0)  # opening a link fails rather than following it
NO_LINKS = (
    "and light-llm never writes through a link in a run folder: remove it or choose another --out."
)
MOVE_IT = "move it away or choose another --out"


def corpus_identity(corpus: str | os.PathLike | None) -> tuple[str, tuple[int, int]] | None:
    """The real path and (device, inode) of the corpus file, to know it under any name (a
    link, a hard link); None without one."""
    if corpus is None:
        return None
    try:
        status = os.stat(corpus)
    except OSError:
        return None
    return os.path.realpath(corpus), (status.st_dev, status.st_ino)


def holds_file(folder: Path, identity: tuple[str, tuple[int, int]]) -> bool:
    """Whether the file of ``identity`` (:func:`corpus_identity`) lies in ``folder``, by its
    real path or as a hard link among the folder's own files."""
    if Path(identity[0]).is_relative_to(folder.resolve()):
        return True
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            status = entry.stat(follow_symlinks=False)
            if (status.st_dev, status.st_ino) == identity[1]:
                return True
    return False


def is_record(record: object) -> bool:
    """Whether ``record`` is a line every reader of the log can use: a JSON object with an
    integer "iter" >= 0, a training line's "loss" a number, an evaluation's losses numbers
    where present (a hand-edited line that is not is skipped, as a line cut short by a kill
    is)."""
    if not isinstance(record, dict) or not is_integer(record.get("iter")) or record["iter"] < 0:
        return False
    kind = record.get("kind", "eval")
    if kind == "train":
        return is_real(record.get("loss"))
    if kind == "eval":
        losses = (record.get(key) for key in ("train_loss", "val_loss"))
        return all(loss is None or is_real(loss) for loss in losses)
    return isinstance(kind, str)  # a kind of a later version: kept, read by no one here


def evaluation_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The evaluation lines of a metrics log (module docstring)."""
    return [record for record in records if record.get("kind", "eval") == "eval"]


def training_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The training-loss lines of a metrics log (module docstring)."""
    return [record for record in records if record.get("kind") == "train"]


def probe_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The probe lines of a metrics log (module docstring)."""
    return [record for record in records if record.get("kind") == "probe"]


class MetricsLog:
    """Appends one JSON object a line to ``folder/metrics.jsonl``, in step with the
    checkpoint: a fresh run (:meth:`start_fresh`) holds its lines until its first checkpoint
    is written (:meth:`checkpoint_written`), so that an ``--overwrite`` run killed before
    then leaves the old run's log with the old run's checkpoint; a resumed run first drops
    the lines written after its checkpoint (:meth:`keep_until`), so that a kill between a
    line and its checkpoint never duplicates lines."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / METRICS_FILE
        self.pending: list[dict[str, Any]] | None = None  # a fresh run's lines, not yet out

    def start_fresh(self) -> None:
        """Hold this run's lines until its first checkpoint, which replaces the old log."""
        self.pending = []

    def append(self, record: dict[str, Any]) -> None:
        if self.pending is not None:
            self.pending.append(record)
            return
        try:
            append_line(self.path, json.dumps(record))
        except OSError as exc:
            raise TrainingError(f"cannot append to {self.path}: {reason(exc)}.") from None

    def checkpoint_written(self) -> None:
        """The run's checkpoint is on disk: a fresh run's held lines replace the old log
        (as one atomic write), and later lines are appended as they come."""
        if self.pending is None:
            return
        self.rewrite(self.pending)
        self.pending = None

    def keep_until(self, iteration: int) -> None:
        """Drop the lines a resumed run will write again: training lines of iterations
        ``iteration`` and later, evaluation lines after ``iteration`` (the checkpoint's)."""
        records = self.records()
        kept = [
            record
            for record in records
            if isinstance(record.get("iter"), int)
            and record["iter"] < iteration + (record.get("kind", "eval") in ("eval", "probe"))
        ]
        if len(kept) != len(records):
            self.rewrite(kept)

    def rewrite(self, records: list[dict[str, Any]]) -> None:
        """Replace the log by ``records``, as one atomic write."""
        try:
            with atomic_file(self.path) as file:
                file.write("".join(json.dumps(r) + "\n" for r in records).encode("utf-8"))
        except OSError as exc:
            raise TrainingError(f"cannot write {self.path}: {reason(exc)}.") from None

    def records(self) -> list[dict[str, Any]]:
        """Every complete line written so far (a line cut short by a kill, or one that is not
        a JSON object, is skipped)."""
        if self.pending is not None:  # a fresh run's lines; the file is the old run's
            return list(self.pending)
        if not os.path.lexists(self.path):
            return []
        data = read_regular_file(self.path, METRICS_LIMIT, "the training log", TrainingError)
        records = []
        for line in data.decode("utf-8", errors="replace").splitlines():
            try:
                record = json.loads(line)
            except (json.JSONDecodeError, RecursionError):
                continue
            if is_record(record):
                records.append(record)
        return records


# --------------------------------------------------------------------------- trainer state
def trainer_state_file(state: dict[str, Any]) -> dict[str, bytes]:
    """``trainer_state.json`` holding ``state`` (tagged with its format and version)."""
    tagged = {"format": TRAINER_STATE_FORMAT, "version": TRAINER_STATE_VERSION, **state}
    return {TRAINER_STATE_FILE: json.dumps(tagged, indent=1).encode("utf-8")}


def read_trainer_state(folder: Path) -> dict[str, Any]:
    """The JSON object of ``folder/trainer_state.json``; CheckpointError when it is missing,
    unreadable or of another format."""
    path = folder / TRAINER_STATE_FILE
    if not path.is_file():
        raise CheckpointError(
            f"{folder} has no {TRAINER_STATE_FILE}, so it holds a model, not a training run "
            "(light-llm train writes a run's state beside its weights)."
        )
    state = read_json_object(path)
    if state.get("format") != TRAINER_STATE_FORMAT:
        raise CheckpointError(f"{path} is not a light-llm trainer state.")
    if state.get("version") != TRAINER_STATE_VERSION:
        raise CheckpointError(
            f"{path} has trainer-state version {state.get('version')}, but this light-llm "
            f"reads version {TRAINER_STATE_VERSION}."
        )
    return state


# --------------------------------------------------------------------------- the folder
# every file a run writes in OUT besides its checkpoint folder, by its path inside OUT: a
# file there that light-llm did not write is never replaced (RunFolder.claim)
RUN_FILES = (
    LOCK_FILE,
    METRICS_FILE,
    LOSS_CURVE_FILE,
    *(f"{DATA_SUBFOLDER}/{name}" for name in (TRAIN_FILE, VAL_FILE, META_FILE)),
)


# the folders a run writes into (the probe records check each file: checkpoints/probes.py)
RUN_FOLDERS = (CHECKPOINT_SUBFOLDER, DATA_SUBFOLDER, PROBES_SUBFOLDER)
# the files a run writes into rather than replacing (the lock, the log it appends to): one
# hard-linked to a file elsewhere is refused, as a link is
WRITTEN_IN_PLACE = (LOCK_FILE, METRICS_FILE)


def outermost_missing(path: Path) -> Path | None:
    """The outermost of ``path`` and its parents that does not exist (what ``mkdir -p``
    creates), None when ``path`` exists."""
    missing, absolute = None, path.absolute()
    for folder in (absolute, *absolute.parents):
        if folder.exists() or folder.is_symlink():
            break
        missing = folder
    return missing


def is_empty_folder(path: Path) -> bool:
    """Whether ``path`` is a readable folder with nothing in it."""
    try:
        return path.is_dir() and not any(path.iterdir())
    except OSError:
        return False


def held_by_live_process(out: Path) -> bool:
    """Whether a live process on this machine holds the lock of the run in ``out``, as its
    lock file's holder line (``HOLDER_LINE``) names it: a run killed with -9 leaves the file,
    whose holder is then gone."""
    try:
        holder = read_regular_file(out / LOCK_FILE, HOLDER_LIMIT).decode("utf-8", "replace")
    except CheckpointError:
        return False
    match = HOLDER.match(holder)
    return bool(match) and match[2] == socket.gethostname() and process_alive(int(match[1]))


def model_folder_holding(path: str | os.PathLike) -> Path | None:
    """The nearest of ``path`` and the folders above it that holds a model (its config.json
    beside its weights) or a training run's checkpoint (its trainer state), else None."""
    path = Path(os.path.abspath(path))
    for folder in (path, *path.parents):
        weights = (folder / WEIGHTS_FILE, folder / SHARDED_WEIGHTS_INDEX)
        if (folder / TRAINER_STATE_FILE).is_file() or (
            (folder / CONFIG_FILE).is_file() and any(file.is_file() for file in weights)
        ):
            return folder
    return None


class RunFolder:
    """``out`` claimed for one run; :meth:`release` (or the process's end) frees it.

    OUT lists the files light-llm wrote in it in its own ``.light-llm-files`` (as a checkpoint
    folder does), each name recorded before its file is first written. A file a run would
    write that is not listed there is not light-llm's (a user's ``metrics.jsonl``, their
    corpus as ``data/train.bin``) and is refused before anything is written, unless
    ``--overwrite``; a run folder from before these manifests (one holding a light-llm
    checkpoint) may have the names of :data:`RUN_FILES` replaced, and nothing else. Whatever
    the options, a run never writes its own corpus (``--data``), never writes through a link
    (a run folder may come from someone else's tarball) and never replaces anything that is
    not a regular file."""

    def __init__(self, out: str | os.PathLike) -> None:
        self.out = Path(out)
        self.checkpoint_dir = self.out / CHECKPOINT_SUBFOLDER
        self.data_dir = self.out / DATA_SUBFOLDER
        self.loss_curve = self.out / LOSS_CURVE_FILE
        self.lock: IO[bytes] | None = None
        self.created: Path | None = None  # the outermost folder claim made (OUT or a parent)
        self.was_empty = False  # OUT existed, empty, before the claim

    def claim(
        self,
        overwrite: bool,
        checkpoint_names: Callable[[Path], Collection[str]],
        corpus: str | os.PathLike | None = None,
    ) -> None:
        """Create OUT, check it is writable, refuse every file the run would write that is
        not light-llm's (:meth:`check_run_files`) and a checkpoint folder that holds files
        light-llm did not write unless ``overwrite``, and lock it (TrainingError /
        OutputError, before any training). ``checkpoint_names`` gives the names light-llm
        wrote in a checkpoint from before manifests
        (:func:`light_llm.checkpoints.folder.names_before_manifests`); ``corpus`` is the
        file trained on, which is never written."""
        holder = model_folder_holding(self.out)
        if holder is not None:  # a run's checkpoint/ and data/ would land among its files
            same = holder == Path(os.path.abspath(self.out))
            where = "is a model folder" if same else f"lies inside the model folder {holder}"
            raise TrainingError(
                f"--out {self.out} {where}; a run writes its own checkpoint/, data/ and "
                "metrics, which would mix with that model's files: give a folder outside it."
            )
        missing = outermost_missing(self.out)
        was_empty = missing is None and is_empty_folder(self.out)
        try:
            make_folder(self.out)
            with tempfile.TemporaryFile(dir=self.out) as probe:
                probe.write(b"light-llm")
                probe.flush()
                os.fsync(probe.fileno())
        except OSError as exc:
            raise TrainingError(
                f"cannot write to the output folder {self.out}: {why_not(self.out, exc)}."
            ) from None
        self.check_run_files(None if overwrite else self.owned_names(checkpoint_names), corpus)
        self.record_names(RUN_FILES)
        self._lock()
        # only the lock's holder may undo what it made (abandon): never another run's folder
        self.created, self.was_empty = missing, was_empty
        try:
            check_replaceable(self.checkpoint_dir, overwrite, checkpoint_names)
        except BaseException:
            self.release()
            raise

    def owned_names(self, checkpoint_names: Callable[[Path], Collection[str]]) -> set[str]:
        """The paths inside OUT that light-llm wrote: those its manifest lists, or in a run
        folder from before manifests (its checkpoint one of light-llm's, by
        ``checkpoint_names``) :data:`RUN_FILES`, else none."""
        owned = written_names(self.out)
        if owned is None:
            checkpoint = existing_folder(self.checkpoint_dir)
            legacy = checkpoint is not None and bool(checkpoint_names(checkpoint))
            owned = set(RUN_FILES) if legacy else set()
        return owned

    def check_run_files(
        self, owned: Collection[str] | None, corpus: str | os.PathLike | None = None
    ) -> None:
        """OutputError naming the first file of :data:`RUN_FILES` (or folder on their way, or
        the checkpoint folder) that the run must not write: a link, something other than a
        regular file, the corpus ``corpus``, or a file not in ``owned`` (None: --overwrite,
        any regular file may be replaced)."""
        kept = corpus_identity(corpus)
        for folder in RUN_FOLDERS:
            path = self.out / folder
            if path.is_symlink():
                raise OutputError(f"{path} is a link, {NO_LINKS}")
            if kept and path.is_dir() and holds_file(path, kept):
                raise OutputError(
                    f"the corpus {corpus} lies in {path}, which this run replaces: train on a "
                    f"copy outside {self.out}, or choose another --out."
                )
            if path.exists() and not path.is_dir():
                raise OutputError(f"{path} is a file, not a folder: {MOVE_IT}.")
        for name in RUN_FILES:
            path = self.out / name
            try:
                status = os.lstat(path)
            except OSError:
                continue  # absent: nothing to lose
            if kept and (status.st_dev, status.st_ino) == kept[1]:
                raise OutputError(
                    f"the corpus {corpus} is {path}, a file this run writes: train on a copy "
                    f"outside {self.out}, or choose another --out."
                )
            if stat.S_ISLNK(status.st_mode):
                raise OutputError(f"{path} is a link, {NO_LINKS}")
            if not stat.S_ISREG(status.st_mode):
                raise OutputError(f"{path} is not a regular file, so not light-llm's: {MOVE_IT}.")
            if name in WRITTEN_IN_PLACE and status.st_nlink > 1:  # the same file elsewhere
                raise OutputError(
                    f"{path} is a hard link to a file elsewhere, which writing it would change: "
                    f"{MOVE_IT}."
                )
            if owned is not None and name not in owned:
                raise OutputError(
                    f"{path} was not written by light-llm and training would replace it: "
                    f"{MOVE_IT}, or pass --overwrite to replace it."
                )

    def record_names(self, names: Collection[str]) -> None:
        """Add ``names`` (paths inside OUT) to OUT's manifest, before their files are first
        written, so that a later run knows them for light-llm's."""
        listed = written_names(self.out) or set()
        if set(names) <= listed:
            return
        text = "".join(f"{name}\n" for name in sorted(listed | set(names)))
        try:
            write_atomically(self.out / FOLDER_MANIFEST, text.encode("utf-8"))
        except OSError as exc:
            raise TrainingError(
                f"cannot write {self.out / FOLDER_MANIFEST}: {reason(exc)}."
            ) from None

    def _lock(self) -> None:
        """Take the lock, or TrainingError naming its holder. A lock file removed by its
        holder's release between our open and our lock is opened again (the lock must be on
        the file that is at the path)."""
        if fcntl is None or self.lock is not None:
            return
        path = self.out / LOCK_FILE
        while True:
            try:  # never through a link; check_run_files refused one not light-llm's
                descriptor = os.open(path, os.O_RDWR | os.O_CREAT | NO_FOLLOW, 0o666)
                lock = os.fdopen(descriptor, "r+b")
            except OSError as exc:
                raise TrainingError(f"cannot lock {path}: {why_not(path, exc)}.") from None
            try:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                lock.seek(0)
                holder = lock.read(HOLDER_LIMIT).decode("utf-8", "replace").strip()
                lock.close()
                raise TrainingError(
                    f"{self.out} is in use by another training run "
                    f"({holder or 'holder unknown'}); wait for it to end or choose another --out."
                ) from None
            try:
                same_file = os.stat(path).st_ino == os.fstat(lock.fileno()).st_ino
            except OSError:
                same_file = False
            if same_file:
                break
            lock.close()
        lock.seek(0)
        lock.truncate()
        started = time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime())
        lock.write(
            HOLDER_LINE.format(pid=os.getpid(), host=socket.gethostname(), since=started).encode()
        )
        lock.flush()
        self.lock = lock

    def release(self) -> None:
        """Free the folder: remove the lock file, then close it (which drops the lock). A
        run killed before this leaves the file, unlocked, for the next run to take."""
        if self.lock is not None:
            with contextlib.suppress(OSError):
                (self.out / LOCK_FILE).unlink()
            self.lock.close()
            self.lock = None

    def abandon(self) -> None:
        """Undo a fresh run that stopped before it trained anything (a corpus too short for
        one window, say): remove the folders :meth:`claim` created, with what was written in
        them, so that bad input leaves nothing behind; an OUT that was there empty is emptied
        again. A folder that held anything before the claim, or holds a checkpoint now, is
        left as it is."""
        self.release()
        if not self.checkpoint_dir.exists():
            if self.created is not None:
                shutil.rmtree(self.created, ignore_errors=True)
            elif self.was_empty:
                for path in self.out.iterdir():
                    if path.is_dir() and not path.is_symlink():
                        shutil.rmtree(path, ignore_errors=True)
                    else:
                        path.unlink(missing_ok=True)
        self.created, self.was_empty = None, False
