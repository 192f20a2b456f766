"""``light-llm tokenizer train`` and ``light-llm tokenize --stats`` through ``light_llm.cli.main``:
the folder written, what it learned from, the counts against an independent count, and bad
input as one sentence with exit code 2."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from light_llm.cli import main
from light_llm.data import load_corpus, split_train_val
from light_llm.tokenizers import BertTokenizer, BPETokenizer, load_tokenizer
from light_llm.tokenizers.bpe import train_bpe
from tests.train.helpers import write_corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = write_corpus(tmp_path_factory.mktemp("corpus") / "corpus.txt", n_lines=600)
    with path.open("a", encoding="utf-8") as file:
        file.write("déjà vu ✓\n" * 3)
    return path


def run(capsys, *argv):
    code = main([*argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_sentence_error(code: int, err: str) -> bool:
    lines = err.strip().splitlines()
    return code == 2 and len(lines) == 1 and lines[0].endswith(".") and "Traceback" not in err


def test_bpe_is_learned_from_the_training_split_by_default(capsys, corpus, tmp_path):
    out = tmp_path / "tok"
    code, stdout, _ = run(
        capsys, "tokenizer", "train", "--data", str(corpus), "--kind", "bpe",
        "--vocab-size", "300", "--out", str(out),
    )  # fmt: skip
    assert code == 0 and "300 ids" in stdout
    tokenizer = load_tokenizer(out)
    assert isinstance(tokenizer, BPETokenizer) and tokenizer.vocab_size == 300
    training_split, _ = split_train_val(load_corpus(corpus))
    assert tokenizer.merges == train_bpe(training_split, 300).merges
    code, _, _ = run(
        capsys, "tokenizer", "train", "--data", str(corpus), "--kind", "bpe",
        "--vocab-size", "300", "--out", str(tmp_path / "whole"), "--whole-file",
    )  # fmt: skip
    assert load_tokenizer(tmp_path / "whole").merges == train_bpe(load_corpus(corpus), 300).merges


def test_wordpiece_folder_holds_a_bert_tokenizer(capsys, corpus, tmp_path):
    out = tmp_path / "wp"
    code, stdout, _ = run(
        capsys, "tokenizer", "train", "--data", str(corpus), "--kind", "wordpiece",
        "--vocab-size", "100", "--out", str(out),
    )  # fmt: skip
    assert code == 0 and "--model bert" in stdout
    tokenizer = load_tokenizer(out)
    assert isinstance(tokenizer, BertTokenizer) and tokenizer.vocab_size == 100
    visible = sorted(path.name for path in out.iterdir() if not path.name.startswith("."))
    assert visible == ["light_tokenizer.json", "vocab.txt"]


def test_an_existing_tokenizer_is_replaced_only_with_overwrite(capsys, corpus, tmp_path):
    out = tmp_path / "tok"
    flags = ["tokenizer", "train", "--data", str(corpus), "--out", str(out)]
    assert run(capsys, *flags, "--kind", "wordpiece", "--vocab-size", "100")[0] == 0
    code, _, err = run(capsys, *flags, "--kind", "bpe", "--vocab-size", "300")
    assert one_sentence_error(code, err) and "--overwrite" in err
    assert run(capsys, *flags, "--kind", "bpe", "--vocab-size", "300", "--overwrite")[0] == 0
    visible = [path.name for path in out.iterdir() if not path.name.startswith(".")]
    assert visible == ["light_tokenizer.json"]  # no stale vocab
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "model.safetensors").write_bytes(b"weights")
    code, _, err = run(
        capsys, "tokenizer", "train", "--data", str(corpus), "--out", str(tmp_path / "ckpt"),
        "--kind", "bpe", "--vocab-size", "300", "--overwrite",
    )  # fmt: skip
    assert one_sentence_error(code, err) and (tmp_path / "ckpt" / "model.safetensors").exists()


@pytest.mark.parametrize(
    ("content", "vocab_size", "expected"),
    [
        ("to be or not to be\n" * 50, "256", "at least 257"),
        ("abab abab\n", "400", "only"),  # too small a corpus: says how many merges it could learn
        ("", "300", "empty"),
        ("a", "300", "holds no text to learn from: the file has 1 character(s)"),
        (b"\x00\x01binary", "300", "binary"),
        (b"\xff\xfe not utf-8", "300", "UTF-8"),
    ],
)
def test_bad_input_is_one_sentence_and_exit_2(capsys, tmp_path, content, vocab_size, expected):
    path = tmp_path / "data.txt"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    code, _, err = run(
        capsys, "tokenizer", "train", "--data", str(path), "--kind", "bpe",
        "--vocab-size", vocab_size, "--out", str(tmp_path / "tok"),
    )  # fmt: skip
    assert one_sentence_error(code, err) and expected in err
    assert not (tmp_path / "tok").exists()


def test_tokenize_stats_count_independently(capsys, corpus, tmp_path):
    out = tmp_path / "tok"
    run(
        capsys, "tokenizer", "train", "--data", str(corpus), "--kind", "bpe",
        "--vocab-size", "300", "--out", str(out),
    )  # fmt: skip
    code, stdout, _ = run(
        capsys, "tokenize", "--checkpoint", str(out), "--stats", "--file", str(corpus),
        "--json", "--top", "3",
    )  # fmt: skip
    assert code == 0
    stats = json.loads(stdout)
    text = corpus.read_bytes().decode("utf-8")
    ids = load_tokenizer(out).encode(text)
    assert stats["characters"] == len(text) and stats["bytes"] == len(text.encode("utf-8"))
    assert stats["tokens"] == len(ids) and stats["unknown"] == 0
    assert stats["bytes_per_token"] == pytest.approx(len(text.encode("utf-8")) / len(ids))
    top = Counter(ids).most_common(3)
    assert [(entry["id"], entry["count"]) for entry in stats["most_frequent"]] == top
    code, stdout, _ = run(
        capsys, "tokenize", "--checkpoint", str(out), "--stats", "--file", str(corpus)
    )
    assert code == 0 and f"tokens: {len(ids):,}" in stdout and "most frequent" in stdout


def test_tokenize_stats_count_unknowns(capsys, corpus, tmp_path):
    run(
        capsys, "tokenizer", "train", "--data", str(corpus), "--kind", "wordpiece",
        "--vocab-size", "100", "--out", str(tmp_path / "wp"),
    )  # fmt: skip
    code, stdout, _ = run(
        capsys, "tokenize", "--checkpoint", str(tmp_path / "wp"), "--stats", "--json",
        "the king ✓ ☂ ☂",
    )  # fmt: skip
    stats = json.loads(stdout)
    assert code == 0 and stats["unknown"] == 3  # ✓ was in the text, but only in its last 10%


def test_tokenize_with_bpe_needs_a_folder(capsys):
    code, _, err = run(capsys, "tokenize", "--tokenizer", "bpe", "some text")
    assert one_sentence_error(code, err) and "--checkpoint" in err


def test_tokenize_refuses_a_folder_of_another_kind(capsys, corpus, tmp_path):
    run(
        capsys, "tokenizer", "train", "--data", str(corpus), "--kind", "bpe",
        "--vocab-size", "300", "--out", str(tmp_path / "tok"),
    )  # fmt: skip
    code, _, err = run(
        capsys, "tokenize", "--checkpoint", str(tmp_path / "tok"), "--tokenizer", "gpt2", "hi"
    )
    assert one_sentence_error(code, err) and "bpe" in err


def test_without_kind_and_size_it_learns_what_train_learns(capsys, tmp_path):
    from light_llm.train.config import TRAINED_TOKENIZER_VOCAB

    corpus = write_corpus(tmp_path / "corpus.txt", n_lines=3000)
    assert main(["tokenizer", "train", "--data", str(corpus), "--out", str(tmp_path / "t")]) == 0
    tokenizer = load_tokenizer(tmp_path / "t")
    assert isinstance(tokenizer, BPETokenizer)
    assert tokenizer.vocab_size <= TRAINED_TOKENIZER_VOCAB["bpe"]  # or as many as the text gives
    assert "768" in capsys.readouterr().out or tokenizer.vocab_size < 768
