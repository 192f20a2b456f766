"""A full disk (issue 12): saving a checkpoint, building the token cache, training a tokenizer
and exporting stop with one sentence that says the disk is full (exit code 2 from the CLI, a
LightLLMError from the API), and leave what was there before byte for byte, with no temporary
file behind.

The disk is a real one: a tmpfs of a few MiB mounted for the test and filled to the last byte
(which needs root; elsewhere the same cases run with ``os.fsync`` reporting ENOSPC, as a
network or delayed-allocation file system does when the data reaches the disk).
"""

from __future__ import annotations

import errno
import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from light_llm.checkpoints import load, save
from light_llm.errors import LightLLMError
from tests.reliability.conftest import assert_refused, run_cli, snapshot


def leftovers(folder: Path) -> list[str]:
    return sorted(
        path.name
        for path in folder.rglob("*")
        if path.name.endswith(".tmp") or ".new-" in path.name or ".old-" in path.name
    )


def tmpfs_mounts() -> bool:
    """Whether this machine lets the tests mount a small tmpfs (root with the right to mount);
    where it does not, the fsync variant alone stands for a full disk (no test is skipped)."""
    with tempfile.TemporaryDirectory() as folder:
        mounted = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", folder], capture_output=True
        )
        if mounted.returncode == 0:
            subprocess.run(["umount", folder], check=True)
        return mounted.returncode == 0


@pytest.fixture(params=["tmpfs", "fsync"] if tmpfs_mounts() else ["fsync"])
def full_disk(request, tmp_path, monkeypatch):
    """(the folder on the disk, a function that fills it up)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if request.param == "fsync":

        def fill() -> None:
            def no_space(descriptor):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

            monkeypatch.setattr(os, "fsync", no_space)

        yield disk, fill
        return
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)], check=True)
    try:

        def fill() -> None:
            with open(disk / "filler", "wb", buffering=0) as filler:
                try:
                    while True:
                        filler.write(b"\0" * 512)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC

        yield disk, fill
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def without_filler(folder: Path) -> dict[str, str]:
    return {name: digest for name, digest in snapshot(folder).items() if name != "filler"}


def test_save_keeps_the_previous_checkpoint(full_disk, char_checkpoint):
    disk, fill = full_disk
    model = load(char_checkpoint)
    save(model, disk / "ck")
    before = snapshot(disk / "ck")
    fill()
    with pytest.raises(LightLLMError, match="No space left on device"):
        save(model, disk / "ck")
    assert snapshot(disk / "ck") == before
    assert leftovers(disk) == []


def test_export_keeps_the_previous_export(capsys, full_disk, char_checkpoint):
    disk, fill = full_disk
    argv = ["export", "--checkpoint", char_checkpoint, "--format", "hf", "--out", disk / "hf"]
    assert run_cli(capsys, *argv)[0] == 0
    before = snapshot(disk / "hf")
    fill()
    code, _, err = run_cli(capsys, *argv)
    assert_refused(code, err, "No space left on device")
    assert snapshot(disk / "hf") == before
    assert leftovers(disk) == []


def test_tokenizer_training_keeps_the_previous_tokenizer(capsys, full_disk, corpus):
    disk, fill = full_disk
    argv = ["tokenizer", "train", "--data", corpus, "--kind", "bpe", "--out", disk / "tok"]
    assert run_cli(capsys, *argv, "--vocab-size", "280")[0] == 0
    before = snapshot(disk / "tok")
    fill()
    code, _, err = run_cli(capsys, *argv, "--vocab-size", "300", "--overwrite")
    assert_refused(code, err, "No space left on device", "cannot write the tokenizer")
    assert snapshot(disk / "tok") == before
    assert leftovers(disk) == []


def test_the_token_cache_build_leaves_nothing_half_written(capsys, full_disk, corpus):
    disk, fill = full_disk
    (disk / "out").mkdir()
    fill()
    before = without_filler(disk)
    code, _, err = run_cli(
        capsys, "train", "--data", corpus, "--out", disk / "out", "--max-iters", "2"
    )
    assert_refused(code, err, "No space left on device")
    assert leftovers(disk) == []
    after = without_filler(disk)
    assert not [name for name in after if name not in before and "lock" not in name], after
