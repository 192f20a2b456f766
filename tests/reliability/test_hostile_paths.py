"""Bad paths given to every command that reads a text file (issue 12, the hostile user): a
symbolic link that points at itself, a folder, a path under a file and a name that is not
UTF-8 are one line on stderr and exit code 2, never a RuntimeError from resolving the path."""

from __future__ import annotations

import os

import pytest

from tests.reliability.conftest import assert_refused, run_cli


def bad_path(tmp_path, kind):
    if kind == "symlink loop":
        (tmp_path / "loop").symlink_to(tmp_path / "loop")
        return tmp_path / "loop"
    if kind == "folder":
        (tmp_path / "folder").mkdir()
        return tmp_path / "folder"
    if kind == "under a file":
        (tmp_path / "file").write_text("x")
        return tmp_path / "file" / "corpus.txt"
    name = os.fsdecode(os.fsencode(str(tmp_path)) + b"/bad\xffname")
    os.mkdir(os.fsencode(name))
    return name


READERS = {
    "eval --data": lambda ck, path, out: ["eval", "--checkpoint", ck, "--data", path],
    "train --data": lambda ck, path, out: ["train", "--data", path, "--out", out],
    "tokenizer train --data": lambda ck, path, out: [
        *("tokenizer", "train", "--data", path, "--kind", "bpe", "--vocab-size", "300"),
        *("--out", out),
    ],
    "tokenize --file": lambda ck, path, out: ["tokenize", "--file", path],
    "generate --checkpoint": lambda ck, path, out: [
        "generate",
        "--checkpoint",
        path,
        "--prompt",
        "a",
    ],
}


@pytest.mark.parametrize("kind", ["symlink loop", "folder", "under a file", "non-UTF-8 name"])
@pytest.mark.parametrize("reader", READERS)
def test_a_bad_path_is_one_line(capsys, tmp_path, char_checkpoint, reader, kind):
    path = bad_path(tmp_path, kind)
    argv = READERS[reader](char_checkpoint, path, tmp_path / "out")
    code, _, err = run_cli(capsys, *argv)
    assert_refused(code, err)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
