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


WRITERS = {
    "export": lambda ck, corpus: ["export", "--checkpoint", ck, "--format", "hf"],
    "quantize": lambda ck, corpus: ["quantize", "--checkpoint", ck],
    "tokenizer train": lambda ck, corpus: [
        *("tokenizer", "train", "--data", corpus, "--kind", "bpe", "--vocab-size", "300"),
    ],
}


@pytest.mark.parametrize("out", [".", "", ".."])
@pytest.mark.parametrize("writer", WRITERS)
def test_the_current_folder_as_out_is_one_sentence(
    capsys, tmp_path, monkeypatch, char_checkpoint, corpus, writer, out
):
    """A command that writes its --out folder as a unit, told to write the folder it runs in
    (or one holding it), says so and names another: it said "Device or resource busy; the
    previous one is unchanged", of a folder that had no previous one."""
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    code, _, err = run_cli(capsys, *WRITERS[writer](char_checkpoint, corpus), "--out", out)
    which = "holds the current folder" if out == ".." else "is the current folder"
    assert_refused(code, err, which, "such as")
    assert list(here.iterdir()) == []
