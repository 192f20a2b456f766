"""Writing files so that no reader ever sees half of one.

Every file light-llm writes (checkpoints, token caches, tokenizers, pictures, logs) goes
through here, in one of three ways:

- :func:`atomic_file` / :func:`write_atomically`: the bytes go to a temporary file in the same
  folder, which is flushed, fsynced, given the permissions a normal file would get, and renamed
  over the target with ``os.replace``. A crash at any moment leaves the old file or the whole
  new one.
- :func:`write_folder_atomically`: a whole folder (a checkpoint) replaced as a unit.
- :func:`append_line`: one line added to a log and flushed; a kill leaves every earlier line
  whole (a reader skips a last line cut short).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import BinaryIO

from light_llm.errors import CheckpointError


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


def append_line(path: str | os.PathLike, line: str) -> None:
    """Add ``line`` and a newline at the end of the text file ``path`` (created if absent) and
    flush it: an append-only log that a kill cuts, at worst, in its last line."""
    with open(path, "a", encoding="utf-8") as file:
        file.write(line + "\n")
        file.flush()


# --------------------------------------------------------------------------- whole folders
def old_folder_prefix(folder: Path) -> str:
    """Name prefix of a previous version moved aside during a swap: ``.NAME.old-``."""
    return f".{folder.name}.old-"


def new_folder_prefix(folder: Path) -> str:
    """Name prefix of a version being written: ``.NAME.new-``."""
    return f".{folder.name}.new-"


def default_folder_mode() -> int:
    """0o777 less the process umask: what ``os.mkdir`` would have given (``tempfile.mkdtemp``
    makes its folders private, 0o700, which a checkpoint should not be)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o777 & ~umask


def check_file_name(name: str) -> None:
    """File names in a checkpoint are plain names: no folders, nothing hidden."""
    if not name or name != Path(name).name or name.startswith("."):
        raise CheckpointError(f"checkpoint file names must be plain file names, got {name!r}.")


def write_folder_atomically(folder: str | os.PathLike, files: Mapping[str, bytes]) -> None:
    """Replace ``folder`` by a folder holding exactly ``files`` (name -> contents), as a unit.

    1. write every file into a fresh sibling ``.NAME.new-XXXX``, fsync each file and the folder;
    2. rename the current ``folder`` (if any) to ``.NAME.old-<time>-XXXX``;
    3. rename the new folder to ``folder`` and fsync the parent;
    4. remove the old folder (and any leftover of an earlier interrupted swap).

    A kill between 2 and 3 leaves no ``folder`` but a complete ``.old`` sibling, which
    :func:`existing_folder` (and so every loader here) falls back to.
    """
    folder = Path(folder)
    for name in files:
        check_file_name(name)
    parent = folder.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=parent, prefix=new_folder_prefix(folder)))
        os.chmod(staging, default_folder_mode())
    except OSError as exc:
        raise CheckpointError(f"cannot write the checkpoint {folder}: {exc.strerror}.") from None
    moved_aside: Path | None = None
    try:
        for name, data in files.items():
            with open(staging / name, "wb") as file:
                file.write(data)
                file.flush()
                os.fsync(file.fileno())
        fsync_folder(staging)
        if folder.exists():
            stamp = f"{time.time_ns():020d}-{secrets.token_hex(4)}"
            moved_aside = parent / f"{old_folder_prefix(folder)}{stamp}"
            os.replace(folder, moved_aside)
        os.replace(staging, folder)
        fsync_folder(parent)
    except BaseException as exc:
        if moved_aside is not None and not folder.exists():
            os.replace(moved_aside, folder)  # put the previous version back
        shutil.rmtree(staging, ignore_errors=True)
        if isinstance(exc, OSError):
            raise CheckpointError(
                f"cannot write the checkpoint {folder}: {exc.strerror or exc}; "
                "the previous one is unchanged."
            ) from None
        raise
    remove_leftovers(folder)


def remove_leftovers(folder: Path) -> None:
    """Delete ``.NAME.old-*`` and ``.NAME.new-*`` siblings: earlier versions and the staging
    folders of interrupted writes, all superseded once ``folder`` is in place."""
    prefixes = (old_folder_prefix(folder), new_folder_prefix(folder))
    for sibling in folder.parent.iterdir():
        if sibling.name.startswith(prefixes):
            shutil.rmtree(sibling, ignore_errors=True)


def existing_folder(folder: Path) -> Path | None:
    """``folder`` if it exists, else the newest complete previous version left beside it by an
    interrupted :func:`write_folder_atomically`, else None."""
    if folder.is_dir():
        return folder
    if not folder.parent.is_dir():
        return None
    previous = sorted(
        sibling
        for sibling in folder.parent.iterdir()
        if sibling.name.startswith(old_folder_prefix(folder)) and sibling.is_dir()
    )
    return previous[-1] if previous else None  # names sort by the time they were moved aside
