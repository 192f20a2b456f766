"""Data-parallel training: torchrun with 2 gloo processes against one process, same batch.

With --grad-accum 2, one process computes micro-batch slots 0 and 1 of every iteration; under
torchrun rank 0 computes slot 0 and rank 1 slot 1 (see light_llm.train.batches), and DDP
averages their gradients. The global batch is the same, so the runs must agree. Halving a
float is exact and a sum of two numbers does not depend on their order, so the two runs
agree to the last bit on the same machine; the test allows 1e-6 relative, for platforms
where the all-reduce sums differently.
"""

import subprocess
import sys

import pytest
import safetensors.torch
import torch

from light_llm.checkpoints.run import (
    OPTIMIZER_TENSORS_FILE,
    MetricsLog,
    evaluation_records,
    read_trainer_state,
    training_records,
)
from tests.train.helpers import one_thread_environment, tiny_flags

SETTINGS = {"grad_accum": 2, "max_iters": 6, "eval_interval": 2, "dropout": 0.0, "lr": 1e-2}
SETTINGS["log_interval"] = 2


def run(command):
    environment = one_thread_environment()
    completed = subprocess.run(command, env=environment, capture_output=True, text=True)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return completed


WARMUPS = {"batch_warmup": 3, "batch_warmup_size": 2, "context_warmup": 2}
WARMUPS["context_warmup_size"] = 8
# AdamW alone, its global-norm clipping low enough to act (the default clips nothing)
CLIPPED_ADAMW = {"optimizer": "adamw", "grad_clip": 0.05}


@pytest.mark.parametrize(
    "switches",
    [  # the warmups and clipping take 35 s more: run with -m slow
        pytest.param({}, id="default"),
        pytest.param(WARMUPS, id="warmups", marks=pytest.mark.slow),
        pytest.param(CLIPPED_ADAMW, id="clipped-adamw", marks=pytest.mark.slow),
    ],
)
def test_torchrun_two_gloo_processes_match_one_process(corpus, tmp_path, switches):
    """Also under the batch-size and sequence-length warmups: every slot of an iteration, on
    either process, draws that iteration's B_t windows of T_t tokens, so the global batch is
    still one process's. Each process steps its share of the parameters, and the checkpoint's
    optimizer state, joined from both, is the one process's."""
    settings = {**SETTINGS, **switches}
    single_out, ddp_out = tmp_path / "single", tmp_path / "ddp"
    run([sys.executable, "-m", "light_llm", "train", *tiny_flags(corpus, single_out, **settings)])
    completed = run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nnodes=1",
            "--nproc_per_node=2",
            "-m",
            "light_llm",
            "train",
            *tiny_flags(corpus, ddp_out, **settings),
        ]
    )
    # rank 0 announced a distributed run, whose gradients meet in shared memory on one CPU
    assert "2 processes averaging gradients in shared memory" in completed.stdout
    assert completed.stdout.count("training a ") == 1  # and rank 1 stayed silent
    single_log, ddp_log = MetricsLog(single_out).records(), MetricsLog(ddp_out).records()
    single, ddp = evaluation_records(single_log), evaluation_records(ddp_log)
    assert [r["iter"] for r in ddp] == [r["iter"] for r in single] == [0, 2, 4, 6]
    single_steps, ddp_steps = training_records(single_log), training_records(ddp_log)
    assert [r["iter"] for r in ddp_steps] == [r["iter"] for r in single_steps] == [0, 2, 4]
    for one, many in zip(single_steps, ddp_steps, strict=True):
        assert many["loss"] == pytest.approx(one["loss"], rel=1e-6)
    assert single[-1]["val_loss"] < single[0]["val_loss"]  # it trained
    for one, many in zip(single, ddp, strict=True):
        assert many["train_loss"] == pytest.approx(one["train_loss"], rel=1e-6)
        assert many["val_loss"] == pytest.approx(one["val_loss"], rel=1e-6)
    single_weights = safetensors.torch.load_file(single_out / "checkpoint" / "model.safetensors")
    ddp_weights = safetensors.torch.load_file(ddp_out / "checkpoint" / "model.safetensors")
    for name, tensor in single_weights.items():
        torch.testing.assert_close(ddp_weights[name], tensor, rtol=1e-6, atol=1e-7)
    single_moments, ddp_moments = (
        safetensors.torch.load_file(out / "checkpoint" / OPTIMIZER_TENSORS_FILE)
        for out in (single_out, ddp_out)
    )
    assert sorted(ddp_moments) == sorted(single_moments)
    for name, tensor in single_moments.items():
        torch.testing.assert_close(ddp_moments[name], tensor, rtol=1e-5, atol=1e-7)
    states = [read_trainer_state(out / "checkpoint") for out in (single_out, ddp_out)]
    # B_t T_t of iterations 0-5 (TINY: batch 4, context 16), grad_accum 2
    tokens = [2 * 8, 2 * 8, 2 * 16, 4 * 16, 4 * 16, 4 * 16] if switches is WARMUPS else [4 * 16] * 6
    assert states[0]["tokens_seen"] == states[1]["tokens_seen"] == sum(tokens) * 2


def torchrun(*flags: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes=1"]
    return run([*command, "--nproc_per_node=2", "-m", "light_llm", "train", *flags])


@pytest.mark.slow  # 28 s; a two-process resume also runs in tests/cli/test_train_processes.py
def test_a_two_process_run_resumes_from_its_joined_optimizer_state(corpus, tmp_path):
    """Both processes load the checkpoint's whole optimizer state (joined from their shares)
    and step their shares on: a finished two-process run extended under torchrun ends where the
    same run in one process, extended the same way, ends (the default's Muon and AdamW state)."""
    outs = {"single": tmp_path / "single", "two": tmp_path / "two"}
    for iterations in (4, 6):  # 4 iterations, then the finished run extended to 6
        for name, out in outs.items():
            flags = tiny_flags(corpus, out, **{**SETTINGS, "max_iters": iterations})
            flags += ["--resume"] if iterations == 6 else []
            if name == "single":
                run([sys.executable, "-m", "light_llm", "train", *flags])
            else:
                torchrun(*flags)
    single, two = (MetricsLog(out).records() for out in outs.values())
    for one, many in zip(training_records(single), training_records(two), strict=True):
        assert many["iter"] == one["iter"] and many["loss"] == pytest.approx(one["loss"], rel=1e-6)
    assert max(r["iter"] for r in training_records(two)) == 4  # the resumed steps were logged
    for file in ("model.safetensors", OPTIMIZER_TENSORS_FILE):
        one, many = (
            safetensors.torch.load_file(out / "checkpoint" / file) for out in outs.values()
        )
        assert sorted(many) == sorted(one)
        for name, tensor in one.items():
            torch.testing.assert_close(many[name], tensor, rtol=1e-5, atol=1e-7)
    assert read_trainer_state(outs["two"] / "checkpoint")["iteration"] == 6
