"""Which arithmetic the trainer takes on a CPU: bfloat16 only where the hardware has it and
PyTorch may use it (light_llm.train.precision.cpu_has_native_bfloat16); on a GPU,
TensorFloat-32 products only while a run trains."""

import os
import subprocess
import sys

import torch

from light_llm.train import TrainConfig, muon, precision, train
from light_llm.train import trainer as trainer_module
from light_llm.train.config import CpuKind
from light_llm.train.muon import orthogonalisation_dtype
from tests.train.helpers import TINY, write_corpus


def test_no_bfloat16_under_kernels_capped_at_avx2():
    """ATEN_CPU_CAPABILITY=avx2 runs this machine as one with AVX2 only: float32 training and
    a float32 Newton-Schulz, whatever bfloat16 arithmetic the hardware has (with it, capped
    kernels would emulate bfloat16 at a fraction of float32's speed)."""
    probe = (
        "import torch\n"
        "from light_llm.train.precision import cpu_has_native_bfloat16, default_dtype\n"
        "from light_llm.train.muon import orthogonalisation_dtype\n"
        "print(torch.backends.cpu.get_cpu_capability(), cpu_has_native_bfloat16(),\n"
        "      default_dtype(torch.device('cpu')),\n"
        "      orthogonalisation_dtype(torch.zeros(4, 96, 384)))\n"
    )
    env = dict(os.environ, ATEN_CPU_CAPABILITY="avx2")
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["AVX2", "False", "float32", "torch.float32"]


def test_bfloat16_needs_both_the_hardware_and_avx512_kernels(monkeypatch):
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: True)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    assert precision.cpu_has_native_bfloat16()
    assert precision.default_dtype(torch.device("cpu")) == "bfloat16"
    assert orthogonalisation_dtype(torch.zeros(4, 96, 384)) == torch.bfloat16
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    assert not precision.cpu_has_native_bfloat16()
    assert precision.default_dtype(torch.device("cpu")) == "float32"
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)
    assert not precision.cpu_has_native_bfloat16()
    assert orthogonalisation_dtype(torch.zeros(4, 96, 384)) == torch.float32


def test_newton_schulz_keeps_small_stacks_in_float32_on_a_cpu_with_bfloat16(monkeypatch):
    """On a CPU with bfloat16 arithmetic a stack runs in bfloat16 from k r² n =
    SMALL_ORTHOGONALISATION_MACS multiply-adds in its Gram products on, either way up; smaller
    stacks stay in their own format (float32, float64); CUDA takes bfloat16 at any size."""
    monkeypatch.setattr(muon, "cpu_has_native_bfloat16", lambda: True)
    threshold = muon.SMALL_ORTHOGONALISATION_MACS
    r = 64
    n = threshold // (r * r)  # one r x n matrix at the threshold exactly
    assert r * r * n == threshold
    assert orthogonalisation_dtype(torch.zeros(r, n)) == torch.bfloat16
    assert orthogonalisation_dtype(torch.zeros(n, r)) == torch.bfloat16
    assert orthogonalisation_dtype(torch.zeros(1, r, n - 1)) == torch.float32
    assert orthogonalisation_dtype(torch.zeros(2, r, n // 2)) == torch.bfloat16
    assert orthogonalisation_dtype(torch.zeros(3, 96, 96)) == torch.float32  # the default's W_O
    assert orthogonalisation_dtype(torch.zeros(3, 96, 288)) == torch.bfloat16  # its W_QKV
    assert orthogonalisation_dtype(torch.zeros(3, 96, 96, dtype=torch.float64)) == torch.float64
    monkeypatch.setattr(muon, "cpu_has_native_bfloat16", lambda: False)
    assert orthogonalisation_dtype(torch.zeros(3, 96, 288)) == torch.float32


def test_this_cpus_kind_names_its_kernels_its_bfloat16_and_amx(monkeypatch):
    """this_cpu: AMX's tiles count only where PyTorch may use them (AVX-512 kernels), as
    bfloat16 arithmetic does; the kind decides which counts were fitted on it."""
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: True)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    assert precision.this_cpu() == CpuKind("AVX512", native_bfloat16=True, amx=True)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
    assert precision.this_cpu() == CpuKind("AVX512", native_bfloat16=True, amx=False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    assert precision.this_cpu() == CpuKind("AVX2")


def test_bfloat16_on_a_cpu_that_emulates_it_is_said_to_be_slow(monkeypatch):
    """bfloat16 asked for on a CPU without its arithmetic is allowed (the numbers are right)
    but gets a warning naming the CPU; float32, a GPU and a CPU with bfloat16 get none."""
    cpu = torch.device("cpu")
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    note = precision.emulated_bfloat16_note("bfloat16", cpu)
    assert note.startswith("warning: this CPU (AVX2) has no bfloat16 arithmetic")
    assert "drop --dtype bfloat16" in note
    assert precision.emulated_bfloat16_note("float32", cpu) == ""
    assert precision.emulated_bfloat16_note("bfloat16", torch.device("cuda")) == ""
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: True)
    assert precision.emulated_bfloat16_note("bfloat16", cpu) == ""


def tf32_settings() -> tuple[bool, bool]:
    return torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32


def test_tensorfloat32_is_on_for_a_gpu_run_only_and_the_process_settings_come_back():
    before = tf32_settings()
    try:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
        with precision.tensorfloat32_products(torch.device("cuda")):
            assert tf32_settings() == (True, True)
        assert tf32_settings() == (False, False)
        try:  # a run stopped by an error (or Ctrl-C) gives them back too
            with precision.tensorfloat32_products(torch.device("cuda")):
                raise KeyboardInterrupt
        except KeyboardInterrupt:
            pass
        assert tf32_settings() == (False, False)
        with precision.tensorfloat32_products(torch.device("cpu")):
            assert tf32_settings() == (False, False)
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def test_a_training_run_holds_tensorfloat32_for_its_device_while_it_trains(tmp_path, monkeypatch):
    entered = []
    real = precision.tensorfloat32_products

    def recorded(device):
        entered.append(device)
        return real(device)

    monkeypatch.setattr(trainer_module, "tensorfloat32_products", recorded)
    corpus = write_corpus(tmp_path / "corpus.txt", n_lines=200)
    run = {**TINY, "data": str(corpus), "out": str(tmp_path / "run"), "max_iters": 2}
    train(TrainConfig(**run))
    assert entered == [torch.device("cpu")]
