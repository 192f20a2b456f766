"""Writing files so that no reader ever sees half of one.

Every file light-llm writes (checkpoints, token caches, tokenizers, pictures) goes through
here: the bytes go to a temporary file in the same folder, which is flushed, fsynced, given
the permissions a normal file would get, and renamed over the target with ``os.replace``.
A crash at any moment leaves the old file or the whole new one.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO


def _default_file_mode() -> int:
    """0o666 less the process umask: what ``open(path, "w")`` would have given."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def fsync_folder(folder: str | os.PathLike) -> None:
    """Make a rename inside ``folder`` durable (where the platform allows opening folders)."""
    with contextlib.suppress(OSError):
        descriptor = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike) -> Iterator[BinaryIO]:
    """A binary file that becomes ``path`` only when the ``with`` block ends without error;
    on any error the temporary file is removed and ``path`` keeps its old contents."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as file:
            yield file
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temporary, _default_file_mode())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    fsync_folder(path.parent)


def write_atomically(path: str | os.PathLike, data: bytes) -> None:
    """Replace ``path`` by ``data`` as one step (see :func:`atomic_file`)."""
    with atomic_file(path) as file:
        file.write(data)
