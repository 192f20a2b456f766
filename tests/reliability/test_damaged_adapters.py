"""A LoRA run's adapters file, damaged: every command that reads it (merge, generate, eval,
export) refuses it in one line naming the tensor, and writes nothing; an intact one still
works. The same checks as a model's own weights (names, shapes, floating-point, finite)."""

from __future__ import annotations

import pytest
import safetensors.torch
import torch

from light_llm.checkpoints.lora import ADAPTERS_FILE
from tests.reliability.conftest import assert_refused, run_cli, snapshot


def first_name(tensors):
    return sorted(tensors)[0]


DAMAGES = {
    "int32 values": (lambda t: {k: v.to(torch.int32) for k, v in t.items()}, ["int32"]),
    "NaN values": (lambda t: {k: v * float("nan") for k, v in t.items()}, ["NaN"]),
    "infinite value": (
        lambda t: {**t, first_name(t): torch.full_like(t[first_name(t)], float("inf"))},
        ["infinite"],
    ),
    "wrong shape": (lambda t: {k: v[:1] for k, v in t.items()}, ["shape"]),
    "a missing adapter": (lambda t: {k: v for k, v in t.items() if k != first_name(t)}, ["lacks"]),
    "an unknown adapter": (lambda t: {**t, "bogus.lora_A": torch.zeros(2, 2)}, ["bogus"]),
}


@pytest.mark.parametrize("damage", DAMAGES)
@pytest.mark.parametrize("command", ["merge", "generate", "eval", "export"])
def test_damaged_adapters_are_one_line_and_nothing_is_written(
    capsys, tmp_path, lora_run, damage, command
):
    damaged = tmp_path / "lora"
    damaged.mkdir()
    checkpoint = lora_run / "checkpoint"
    for path in checkpoint.iterdir():
        (damaged / path.name).write_bytes(path.read_bytes())
    tensors = safetensors.torch.load_file(damaged / ADAPTERS_FILE)
    change, words = DAMAGES[damage]
    safetensors.torch.save_file(change(tensors), damaged / ADAPTERS_FILE)
    before = snapshot(tmp_path)
    out = tmp_path / "out"
    argv = {
        "merge": ["merge", "--checkpoint", str(damaged), "--out", str(out)],
        "generate": ["generate", "--checkpoint", str(damaged), "--prompt", "the"],
        "eval": ["eval", "--checkpoint", str(damaged), "--eval-iters", "1"],
        "export": ["export", "--checkpoint", str(damaged), "--format", "hf", "--out", str(out)],
    }[command]
    code, _, err = run_cli(capsys, *argv)
    assert_refused(code, err, *words)
    assert snapshot(tmp_path) == before and not out.exists()


def test_intact_adapters_merge(capsys, tmp_path, lora_run):
    code, _, err = run_cli(
        capsys, "merge", "--checkpoint", str(lora_run), "--out", str(tmp_path / "m")
    )
    assert code == 0, err
