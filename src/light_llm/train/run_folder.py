"""The output folder of a training run (``--out``), held by one run at a time.

Before anything is trained, :meth:`RunFolder.claim` creates the folder, makes sure files can
be written there, takes its lock and checks that the checkpoint to be written there would
replace nothing light-llm did not write. The lock is an advisory lock on
``OUT/.light-llm.lock`` (``fcntl.flock``): the system drops it when the process ends however it
ends (``kill -9`` included), so a crash never leaves a folder locked; a run that ends
normally removes the file. The file names its holder (process id, machine, start time),
which a second run reports instead of the two corrupting each other's ``metrics.jsonl``.
"""

from __future__ import annotations

import contextlib
import os
import socket
import tempfile
import time
from pathlib import Path
from typing import IO

from light_llm.atomic import check_replaceable, why_not
from light_llm.checkpoints.folder import is_light_llm_checkpoint
from light_llm.errors import TrainingError

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; runs are not guarded against each other
    fcntl = None

LOCK_FILE = ".light-llm.lock"
HOLDER_LIMIT = 4096  # bytes of a lock file worth reading


class RunFolder:
    """``out`` claimed for one run; :meth:`release` (or the process's end) frees it."""

    def __init__(self, out: Path, checkpoint_dir: Path) -> None:
        self.out = Path(out)
        self.checkpoint_dir = checkpoint_dir
        self.lock: IO[bytes] | None = None

    def claim(self, overwrite: bool) -> None:
        """Create OUT, check it is writable, lock it, and refuse a checkpoint folder that holds
        files light-llm did not write unless ``overwrite`` (TrainingError / OutputError,
        before any training)."""
        try:
            self.out.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile(dir=self.out) as probe:
                probe.write(b"light-llm")
                probe.flush()
                os.fsync(probe.fileno())
        except OSError as exc:
            raise TrainingError(
                f"cannot write to the output folder {self.out}: {why_not(self.out, exc)}."
            ) from None
        self._lock()
        try:
            check_replaceable(self.checkpoint_dir, overwrite, is_light_llm_checkpoint)
        except BaseException:
            self.release()
            raise

    def _lock(self) -> None:
        """Take the lock, or TrainingError naming its holder. A lock file removed by its
        holder's release between our open and our lock is opened again (the lock must be on
        the file that is at the path)."""
        if fcntl is None or self.lock is not None:
            return
        path = self.out / LOCK_FILE
        while True:
            try:
                lock = open(path, "a+b")  # noqa: SIM115 (held open for the run's length)
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
        lock.write(f"process {os.getpid()} on {socket.gethostname()}, since {started}".encode())
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
