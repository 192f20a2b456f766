"""The trainer: it learns, it resumes exactly (the GPT and the masked-LM encoder alike), and it
never damages its last checkpoint."""

import errno
import json
import math
import os
import signal

import numpy as np
import pytest
import safetensors.torch
import torch

from light_llm.checkpoints import load, load_config
from light_llm.data import TokenDataset
from light_llm.errors import TrainingError
from light_llm.models.gpt import GPT
from light_llm.train import TrainConfig, train
from light_llm.train.batches import micro_batch_rng
from light_llm.train.mlm import train_mlm
from light_llm.train.optim import clip_grad_norm, configure_adamw
from light_llm.train.state import read_trainer_state
from tests.conftest import tiny_config
from tests.train.helpers import TINY


def tiny_run(corpus, out, **overrides):
    return TrainConfig(**{**TINY, "data": str(corpus), "out": str(out), **overrides})


def metric_lines(out):
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def tensors(path):
    return safetensors.torch.load_file(path)


def assert_same_tensors(first, second):
    assert first.keys() == second.keys()
    for name in first:
        assert torch.equal(first[name], second[name]), name


def test_a_tiny_model_overfits_one_batch():
    torch.manual_seed(0)
    model = GPT(tiny_config(vocab_size=11, block_size=12, n_embd=32))
    x = torch.randint(0, 11, (4, 12))
    y = torch.roll(x, -1, dims=1)
    optimizer = configure_adamw(model, 0.0, 3e-3, (0.9, 0.95), "cpu")
    for _ in range(150):
        _, loss = model(x, y)
        loss.backward()
        clip_grad_norm(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    _, loss = model(x, y)
    assert loss.item() < 0.05


def test_training_lowers_the_loss_and_writes_its_outputs(corpus, tmp_path):
    out = tmp_path / "run"
    result = train(tiny_run(corpus, out, max_iters=30, eval_interval=10, lr=1e-2))
    records = metric_lines(out)
    assert [r["iter"] for r in records] == [0, 10, 20, 30]
    for record in records:
        assert {"iter", "train_loss", "val_loss", "lr", "tokens_per_s", "elapsed_s"} <= set(record)
    assert records[-1]["val_loss"] < records[0]["val_loss"] - 0.5
    last = records[-1]
    assert last["val_perplexity"] == pytest.approx(math.exp(last["val_loss"]), rel=1e-12)
    assert (out / "loss_curve.png").read_bytes().startswith(b"\x89PNG")
    assert result.iteration == 30 and sorted(result.losses) == list(range(30))
    state = read_trainer_state(out / "checkpoint")
    assert state["iteration"] == 30
    assert state["best_val_loss"] == min(r["val_loss"] for r in records)
    model = load(out)  # the checkpoint is a loadable model folder
    assert model.config.n_embd == TINY["n_embd"]


@pytest.mark.parametrize("model", ["gpt", "bert"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_resume_equals_the_uninterrupted_run_exactly(corpus, tmp_path, dtype, model):
    run = {"gpt": train, "bert": train_mlm}[model]  # the GPT, or the masked-LM encoder
    common = {
        "max_iters": 20,
        "lr_decay_iters": 20,
        "dropout": 0.1,
        "grad_accum": 2,
        "dtype": dtype,
        "model": model,
    }
    straight = run(tiny_run(corpus, tmp_path / "straight", **common))
    run(tiny_run(corpus, tmp_path / "split", **{**common, "max_iters": 10}))
    resumed = run(TrainConfig(out=str(tmp_path / "split"), max_iters=20, resume=True))
    assert sorted(resumed.losses) == list(range(10, 20))
    for iteration, loss in resumed.losses.items():
        assert loss == straight.losses[iteration], iteration  # bit for bit
    straight_lines = metric_lines(tmp_path / "straight")
    split_lines = metric_lines(tmp_path / "split")
    assert [r["iter"] for r in split_lines] == [r["iter"] for r in straight_lines]
    for a, b in zip(straight_lines, split_lines, strict=True):
        for key in ("train_loss", "val_loss", "lr"):
            assert a[key] == b[key], (a["iter"], key)
    for name in ("model.safetensors", "optimizer.safetensors"):
        assert_same_tensors(
            tensors(tmp_path / "straight" / "checkpoint" / name),
            tensors(tmp_path / "split" / "checkpoint" / name),
        )


def test_ctrl_c_saves_mid_interval_and_resume_is_still_exact(corpus, tmp_path, monkeypatch):
    common = {"max_iters": 12, "dropout": 0.1}
    straight = train(tiny_run(corpus, tmp_path / "straight", **common))
    calls = {"n": 0}
    original_forward = GPT.forward

    def forward_then_ctrl_c(self, *args, **kwargs):
        if self.training:
            calls["n"] += 1
            if calls["n"] == 7:  # during iteration 6 (0-based)
                signal.raise_signal(signal.SIGINT)
        return original_forward(self, *args, **kwargs)

    monkeypatch.setattr(GPT, "forward", forward_then_ctrl_c)
    stopped = train(tiny_run(corpus, tmp_path / "stopped", **common))
    monkeypatch.setattr(GPT, "forward", original_forward)
    assert stopped.interrupted and stopped.iteration == 7  # iteration 6 was finished first
    assert read_trainer_state(tmp_path / "stopped" / "checkpoint")["iteration"] == 7
    resumed = train(TrainConfig(out=str(tmp_path / "stopped"), resume=True))
    assert not resumed.interrupted and resumed.iteration == 12
    assert {**stopped.losses, **resumed.losses} == straight.losses
    assert_same_tensors(
        tensors(tmp_path / "straight" / "checkpoint" / "model.safetensors"),
        tensors(tmp_path / "stopped" / "checkpoint" / "model.safetensors"),
    )


def test_a_failed_checkpoint_write_never_replaces_the_last_good_one(corpus, tmp_path, monkeypatch):
    out = tmp_path / "run"
    train(tiny_run(corpus, out, max_iters=5))
    folder = out / "checkpoint"
    before = {path.name: path.read_bytes() for path in folder.iterdir()}
    real_fsync = os.fsync
    calls = {"n": 0}

    def fsync_until_the_disk_fills(fd):
        calls["n"] += 1
        if calls["n"] > 3:  # a few files of the next checkpoint get written, then ENOSPC
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync_until_the_disk_fills)
    with pytest.raises(TrainingError, match="No space left on device"):
        train(TrainConfig(out=str(out), max_iters=10, resume=True))
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert calls["n"] > 3
    assert {path.name: path.read_bytes() for path in folder.iterdir()} == before
    expected_names = ["checkpoint", "data", "loss_curve.png", "metrics.jsonl"]
    assert sorted(path.name for path in out.iterdir()) == expected_names  # no staging left
    assert read_trainer_state(folder)["iteration"] == 5


def test_a_nan_loss_stops_naming_the_iteration_and_the_last_checkpoint(
    corpus, tmp_path, monkeypatch
):
    calls = {"n": 0}
    original_forward = GPT.forward

    def forward_with_nan(self, *args, **kwargs):
        logits, loss = original_forward(self, *args, **kwargs)
        if self.training:
            calls["n"] += 1
            if calls["n"] == 8:  # iteration 7
                loss = loss * float("nan")
        return logits, loss

    monkeypatch.setattr(GPT, "forward", forward_with_nan)
    out = tmp_path / "run"
    with pytest.raises(TrainingError) as caught:
        train(tiny_run(corpus, out, max_iters=10))
    message = str(caught.value)
    assert "iteration 7" in message and "nan" in message
    assert f"{out / 'checkpoint'} (iteration 5)" in message
    assert read_trainer_state(out / "checkpoint")["iteration"] == 5


def test_compiled_model_saves_names_without_orig_mod_prefix(corpus, tmp_path, monkeypatch):
    real_compile = torch.compile
    monkeypatch.setattr(torch, "compile", lambda model: real_compile(model, backend="eager"))
    out = tmp_path / "run"
    train(tiny_run(corpus, out, max_iters=2, compile=True))
    names = tensors(out / "checkpoint" / "model.safetensors").keys()
    assert names and not any("_orig_mod" in name for name in names)
    resumed = train(TrainConfig(out=str(out), max_iters=4, resume=True, compile=True))
    assert resumed.iteration == 4


def test_gradient_checkpointing_gives_the_same_losses(corpus, tmp_path):
    plain = train(tiny_run(corpus, tmp_path / "plain", max_iters=3))
    checkpointed = train(
        tiny_run(corpus, tmp_path / "ckpt", max_iters=3, gradient_checkpointing=True)
    )
    for iteration, loss in plain.losses.items():
        assert checkpointed.losses[iteration] == pytest.approx(loss, rel=1e-5)


def test_label_smoothing_reaches_the_loss_as_seed_002_eq_51(corpus, tmp_path):
    """The first training loss with alpha = 0.3 equals (1 - a) CE + a * mean_v(-log p_v),
    computed here from the initial model and the first batch rebuilt by hand."""
    alpha = 0.3
    out = tmp_path / "smooth"
    result = train(tiny_run(corpus, out, max_iters=1, label_smoothing=alpha))
    torch.manual_seed(TINY["seed"])  # the trainer seeds torch with seed + rank, then builds
    model = GPT(load_config(out))
    dataset = TokenDataset(out / "data" / "train.bin", np.uint16, TINY["block_size"])
    x, y = dataset.get_batch(TINY["batch_size"], micro_batch_rng(TINY["seed"], 0, 0))
    with torch.no_grad():
        logits, _ = model(x)
        log_p = torch.log_softmax(logits.double(), dim=-1)  # (B, T, V)
        nll = -log_p.gather(-1, y[..., None]).squeeze(-1)  # (B, T)
        uniform = -log_p.mean(dim=-1)  # (B, T)
        expected = ((1 - alpha) * nll + alpha * uniform).mean().item()
    assert result.losses[0] == pytest.approx(expected, rel=1e-5)


def test_bfloat16_autocast_trains_on_the_cpu(corpus, tmp_path):
    result = train(tiny_run(corpus, tmp_path / "bf16", max_iters=10, dtype="bfloat16", lr=1e-2))
    first, last = result.evaluations[0]["val_loss"], result.evaluations[-1]["val_loss"]
    assert last < first
    assert read_trainer_state(tmp_path / "bf16" / "checkpoint")["dtype"] == "bfloat16"
