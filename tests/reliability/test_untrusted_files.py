"""Class 3 of issue 12: every file light-llm reads is untrusted. Deep nesting, damaged
trainer states, a tampered token cache, tokenizer files pointing outside their folder or at
a device or a FIFO, unreadable files: one sentence, exit code 2, nothing changed on disk."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from light_llm.cli import main
from light_llm.data import encode_corpus
from light_llm.tokenizers import CharTokenizer
from tests.reliability.conftest import assert_refused, run_cli, snapshot
from tests.train.helpers import tiny_flags

DEEP = "[" * 100_000


def generate_argv(folder):
    return ["generate", "--checkpoint", folder, "--prompt", "to", "--max-new-tokens", "2"]


@pytest.mark.parametrize("name", ["config.json", "light_tokenizer.json"])
@pytest.mark.parametrize("content", [DEEP, '{"a":' * 50_000, "[]", "\xff\xfe", "{"])
def test_a_bad_json_file_in_a_checkpoint_is_one_sentence(capsys, char_checkpoint, name, content):
    (char_checkpoint / name).write_bytes(content.encode("utf-8", "surrogateescape"))
    before = snapshot(char_checkpoint)
    code, _, err = run_cli(capsys, *generate_argv(char_checkpoint))
    assert_refused(code, err, name)
    assert snapshot(char_checkpoint) == before


def bert_tokenizer_file(folder, vocab_file):
    (folder / "light_tokenizer.json").write_text(
        json.dumps(
            {
                "type": "bert",
                "vocab_file": vocab_file,
                "lowercase": True,
                "strip_accents": None,
                "model_max_length": 16,
            }
        )
    )


@pytest.mark.parametrize(
    "vocab_file", ["/dev/zero", "/etc/passwd", "../outside.txt", "fifo", "sub"]
)
def test_a_tokenizer_file_names_only_regular_files_in_its_folder(
    capsys, char_checkpoint, vocab_file
):
    (char_checkpoint.parent / "outside.txt").write_text("[PAD]\n")
    os.mkfifo(char_checkpoint / "fifo")  # reading it would block forever
    (char_checkpoint / "sub").mkdir()
    bert_tokenizer_file(char_checkpoint, vocab_file)
    code, _, err = run_cli(capsys, *generate_argv(char_checkpoint))
    assert_refused(code, err)
    assert any(word in err for word in ("outside", "not a regular file", "is a folder")), err


def test_an_unreadable_file_says_permission_denied(capsys, char_checkpoint, monkeypatch):
    """chmod 0 makes the file unreadable for a user; root reads any file, so there the
    kernel's answer to an unreadable file (PermissionError from open) is given directly."""
    unreadable = str(char_checkpoint / "config.json")
    (char_checkpoint / "config.json").chmod(0)
    if os.geteuid() == 0:
        real_open = os.open

        def open_as_a_user(path, *args, **kwargs):
            if os.fspath(path) == unreadable:
                raise PermissionError(13, "Permission denied", unreadable)
            return real_open(path, *args, **kwargs)

        monkeypatch.setattr(os, "open", open_as_a_user)
    code, _, err = run_cli(capsys, *generate_argv(char_checkpoint))
    assert_refused(code, err, "permission denied")


@pytest.fixture(scope="module")
def trained_once(tmp_path_factory, corpus):
    out = tmp_path_factory.mktemp("run") / "out"
    assert main(["train", *map(str, tiny_flags(corpus, out, max_iters=5))]) == 0
    return out


@pytest.fixture
def trained(tmp_path, trained_once):
    """A copy of one tiny training run, to damage."""
    return Path(shutil.copytree(trained_once, tmp_path / "out"))


def damage(state: dict, how: str) -> dict:
    if how.startswith("drop "):
        del state[how.removeprefix("drop ")]
    elif how == "iteration as text":
        state["iteration"] = "5"
    elif how == "rng garbage":
        state["rng"] = [{"python": 3}]
    elif how == "config lr as text":
        state["config"]["lr"] = "fast"
    elif how == "config not an object":
        state["resolved_config"] = [1, 2]
    return state


DAMAGE = [
    "drop iteration",
    "drop rng",
    "drop config",
    "iteration as text",
    "rng garbage",
    "config lr as text",
    "config not an object",
]


@pytest.mark.parametrize("how", DAMAGE + ["deep"])
def test_a_damaged_trainer_state_is_refused_by_resume(capsys, trained, corpus, how):
    path = trained / "checkpoint" / "trainer_state.json"
    if how == "deep":
        path.write_text(DEEP)
    else:
        path.write_text(json.dumps(damage(json.loads(path.read_text()), how)))
    before = snapshot(trained)
    argv = tiny_flags(corpus, trained, max_iters=8)
    code, _, err = run_cli(capsys, "train", *argv, "--resume")
    assert_refused(code, err, "trainer_state.json")
    assert snapshot(trained) == before


def test_a_tampered_token_cache_of_the_same_size_is_rebuilt(tmp_path):
    text = "to be or not to be, that is the question\n" * 40
    tokenizer = CharTokenizer.from_text(text)
    train_path, _ = encode_corpus(text, tokenizer, tmp_path)
    honest = np.fromfile(train_path, dtype=np.uint16)
    tampered = np.full_like(honest, 60_000)  # ids far outside the 17-character vocabulary
    tampered.tofile(train_path)
    encode_corpus(text, tokenizer, tmp_path)
    assert np.array_equal(np.fromfile(train_path, dtype=np.uint16), honest)


@pytest.mark.parametrize("what", ["fifo", "folder", "device"])
def test_a_corpus_that_is_not_a_regular_file_is_refused(capsys, tmp_path, what):
    path = {"fifo": tmp_path / "fifo", "folder": tmp_path, "device": "/dev/zero"}[what]
    if what == "fifo":
        os.mkfifo(path)
    code, _, err = run_cli(capsys, "train", "--data", path, "--out", tmp_path / "out")
    assert_refused(code, err, str(path))
