"""Class 12 of issue 27, words that mislead: a checkpoint that cannot be read is not reported
as one that cannot be written; a sentence quoting another ends with one period; "the previous
one is unchanged" only where there was one."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from light_llm import GPT, ModelConfig
from light_llm.checkpoints import save
from light_llm.errors import CheckpointError
from tests.reliability.conftest import assert_refused, run_cli


def under_a_file(tmp_path, name):
    (tmp_path / "a-file").write_text("keep me\n")
    return tmp_path / "a-file" / name


COMMANDS_UNDER_A_FILE = {
    "attention": lambda ck, bad, corpus: (
        ["attention", "--checkpoint", ck, "--prompt", "ab"] + ["--out", bad / "x.png"]
    ),
    "train": lambda ck, bad, corpus: ["train", "--data", corpus, "--out", bad],
    "tokenizer train": lambda ck, bad, corpus: (
        ["tokenizer", "train", "--data", corpus] + ["--out", bad]
    ),
    "export": lambda ck, bad, corpus: (
        ["export", "--checkpoint", ck, "--format", "hf"] + ["--out", bad]
    ),
    "explain": lambda ck, bad, corpus: ["explain", "cat-sat", "--markdown", bad / "x.md"],
}


@pytest.mark.parametrize("command", COMMANDS_UNDER_A_FILE)
def test_a_path_under_a_file_is_one_sentence_with_one_period(
    capsys, tmp_path, char_checkpoint, corpus, command
):
    bad = under_a_file(tmp_path, "sub")
    code, _, err = run_cli(capsys, *COMMANDS_UNDER_A_FILE[command](char_checkpoint, bad, corpus))
    assert_refused(code, err, "is a file")
    assert ".." not in err.replace(str(tmp_path), "") and "None." not in err
    assert (tmp_path / "a-file").read_text() == "keep me\n"


def test_a_checkpoint_that_cannot_be_read_is_not_called_unwritable(
    capsys, char_checkpoint, monkeypatch
):
    real_is_file = Path.is_file

    def is_file_as_a_user(path):  # a folder of mode 000 as anyone but root
        if char_checkpoint in (path, *path.parents):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return real_is_file(path)

    monkeypatch.setattr(Path, "is_file", is_file_as_a_user)
    code, _, err = run_cli(capsys, "generate", "--checkpoint", char_checkpoint, "--prompt", "a")
    assert_refused(code, err, "cannot open", "permission denied")
    assert "write" not in err


@pytest.mark.parametrize("existed", [False, True])
def test_a_failed_save_says_whether_a_previous_checkpoint_is_kept(tmp_path, monkeypatch, existed):
    model = GPT(ModelConfig(vocab_size=20, block_size=8, n_layer=1, n_head=2, n_embd=16))
    folder = tmp_path / "ck"
    if existed:
        save(model, folder)

    def full_disk(descriptor):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(CheckpointError) as raised:
        save(model, folder, overwrite=True)
    message = str(raised.value)
    assert ("previous one is unchanged" in message) == existed
    assert ("nothing was written" in message) == (not existed)
    assert message.count("..") == 0
