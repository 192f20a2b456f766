"""Writing files so that no reader ever sees half of one.

Every file light-llm writes (checkpoints, token caches, tokenizers, pictures, logs) goes
through here, in one of three ways:

- :func:`atomic_file` / :func:`write_atomically`: the bytes go to a temporary file in the same
  folder, which is flushed, fsynced, given the permissions a normal file would get, and renamed
  over the target with ``os.replace``. A crash at any moment leaves the old file or the whole
  new one.
- :func:`write_folder_atomically`: a whole folder (a checkpoint) replaced as a unit. The
  folder lists what it wrote in ``.light-llm-files``; a folder holding anything else (a user's
  own files) is never replaced unless asked (``overwrite``), so saving never deletes a file
  light-llm did not write (:func:`check_replaceable`).
- :func:`append_line`: one line added to a log and flushed; a kill leaves every earlier line
  whole (a reader skips a last line cut short).

Temporary files carry the writer's process id (``.NAME.<pid>.XXXX.tmp``): the next write of
the same file removes those whose writer is gone (killed mid-write), never a live one's.
Folders are created by :func:`make_folder`, which names the real obstacle (a file where a
folder should be, a missing permission) rather than "File exists".
"""

from __future__ import annotations

import contextlib
import io
import os
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from pathlib import Path
from typing import BinaryIO

from light_llm.errors import CheckpointError, DataError, OutputError, reason
from light_llm.untrusted import read_text_file


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
    make_folder(path.parent)
    remove_stale_temporaries(path)
    handle, temporary = tempfile.mkstemp(
        dir=path.parent, prefix=f"{temporary_prefix(path)}{os.getpid()}.", suffix=".tmp"
    )
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


def temporary_prefix(path: Path) -> str:
    """Name prefix of the temporary files :func:`atomic_file` writes for ``path``."""
    return f".{path.name}."


def process_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this machine (one of another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return pid > 0
    return True


def remove_stale_temporaries(path: Path) -> None:
    """Delete the ``.NAME.<pid>.XXXX.tmp`` files of ``path`` left by writers that no longer
    run (a build killed mid-write); a live writer's file is left alone."""
    prefix = temporary_prefix(path)
    with contextlib.suppress(OSError):
        for sibling in path.parent.iterdir():
            name = sibling.name
            if not (name.startswith(prefix) and name.endswith(".tmp")):
                continue
            writer = name[len(prefix) :].split(".", 1)[0]
            if writer.isdigit() and not process_alive(int(writer)):
                sibling.unlink(missing_ok=True)


def make_folder(folder: str | os.PathLike) -> Path:
    """Create ``folder`` and any missing parents (an existing folder is fine); OutputError
    naming the real obstacle: a file where a folder should be, a missing permission."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot create the folder {folder}: {why_not(folder, exc)}.") from None
    return folder


def why_not(path: Path, exc: OSError) -> str:
    """Why ``path`` could not be made or written: the nearest existing ancestor that is a
    file, else the system's reason."""
    for ancestor in (path, *path.parents):
        if ancestor.exists():
            if not ancestor.is_dir():
                return f"{ancestor} is a file, not a folder"
            break
    return reason(exc)


def write_atomically(path: str | os.PathLike, data: bytes) -> None:
    """Replace ``path`` by ``data`` as one step (see :func:`atomic_file`)."""
    with atomic_file(path) as file:
        file.write(data)


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"  # the first 8 bytes of every PNG file


def check_picture_path(path: str | os.PathLike, what: str = "the picture") -> Path:
    """``path`` as a Path if a PNG picture a user named may be written there, else
    OutputError (one sentence): its name must end in .png, no file may stand where its folder
    would be (a missing folder is made when it is written), the nearest folder that exists
    must take a new file (tried with an empty one, removed at once: a folder the system will
    not write, such as /proc, is found before the work, not after it), and a file already there
    must be a PNG itself (:func:`refuse_to_draw_over`). ``what``: how the sentence names it (a
    flag, say)."""
    path = Path(path)
    if path.suffix.lower() != ".png":
        raise OutputError(f"{what} {path} is drawn as a PNG picture: give a name ending in .png.")
    if path.is_dir():
        raise OutputError(f"{what} {path} is a folder: give a file name ending in .png.")
    folder = next((ancestor for ancestor in path.absolute().parents if ancestor.exists()), None)
    if folder is not None and not folder.is_dir():
        raise OutputError(f"{what} {path} cannot be written: {folder} is a file, not a folder.")
    if folder is not None:
        try:
            handle, trial = tempfile.mkstemp(  # named as atomic_file names its own
                dir=folder, prefix=f"{temporary_prefix(path)}{os.getpid()}.", suffix=".tmp"
            )
        except OSError as exc:
            raise OutputError(f"{what} {path} cannot be written: {reason(exc)}.") from None
        os.close(handle)
        Path(trial).unlink(missing_ok=True)
    return refuse_to_draw_over(path, what)


def refuse_to_draw_over(path: Path, what: str = "the picture") -> Path:
    """``path``, unless a file that is not a PNG picture is there (OutputError): a picture is
    redrawn over an earlier one, never over a checkpoint, a corpus or any other file that a
    mistyped path names (:func:`refuse_to_replace`)."""
    return refuse_to_replace(
        path, what, (PNG_SIGNATURE,), "a PNG picture: light-llm draws over its own pictures only"
    )


def refuse_to_replace(path: Path, what: str, starts: tuple[bytes, ...], ours: str) -> Path:
    """``path``, unless a file is there whose first bytes are none of ``starts`` (those of the
    files light-llm writes there): OutputError "WHAT PATH is a file that is not OURS; name
    another file". Nothing there, or a folder (the writer's own sentence), passes."""
    if not (path.exists() or path.is_symlink()) or path.is_dir():
        return path
    try:
        with open(path, "rb") as existing:
            head = existing.read(max(map(len, starts))) if path.is_file() else b""
    except OSError as exc:
        raise OutputError(f"{what} {path} cannot be read: {reason(exc)}.") from None
    if not head.startswith(starts):
        raise OutputError(f"{what} {path} is a file that is not {ours}; name another file.")
    return path


def save_figure(figure, path: str | os.PathLike, dpi: int = 100) -> Path:
    """Render a matplotlib ``figure`` as PNG in memory and write it to ``path`` as one step;
    returns the path. OutputError when ``path`` names a file that is not a PNG
    (:func:`refuse_to_draw_over`), DataError (one sentence) when it cannot be written."""
    path = refuse_to_draw_over(Path(path))
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi)
    try:
        write_atomically(path, buffer.getvalue())
    except OSError as exc:
        raise DataError(f"cannot write the picture {path}: {reason(exc)}.") from None
    return path


def append_line(path: str | os.PathLike, line: str) -> None:
    """Add ``line`` and a newline at the end of the text file ``path`` (created if absent) and
    flush it: an append-only log that a kill cuts, at worst, in its last line. A link at
    ``path`` is an OSError, never followed."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
    descriptor = os.open(path, flags, 0o666)  # a link is refused (ELOOP), never followed
    with os.fdopen(descriptor, "a", encoding="utf-8") as file:
        file.write(line + "\n")
        file.flush()


# --------------------------------------------------------------------------- whole folders
def old_folder_prefix(folder: Path) -> str:
    """Name prefix of a previous version moved aside during a swap: ``.NAME.old-``."""
    return f".{folder.name}.old-"


def new_folder_prefix(folder: Path) -> str:
    """Name prefix of a version being written: ``.NAME.new-``."""
    return f".{folder.name}.new-"


# what a swap adds to a folder's name for the sibling it moves the old version to:
# ".NAME.old-" and a stamp of 20 digits, "-" and 8 hex digits (the longest sibling it writes)
SWAP_SIBLING_EXTRA_BYTES = len("..old-") + 20 + 1 + 8
NAME_MAX_FALLBACK = 255  # bytes a name, on every file system Linux, macOS and Windows use


def name_limit(path: Path) -> int:
    """The most bytes a file name may have where ``path`` would be (the file system's
    NAME_MAX, asked of the nearest folder that exists; 255 where it cannot be asked)."""
    for ancestor in path.absolute().parents:
        try:  # a part of the path may itself be too long to ask about
            if ancestor.is_dir():
                return os.pathconf(ancestor, "PC_NAME_MAX")
        except (OSError, ValueError, AttributeError):  # Windows has no pathconf
            continue
    return NAME_MAX_FALLBACK


def check_folder_name_fits(folder: Path, what: str) -> None:
    """OutputError, before anything is written, when a part of ``folder``'s path is longer
    than the file system takes, or the folder's own name leaves no room for the sibling a swap
    writes beside it (``.NAME.old-<stamp>``: :data:`SWAP_SIBLING_EXTRA_BYTES` more)."""
    limit = name_limit(folder)
    for part in folder.parts:
        if len(os.fsencode(part)) > limit:
            raise OutputError(
                f"cannot write {what} {folder}: the name {part[:40]}... is "
                f"{len(os.fsencode(part))} bytes, over the {limit} this file system allows a "
                "name; choose a shorter one."
            )
    name_bytes = len(os.fsencode(folder.name))
    if name_bytes + SWAP_SIBLING_EXTRA_BYTES > limit:
        raise OutputError(
            f"cannot write {what} {folder}: its name is {name_bytes} bytes, and the folder is "
            f"replaced as a unit through a sibling {SWAP_SIBLING_EXTRA_BYTES} bytes longer, over "
            f"the {limit} this file system allows a name; choose a name of at most "
            f"{limit - SWAP_SIBLING_EXTRA_BYTES} bytes."
        )


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


FOLDER_MANIFEST = ".light-llm-files"  # the names write_folder_atomically put in a folder
MANIFEST_LIMIT = 1 << 20  # bytes of a manifest worth reading


def written_names(folder: Path) -> set[str] | None:
    """The file names the manifest of ``folder`` lists, or None without a readable one."""
    path = folder / FOLDER_MANIFEST
    if not path.is_file() or path.is_symlink():
        return None
    try:  # bounded and non-blocking: a FIFO or /dev/zero is no manifest
        text = read_text_file(path, MANIFEST_LIMIT, "the manifest", OutputError)
    except OutputError:
        return None
    return {name for name in text.splitlines() if name}


def check_replaceable(
    folder: str | os.PathLike,
    overwrite: bool = False,
    written_before_manifests: Callable[[Path], Collection[str]] | None = None,
) -> None:
    """OutputError unless replacing ``folder`` as a unit loses nothing light-llm did not
    write: ``folder`` is absent, empty, or holds only files its manifest lists (or, without
    a manifest, only the names ``written_before_manifests(folder)`` gives: light-llm's own
    file names when it is one of light-llm's folders from before manifests, none else).
    ``overwrite`` allows replacing any folder, never a file."""
    folder = Path(folder)
    if not folder.exists() and not folder.is_symlink():
        return
    if not folder.is_dir():
        raise OutputError(f"{folder} is a file, not a folder: remove it or choose another path.")
    if overwrite:
        return
    try:
        entries = sorted(entry.name for entry in folder.iterdir())
    except OSError as exc:
        raise OutputError(f"cannot look into {folder}: {reason(exc)}.") from None
    owned = written_names(folder)
    if owned is None:
        owned = set(written_before_manifests(folder) if written_before_manifests else ())
    foreign = [name for name in entries if name not in owned and name != FOLDER_MANIFEST]
    if foreign:
        shown = ", ".join(foreign[:3]) + (
            f" and {len(foreign) - 3} more" if len(foreign) > 3 else ""
        )
        raise OutputError(
            f"{folder} holds files light-llm did not write ({shown}); saving there would "
            "delete them: choose a new or empty folder, or move those files away (light-llm "
            "train's --overwrite and the API's overwrite=True replace such a folder on purpose)."
        )


def refuse_working_folder(folder: str | os.PathLike, named: str | None = None) -> None:
    """OutputError when ``folder`` is the current folder or holds it: a folder written as a
    unit replaces the old one whole, which the system refuses for the folder a process stands
    in ("Device or resource busy") and which would leave the learner's shell in a removed
    folder. ``named``: how the sentence names it (``--out .``, say; the path by default)."""
    folder = Path(folder)
    named = named or str(folder)
    target, here = folder.resolve(), Path.cwd().resolve()
    if target == here or target in here.parents:
        which = "is the current folder" if target == here else "holds the current folder"
        raise OutputError(
            f"{named} {which}, which writing there would replace as a whole; name a folder "
            f"that does not hold it, such as {os.path.join(folder, 'model')}."
        )


def write_folder_atomically(
    folder: str | os.PathLike,
    files: Mapping[str, bytes],
    overwrite: bool = False,
    written_before_manifests: Callable[[Path], Collection[str]] | None = None,
    what: str = "the checkpoint",
) -> None:
    """Replace ``folder`` by a folder holding exactly ``files`` (name -> contents) and the
    manifest naming them, as a unit; a folder holding anything light-llm did not write is
    refused (:func:`check_replaceable`, ``overwrite`` and ``written_before_manifests`` as
    there) before anything is written. ``what`` names the folder in an error ("cannot write
    the checkpoint ...").

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
    check_folder_name_fits(folder, what)
    refuse_working_folder(folder)
    check_replaceable(folder, overwrite, written_before_manifests)
    files = {**files, FOLDER_MANIFEST: "".join(f"{name}\n" for name in files).encode("utf-8")}
    parent = make_folder(folder.parent)
    try:
        staging = Path(tempfile.mkdtemp(dir=parent, prefix=new_folder_prefix(folder)))
        os.chmod(staging, default_folder_mode())
    except OSError as exc:
        raise CheckpointError(f"cannot write {what} {folder}: {reason(exc)}.") from None
    moved_aside: Path | None = None
    had_previous = folder.exists()
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
            kept = "the previous one is unchanged" if had_previous else "nothing was written"
            raise CheckpointError(f"cannot write {what} {folder}: {reason(exc)}; {kept}.") from None
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
