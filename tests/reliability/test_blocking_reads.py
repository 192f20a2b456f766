"""Classes 5 and 6 of issue 27: reads that block, never end, or reserve their limit.

5. A FIFO (which blocks a plain ``open`` forever) or a link to /dev/zero (which never ends)
   under any name light-llm reads in a run folder or checkpoint: `train --resume`, `merge`,
   `generate` and `tokenize --file` answer one sentence instead of hanging or filling memory.
6. A corpus read takes memory for what the file holds, not for its 16 GiB limit: `train`,
   `eval`, `tokenizer train` and `tokenize --file` work under a 3 GiB address-space limit.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from light_llm.checkpoints import load, save
from light_llm.checkpoints.run import TRAINER_STATE_FILE
from tests.reliability.conftest import assert_refused, run_cli, snapshot
from tests.train.helpers import tiny_flags

RUN_FOLDER_NAMES = [
    "checkpoint/optimizer.json",
    "checkpoint/optimizer.safetensors",
    "checkpoint/trainer_state.json",
    "checkpoint/config.json",
    "checkpoint/model.safetensors",
    "checkpoint/light_tokenizer.json",
    "data/meta.json",
    "data/train.bin",
    "metrics.jsonl",
]


def replace_by(path, kind):
    path.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
@pytest.mark.parametrize("name", RUN_FOLDER_NAMES)
def test_resume_never_blocks_on_a_run_folder_file(capsys, tmp_path, finished_run, name, kind):
    out = shutil.copytree(finished_run, tmp_path / "out", symlinks=True)
    replace_by(out / name, kind)
    before = snapshot(out)
    code, _, err = run_cli(capsys, "train", "--out", out, "--resume", "--max-iters", "4")
    assert_refused(code, err, os.path.basename(name))
    assert snapshot(out) == before


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
@pytest.mark.parametrize("name", [".light-llm-files", "model.safetensors", "config.json"])
def test_a_checkpoint_manifest_or_state_that_blocks_is_no_hang(
    capsys,
    tmp_path,
    finished_run,
    name,
    kind,
):
    checkpoint = shutil.copytree(finished_run / "checkpoint", tmp_path / "ck")
    replace_by(checkpoint / name, kind)
    argv = ["generate", "--checkpoint", checkpoint, "--prompt", "the", "--max-new-tokens", "2"]
    code, _, err = run_cli(capsys, *argv)
    if name == ".light-llm-files":  # not read to load: the model answers
        assert code == 0, err
        (checkpoint / TRAINER_STATE_FILE).unlink()  # a model folder: a run's is refused whole
        save(load(checkpoint), checkpoint)  # no manifest to trust: light-llm's names replaced
        assert (checkpoint / name).is_file()
        return
    assert_refused(code, err, name)


@pytest.mark.parametrize("path", ["/dev/zero", "fifo", "folder"])
def test_tokenize_file_reads_only_regular_files(capsys, tmp_path, path):
    if path == "fifo":
        os.mkfifo(tmp_path / "fifo")
    elif path == "folder":
        (tmp_path / "folder").mkdir()
    target = path if path.startswith("/") else tmp_path / path
    code, _, err = run_cli(capsys, "tokenize", "--file", target)
    assert_refused(code, err, str(target))


def test_corpus_reads_fit_under_a_small_address_space_limit(tmp_path, corpus):
    out = tmp_path / "out"
    commands = [
        ["train", *tiny_flags(corpus, out, max_iters=1, eval_interval=1)],
        ["eval", "--checkpoint", str(out), "--eval-iters", "1"],
        ["tokenizer", "train", "--data", str(corpus), "--kind", "bpe", "--vocab-size", "300"]
        + ["--out", str(tmp_path / "tok")],
        ["tokenize", "--file", str(corpus), "--tokenizer", "char"],
    ]
    script = textwrap.dedent(
        f"""
        import resource, sys
        limit = 3 * 2**30  # far below the 16 GiB a corpus may be
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        from light_llm.cli import main
        for argv in {commands!r}:
            code = main(argv)
            if code != 0:
                sys.exit(f"{{argv[0]}} exited with {{code}}")
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=os.environ.copy()
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "MemoryError" not in result.stderr
