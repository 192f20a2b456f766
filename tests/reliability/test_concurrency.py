"""Class 5 of issue 12: concurrency and ordering. One run holds its output folder and a
second is told who; metrics.jsonl never holds lines beyond its checkpoint after a resume; a
killed write's temporary file is removed by the next write; an --overwrite run that has not
yet written a checkpoint has not touched the old run's log."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from light_llm.atomic import write_atomically
from light_llm.checkpoints.folder import names_before_manifests
from light_llm.checkpoints.run import LOCK_FILE, MetricsLog, RunFolder, held_by_live_process
from tests.reliability.conftest import assert_refused, run_cli, snapshot
from tests.train.helpers import tiny_flags


def test_a_second_run_on_a_held_folder_names_the_holder(capsys, tmp_path, corpus):
    out = tmp_path / "out"
    holder = RunFolder(out)
    holder.claim(overwrite=False, checkpoint_names=names_before_manifests)
    try:
        assert held_by_live_process(out)  # what the explorer reads as "still training"
        before = snapshot(out)
        code, _, err = run_cli(capsys, "train", *tiny_flags(corpus, out, max_iters=1))
        assert_refused(code, err, "in use by another training run", f"process {os.getpid()}")
        assert snapshot(out) == before
    finally:
        holder.release()
    assert not (out / LOCK_FILE).exists()
    assert run_cli(capsys, "train", *tiny_flags(corpus, out, max_iters=1))[0] == 0


def test_a_lock_left_by_a_killed_run_does_not_hold_the_folder(tmp_path):
    out = tmp_path / "out"
    code = (
        "import os, sys; from pathlib import Path; "
        "from light_llm.checkpoints.run import RunFolder; "
        f"RunFolder(Path({str(out)!r})).claim(False, lambda folder: False); os._exit(0)"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
    assert (out / LOCK_FILE).exists()  # left behind, as after kill -9
    assert not held_by_live_process(out)  # its holder is gone
    folder = RunFolder(out)
    folder.claim(overwrite=False, checkpoint_names=names_before_manifests)
    folder.release()


def lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("checkpoint_iteration", [0, 5, 10])
def test_resume_drops_the_lines_written_after_its_checkpoint(tmp_path, checkpoint_iteration):
    log = MetricsLog(tmp_path)
    for iteration in range(0, 16):
        log.append({"kind": "train", "iter": iteration, "loss": 1.0})
        if iteration % 5 == 0:
            log.append({"kind": "eval", "iter": iteration, "val_loss": 1.0})
    log.keep_until(checkpoint_iteration)
    kept = lines(tmp_path / "metrics.jsonl")
    assert all(r["iter"] < checkpoint_iteration for r in kept if r["kind"] == "train")
    assert max(r["iter"] for r in kept if r["kind"] == "eval") == checkpoint_iteration
    assert len(kept) == checkpoint_iteration + checkpoint_iteration // 5 + 1


def test_a_fresh_run_leaves_the_old_log_until_its_first_checkpoint(tmp_path):
    old = [{"kind": "eval", "iter": i, "val_loss": 2.0} for i in range(3)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in old))
    before = snapshot(tmp_path)
    log = MetricsLog(tmp_path)
    log.start_fresh()
    log.append({"kind": "train", "iter": 0, "loss": 3.0})
    assert snapshot(tmp_path) == before  # killed here: the old run's log is whole
    log.checkpoint_written()
    log.append({"kind": "eval", "iter": 0, "val_loss": 3.0})
    assert [
        r["loss" if r["kind"] == "train" else "val_loss"] for r in lines(tmp_path / "metrics.jsonl")
    ] == [3.0, 3.0]


@pytest.mark.parametrize("name", ["train.bin", "meta.json", "model.png"])
def test_a_killed_writers_temporary_file_is_removed_by_the_next_write(tmp_path, name):
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    stale = tmp_path / f".{name}.{int(dead.stdout)}.abcd1234.tmp"
    stale.write_bytes(b"\0" * 1000)
    live = tmp_path / f".{name}.{os.getpid()}.live0000.tmp"  # a writer still running
    live.write_bytes(b"x")
    write_atomically(tmp_path / name, b"done")
    assert not stale.exists() and live.exists()
    assert (tmp_path / name).read_bytes() == b"done"
