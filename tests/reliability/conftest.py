"""Shared by the reliability tests: a small checkpoint, a tiny training corpus, checksums of
what was on disk before, and the one assertion every refusal must pass."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from light_llm.cli import main
from tests.conftest import CHAR_CORPUS, save_char_checkpoint
from tests.train.helpers import tiny_flags, write_corpus

CORPUS = CHAR_CORPUS  # the characters of the small checkpoint


@pytest.fixture
def char_checkpoint(tmp_path) -> Path:
    """A small char-level GPT checkpoint (weights moved off their initial values)."""
    return save_char_checkpoint(tmp_path / "ck", block_size=16, n_layer=1, n_embd=16)[0]


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> Path:
    return write_corpus(tmp_path_factory.mktemp("corpus") / "corpus.txt", n_lines=400)


def snapshot(path: Path) -> dict[str, str]:
    """sha256 of every file under ``path`` (hidden ones too), by path relative to it; of
    ``path`` itself when it is a file; {} when nothing is there."""
    path = Path(path)
    if path.is_file():
        return {".": hashlib.sha256(path.read_bytes()).hexdigest()}
    if not path.is_dir():
        return {}
    return {
        str(file.relative_to(path)): hashlib.sha256(file.read_bytes()).hexdigest()
        for file in sorted(path.rglob("*"))
        if file.is_file()
    }


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    """``light-llm ARGV`` in this process: (exit code, stdout, stderr); argparse's refusals
    (a SystemExit) included."""
    try:
        code = main([str(arg) for arg in argv])
    except SystemExit as exit_:
        code = exit_.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_refused(code: int, err: str, *words: str) -> None:
    """Exit code 2, exactly one line on stderr naming the problem (each of ``words``, case
    ignored), no traceback."""
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for word in words:
        assert word.lower() in err.lower(), (word, err)


@pytest.fixture(scope="session")
def lora_run(tmp_path_factory, corpus):
    """A tiny base model and a LoRA run on it (training output folders)."""
    folder = tmp_path_factory.mktemp("lora")
    base, lora = folder / "base", folder / "lora"
    # GPT-2-shaped (nanoGPT's recipe), so that export reaches the adapters
    assert main(["train", *tiny_flags(corpus, base, max_iters=2, preset="nanogpt-cpu")]) == 0
    flags = ["--init-from", str(base), "--lora-rank", "2", "--data", str(corpus)]
    flags += ["--out", str(lora), "--max-iters", "2", "--eval-iters", "1", "--sample-tokens", "0"]
    assert main(["train", *flags]) == 0
    return lora


@pytest.fixture(scope="session")
def finished_run(tmp_path_factory, corpus):
    """A finished two-iteration run (copied by each test that changes it)."""
    out = tmp_path_factory.mktemp("run") / "out"
    assert main(["train", *tiny_flags(corpus, out, max_iters=2, eval_interval=2)]) == 0
    return out
