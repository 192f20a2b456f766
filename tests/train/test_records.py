"""One record for both engines: a PyTorch run and a NumPy run of the same config write
metrics.jsonl lines of the same kinds with the same fields, and their bits per byte are the
loss spread over the bytes of the split's text, counted here from the text itself."""

from __future__ import annotations

import json
import math

import pytest

from light_llm.data import split_train_val
from light_llm.train import TrainConfig
from light_llm.train.numpy_trainer import train_numpy
from light_llm.train.records import longer_warmups_note, warmup_note
from light_llm.train.trainer import train
from tests.train.helpers import TINY, write_corpus


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """metrics.jsonl of each engine after 3 steps (a training line each step, evaluations at
    steps 0 and 3), and the corpus."""
    folder = tmp_path_factory.mktemp("records")
    corpus = write_corpus(folder / "corpus.txt", n_lines=300)
    settings = {**TINY, "tokenizer": "char", "data": str(corpus), "max_iters": 3}
    settings.update(eval_interval=3, log_interval=1)
    records = {}
    for engine, trainer in (("torch", train), ("numpy", train_numpy)):
        out = folder / engine
        trainer(TrainConfig(**settings, engine=engine, out=str(out)))
        lines = (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
        records[engine] = [json.loads(line) for line in lines]
    return records, corpus


def shape(records: list[dict]) -> list[tuple[str, int, list[str]]]:
    return [(record["kind"], record["iter"], sorted(record)) for record in records]


def test_both_engines_write_the_same_kinds_of_line_with_the_same_fields(runs):
    records, _ = runs
    assert shape(records["numpy"]) == shape(records["torch"])
    kinds = [(record["kind"], record["iter"]) for record in records["numpy"]]
    assert kinds == [
        ("eval", 0),
        ("probe", 0),
        ("train", 0),
        ("train", 1),
        ("train", 2),
        ("eval", 3),
        ("probe", 3),
    ]
    evaluation = records["numpy"][-2]
    assert {"val_bpb", "val_bpc", "train_bpb", "val_perplexity"} <= set(evaluation)
    assert {"bpb", "bpc", "loss", "lr"} <= set(records["numpy"][2])


def test_a_numpy_runs_bits_per_byte_is_its_loss_over_the_bytes_of_the_text(runs):
    records, corpus = runs
    _, val_text = split_train_val(corpus.read_text(encoding="utf-8"))
    # a character tokenizer: one token a character; all but the first are predicted
    val_bytes = len(val_text[1:].encode("utf-8"))
    val_tokens = len(val_text) - 1
    for record in (r for r in records["numpy"] if r["kind"] == "eval"):
        expected = record["val_loss"] * val_tokens / (math.log(2) * val_bytes)
        assert record["val_bpb"] == pytest.approx(expected, rel=1e-12)
        assert record["val_perplexity"] == pytest.approx(math.exp(record["val_loss"]))


def test_a_warmup_as_long_as_the_run_is_said_with_the_rate_it_reaches():
    """lr (t + 1) / (T_w + 1) on the last step t = N - 1 of a run of N: N / (T_w + 1)."""
    from light_llm.schedule import learning_rate

    assert warmup_note(20, 840) is None and warmup_note(9, 10) is None
    for warmup, iterations in ((30, 10), (10, 10), (100, 3)):
        share = learning_rate(iterations - 1, 1.0, 0.0, warmup, warmup)
        note = warmup_note(warmup, iterations)
        assert note.startswith(f"warmup: {warmup} iterations, as many as the run's {iterations}")
        assert f"rises to {share:.0%} of its peak" in note


def test_both_engines_say_so_in_their_first_lines_and_log_alike(tmp_path, capsys):
    corpus = write_corpus(tmp_path / "corpus.txt")
    for engine, run in (("torch", train), ("numpy", train_numpy)):
        settings = {**TINY, "max_iters": 4, "warmup_iters": 6, "eval_interval": 4}
        config = TrainConfig(data=str(corpus), out=str(tmp_path / engine), **settings)
        run(config.resolve() if engine == "numpy" else config)
        out, err = capsys.readouterr()
        assert warmup_note(6, 4) in out, engine
        # outside a terminal: plain lines, no progress bar, and the same last line
        assert "\r" not in out + err and "iter 0/4: loss" in out, engine
        done = out.strip().splitlines()[-1]
        assert done.startswith("done: 4 iterations") and "metrics " in done, (engine, done)
        assert "loss curve " in done, (engine, done)


def test_a_size_or_momentum_warmup_as_long_as_the_run_is_said(tmp_path, capsys):
    """--batch-warmup, --context-warmup and --muon-momentum-warmup of the run's length or more:
    the run never trains at its batch size or context, or at its momentum; each is named, in
    both engines' first lines, and a warmup that ends inside the run is not."""
    corpus = write_corpus(tmp_path / "corpus.txt")
    long = {"batch_warmup": 4, "batch_warmup_size": 2, "context_warmup": 9,
            "context_warmup_size": 8, "optimizer": "muon", "muon_momentum_warmup": 4}  # fmt: skip
    config = TrainConfig(data=str(corpus), **{**TINY, "max_iters": 4, **long}).resolve()
    note = longer_warmups_note(config)
    assert "--batch-warmup 4 is as long as the run's 4 iterations or longer, so it never " in note
    assert "trains at its --batch-size 4" in note
    assert "--context-warmup 9 is as long as the run's 4 iterations or longer, so it never " in note
    assert "trains at its --block-size 16" in note
    assert f"Muon's momentum never reaches its {config.muon_momentum}" in note
    inside = {**long, "batch_warmup": 3, "context_warmup": 3, "muon_momentum_warmup": 3}
    assert longer_warmups_note(TrainConfig(**{**TINY, "max_iters": 4, **inside}).resolve()) is None
    for engine, run in (("torch", train), ("numpy", train_numpy)):
        run_config = TrainConfig(data=str(corpus), out=str(tmp_path / engine), **{**TINY,
                                 "max_iters": 4, **long, "eval_interval": 4})  # fmt: skip
        run(run_config.resolve() if engine == "numpy" else run_config)
        assert note in capsys.readouterr().out, engine
