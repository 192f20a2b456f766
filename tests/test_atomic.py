"""Atomic writes: a reader sees the old file or the whole new one."""

import os
import stat

import pytest

from light_llm.atomic import atomic_file, write_atomically


def test_write_atomically_replaces_whole_files_and_leaves_no_temporaries(tmp_path):
    path = tmp_path / "sub" / "file.json"
    write_atomically(path, b"old")
    write_atomically(path, b"new")
    assert path.read_bytes() == b"new"
    assert os.listdir(path.parent) == ["file.json"]


def test_failed_write_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "file.json"
    write_atomically(path, b"old")

    def disk_full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space"):
        write_atomically(path, b"new")
    assert path.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["file.json"]


def test_an_error_inside_the_block_keeps_the_old_file(tmp_path):
    path = tmp_path / "tokens.bin"
    write_atomically(path, b"old")
    with pytest.raises(RuntimeError), atomic_file(path) as file:
        file.write(b"partial")
        raise RuntimeError("killed mid-write")
    assert path.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["tokens.bin"]


def test_files_get_the_permissions_of_a_normally_created_file(tmp_path):
    reference = tmp_path / "plain"
    reference.write_bytes(b"x")  # open() applies the umask to 0o666
    path = tmp_path / "atomic"
    write_atomically(path, b"x")
    assert stat.S_IMODE(path.stat().st_mode) == stat.S_IMODE(reference.stat().st_mode)
