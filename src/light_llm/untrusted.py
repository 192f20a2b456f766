"""Reading a file light-llm did not write itself (or that someone may have changed since):
every config.json, tokenizer file, trainer_state.json, shard index and token-cache meta.json
goes through here. No tensor library needed.

What is refused, each with one sentence in the caller's typed error:

- a path that is not a regular file: a folder, a FIFO (which would block the read forever),
  a device such as /dev/zero (which never ends);
- a file larger than its bound (``limit``), before it is read;
- a file the process may not read ("permission denied", not "no such file");
- text that is not UTF-8, JSON that does not parse or is nested too deeply to parse;
- a file a tokenizer names outside its own folder (:func:`file_inside`).
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from light_llm.errors import CheckpointError, reason

JSON_LIMIT = 256 * 2**20  # bytes of a JSON file worth reading (GPT-2's vocabulary is 1 MB)


def read_regular_file(
    path: str | os.PathLike, limit: int, what: str = "", error: type[Exception] = CheckpointError
) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``limit`` bytes that can be
    read, else ``error`` saying which of these it is not (``what`` names the file). Memory
    is taken for what the file holds, never for the limit (a 40 KB corpus under a 16 GiB
    limit needs 40 KB, also under ``ulimit -v``)."""
    name = describe(path, what)
    with open_regular_file(path, what, error) as (descriptor, size):
        if size > limit:
            raise error(f"{name} is {size:,} bytes, more than the {limit:,} such a file may be.")
        try:
            data = read_at_most(descriptor, size, limit)
        except OSError as exc:
            raise error(f"cannot read {name}: {reason(exc)}.") from None
        except MemoryError:
            raise error(f"{name} ({size:,} bytes) does not fit in this process's memory.") from None
    if len(data) > limit:
        raise error(f"{name} grew past the {limit:,} bytes such a file may be.")
    return data


def describe(path: str | os.PathLike, what: str = "") -> str:
    """How a message names the file ``path``: "corpus file PATH", or PATH alone."""
    return f"{what} {path}" if what else str(path)


READ_CHUNK = 1 << 20  # bytes read at a time beyond what fstat announced


def read_at_most(descriptor: int, size: int, limit: int) -> bytes:
    """Up to ``limit + 1`` bytes from ``descriptor``: the ``size`` fstat announced in one
    buffer of that size, then whatever the file grew by in chunks (a file under /proc says
    0 and holds text), so that the caller sees a file that grew past ``limit``."""
    buffer = bytearray(min(size, limit) + 1)
    view = memoryview(buffer)
    filled = 0
    with view, os.fdopen(descriptor, "rb", buffering=0, closefd=False) as file:
        while filled < len(buffer):
            count = file.readinto(view[filled:])
            if not count:
                break
            filled += count
    if filled < len(buffer):
        del buffer[filled:]
        return bytes(buffer)
    chunks = [bytes(buffer)]
    total = filled
    while total <= limit and (chunk := os.read(descriptor, min(READ_CHUNK, limit + 1 - total))):
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


@contextlib.contextmanager
def open_regular_file(
    path: str | os.PathLike, what: str = "", error: type[Exception] = CheckpointError
) -> Iterator[tuple[int, int]]:
    """``(descriptor, size)`` of ``path`` opened for reading without blocking (a FIFO would
    block ``open`` itself) when it is a regular file, else ``error``: a folder, a FIFO, a
    device such as /dev/zero, a socket, a missing or unreadable file. The descriptor is
    closed when the block ends."""
    name = describe(path, what)
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise error(f"{name} does not exist.") from None
    except PermissionError:
        raise error(f"cannot read {name}: permission denied.") from None
    except OSError as exc:
        raise error(f"cannot read {name}: {reason(exc)}.") from None
    try:
        status = os.fstat(descriptor)
        if stat.S_ISDIR(status.st_mode):
            raise error(f"{name} is a folder, not a file.")
        if not stat.S_ISREG(status.st_mode):
            raise error(f"{name} is not a regular file (a device, a pipe or a socket).")
        yield descriptor, status.st_size
    finally:
        os.close(descriptor)


def check_regular_file(
    path: str | os.PathLike, what: str = "", error: type[Exception] = CheckpointError
) -> None:
    """``error`` unless ``path`` is a regular file that can be read (:func:`open_regular_file`):
    for files a library opens itself by name (safetensors), checked before it does."""
    with open_regular_file(path, what, error):
        pass


def read_text_file(
    path: str | os.PathLike, limit: int, what: str = "", error: type[Exception] = CheckpointError
) -> str:
    """:func:`read_regular_file` decoded as UTF-8 (``error`` if it is not)."""
    data = read_regular_file(path, limit, what, error)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(
            f"{f'{what} ' if what else ''}{path} is not UTF-8 text (byte {exc.start})."
        ) from None


def parse_json(text: str, source: str, error: type[Exception] = CheckpointError) -> Any:
    """The JSON value of ``text`` (from ``source``); ``error`` when it does not parse or is
    nested too deeply to parse (``[[[[...`` a hundred thousand deep)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"{source} is not valid JSON ({exc}).") from None
    except RecursionError:
        raise error(f"{source} is not valid JSON (it is nested too deeply).") from None


def read_json_object(
    path: str | os.PathLike,
    what: str = "",
    error: type[Exception] = CheckpointError,
    limit: int = JSON_LIMIT,
) -> dict[str, Any]:
    """The JSON object in the file ``path`` (:func:`read_regular_file`, :func:`parse_json`);
    ``error`` when it is anything else."""
    value = parse_json(read_text_file(path, limit, what, error), str(path), error)
    if not isinstance(value, dict):
        raise error(f"{path} should hold a JSON object, not a {type(value).__name__}.")
    return value


def file_inside(folder: Path, name: object, error: type[Exception] = CheckpointError) -> Path:
    """``folder / name`` when ``name`` is a plain relative file name that stays inside
    ``folder`` once links are followed; ``error`` for an absolute path, ``..``, or a link out
    (a tokenizer's files live in its folder)."""
    if not isinstance(name, str) or not name or "\x00" in name:
        raise error(f"a file name in {folder} must be text, got {name!r}.")
    candidate = folder / name
    if Path(name).is_absolute():
        raise error(f"{name!r} lies outside {folder}: a checkpoint's files live in its folder.")
    try:
        inside = candidate.resolve().is_relative_to(folder.resolve())
    except (OSError, RuntimeError):
        inside = False
    if not inside:
        raise error(f"{name!r} lies outside {folder}: a checkpoint's files live in its folder.")
    return candidate
