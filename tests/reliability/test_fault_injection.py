"""Fault injection (issue 12): ``light-llm train`` killed with SIGKILL at chosen and at random
moments, during a checkpoint's save (while its files are written, and between moving the old
checkpoint aside and moving the new one in), during the token cache's build, during a
``--resume`` and during an ``--overwrite`` run. Afterwards the output folder holds the old
complete checkpoint or the new complete one: it loads, ``--resume`` continues it to the end,
no temporary file or folder outlives the next run, and metrics.jsonl holds each iteration once.

A chosen moment is reached by running the trainer under a small driver that stops the process
(it sleeps, waiting for the kill) the first time a write matching the moment happens; random
moments are seeded delays. The killed run is a real process; the resumed run is the CLI.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from light_llm.atomic import existing_folder
from light_llm.checkpoints import load
from light_llm.checkpoints.run import read_trainer_state
from tests.reliability.conftest import run_cli
from tests.train.helpers import tiny_flags

SRC = Path(__file__).resolve().parents[2] / "src"
MAX_ITERS = 60
FLAGS = {"eval_interval": 4, "eval_iters": 1, "max_iters": MAX_ITERS, "log_interval": 1}

# The driver: os.fsync / os.replace stop the process (after writing the marker file) when the
# path they touch contains STALL_PATH, at its STALL_COUNT-th matching call.
DRIVER = """
import os, sys, time
from pathlib import Path
pattern, count, marker, call = os.environ["STALL_PATH"], int(os.environ["STALL_COUNT"]), \\
    Path(os.environ["STALL_MARKER"]), os.environ["STALL_CALL"]
seen = [0]
def stall_if(path):
    if pattern in str(path):
        seen[0] += 1
        if seen[0] == count:
            marker.write_text("stalled")
            time.sleep(3600)
real_fsync, real_replace = os.fsync, os.replace
def fsync(fd):
    stall_if(os.readlink(f"/proc/self/fd/{fd}"))
    return real_fsync(fd)
def replace(src, dst, **kwargs):
    stall_if(src)
    return real_replace(src, dst, **kwargs)
if call == "fsync":
    os.fsync = fsync
else:
    os.replace = replace
from light_llm.cli import main
sys.exit(main(sys.argv[1:]))
"""


def start_training(argv: list[str], tmp_path: Path, stall: tuple[str, str, int] | None):
    env = {**os.environ, "PYTHONPATH": str(SRC), "STALL_MARKER": str(tmp_path / "stalled")}
    if stall is not None:
        call, path, count = stall
        env.update(STALL_CALL=call, STALL_PATH=path, STALL_COUNT=str(count))
        command = [sys.executable, "-c", DRIVER, "train", *argv]
    else:
        command = [sys.executable, "-m", "light_llm", "train", *argv]
    return subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )


def kill_when_stalled(process: subprocess.Popen, marker: Path) -> None:
    """SIGKILL ``process`` once it wrote ``marker`` (it then sleeps until killed)."""
    while not marker.exists():
        assert process.poll() is None, f"the run ended before the moment: {process.stderr.read()}"
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()


def kill_after(process: subprocess.Popen, seconds: float) -> None:
    try:
        process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGKILL)
        process.wait()


def leftovers(out: Path) -> list[str]:
    """Temporary files and folders of interrupted writes anywhere under ``out``."""
    return sorted(
        str(path.relative_to(out))
        for path in out.rglob("*")
        if path.name.endswith(".tmp") or ".new-" in path.name or ".old-" in path.name
    )


def assert_whole_checkpoint_or_none(out: Path) -> int | None:
    """The iteration of the checkpoint the killed run left (loaded whole), None if none."""
    folder = existing_folder(out / "checkpoint")
    if folder is None:
        return None
    load(out)  # every tensor there and finite, the config matching
    return read_trainer_state(folder)["iteration"]


def assert_finished_cleanly(capsys, corpus: Path, out: Path, resume: bool) -> None:
    """The run in ``out`` continued (or started over) to the end: exit 0, its final checkpoint
    at MAX_ITERS, nothing temporary left, each iteration logged once."""
    extra = {"resume": True} if resume else {"overwrite": True}
    code, _, err = run_cli(capsys, "train", *tiny_flags(corpus, out, **FLAGS, **extra))
    assert code == 0, err
    assert read_trainer_state(out / "checkpoint")["iteration"] == MAX_ITERS
    load(out)
    assert leftovers(out) == []
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    for kind in ("train", "eval"):
        iterations = [record["iter"] for record in records if record.get("kind") == kind]
        assert iterations == sorted(set(iterations)), (kind, iterations)
    assert max(record["iter"] for record in records) == MAX_ITERS


def check_after_kill(capsys, corpus: Path, out: Path, before: int | None) -> None:
    iteration = assert_whole_checkpoint_or_none(out)
    if before is not None:  # the old checkpoint, or a newer complete one
        assert iteration is not None and iteration >= before
    assert_finished_cleanly(capsys, corpus, out, resume=iteration is not None)


def first_run(capsys, corpus: Path, out: Path, max_iters: int) -> int:
    code, _, err = run_cli(
        capsys, "train", *tiny_flags(corpus, out, **{**FLAGS, "max_iters": max_iters})
    )
    assert code == 0, err
    return read_trainer_state(out / "checkpoint")["iteration"]


# (what the process does when it stops: the call, a part of the path it touches, which
# time), and whether a complete checkpoint must be there after the kill
MOMENTS = {
    "writing the token cache": (("fsync", "train.bin", 1), False),
    "writing the first checkpoint's files": (("fsync", ".checkpoint.new-", 2), False),
    "moving a checkpoint in (old one aside)": (("replace", ".checkpoint.new-", 2), True),
    "writing the third checkpoint": (("fsync", ".checkpoint.new-", 9), True),
}
FAST = {"writing the token cache", "moving a checkpoint in (old one aside)"}


@pytest.mark.parametrize(
    "moment",
    [
        pytest.param(name, marks=() if name in FAST else pytest.mark.slow, id=name)
        for name in MOMENTS
    ],
)
def test_a_run_killed_at_a_chosen_moment_resumes_to_the_end(capsys, tmp_path, corpus, moment):
    out = tmp_path / "out"
    stall, has_checkpoint = MOMENTS[moment]
    process = start_training(tiny_flags(corpus, out, **FLAGS), tmp_path, stall)
    kill_when_stalled(process, tmp_path / "stalled")
    assert (assert_whole_checkpoint_or_none(out) is not None) == has_checkpoint
    check_after_kill(capsys, corpus, out, before=None)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["resume", "overwrite"])
@pytest.mark.parametrize("moment", ["moving a checkpoint in (old one aside)", "writing files"])
def test_a_killed_resume_or_overwrite_keeps_the_old_checkpoint(
    capsys, tmp_path, corpus, mode, moment
):
    out = tmp_path / "out"
    done = first_run(capsys, corpus, out, max_iters=8)
    old_log = (out / "metrics.jsonl").read_text()
    stall = ("replace", ".checkpoint.new-", 1) if moment != "writing files" else None
    stall = stall or ("fsync", ".checkpoint.new-", 1)
    argv = tiny_flags(corpus, out, **FLAGS, **{mode: True})
    kill_when_stalled(start_training(argv, tmp_path, stall), tmp_path / "stalled")
    assert assert_whole_checkpoint_or_none(out) == done  # the old one, untouched
    if mode == "overwrite":  # the killed fresh run has not yet replaced the old log
        assert (out / "metrics.jsonl").read_text() == old_log
    assert_finished_cleanly(capsys, corpus, out, resume=True)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_a_run_killed_at_a_random_moment_resumes_to_the_end(capsys, tmp_path, corpus, seed):
    out = tmp_path / "out"
    delay = random.Random(seed).uniform(1.0, 8.0)
    before = None
    if seed % 2:  # half of them kill a --resume of a finished shorter run
        before = first_run(capsys, corpus, out, max_iters=8)
        argv = tiny_flags(corpus, out, **FLAGS, resume=True)
    else:
        argv = tiny_flags(corpus, out, **FLAGS)
    kill_after(start_training(argv, tmp_path, None), delay)
    check_after_kill(capsys, corpus, out, before)
