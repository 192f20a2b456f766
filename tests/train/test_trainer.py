"""The trainer: it learns, it resumes exactly (the GPT and the masked-LM encoder alike), and it
never damages its last checkpoint."""

import dataclasses
import errno
import json
import math
import os
import re
import signal

import numpy as np
import pytest
import safetensors.torch
import torch

from light_llm.checkpoints import load, load_config
from light_llm.checkpoints.run import read_trainer_state
from light_llm.config import PRESETS
from light_llm.data import TokenDataset, split_train_val
from light_llm.errors import TrainingError
from light_llm.models.gpt import GPT
from light_llm.schedule import learning_rate
from light_llm.tokenizers import get_tokenizer
from light_llm.train import TrainConfig, train
from light_llm.train.batches import micro_batch_rng
from light_llm.train.calibration import Reference
from light_llm.train.config import DEFAULT_PRESETS, PRESET_RECIPES, CpuKind
from light_llm.train.optim import clip_grad_norm, configure_adamw
from light_llm.train.resume import run_device
from light_llm.train.trainer import train_mlm
from tests.conftest import tiny_config
from tests.train.helpers import TINY, record_input_shapes


def tiny_run(corpus, out, **overrides):
    return TrainConfig(**{**TINY, "data": str(corpus), "out": str(out), **overrides})


def metric_lines(out, kind="eval"):
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [line for line in lines if line["kind"] == kind]


def tensors(path):
    return safetensors.torch.load_file(path)


def assert_same_checkpoint_file(first_out, second_out, name="model.safetensors"):
    """The tensors of checkpoint file ``name`` of two runs are equal, bit for bit."""
    first = tensors(first_out / "checkpoint" / name)
    second = tensors(second_out / "checkpoint" / name)
    assert first.keys() == second.keys()
    for key in first:
        assert torch.equal(first[key], second[key]), key


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


@pytest.mark.parametrize("optimizer", ["adamw", "muon"])
@pytest.mark.parametrize("model", ["gpt", "bert"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_resume_equals_the_uninterrupted_run_exactly(corpus, tmp_path, dtype, model, optimizer):
    run = {"gpt": train, "bert": train_mlm}[model]  # the GPT, or the masked-LM encoder
    common = {
        "max_iters": 20,
        "lr_decay_iters": 20,
        "dropout": 0.1,
        "grad_accum": 2,
        "dtype": dtype,
        "model": model,
        "optimizer": optimizer,
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
        assert_same_checkpoint_file(tmp_path / "straight", tmp_path / "split", name)


def test_a_resumed_run_goes_on_on_the_device_it_began_on(corpus, tmp_path, monkeypatch, capsys):
    """A run started with --device cpu and resumed without --device where a GPU has appeared
    goes on on the CPU, bit for bit (``auto`` would take the GPU: on an H200 every resume test
    of a CPU run moved there and lost its last bits)."""
    common = {"max_iters": 8, "lr_decay_iters": 8}
    straight = train(tiny_run(corpus, tmp_path / "straight", **common))
    train(tiny_run(corpus, tmp_path / "split", **{**common, "max_iters": 4}))
    capsys.readouterr()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # what auto would take
    resumed = train(TrainConfig(out=str(tmp_path / "split"), max_iters=8, resume=True))
    assert "; cpu, float32; writing to" in capsys.readouterr().out
    assert resumed.losses == {i: straight.losses[i] for i in range(4, 8)}
    assert_same_checkpoint_file(tmp_path / "straight", tmp_path / "split")


def test_the_device_of_a_run_is_the_one_given_else_its_own_on_resume_else_auto(corpus, tmp_path):
    train(tiny_run(corpus, tmp_path / "cpu", max_iters=2))  # --device cpu
    train(tiny_run(corpus, tmp_path / "auto", max_iters=2, device=None))  # no --device
    assert run_device(TrainConfig(out=str(tmp_path / "cpu"), resume=True)) == "cpu"
    assert run_device(TrainConfig(out=str(tmp_path / "cpu"), resume=True, device="cuda")) == "cuda"
    assert run_device(TrainConfig(out=str(tmp_path / "auto"), resume=True)) == "auto"
    assert run_device(TrainConfig(out=str(tmp_path / "cpu"))) == "auto"  # a new run
    assert run_device(TrainConfig(out=str(tmp_path / "none"), resume=True)) == "auto"


def test_the_muon_momentum_warmup_sets_each_steps_momentum_and_resumes_exactly(
    corpus, tmp_path, monkeypatch
):
    """--muon-momentum-warmup 4 with μ = 0.95: the trainer sets μ = 0.85, 0.875, 0.9, 0.925,
    then 0.95, before the steps 0, 1, 2, ...; a run stopped after step 3 resumes with the
    momentum of step 4 on, its losses those of the run never stopped, bit for bit."""
    from light_llm.train import trainer as trainer_module
    from light_llm.train.optim import set_muon_momentum

    seen = []

    def recording(optimizer, momentum):
        seen.append(momentum)
        set_muon_momentum(optimizer, momentum)

    monkeypatch.setattr(trainer_module, "set_muon_momentum", recording)
    common = {"max_iters": 8, "lr_decay_iters": 8, "optimizer": "muon", "muon_momentum": 0.95}
    common["muon_momentum_warmup"] = 4
    straight = train(tiny_run(corpus, tmp_path / "straight", **common))
    expected = [0.85, 0.875, 0.9, 0.925, 0.95, 0.95, 0.95, 0.95]
    assert seen == pytest.approx(expected, rel=1e-12, abs=0)
    without = train(tiny_run(corpus, tmp_path / "without", **{**common, "muon_momentum_warmup": 0}))
    # the momentum changed the run from step 1 on: step 0's Nesterov update (1 + μ) g is
    # orthogonalised to the same matrix whatever μ (in float32 to the bit)
    assert without.losses[2] != straight.losses[2]
    seen.clear()
    train(tiny_run(corpus, tmp_path / "split", **{**common, "max_iters": 4}))
    resumed = train(TrainConfig(out=str(tmp_path / "split"), max_iters=8, resume=True))
    assert seen[4:] == pytest.approx(expected[4:], rel=1e-12, abs=0)
    assert resumed.losses == {i: straight.losses[i] for i in range(4, 8)}


def test_the_batch_warmup_draws_each_iterations_size_counts_its_tokens_and_resumes_exactly(
    corpus, tmp_path, monkeypatch
):
    """--batch-warmup 3 --batch-warmup-size 2 at batch 4, grad_accum 2, context 16: the step
    sees micro-batches of 2 windows in iterations 0-2 (two each) and of 4 after; the run's
    tokens are 3 x 2 x 2 x 16 + 5 x 4 x 2 x 16 = 832 in the checkpoint and in the throughput
    meter; a run stopped inside the warmup (after iteration 2) resumes bit for bit."""
    from light_llm.train.trainer import Trainer

    shapes, _ = record_input_shapes(monkeypatch, GPT)
    common = {"max_iters": 8, "lr_decay_iters": 8, "grad_accum": 2, "eval_interval": 4}
    common.update(batch_warmup=3, batch_warmup_size=2)
    trainer = Trainer(tiny_run(corpus, tmp_path / "straight", **common))
    straight = trainer.run()
    assert shapes == [(2, 16)] * 6 + [(4, 16)] * 10
    hand = 3 * 2 * 2 * 16 + 5 * 4 * 2 * 16
    state = read_trainer_state(tmp_path / "straight" / "checkpoint")
    assert state["tokens_seen"] == hand == 832
    assert trainer.meter.run_tokens == hand
    plain = train(
        tiny_run(
            corpus, tmp_path / "plain", **{**common, "batch_warmup": 0, "batch_warmup_size": None}
        )
    )
    assert plain.losses[0] != straight.losses[0]  # the smaller batches changed the run
    train(tiny_run(corpus, tmp_path / "split", **{**common, "max_iters": 2}))
    shapes.clear()
    resumed = train(TrainConfig(out=str(tmp_path / "split"), max_iters=8, resume=True))
    assert shapes == [(2, 16)] * 2 + [(4, 16)] * 10
    assert resumed.losses == {i: straight.losses[i] for i in range(2, 8)}
    assert read_trainer_state(tmp_path / "split" / "checkpoint")["tokens_seen"] == hand
    for name in ("model.safetensors", "optimizer.safetensors"):
        assert_same_checkpoint_file(tmp_path / "straight", tmp_path / "split", name)
    # the tokens counted so far follow the warmup: a resume cannot change it
    with pytest.raises(TrainingError, match=r"batch_warmup \(3 saved, 5 asked\)"):
        train(TrainConfig(out=str(tmp_path / "split"), max_iters=9, resume=True, batch_warmup=5))


def test_the_context_warmup_trains_on_shorter_windows_evaluates_whole_blocks_and_resumes(
    corpus, tmp_path, monkeypatch
):
    """--context-warmup 3 --context-warmup-size 8 with --batch-warmup 2 --batch-warmup-size 2
    (batch 4, context 16): the step sees (2, 8) windows in iterations 0-1, (4, 8) in 2, then
    (4, 16); every evaluation reads (4, 16), the probes whole blocks too; the run counts
    2 x 2 x 8 + 4 x 8 + 3 x 4 x 16 = 256 tokens (checkpoint and meter); a run stopped after
    iteration 1, inside both warmups, resumes bit for bit."""
    from light_llm.train.trainer import Trainer

    trained, evaluated = record_input_shapes(monkeypatch, GPT)
    common = {"max_iters": 6, "lr_decay_iters": 6, "eval_interval": 3}
    common.update(context_warmup=3, context_warmup_size=8, batch_warmup=2, batch_warmup_size=2)
    trainer = Trainer(tiny_run(corpus, tmp_path / "straight", **common))
    straight = trainer.run()
    assert trained == [(2, 8)] * 2 + [(4, 8)] + [(4, 16)] * 3
    assert (4, 16) in evaluated and {shape[1] for shape in evaluated} == {16}  # and probes
    hand = 2 * 2 * 8 + 4 * 8 + 3 * 4 * 16
    assert read_trainer_state(tmp_path / "straight" / "checkpoint")["tokens_seen"] == hand == 256
    assert trainer.meter.run_tokens == hand
    shorter = {"context_warmup": 0, "context_warmup_size": None}
    plain = train(tiny_run(corpus, tmp_path / "plain", **{**common, **shorter}))
    assert plain.losses[0] != straight.losses[0]  # the shorter windows changed the run
    train(tiny_run(corpus, tmp_path / "split", **{**common, "max_iters": 1}))
    trained.clear()
    resumed = train(TrainConfig(out=str(tmp_path / "split"), max_iters=6, resume=True))
    assert trained == [(2, 8)] + [(4, 8)] + [(4, 16)] * 3
    assert resumed.losses == {i: straight.losses[i] for i in range(1, 6)}
    assert read_trainer_state(tmp_path / "split" / "checkpoint")["tokens_seen"] == hand
    for name in ("model.safetensors", "optimizer.safetensors"):
        assert_same_checkpoint_file(tmp_path / "straight", tmp_path / "split", name)


def test_normuon_resumes_exactly_from_its_saved_second_moments(corpus, tmp_path):
    """--normuon stopped after 4 of 8 steps: the checkpoint holds one second moment
    (d_out, 1) per Muon matrix, and the resumed run's losses and weights are those of the run
    never stopped, bit for bit."""
    common = {"max_iters": 8, "lr_decay_iters": 8, "optimizer": "muon", "normuon": True}
    straight = train(tiny_run(corpus, tmp_path / "straight", **common))
    plain = train(tiny_run(corpus, tmp_path / "plain", **{**common, "normuon": False}))
    assert plain.losses[1] != straight.losses[1]  # NorMuon changed the run
    train(tiny_run(corpus, tmp_path / "split", **{**common, "max_iters": 4}))
    saved = tensors(tmp_path / "split" / "checkpoint" / "optimizer.safetensors")
    moments = [t for name, t in saved.items() if name.endswith(".second_moment")]
    assert len(moments) == 5 * TINY["n_layer"]  # c_attn, c_proj, c_fc, c_proj and SwiGLU's c_v
    assert all(m.shape[1] == 1 and m.abs().sum() > 0 for m in moments)
    resumed = train(TrainConfig(out=str(tmp_path / "split"), max_iters=8, resume=True))
    assert resumed.losses == {i: straight.losses[i] for i in range(4, 8)}
    assert_same_checkpoint_file(tmp_path / "straight", tmp_path / "split")


@pytest.mark.parametrize("engine", ["torch", "numpy"])
def test_zero_init_projections_start_at_zero_and_leave_every_other_weight_as_drawn(
    corpus, tmp_path, engine
):
    """--zero-init-projections: at iteration 0 each block's attn.c_proj.weight and
    mlp.c_proj.weight are zero, and every other weight equals, bit for bit, the one the run
    without the switch starts from (the same draws), in both engines."""
    from light_llm.train.numpy_trainer import train_numpy

    trainer = train if engine == "torch" else train_numpy
    start = {}
    for zero in (False, True):
        out = tmp_path / f"zero-{zero}"
        trainer(tiny_run(corpus, out, max_iters=0, n_layer=2, zero_init_projections=zero))
        start[zero] = tensors(out / "checkpoint" / "model.safetensors")
    assert start[True].keys() == start[False].keys()
    zeroed = [f"transformer.h.{i}.{part}.c_proj.weight" for i in (0, 1) for part in ("attn", "mlp")]
    for name, value in start[True].items():
        if name in zeroed:
            assert not value.any() and start[False][name].abs().min() > 0, name
        else:
            assert torch.equal(value, start[False][name]), name
    assert read_trainer_state(tmp_path / "zero-True" / "checkpoint")["resolved_config"][
        "zero_init_projections"
    ]


def test_zero_initialised_projections_learn_and_a_resume_keeps_the_switch(corpus, tmp_path):
    """Under Muon the zero projections get a full orthogonalised step and learn; a run
    stopped after 4 of 8 steps resumes with the switch, equal to the uninterrupted run."""
    common = {"max_iters": 8, "lr_decay_iters": 8, "optimizer": "muon"}
    straight = train(tiny_run(corpus, tmp_path / "straight", zero_init_projections=True, **common))
    weights = tensors(tmp_path / "straight" / "checkpoint" / "model.safetensors")
    assert weights["transformer.h.0.attn.c_proj.weight"].abs().min() > 0
    assert weights["transformer.h.0.mlp.c_proj.weight"].abs().min() > 0
    plain = train(tiny_run(corpus, tmp_path / "plain", **common))
    assert plain.losses[0] != straight.losses[0]  # another starting model
    split = tmp_path / "split"
    train(tiny_run(corpus, split, zero_init_projections=True, **{**common, "max_iters": 4}))
    resumed = train(TrainConfig(out=str(split), max_iters=8, resume=True))
    assert resumed.losses == {i: straight.losses[i] for i in range(4, 8)}
    assert read_trainer_state(split / "checkpoint")["resolved_config"]["zero_init_projections"]
    assert_same_checkpoint_file(tmp_path / "straight", split)


def test_the_weight_average_is_saved_and_evaluated_by_hand_and_the_raw_weights_train(
    corpus, tmp_path
):
    """--ema-beta 0.8 --ema-start 1 over 4 steps: the checkpoint's model is
    θ̄_4 = β³ θ_1 + (1 - β)(β² θ_2 + β θ_3 + θ_4), θ_k the weights of the run without an
    average after k steps; beside it raw_weights.safetensors is θ_4 bit for bit, the training
    losses are that run's, and the final evaluation is the average's."""
    beta, common = 0.8, {"max_iters": 4, "lr_decay_iters": 4, "eval_interval": 2}
    plain = {}
    for k in range(1, 5):
        train(tiny_run(corpus, tmp_path / f"plain{k}", **{**common, "max_iters": k}))
        plain[k] = tensors(tmp_path / f"plain{k}" / "checkpoint" / "model.safetensors")
    averaged = train(tiny_run(corpus, tmp_path / "ema", ema_beta=beta, ema_start=1, **common))
    checkpoint = tmp_path / "ema" / "checkpoint"
    model, raw = (
        tensors(checkpoint / "model.safetensors"),
        tensors(checkpoint / "raw_weights.safetensors"),
    )
    assert raw.keys() == model.keys() == plain[4].keys()
    for name in model:
        assert torch.equal(raw[name], plain[4][name]), name
        θ = {k: plain[k][name].double() for k in plain}
        by_hand = beta**3 * θ[1] + (1 - beta) * (beta**2 * θ[2] + beta * θ[3] + θ[4])
        assert torch.allclose(model[name].double(), by_hand, rtol=1e-5, atol=1e-7), name
    straight = train(tiny_run(corpus, tmp_path / "straight", **common))
    assert averaged.losses == straight.losses
    assert averaged.evaluations[0]["val_loss"] == straight.evaluations[0]["val_loss"]
    # the same raw weights, another evaluation: the average's
    assert averaged.evaluations[-1]["val_loss"] != straight.evaluations[-1]["val_loss"]


@pytest.mark.parametrize("stop_at", [2, 6])
def test_a_weight_averaged_run_resumes_bit_for_bit(corpus, tmp_path, monkeypatch, stop_at):
    """--ema-beta 0.9 --ema-start 4 stopped (Ctrl-C) after 2 steps, before the average
    exists, or after 6 (the average and the raw weights both in the checkpoint): the resumed
    run's losses, evaluations, average and raw weights are those of the run never stopped,
    bit for bit; a resume asking for another average is refused."""
    common = {"max_iters": 8, "eval_interval": 4, "ema_beta": 0.9, "ema_start": 4}
    straight = train(tiny_run(corpus, tmp_path / "straight", **common))
    split = tmp_path / "split"
    raw_file = split / "checkpoint" / "raw_weights.safetensors"
    stopped, resumed = stopped_then_resumed(monkeypatch, tiny_run(corpus, split, **common), stop_at)
    assert {**stopped.losses, **resumed.losses} == straight.losses
    assert resumed.evaluations[-1]["val_loss"] == straight.evaluations[-1]["val_loss"]
    assert_same_checkpoint_file(tmp_path / "straight", split)
    assert_same_checkpoint_file(tmp_path / "straight", split, raw_file.name)
    with pytest.raises(TrainingError, match=r"ema_beta \(0.9 saved, 0.5 asked\)"):
        train(TrainConfig(out=str(split), max_iters=9, resume=True, ema_beta=0.5))


def test_a_run_saved_before_the_optimizer_setting_resumes_with_adamw(corpus, tmp_path):
    out = tmp_path / "old"
    train(tiny_run(corpus, out, max_iters=3, preset="char-baby"))  # the default then
    path = out / "checkpoint" / "trainer_state.json"
    state = json.loads(path.read_text())
    for key in ("config", "resolved_config"):
        for name in ("optimizer", "muon_lr", "muon_momentum"):
            del state[key][name]
    path.write_text(json.dumps(state))
    resumed = train(TrainConfig(out=str(out), max_iters=5, resume=True))
    assert resumed.iteration == 5
    assert read_trainer_state(out / "checkpoint")["resolved_config"]["optimizer"] == "adamw"


def test_a_run_of_an_older_default_recipe_resumes_with_its_own_settings(corpus, tmp_path):
    """A run started when the default preset was bpe-cpu (its config as given names no
    preset, no orthogonaliser, no momentum warmup, no NorMuon, no zero-init) resumes as bpe-cpu
    with Newton-Schulz, a constant momentum and without NorMuon, bit for bit as the run that was
    never stopped, though today's default is another model."""
    common = {"max_iters": 8, "lr_decay_iters": 8, "preset": "bpe-cpu", "tokenizer": "char"}
    straight = train(tiny_run(corpus, tmp_path / "straight", **common))
    out = tmp_path / "old"
    train(tiny_run(corpus, out, **{**common, "max_iters": 4}))
    path = out / "checkpoint" / "trainer_state.json"
    state = json.loads(path.read_text())
    state["config"]["preset"] = None  # the default of the time
    for key in ("config", "resolved_config"):
        del state[key]["muon_orthogonaliser"], state[key]["cautious_weight_decay"]
        del state[key]["muon_momentum_warmup"], state[key]["normuon"]
        del state[key]["zero_init_projections"], state[key]["ema_beta"], state[key]["ema_start"]
        del state[key]["batch_warmup"], state[key]["batch_warmup_size"]
        del state[key]["context_warmup"], state[key]["context_warmup_size"]
        del state[key]["sampling"]
    path.write_text(json.dumps(state))
    assert DEFAULT_PRESETS["gpt"] != "bpe-cpu"
    resumed = train(TrainConfig(out=str(out), max_iters=8, resume=True))
    assert resumed.losses == {i: straight.losses[i] for i in range(4, 8)}
    resolved = read_trainer_state(out / "checkpoint")["resolved_config"]
    assert resolved["preset"] == "bpe-cpu" and resolved["muon_momentum_warmup"] == 0
    assert resolved["normuon"] is False and resolved["zero_init_projections"] is False
    assert (resolved["ema_beta"], resolved["ema_start"]) == (None, 0)
    assert (resolved["batch_warmup"], resolved["batch_warmup_size"]) == (0, None)
    assert (resolved["context_warmup"], resolved["context_warmup_size"]) == (0, None)
    assert resolved["sampling"] == "uniform"


@pytest.mark.parametrize(
    ("old", "removed", "today"),
    [
        ({"lr_schedule": "cosine"}, ("lr_schedule", "cooldown_fraction"), "wsd"),
        ({"sampling": "uniform"}, ("sampling",), "passes"),
        ({"muon_scale": "keller"}, ("muon_scale",), "aspect"),
    ],
)
def test_a_run_from_before_a_setting_existed_resumes_with_that_of_its_time(
    corpus, tmp_path, old, removed, today
):
    """A default run saved before the schedule was a setting (every run decayed by the
    cosine), or the sampling (every run drew its windows at uniform random starts), or Muon's
    scale (every run took Keller Jordan's), names none of them in its trainer state: it
    resumes on the cosine, at uniform starts, or with Keller Jordan's scale, bit for bit as
    the run that was never stopped, though today's default cools down by warmup-stable-decay,
    reads shuffled passes and scales Muon's update by both sides."""
    ((setting, value),) = old.items()
    common = {"max_iters": 8, "lr_decay_iters": 8, "tokenizer": "char", **old}
    straight = train(tiny_run(corpus, tmp_path / "straight", **common))
    out = tmp_path / "old"
    train(tiny_run(corpus, out, **{**common, "max_iters": 4}))
    path = out / "checkpoint" / "trainer_state.json"
    state = json.loads(path.read_text())
    for key in ("config", "resolved_config"):
        for name in removed:
            del state[key][name]
    path.write_text(json.dumps(state))
    assert PRESET_RECIPES[DEFAULT_PRESETS["gpt"]][setting] == today
    resumed = train(TrainConfig(out=str(out), max_iters=8, resume=True))
    assert resumed.losses == {i: straight.losses[i] for i in range(4, 8)}
    assert read_trainer_state(out / "checkpoint")["resolved_config"][setting] == value


def test_a_default_run_of_the_recipe_before_resumes_with_its_own_settings_and_shape(
    corpus, tmp_path
):
    """A default run saved when the recipe took AdamW's β1 0.9, Muon at 0.02, clipping at 1
    and a model of 4 layers of 4 heads (its config as given names none of them, its resolved
    config records them) resumes with those, bit for bit as the run that was never stopped,
    not with today's."""
    before = {"beta1": 0.9, "muon_lr": 0.02, "grad_clip": 1.0, "n_head": 4, "n_layer": 4}
    default = DEFAULT_PRESETS["gpt"]
    shape = PRESETS[default]
    today = {**PRESET_RECIPES[default], "n_head": shape.n_head, "n_layer": shape.n_layer}
    assert all(today[key] != value for key, value in before.items())
    common = {"max_iters": 8, "lr_decay_iters": 8, "tokenizer": "char"}
    straight = train(tiny_run(corpus, tmp_path / "straight", **common, **before))
    out = tmp_path / "old"
    train(tiny_run(corpus, out, **{**common, "max_iters": 4}, **before))
    path = out / "checkpoint" / "trainer_state.json"
    state = json.loads(path.read_text())
    for key in before:
        state["config"][key] = None  # the default's, as the run was started
    path.write_text(json.dumps(state))
    resumed = train(TrainConfig(out=str(out), max_iters=8, resume=True))
    assert resumed.losses == {i: straight.losses[i] for i in range(4, 8)}
    resolved = read_trainer_state(out / "checkpoint")["resolved_config"]
    assert {key: resolved[key] for key in before} == before


def test_a_resume_cannot_change_the_sampling(corpus, tmp_path):
    """The run's windows are counted from its first (shuffled passes) or drawn per iteration
    (uniform): a resume keeps the run's way, and asking for the other is one sentence."""
    out = tmp_path / "run"
    train(tiny_run(corpus, out, max_iters=2))
    with pytest.raises(TrainingError, match=r"sampling \('passes' saved, 'uniform' asked\)"):
        train(TrainConfig(out=str(out), max_iters=4, resume=True, sampling="uniform"))
    assert read_trainer_state(out / "checkpoint")["iteration"] == 2


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"batch_size": 2}, "batch_size (4 saved, 2 asked)"),
        ({"grad_accum": 2}, "grad_accum (1 saved, 2 asked)"),
        ({"seed": 8}, "seed (7 saved, 8 asked)"),
    ],
)
def test_a_resume_cannot_change_the_batch_or_the_seed(corpus, tmp_path, change, named):
    """Window j of the shuffled passes is counted as (iterations before) x batch x grad_accum
    and the passes' order is drawn from the seed: a resume asking for another would re-read
    windows of the pass under way (and the run's tokens would be miscounted), so it is one
    sentence, and the run is left as it was."""
    out = tmp_path / "run"
    train(tiny_run(corpus, out, max_iters=2))
    with pytest.raises(TrainingError, match=re.escape(named)):
        train(TrainConfig(out=str(out), max_iters=4, resume=True, **change))
    assert read_trainer_state(out / "checkpoint")["iteration"] == 2


def stopped_then_resumed(monkeypatch, config, call):
    """Train ``config`` with Ctrl-C pressed in the ``call``-th training forward pass (so
    during iteration call - 1, after which the trainer saves and stops), then resume it to
    its end; returns both results."""
    calls = {"n": 0}
    original_forward = GPT.forward

    def forward_then_ctrl_c(self, *args, **kwargs):
        if self.training:
            calls["n"] += 1
            if calls["n"] == call:
                signal.raise_signal(signal.SIGINT)
        return original_forward(self, *args, **kwargs)

    monkeypatch.setattr(GPT, "forward", forward_then_ctrl_c)
    stopped = train(config)
    monkeypatch.setattr(GPT, "forward", original_forward)
    assert stopped.interrupted and stopped.iteration == call
    resumed = train(TrainConfig(out=config.out, resume=True))
    assert not resumed.interrupted
    return stopped, resumed


def test_ctrl_c_saves_mid_interval_and_resume_is_still_exact(corpus, tmp_path, monkeypatch):
    common = {"max_iters": 12, "dropout": 0.1}
    straight = train(tiny_run(corpus, tmp_path / "straight", **common))
    stopped, resumed = stopped_then_resumed(
        monkeypatch, tiny_run(corpus, tmp_path / "stopped", **common), 7
    )  # iteration 6 was finished first, and saved
    assert resumed.iteration == 12
    assert {**stopped.losses, **resumed.losses} == straight.losses
    assert_same_checkpoint_file(tmp_path / "straight", tmp_path / "stopped")


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
    expected_names = [
        ".light-llm-files",
        "checkpoint",
        "data",
        "loss_curve.png",
        "metrics.jsonl",
        "probes",
    ]
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


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_gradient_checkpointing_gives_the_same_losses(corpus, tmp_path, dtype):
    """Also under bfloat16 autocast on the CPU, whose attention runs in float32: the backward's
    recomputation runs it so too."""
    plain = train(tiny_run(corpus, tmp_path / "plain", max_iters=3, dtype=dtype))
    checkpointed = train(
        tiny_run(corpus, tmp_path / "ckpt", max_iters=3, dtype=dtype, gradient_checkpointing=True)
    )
    for iteration, loss in plain.losses.items():
        assert checkpointed.losses[iteration] == pytest.approx(loss, rel=1e-5)


def test_label_smoothing_reaches_the_loss_as_seed_002_eq_51(corpus, tmp_path):
    """The first training loss with alpha = 0.3 equals (1 - a) CE + a * mean_v(-log p_v),
    computed here from the initial model and the first batch rebuilt by hand."""
    alpha = 0.3
    out = tmp_path / "smooth"
    result = train(tiny_run(corpus, out, max_iters=1, label_smoothing=alpha, sampling="uniform"))
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


def test_a_time_budget_fixes_max_iters_and_equals_that_run_exactly(corpus, tmp_path):
    common = {"max_iters": None, "warmup_iters": 6, "dropout": 0.1, "eval_interval": 20}
    common["min_lr"] = 1e-4
    timed = train(tiny_run(corpus, tmp_path / "timed", time="2s", **common))
    state = read_trainer_state(tmp_path / "timed" / "checkpoint")
    end = state["config"]["max_iters"]  # the count the budget gave, recorded
    assert end == timed.iteration == state["iteration"] >= 6
    assert state["resolved_config"]["lr_decay_iters"] == end  # the cosine decays to the end
    fixed = train(tiny_run(corpus, tmp_path / "fixed", **{**common, "max_iters": end}))
    assert timed.losses == fixed.losses  # bit for bit
    for name in ("model.safetensors", "optimizer.safetensors"):
        assert_same_checkpoint_file(tmp_path / "timed", tmp_path / "fixed", name)
    assert metric_lines(tmp_path / "timed")[-1]["lr"] == 1e-4  # the end of the cosine


@pytest.mark.parametrize("stop_during", [3, 8], ids=["in-the-warmup", "after-the-estimate"])
def test_a_resumed_time_run_finishes_as_the_run_of_its_count(
    corpus, tmp_path, monkeypatch, stop_during
):
    common = {"max_iters": None, "warmup_iters": 6, "dropout": 0.1, "eval_interval": 20}
    timed = tiny_run(corpus, tmp_path / "timed", time="3s", **common)
    stopped, resumed = stopped_then_resumed(monkeypatch, timed, stop_during)
    end = read_trainer_state(tmp_path / "timed" / "checkpoint")["config"]["max_iters"]
    assert resumed.iteration == end
    fixed = train(tiny_run(corpus, tmp_path / "fixed", **{**common, "max_iters": end}))
    assert {**stopped.losses, **resumed.losses} == fixed.losses
    assert_same_checkpoint_file(tmp_path / "timed", tmp_path / "fixed")


@pytest.mark.parametrize("past_the_end", [True, False], ids=["past-the-end", "inside"])
def test_a_time_run_whose_count_ends_before_ema_start_says_the_average_will_not_begin(
    corpus, tmp_path, capsys, past_the_end
):
    """--ema-start past the count a --time budget fixes (no 2 s budget fits 10^7 iterations)
    prints one warning line, again on a resume that stays before it, and the checkpoint holds
    no average (no raw weights beside it); an --ema-start at the warmup's end, where the count
    is fixed, averages silently."""
    common = {"max_iters": None, "warmup_iters": 6, "eval_interval": 20, "ema_beta": 0.9}
    ema_start = 10**7 if past_the_end else 6
    out = tmp_path / "timed"
    train(tiny_run(corpus, out, time="2s", ema_start=ema_start, **common))
    printed = capsys.readouterr().out
    end = read_trainer_state(out / "checkpoint")["config"]["max_iters"]
    warning = f"warning: --ema-start {ema_start} is past the end --time 2s fixed (iteration {end})"
    raw_weights = out / "checkpoint" / "raw_weights.safetensors"
    assert (warning in printed) == past_the_end == (end < ema_start)
    assert raw_weights.exists() != past_the_end
    train(TrainConfig(out=str(out), resume=True, max_iters=end + 2))
    assert (warning.replace(f"{end})", f"{end + 2})") in capsys.readouterr().out) == past_the_end
    assert raw_weights.exists() != past_the_end


def test_training_loss_records_every_log_interval_in_bits_too(corpus, tmp_path, capsys):
    out = tmp_path / "run"
    result = train(tiny_run(corpus, out, max_iters=12, log_interval=4, tokenizer="char"))
    logged = metric_lines(out, "train")
    assert [r["iter"] for r in logged] == [0, 4, 8]
    for record in logged:
        assert record["loss"] == result.losses[record["iter"]]
        # an ASCII text under a character tokenizer: a token is a byte is a character
        assert record["bpb"] == pytest.approx(record["loss"] / math.log(2), rel=1e-12)
        assert record["bpc"] == pytest.approx(record["loss"] / math.log(2), rel=1e-12)
    for record in metric_lines(out):
        assert record["val_bpb"] == pytest.approx(record["val_loss"] / math.log(2), rel=1e-12)
    lines = [line for line in capsys.readouterr().out.splitlines() if "tokens/s" in line]
    assert [line.split(":")[0] for line in lines] == ["iter 0/12", "iter 4/12", "iter 8/12"]
    assert all(line.endswith(" left") for line in lines)


def test_multi_token_prediction_trains_on_both_losses_and_evaluates_the_next_token(
    corpus, tmp_path, capsys
):
    """--mtp-weight 0.5: each step's loss is the model's training-mode loss (next token + 0.5
    x token after next, recomputed here from the saved batch), its lines carry no bits per
    byte, the evaluations report the next token's loss (as `light-llm eval` computes it from
    the checkpoint), the first lines say so, and a resumed run continues it bit for bit."""
    common = dict(max_iters=8, lr_decay_iters=8, tokenizer="char", mtp_weight=0.5)
    straight = train(tiny_run(corpus, tmp_path / "straight", **common))
    assert "multi-token prediction: the training loss is" in capsys.readouterr().out
    for record in metric_lines(tmp_path / "straight", "train"):
        assert "bpb" not in record and "bpc" not in record
    last_eval = metric_lines(tmp_path / "straight")[-1]
    assert "val_bpb" in last_eval
    model = load(tmp_path / "straight")
    assert model.config.mtp_weight == 0.5 and model.mtp_proj.weight.abs().max() > 0
    x, y = torch.randint(0, model.config.vocab_size, (2, 2, TINY["block_size"]))
    model.train()
    _, objective = model(x, y)
    model.eval()
    seen = []  # the head's input: the final hidden states LN_f(X_L), (B, T, d)
    hook = model.lm_head.register_forward_hook(lambda module, args, out: seen.append(args[0]))
    _, next_token = model(x, y)
    hook.remove()
    ahead = model.token_after_next_loss(seen[0][:, :-1], y[:, 1:], 0.0)
    assert objective.item() == pytest.approx(next_token.item() + 0.5 * ahead.item(), rel=1e-6)
    train(tiny_run(corpus, tmp_path / "split", **{**common, "max_iters": 4}))
    resumed = train(TrainConfig(out=str(tmp_path / "split"), max_iters=8, resume=True))
    for iteration, loss in resumed.losses.items():
        assert loss == straight.losses[iteration], iteration  # bit for bit
    assert_same_checkpoint_file(tmp_path / "straight", tmp_path / "split")


def test_bits_per_byte_of_gpt2_tokens_is_total_nats_over_bytes(corpus, tmp_path):
    out = tmp_path / "run"
    train(tiny_run(corpus, out, max_iters=1, tokenizer="gpt2", eval_interval=1))
    record = metric_lines(out)[-1]
    _, val_text = split_train_val(corpus.read_text(encoding="utf-8"))
    ids = get_tokenizer("gpt2").encode(val_text)
    n_tokens = len(ids) - 1  # predicted: all but the first, over the text they cover
    covered = get_tokenizer("gpt2").decode(ids[1:])
    total_bits = record["val_loss"] * n_tokens / math.log(2)
    assert record["val_bpb"] == pytest.approx(total_bits / len(covered.encode()), rel=1e-12)
    assert n_tokens < len(val_text) and record["val_bpb"] < record["val_loss"] / math.log(2)


def test_extending_a_run_goes_on_at_the_final_learning_rate(corpus, tmp_path, capsys):
    common = {"max_iters": 10, "warmup_iters": 2, "log_interval": 1, "lr": 1e-3, "min_lr": 1e-4}
    common["lr_schedule"] = "cosine"
    train(tiny_run(corpus, tmp_path / "kept", **common))
    train(TrainConfig(out=str(tmp_path / "kept"), max_iters=16, resume=True))
    assert "at its final learning rate 0.0001" in capsys.readouterr().out
    logged = {r["iter"]: r["lr"] for r in metric_lines(tmp_path / "kept", "train")}
    assert [logged[i] for i in range(10, 16)] == [1e-4] * 6

    train(tiny_run(corpus, tmp_path / "stretched", **common))
    train(
        TrainConfig(
            out=str(tmp_path / "stretched"), max_iters=16, resume=True, restretch_schedule=True
        )
    )
    assert "re-stretched to end at 16" in capsys.readouterr().out
    logged = {r["iter"]: r["lr"] for r in metric_lines(tmp_path / "stretched", "train")}
    assert logged[10] == learning_rate(10, 1e-3, 1e-4, 2, 16) > 1e-4


def test_extending_a_run_whose_rate_reached_zero_is_refused_unless_given_a_rate(
    corpus, tmp_path, capsys
):
    """The default's schedule decays to 0: going on at that rate would change no weight, so
    the extension is refused with nothing written; --min-lr on the resume gives the new
    iterations a rate, which the note names and the metrics log."""
    out = tmp_path / "run"
    common = {"max_iters": 6, "warmup_iters": 2, "log_interval": 1, "lr": 1e-3, "min_lr": 0.0}
    train(tiny_run(corpus, out, lr_schedule="wsd", **common))
    files = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    refused = "schedule ends at iteration 6 at a learning rate of 0, .*change no weight"
    with pytest.raises(TrainingError, match=refused):
        train(TrainConfig(out=str(out), max_iters=9, resume=True))
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == files

    capsys.readouterr()
    train(TrainConfig(out=str(out), max_iters=9, resume=True, min_lr=2e-4))
    assert "at its final learning rate 0.0002" in capsys.readouterr().out
    logged = {r["iter"]: r["lr"] for r in metric_lines(out, "train")}
    assert [logged[i] for i in range(6, 9)] == [2e-4] * 3

    # a run that ended inside its warmup has not decayed: it goes on along its schedule
    short = tmp_path / "short"
    train(tiny_run(corpus, short, **{**common, "max_iters": 3, "warmup_iters": 5}))
    train(TrainConfig(out=str(short), max_iters=5, resume=True))
    assert "on its own schedule, whose decay ends at 5" in capsys.readouterr().out
    logged = {r["iter"]: r["lr"] for r in metric_lines(short, "train")}
    assert [logged[i] for i in (3, 4)] == [learning_rate(i, 1e-3, 0.0, 5, 5) for i in (3, 4)]
    assert min(logged[i] for i in (3, 4)) > 0


def test_wsd_holds_the_peak_then_cools_down_to_the_floor_in_the_logged_rates(corpus, tmp_path):
    common = {"max_iters": 12, "warmup_iters": 2, "log_interval": 1, "lr": 1e-3, "min_lr": 1e-4}
    for shape in ("linear", "sqrt"):
        out = tmp_path / shape
        cooldown = {"cooldown_fraction": 0.3, "cooldown_shape": shape}
        train(tiny_run(corpus, out, lr_schedule="wsd", **cooldown, **common))
        logged = {r["iter"]: r["lr"] for r in metric_lines(out, "train")}
        # 10 steps after warmup, the last 3 of them cooling down: from step 9 to the floor
        # at 12, in a straight line or falling by sqrt(1/3) and sqrt(2/3) of the way
        fallen = [1 / 3, 2 / 3] if shape == "linear" else [(1 / 3) ** 0.5, (2 / 3) ** 0.5]
        cooling = [1e-3 - f * (1e-3 - 1e-4) for f in fallen]
        expected = [1e-3 / 3, 2e-3 / 3, *[1e-3] * 8, *cooling]
        assert [logged[i] for i in range(12)] == pytest.approx(expected, rel=1e-12)


def test_a_resume_may_change_the_schedule_in_either_direction(corpus, tmp_path):
    """A wsd run resumed with --lr-schedule cosine (its cooldown, never given, is not carried
    over) and a cosine run resumed with --lr-schedule wsd log the new schedule's rates."""
    common = {"max_iters": 6, "warmup_iters": 2, "log_interval": 1, "lr": 1e-3, "min_lr": 1e-4}
    for start, then, cooldown in (("wsd", "cosine", None), ("cosine", "wsd", 0.5)):
        out = tmp_path / start
        train(tiny_run(corpus, out, lr_schedule=start, **common))
        resumed = TrainConfig(out=str(out), max_iters=10, resume=True, lr_schedule=then)
        train(dataclasses.replace(resumed, restretch_schedule=True))
        logged = {r["iter"]: r["lr"] for r in metric_lines(out, "train")}
        expected = [learning_rate(i, 1e-3, 1e-4, 2, 10, cooldown_fraction=cooldown)
                    for i in range(6, 10)]  # fmt: skip
        assert [logged[i] for i in range(6, 10)] == pytest.approx(expected, rel=1e-12)


def test_a_sqrt_cooldown_is_recorded_resumed_bit_for_bit_and_dropped_with_its_schedule(
    corpus, tmp_path
):
    """A run cooling down as 1 - sqrt resumes on it (the shape comes back from its trainer
    state, not the default's straight line), bit for bit as the run that was never stopped;
    resumed with --lr-schedule cosine, its shape, never given again, goes with its wsd."""
    common = {"max_iters": 8, "warmup_iters": 2, "log_interval": 1, "lr": 1e-3, "min_lr": 1e-4}
    sqrt = {"lr_schedule": "wsd", "cooldown_shape": "sqrt", **common}
    straight = train(tiny_run(corpus, tmp_path / "straight", **sqrt))
    out = tmp_path / "stopped"
    train(tiny_run(corpus, out, **{**sqrt, "max_iters": 4, "lr_decay_iters": 8}))
    resumed = train(TrainConfig(out=str(out), max_iters=8, resume=True))
    assert resumed.losses == {i: straight.losses[i] for i in range(4, 8)}
    assert read_trainer_state(out / "checkpoint")["resolved_config"]["cooldown_shape"] == "sqrt"
    logged = {r["iter"]: r["lr"] for r in metric_lines(out, "train")}
    expected = [learning_rate(i, 1e-3, 1e-4, 2, 8, 0.5, "sqrt") for i in range(8)]
    assert [logged[i] for i in range(8)] == pytest.approx(expected, rel=1e-12)
    assert logged[6] < learning_rate(6, 1e-3, 1e-4, 2, 8, 0.5)  # under the straight line
    to_cosine = TrainConfig(out=str(out), max_iters=10, resume=True, lr_schedule="cosine")
    train(dataclasses.replace(to_cosine, restretch_schedule=True))
    resolved = read_trainer_state(out / "checkpoint")["resolved_config"]
    assert (resolved["lr_schedule"], resolved["cooldown_shape"]) == ("cosine", None)


def test_the_default_length_follows_the_machines_arithmetic_and_is_recorded(
    corpus, tmp_path, capsys, monkeypatch
):
    """A run that gives no --max-iters takes the count fitted to its dtype, says so in its
    first lines and records it as --max-iters: its resume keeps it when the table changes.
    (On the kind of CPU float32's count was fitted on, whatever kind runs the test.)"""
    monkeypatch.setattr("light_llm.train.prepare.this_cpu", lambda: CpuKind("AVX2"))
    monkeypatch.setattr("light_llm.train.config.FITTED_MAX_ITERS", {"qwen3-cpu": {"float32": 3}})
    settings = {key: value for key, value in TINY.items() if key != "max_iters"}
    out = tmp_path / "fitted"
    result = train(TrainConfig(**settings, data=str(corpus), out=str(out)))
    assert result.iteration == 3
    printed = capsys.readouterr().out
    recipe = PRESET_RECIPES[DEFAULT_PRESETS["gpt"]]["max_iters"]
    assert f"3 iterations, not the recipe's {recipe}: this CPU" in printed
    assert "That length is the default's: this run's model or batch differs" in printed
    state = read_trainer_state(out / "checkpoint")
    assert state["config"]["max_iters"] == 3 and state["resolved_config"]["max_iters"] == 3
    monkeypatch.setattr("light_llm.train.config.FITTED_MAX_ITERS", {"qwen3-cpu": {"float32": 5}})
    resumed = train(TrainConfig(out=str(out), resume=True))
    assert resumed.iteration == 3 and not resumed.losses  # already at its end
    given = TrainConfig(**settings, data=str(corpus), out=str(tmp_path / "given"), max_iters=2)
    given = train(given)
    assert given.iteration == 2 and "not the recipe's" not in capsys.readouterr().out


def test_on_a_cpu_no_count_was_fitted_on_the_default_measures_its_length(
    corpus, tmp_path, capsys, monkeypatch
):
    """On a kind of CPU no count was fitted on, the default's length is measured against
    nanoGPT's step before the first step (train.calibration), said, and recorded as
    --max-iters; the run is the one that count gives by hand, bit for bit (measuring leaves
    its numbers alone), and its resume keeps the count without measuring again."""
    monkeypatch.setattr("light_llm.train.prepare.this_cpu", lambda: CpuKind("DEFAULT"))
    reference = Reference("a test machine", iterations=6, ratio=1.0)
    monkeypatch.setattr("light_llm.train.calibration.REFERENCE", reference)
    settings = {key: value for key, value in TINY.items() if key != "max_iters"}
    out = tmp_path / "measured"
    measured = train(TrainConfig(**settings, data=str(corpus), out=str(out)))
    captured = capsys.readouterr()
    printed = captured.out
    assert "timing this CPU (DEFAULT): the default's step against nanoGPT's" in captured.err
    state = read_trainer_state(out / "checkpoint")
    count = state["config"]["max_iters"]
    assert measured.iteration == count == state["resolved_config"]["max_iters"]
    assert f"\n{count} iterations: float32 on this CPU (DEFAULT), where no count" in printed
    assert "on a test machine, where 6 iterations end the default's run" in printed
    assert "That length is the default's: this run's model or batch differs" in printed
    by_hand = TrainConfig(**settings, data=str(corpus), out=str(tmp_path / "given"))
    given = train(dataclasses.replace(by_hand, max_iters=count))
    captured = capsys.readouterr()
    assert given.losses == measured.losses and "where no count" not in captured.out
    assert "timing this CPU" not in captured.err
    resumed = train(TrainConfig(out=str(out), resume=True))
    captured = capsys.readouterr()
    assert resumed.iteration == count and "where no count" not in captured.out
    assert "timing this CPU" not in captured.err


def test_the_default_recipe_fits_its_weight_decay_to_the_corpus_and_records_it(
    corpus, tmp_path, capsys
):
    """A new run of the default recipe raises its weight decay to λ = B T / (η E N) (the
    weights averaged over E passes of the training split's N tokens), says so, and records it
    as --weight-decay: the run then equals one given that decay by hand, bit for bit, and
    its resume keeps it; the NumPy engine fits the same λ."""
    from light_llm.train.numpy_trainer import train_numpy

    settings = {**TINY, "tokenizer": "char", "max_iters": 6}
    out = tmp_path / "fitted"
    fitted = train(TrainConfig(**settings, data=str(corpus), out=str(out)))
    state = read_trainer_state(out / "checkpoint")
    resolved = state["resolved_config"]
    tokens_per_pass = state["data"]["train_tokens"]
    steps_per_pass = tokens_per_pass / (TINY["batch_size"] * TINY["block_size"])
    expected = 1 / (resolved["lr"] * PRESET_RECIPES["qwen3-cpu"]["weight_decay_epochs"])
    expected /= max(steps_per_pass, 1)
    assert expected > 0.1  # the recipe's, raised on this small corpus
    assert state["config"]["weight_decay"] == resolved["weight_decay"] == pytest.approx(expected)
    assert f"weight decay {expected:.3g}, not 0.1" in capsys.readouterr().out
    by_hand = TrainConfig(
        **settings, data=str(corpus), out=str(tmp_path / "by-hand"),
        weight_decay=resolved["weight_decay"],
    )  # fmt: skip
    assert train(by_hand).losses == fitted.losses
    assert "weight decay" not in capsys.readouterr().out  # given: nothing to fit
    train(TrainConfig(out=str(out), resume=True, max_iters=8))
    assert (
        read_trainer_state(out / "checkpoint")["resolved_config"]["weight_decay"]
        == (resolved["weight_decay"])
    )
    numpy_out = tmp_path / "numpy"
    train_numpy(TrainConfig(**settings, data=str(corpus), out=str(numpy_out), engine="numpy"))
    numpy_state = read_trainer_state(numpy_out / "checkpoint")
    assert numpy_state["resolved_config"]["weight_decay"] == resolved["weight_decay"]


def test_a_run_from_before_the_fitted_weight_decay_resumes_with_its_own(corpus, tmp_path):
    """A default run saved before the decay was fitted (its trainer state names no
    weight_decay_epochs and records the recipe's 0.1) resumes with 0.1, not a fitted one."""
    out = tmp_path / "old"
    settings = {**TINY, "tokenizer": "char", "weight_decay": 0.1, "max_iters": 4}
    train(TrainConfig(**settings, data=str(corpus), out=str(out)))
    path = out / "checkpoint" / "trainer_state.json"
    state = json.loads(path.read_text())
    state["config"]["weight_decay"] = None  # the default of the time
    for key in ("config", "resolved_config"):
        del state[key]["weight_decay_epochs"]
    path.write_text(json.dumps(state))
    train(TrainConfig(out=str(out), resume=True, max_iters=6))
    resolved = read_trainer_state(out / "checkpoint")["resolved_config"]
    assert resolved["weight_decay"] == 0.1
