"""``light-llm train --tokenizer bpe|wordpiece --vocab-size N`` and ``--tokenizer DIR``: the
tokenizer is learned from the training split alone, saved with the checkpoint and read back
from it with nothing else on disk; the sizing advice; bad combinations as one sentence."""

from __future__ import annotations

import shutil

import pytest

from light_llm.checkpoints import load, load_tokenizer
from light_llm.cli import main
from light_llm.data import load_corpus, split_train_val
from light_llm.generate import generate_text
from light_llm.shakespeare import shakespeare_slice
from light_llm.tokenizers import BertTokenizer, BPETokenizer
from light_llm.tokenizers.bpe import train_bpe
from light_llm.tokenizers.wordpiece import train_wordpiece
from light_llm.train.config import LARGE_TEXT_CHARACTERS, LARGE_TEXT_VOCAB, TRAINED_TOKENIZER_VOCAB
from light_llm.train.sizing import sizing_advice, vocabulary_parameters
from tests.train.helpers import tiny_flags


def one_sentence_error(code: int, err: str) -> bool:
    lines = err.strip().splitlines()
    return code == 2 and len(lines) == 1 and lines[0].endswith(".") and "Traceback" not in err


@pytest.fixture(scope="module")
def bpe_run(tmp_path_factory, corpus):
    out = tmp_path_factory.mktemp("bpe") / "run"
    assert main(["train", *tiny_flags(corpus, out, tokenizer="bpe", vocab_size=300)]) == 0
    return out


def test_bpe_is_learned_from_the_training_split_and_saved_with_the_checkpoint(bpe_run, corpus):
    tokenizer = load_tokenizer(bpe_run)
    assert isinstance(tokenizer, BPETokenizer) and tokenizer.vocab_size == 300
    training_split, validation_split = split_train_val(load_corpus(corpus))
    assert tokenizer.merges == train_bpe(training_split, 300).merges
    assert tokenizer.merges != train_bpe(training_split + validation_split, 300).merges
    assert load(bpe_run).config.vocab_size == 300


def test_the_checkpoint_alone_tokenizes_and_generates(bpe_run, corpus, tmp_path):
    moved = tmp_path / "elsewhere"
    shutil.copytree(bpe_run / "checkpoint", moved)
    text = corpus.read_text(encoding="utf-8")[:500]
    assert load_tokenizer(moved).encode(text) == load_tokenizer(bpe_run).encode(text)
    (continuation,) = generate_text(load(moved), load_tokenizer(moved), ["KING:"], 8, seed=1)
    assert isinstance(continuation, str)


def test_a_tokenizer_folder_is_used_as_it_is(capsys, corpus, tmp_path):
    folder = tmp_path / "tok"
    assert main(["tokenizer", "train", "--data", str(corpus), "--kind", "bpe",
                 "--vocab-size", "280", "--out", str(folder)]) == 0  # fmt: skip
    out = tmp_path / "run"
    assert main(["train", *tiny_flags(corpus, out, tokenizer=folder, max_iters=2)]) == 0
    assert load_tokenizer(out).merges == load_tokenizer(folder).merges


def test_a_run_resumes_after_its_tokenizer_folder_is_gone(capsys, corpus, tmp_path):
    """The checkpoint holds the tokenizer, so the folder it was learned in may move; another
    tokenizer is refused as a difference from the saved run, named as such."""
    folder = tmp_path / "tok"
    assert main(["tokenizer", "train", "--data", str(corpus), "--kind", "bpe",
                 "--vocab-size", "280", "--out", str(folder)]) == 0  # fmt: skip
    out = tmp_path / "run"
    assert main(["train", *tiny_flags(corpus, out, tokenizer=folder, max_iters=2)]) == 0
    merges = load_tokenizer(folder).merges
    shutil.rmtree(folder)
    capsys.readouterr()
    assert main(["train", "--resume", "--out", str(out), "--max-iters", "3"]) == 0
    assert load_tokenizer(out).merges == merges
    code = main(["train", "--resume", "--out", str(out), "--max-iters", "4", "--tokenizer", "gpt2"])
    err = capsys.readouterr().err
    assert one_sentence_error(code, err)
    assert f"tokenizer ('{folder}' saved, 'gpt2' asked)" in err


def test_the_resumed_run_keeps_its_tokenizer_and_refuses_another_size(capsys, corpus, tmp_path):
    out = tmp_path / "run"
    flags = tiny_flags(corpus, out, tokenizer="bpe", vocab_size=280, max_iters=2)
    assert main(["train", *flags]) == 0
    capsys.readouterr()
    code = main(["train", "--resume", "--out", str(out), "--vocab-size", "300"])
    assert one_sentence_error(code, capsys.readouterr().err)
    # the saved --vocab-size is not blamed on a --tokenizer the resume gives
    code = main(["train", "--resume", "--out", str(out), "--tokenizer", "gpt2"])
    err = capsys.readouterr().err
    assert one_sentence_error(code, err) and "tokenizer ('bpe' saved, 'gpt2' asked)" in err
    assert main(["train", "--resume", "--out", str(out), "--max-iters", "3"]) == 0
    assert load_tokenizer(out).vocab_size == 280


def test_a_bert_model_trains_with_a_learned_wordpiece(corpus, tmp_path):
    out = tmp_path / "bert"
    flags = tiny_flags(corpus, out, tokenizer="wordpiece", vocab_size=90, max_iters=2)
    assert main(["train", "--model", "bert", *flags]) == 0
    tokenizer = load_tokenizer(out)
    assert isinstance(tokenizer, BertTokenizer) and tokenizer.vocab_size == 90
    # tokenizers' WordPieceTrainer breaks ties between equally frequent pairs in hash order,
    # so two trainings may differ in a few tokens: the pieces must come from the training split
    training_split, _ = split_train_val(load_corpus(corpus))
    assert all(token.removeprefix("##") in training_split for token in tokenizer.vocab[5:])
    assert tokenizer.vocab[:5] == train_wordpiece(training_split, 90).vocab[:5]


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--tokenizer", "char", "--vocab-size", "300"], "--vocab-size"),
        (["--tokenizer", "bpe", "--vocab-size", "200"], "at least 257"),
        (["--tokenizer", "bpe", "--vocab-size", "100000"], "merges"),
        (["--tokenizer", "wordpiece"], "gpt model trains with"),
        (["--model", "bert", "--tokenizer", "bpe"], "bert model trains with"),
        (["--tokenizer", "no-such-folder"], "not 'no-such-folder'"),
    ],
)
def test_bad_tokenizer_settings_are_one_sentence(capsys, corpus, tmp_path, flags, expected):
    code = main(["train", *tiny_flags(corpus, tmp_path / "run"), *flags])
    err = capsys.readouterr().err
    assert one_sentence_error(code, err) and expected in err


def test_a_folder_of_another_kind_is_one_sentence(capsys, corpus, tmp_path):
    folder = tmp_path / "wp"
    assert main(["tokenizer", "train", "--data", str(corpus), "--kind", "wordpiece",
                 "--vocab-size", "90", "--out", str(folder)]) == 0  # fmt: skip
    capsys.readouterr()
    code = main(["train", *tiny_flags(corpus, tmp_path / "run", tokenizer=folder)])
    err = capsys.readouterr().err
    assert one_sentence_error(code, err) and "WordPiece" in err and "gpt model" in err


def test_the_default_bpe_learns_fewer_ids_from_a_small_text_and_says_so(capsys, tmp_path):
    small = tmp_path / "small.txt"
    small.write_text("".join(f"to be or not to be, line {n}.\n" for n in range(120)))
    out = tmp_path / "run"
    flags = tiny_flags(small, out, max_iters=1)  # the default preset, qwen3-cpu: a bpe of 512
    assert main(["train", *flags]) == 0
    training_split, _ = split_train_val(load_corpus(small))
    most = train_bpe(training_split, TRAINED_TOKENIZER_VOCAB["bpe"], at_most=True).vocab_size
    assert most < TRAINED_TOKENIZER_VOCAB["bpe"] and load_tokenizer(out).vocab_size == most
    notes = [line for line in capsys.readouterr().out.splitlines() if "not the default" in line]
    assert len(notes) == 1 and f"only {most} bpe ids" in notes[0]
    code = main(["train", *flags, "--vocab-size", str(most + 1), "--overwrite"])
    assert one_sentence_error(code, capsys.readouterr().err)  # asked for: exactly, or an error


def test_sizing_advice_at_the_start_of_training(capsys, corpus, tmp_path):
    out = tmp_path / "run"
    assert main(["train", *tiny_flags(corpus, out, tokenizer="gpt2", max_iters=1)]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("sizing")]
    assert len(lines) == 1
    model = load(out)
    table = vocabulary_parameters(50257, 16, model.config.tie_embeddings)
    assert f"{table / 1e6:.2f}M of the {model.num_parameters() / 1e6:.2f}M" in lines[0]


def test_sizing_advice_counts_the_value_embeddings_table(capsys, corpus, tmp_path):
    """With --value-embeddings the vocabulary's tables are E, the untied head and E_v."""
    out = tmp_path / "run"
    flags = tiny_flags(corpus, out, tokenizer="gpt2", max_iters=1, value_embeddings=True)
    assert main(["train", *flags, "--untie-embeddings"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("sizing")]
    model = load(out)
    tables = (model.transformer.wte, model.lm_head, model.transformer.wve)
    table = sum(layer.weight.numel() for layer in tables)
    assert f"{table / 1e6:.2f}M of the {model.num_parameters() / 1e6:.2f}M" in lines[0]


def test_sizing_advice_thresholds():
    assert sizing_advice(1_000_000, 400_000, 30_000_000) is None
    assert "60%" in sizing_advice(1_000_000, 600_000, 30_000_000)
    few = sizing_advice(1_000_000, 100_000, 5_000_000)
    assert "5.0 per parameter" in few and "5,000,000" in few
    both = sizing_advice(1_000_000, 900_000, 1_000_000)
    assert "90%" in both and "1.0 per parameter" in both
    assert sizing_advice(1_000_000, 500_000, 20_000_000) is None  # exactly at both bounds
    assert vocabulary_parameters(100, 8, tie_embeddings=False) == 1600


@pytest.mark.parametrize("engine", ["torch", "numpy"])
def test_only_a_run_that_learned_its_tokenizer_says_how_many_ids_it_learned(
    capsys, corpus, tmp_path, bpe_run, engine
):
    """A BPE learned at the default size from a text too small for it says so; a fine-tuning
    run from a base of that tokenizer learns nothing, and says nothing of the kind."""
    fresh = tmp_path / "fresh"
    flags = tiny_flags(corpus, fresh, tokenizer="bpe", max_iters=1, engine=engine)
    assert main(["train", *flags]) == 0
    learned = load_tokenizer(fresh).vocab_size
    assert learned < TRAINED_TOKENIZER_VOCAB["bpe"]
    assert f"the training split gives only {learned} bpe ids" in capsys.readouterr().out
    argv = ["train", "--init-from", str(bpe_run), "--data", str(corpus), "--out",
            str(tmp_path / "tuned"), "--max-iters", "1", "--eval-interval", "1",
            "--eval-iters", "1", "--sample-tokens", "0", "--batch-size", "2"]  # fmt: skip
    assert main(argv) == 0
    assert "gives only" not in capsys.readouterr().out


@pytest.mark.parametrize("engine", ["torch", "numpy"])
def test_the_default_bpe_learns_more_ids_from_a_large_text_and_says_so(capsys, tmp_path, engine):
    """The default preset's BPE is fitted to the text: LARGE_TEXT_VOCAB ids from a training
    split of LARGE_TEXT_CHARACTERS or more (the merges a BPE of that size learns from it), the
    kind's default below; one line says why when it learns more; a size asked for is kept."""
    text, default = shakespeare_slice(), TRAINED_TOKENIZER_VOCAB["bpe"]
    for size, expected in ((len(text), LARGE_TEXT_VOCAB), (256_000, default)):
        corpus = tmp_path / f"text-{size}.txt"
        corpus.write_text(text[:size], encoding="utf-8")
        training_split, _ = split_train_val(text[:size])
        assert (len(training_split) >= LARGE_TEXT_CHARACTERS) is (expected == LARGE_TEXT_VOCAB)
        out = tmp_path / f"run-{size}"
        assert main(["train", *tiny_flags(corpus, out, max_iters=1, engine=engine)]) == 0
        tokenizer = load_tokenizer(out)
        assert tokenizer.vocab_size == expected
        assert tokenizer.merges == train_bpe(training_split, expected, at_most=True).merges
        said = [line for line in capsys.readouterr().out.splitlines() if "ids, not" in line]
        if expected == LARGE_TEXT_VOCAB:
            assert len(said) == 1 and f"{LARGE_TEXT_VOCAB} bpe ids, not {default}" in said[0]
        else:
            assert said == []
    asked = tmp_path / "asked"
    flags = tiny_flags(tmp_path / f"text-{len(text)}.txt", asked, max_iters=1, engine=engine)
    assert main(["train", *flags, "--vocab-size", "1000"]) == 0
    assert load_tokenizer(asked).vocab_size == 1000
