"""Probes recorded during training: when, what (each number against the model's own forward on
the checkpoint saved at that iteration), across a resume (no iteration twice, the same records
as a run never stopped), from both engines, and what bad input gets."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from light_llm.checkpoints import load, load_tokenizer
from light_llm.checkpoints.probes import (
    PROBES_SUBFOLDER,
    probe_file,
    probe_iterations,
    read_probe,
)
from light_llm.cli import main
from light_llm.errors import CheckpointError, ConfigError, TrainingError
from light_llm.inspect.probe import take_probe
from light_llm.train import TrainConfig, train
from light_llm.train.numpy_trainer import train_numpy
from light_llm.train.probes import (
    DEFAULT_PROBE_PROMPT,
    PROBE_SLICE_WINDOWS,
    ProbeRecorder,
    probe_interval,
)
from light_llm.train.trainer import PROBE_THREADS, Trainer
from tests.train.helpers import TINY, tiny_flags

PROBED = {"probe_interval": 4, "probe_prompt": "the king shall come to"}


def tiny_run(corpus, out, **overrides):
    return TrainConfig(**{**TINY, "data": str(corpus), "out": str(out), **PROBED, **overrides})


def without_time(record):
    return {key: value for key, value in record.items() if key != "elapsed_s"}


def test_probes_at_every_interval_and_evaluation(corpus, tmp_path):
    train(tiny_run(corpus, tmp_path, max_iters=10))  # evaluations at 0, 5, 10
    assert probe_iterations(tmp_path) == [0, 4, 5, 8, 10]
    record = read_probe(tmp_path, 8)
    assert record["iter"] == 8 and record["tokens_seen"] == 8 * TINY["batch_size"] * 16


def test_the_last_probe_is_the_checkpoint_seen_by_its_own_forward(corpus, tmp_path):
    train(tiny_run(corpus, tmp_path, max_iters=10))
    record = read_probe(tmp_path, 10)
    model, tokenizer = load(tmp_path), load_tokenizer(tmp_path)
    ids = tokenizer.encode(PROBED["probe_prompt"])
    assert record["prompt"]["ids"] == ids
    assert record["prompt"]["text"] == PROBED["probe_prompt"]
    # the next-token distribution against the plain forward of the saved checkpoint
    with torch.no_grad():
        logits, _ = model(torch.tensor([ids]))
    probs = torch.softmax(logits[0, -1].double(), -1).numpy()
    top = np.argsort(-probs, kind="stable")[:10]
    assert record["next_token"]["ids"] == top.tolist()
    np.testing.assert_allclose(record["next_token"]["probs"], probs[top], atol=1e-5)
    # attention: every row a distribution over the positions before it
    attention = np.array(record["attention"])
    assert attention.shape == (TINY["n_layer"], TINY["n_head"], len(ids), len(ids))
    np.testing.assert_allclose(attention.sum(-1), 1.0, atol=1e-4)
    assert np.all(np.triu(attention, 1) == 0)
    # the importance table's clean loss is the slice's mean next-token loss
    val = np.fromfile(tmp_path / "data" / "val.bin", dtype=np.uint16)
    slice_ids = val[: PROBE_SLICE_WINDOWS * TINY["block_size"] + 1]
    windows = torch.tensor(slice_ids[:-1].astype(np.int64)).view(-1, TINY["block_size"])
    targets = torch.tensor(slice_ids[1:].astype(np.int64)).view(-1, TINY["block_size"])
    with torch.no_grad():
        _, loss = model(windows, targets)
    assert record["slice_loss"] == pytest.approx(loss.item(), abs=1e-5)
    # and the whole record is what the explorer computes on the checkpoint
    again = take_probe(model, tokenizer, ids, slice_ids, sample=record["sample"])
    for key in ("attention", "lens", "importance", "head_roles", "next_token", "slice_loss"):
        assert json.loads(json.dumps(again[key])) == record[key], key


def test_a_resumed_run_continues_the_same_history(corpus, tmp_path):
    common = {"max_iters": 20, "lr_decay_iters": 20}
    train(tiny_run(corpus, tmp_path / "straight", **common))
    split = tmp_path / "split"
    train(tiny_run(corpus, split, **{**common, "max_iters": 10}))
    # a killed run's future: a record after the checkpoint, to be dropped and taken again
    (split / PROBES_SUBFOLDER / "iter-00000012.json").write_text(
        json.dumps({"format": "light-llm-probe", "iter": 12, "stale": True})
    )
    train(TrainConfig(out=str(split), max_iters=20, resume=True))
    assert probe_iterations(split) == probe_iterations(tmp_path / "straight")
    for iteration in probe_iterations(split):
        assert without_time(read_probe(split, iteration)) == without_time(
            read_probe(tmp_path / "straight", iteration)
        ), iteration


def test_a_resumed_run_removes_a_killed_writers_temporary_record(corpus, tmp_path):
    """A run killed while writing the probe of the iteration its checkpoint holds leaves
    that record's temporary file, which the resumed run never writes again: it removes it on
    resuming; a live writer's temporary file and anything not a record's stay."""
    train(tiny_run(corpus, tmp_path, max_iters=10, lr_decay_iters=20))
    ended = [sys.executable, "-c", "import os; print(os.getpid())"]  # a process that has ended
    dead = int(subprocess.run(ended, capture_output=True, text=True, check=True).stdout)
    folder = tmp_path / PROBES_SUBFOLDER
    killed = folder / f".iter-00000010.json.{dead}.k1ll3d.tmp"
    live = folder / f".iter-00000010.json.{os.getpid()}.l1v3.tmp"
    not_a_record = folder / f".notes.txt.{dead}.n0t3s.tmp"
    for path in (killed, live, not_a_record):
        path.write_text("{")
    train(TrainConfig(out=str(tmp_path), max_iters=12, resume=True))
    assert not killed.exists() and live.exists() and not_a_record.exists()


def test_a_fresh_run_replaces_an_earlier_runs_probes_but_no_one_elses_files(corpus, tmp_path):
    train(tiny_run(corpus, tmp_path, max_iters=10))
    notes = tmp_path / PROBES_SUBFOLDER / "notes.txt"
    notes.write_text("mine")
    train(tiny_run(corpus, tmp_path, max_iters=5, probe_interval=0, overwrite=True))
    assert probe_iterations(tmp_path) == []  # the earlier run's are never taken for this one's
    train(tiny_run(corpus, tmp_path, max_iters=5, overwrite=True))
    assert probe_iterations(tmp_path) == [0, 4, 5]
    assert notes.read_text() == "mine"


def test_a_file_of_someone_elses_in_a_probes_place_stops_the_run_untouched(corpus, tmp_path):
    folder = tmp_path / PROBES_SUBFOLDER
    folder.mkdir()
    theirs = folder / "iter-00000000.json"
    theirs.write_text("my own notes")
    with pytest.raises(TrainingError, match="not a probe record light-llm wrote"):
        train(tiny_run(corpus, tmp_path, max_iters=5))
    assert theirs.read_text() == "my own notes"


def test_no_probes_with_interval_zero(corpus, tmp_path):
    train(tiny_run(corpus, tmp_path, max_iters=5, probe_interval=0))
    assert not (tmp_path / PROBES_SUBFOLDER).exists()


def test_the_default_interval_and_prompt(corpus, tmp_path):
    config = TrainConfig().resolve()
    assert probe_interval(config) == config.eval_interval // 5
    assert probe_interval(TrainConfig(eval_interval=5).resolve()) == 10
    train(tiny_run(corpus, tmp_path, max_iters=5, probe_prompt=None))
    record = read_probe(tmp_path, 5)
    val = np.fromfile(tmp_path / "data" / "val.bin", dtype=np.uint16)
    assert record["prompt"]["ids"] == val[: TINY["block_size"]].tolist()  # a corpus of one's own
    assert "Juliet" in DEFAULT_PROBE_PROMPT


def test_the_numpy_engine_records_the_same_kind_of_probe(corpus, tmp_path):
    train_numpy(tiny_run(corpus, tmp_path, engine="numpy", max_iters=4, eval_interval=4))
    assert probe_iterations(tmp_path) == [0, 4]
    record = read_probe(tmp_path, 4)
    model = load(tmp_path, engine="numpy")
    logits = model.forward(np.array([record["prompt"]["ids"]]))[0][0, -1].astype(np.float64)
    probs = np.exp(logits - logits.max())
    probs /= probs.sum()
    np.testing.assert_allclose(
        record["next_token"]["probs"], probs[record["next_token"]["ids"]], atol=1e-5
    )
    assert isinstance(record["sample"], str)


def test_a_damaged_record_is_one_sentence(tmp_path):
    path = probe_file(tmp_path, 3)
    path.parent.mkdir()
    path.write_text('{"format": "light-llm-probe", "iter": ')
    with pytest.raises(CheckpointError, match="not valid JSON"):
        read_probe(tmp_path, 3)
    path.write_text(json.dumps({"format": "light-llm-probe", "iter": 4}))
    with pytest.raises(CheckpointError, match="not a light-llm probe record of iteration 3"):
        read_probe(tmp_path, 3)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--probe-prompt", "  "], "--probe-prompt is empty"),
        (["--probe-prompt", "the king " * 10], "longer than the context of 16"),
        (["--probe-prompt", "ZQX"], "cannot be read by this run's tokenizer"),
        (["--probe-interval", "-1"], "--probe-interval (0 = no probes) must be"),
    ],
)
def test_bad_probe_flags_are_one_sentence_and_write_nothing(
    corpus, tmp_path, capsys, flags, message
):
    out = tmp_path / "run"
    status = main(["train", *tiny_flags(corpus, out, tokenizer="char"), *flags])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1 and message in err[0], err
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.parametrize("flags", [["--probe-prompt", "the king"], ["--probe-interval", "3"]])
def test_probe_flags_on_an_encoder_are_one_sentence_and_write_nothing(
    corpus, tmp_path, capsys, flags
):
    out = tmp_path / "run"
    status = main(["train", "--model", "bert", *tiny_flags(corpus, out), *flags])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1 and "an encoder (--model bert) records no probes" in err[0]
    assert not out.exists() or not any(out.iterdir())
    assert main(["train", "--model", "bert", *tiny_flags(corpus, out, max_iters=1)]) == 0
    assert probe_iterations(out) == []  # none, as said


def test_a_config_rejects_an_empty_prompt():
    with pytest.raises(ConfigError, match="empty"):
        TrainConfig(probe_prompt="").resolve()


def test_a_probed_run_trains_exactly_as_one_never_probed(corpus, tmp_path):
    common = {"max_iters": 8, "dropout": 0.1}
    probed = train(tiny_run(corpus, tmp_path / "probed", probe_interval=2, **common))
    plain = train(tiny_run(corpus, tmp_path / "plain", probe_interval=0, **common))
    assert probed.losses == plain.losses  # bit for bit: the probes draw from no generator


def test_probes_run_on_one_thread_and_give_the_steps_theirs_back(corpus, tmp_path, monkeypatch):
    seen = {"probe": [], "step": []}
    record, step = ProbeRecorder.record, Trainer.step

    def counting_record(self, *args, **kwargs):
        seen["probe"].append(torch.get_num_threads())
        return record(self, *args, **kwargs)

    def counting_step(self, *args, **kwargs):
        seen["step"].append(torch.get_num_threads())
        return step(self, *args, **kwargs)

    monkeypatch.setattr(ProbeRecorder, "record", counting_record)
    monkeypatch.setattr(Trainer, "step", counting_step)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        train(tiny_run(corpus, tmp_path, max_iters=6, probe_interval=2))
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    assert seen["probe"] == [PROBE_THREADS] * len(probe_iterations(tmp_path)) == [1] * 5
    assert set(seen["step"]) == {2}  # the thread governor waits WINDOW steps: all threads


def test_each_probe_adds_a_point_of_the_slices_loss_in_bits_per_byte(corpus, tmp_path):
    train(tiny_run(corpus, tmp_path, max_iters=10))
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    points = [line for line in lines if line["kind"] == "probe"]
    assert [point["iter"] for point in points] == probe_iterations(tmp_path)
    record = read_probe(tmp_path, 10)
    scored = np.fromfile(tmp_path / "data" / "val.bin", dtype=np.uint16)[
        1 : PROBE_SLICE_WINDOWS * 16 + 1
    ]
    text_bytes = len(load_tokenizer(tmp_path).decode(scored.tolist()).encode("utf-8"))
    expected = record["slice_loss"] * len(scored) / (np.log(2) * text_bytes)
    assert points[-1]["bpb"] == pytest.approx(expected, rel=1e-9)
    assert points[-1]["loss"] == record["slice_loss"]


@pytest.mark.parametrize("engine", ["torch", "numpy"])
def test_weights_gone_bad_stop_the_run_in_the_trainers_sentence(corpus, tmp_path, engine):
    """A rate of 1e9 turns the weights to NaN or infinity, and a probe is due at every
    iteration: the probe of the bad weights is skipped and the run stops in the trainer's
    sentence, naming the iteration and the last good checkpoint (it stopped in the sampler's,
    "the model's logits are NaN or infinite"), with no probe of the bad weights written."""
    out = tmp_path / "run"
    config = tiny_run(corpus, out, engine=engine, lr=1e9, warmup_iters=0, probe_interval=1)
    with pytest.raises(TrainingError) as stop:
        (train if engine == "torch" else train_numpy)(config)
    message = str(stop.value)
    assert "loss became nan" in message or "loss became inf" in message, message
    assert f"the last good checkpoint is {out / 'checkpoint'} (iteration 0)" in message
    bad = int(message.split(" at iteration ")[1].split(",")[0])
    assert probe_iterations(out) == list(range(bad))  # every iteration before, none after
