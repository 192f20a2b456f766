"""``light-llm quantize`` and ``--quantize int8``: the checkpoint it writes (bit-identical
when saved again, its scales those of the NumPy formula), the commands that read it, and
``generate --stats``."""

import json

import numpy as np
import pytest
import safetensors.numpy
import torch

from light_llm.checkpoints import load
from light_llm.cli import main
from light_llm.generate import generate
from light_llm.models.quantize import is_quantized, quantize_gpt
from light_llm.reference.quantize import SCALE_SUFFIX, quantize_rows, quantized_names
from tests.conftest import save_char_checkpoint


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(arg) for arg in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def checkpoints(tmp_path, capsys):
    """A float char-level checkpoint (32 wide: the int8 kernel's sizes) and its int8 form."""
    folder, model, tokenizer = save_char_checkpoint(
        tmp_path / "float", block_size=24, n_layer=2, n_embd=32
    )
    code, out, err = run_cli(capsys, "quantize", "--checkpoint", folder, "--out", tmp_path / "q")
    assert code == 0, err
    assert "int8" in out
    return folder, tmp_path / "q", model, tokenizer


def test_the_int8_checkpoint_holds_the_numpy_formulas_integers_and_scales(checkpoints):
    folder, int8_folder, model, _ = checkpoints
    config = json.loads((int8_folder / "config.json").read_text())
    assert config["quantization"] == "int8"
    stored = safetensors.numpy.load_file(int8_folder / "model.safetensors")
    floats = safetensors.numpy.load_file(folder / "model.safetensors")
    for name in quantized_names(model.config):
        q, s = quantize_rows(floats[name])
        np.testing.assert_array_equal(stored[name], q)
        np.testing.assert_array_equal(stored[name + SCALE_SUFFIX], s)
    assert "lm_head.weight" not in stored  # tied: the token table, stored once
    ratio = (int8_folder / "model.safetensors").stat().st_size / (
        folder / "model.safetensors"
    ).stat().st_size
    assert ratio < 0.4


def test_saving_a_loaded_int8_checkpoint_again_is_bit_identical(checkpoints, tmp_path):
    from light_llm.checkpoints import save

    _, int8_folder, _, tokenizer = checkpoints
    model = load(int8_folder)
    assert is_quantized(model)
    save(model, tmp_path / "again", tokenizer)
    for name in ("model.safetensors", "config.json"):
        assert (tmp_path / "again" / name).read_bytes() == (int8_folder / name).read_bytes()


def test_generate_from_the_int8_checkpoint_equals_quantize_on_load(checkpoints, capsys):
    folder, int8_folder, model, tokenizer = checkpoints
    argv = ["--prompt", "to be", "--temperature", "0", "--max-new-tokens", "12", "--no-stream"]
    code, from_file, err = run_cli(capsys, "generate", "--checkpoint", int8_folder, *argv)
    assert code == 0, err
    code, on_load, err = run_cli(
        capsys, "generate", "--checkpoint", folder, "--quantize", "int8", *argv
    )
    assert code == 0, err
    idx = torch.tensor([tokenizer.encode("to be")])
    expected = generate(quantize_gpt(model), idx, 12, temperature=0.0)[0].tolist()
    assert from_file == on_load == tokenizer.decode(expected) + "\n"


def test_the_numpy_engine_reads_the_int8_checkpoint_as_q_times_s(checkpoints, capsys):
    folder, int8_folder, _, _ = checkpoints
    argv = ["--prompt", "to be", "--temperature", "0", "--max-new-tokens", "12", "--no-stream"]
    argv += ["--engine", "numpy"]
    code, from_file, err = run_cli(capsys, "generate", "--checkpoint", int8_folder, *argv)
    assert code == 0, err
    code, on_load, err = run_cli(
        capsys, "generate", "--checkpoint", folder, "--quantize", "int8", *argv
    )
    assert code == 0, err
    assert from_file == on_load


def test_dequantize_writes_q_times_s_as_float_weights(checkpoints, capsys, tmp_path):
    _, int8_folder, _, _ = checkpoints
    out = tmp_path / "back"
    code, _, err = run_cli(
        capsys, "quantize", "--checkpoint", int8_folder, "--out", out, "--dequantize"
    )
    assert code == 0, err
    assert "quantization" not in json.loads((out / "config.json").read_text())
    stored = safetensors.numpy.load_file(int8_folder / "model.safetensors")
    back = safetensors.numpy.load_file(out / "model.safetensors")
    name = "transformer.h.1.mlp.c_fc.weight"
    expected = stored[name].astype(np.float32) * stored[name + SCALE_SUFFIX][:, None]
    np.testing.assert_array_equal(back[name], expected)


def test_stats_prints_the_speed_the_bytes_and_the_mbu(checkpoints, capsys):
    _, int8_folder, _, _ = checkpoints
    stats = ["generate", "--checkpoint", int8_folder, "--prompt", "to", "--stats"]
    argv = [*stats, "--temperature", "0", "--max-new-tokens", "8", "--no-stream", "--ignore-eos"]
    code, _, err = run_cli(capsys, *argv)
    assert code == 0, err
    lines = [line for line in err.splitlines() if line.startswith("stats: ")]
    assert len(lines) == 4
    assert "8 steps x 1 prompt(s) of 2 tokens" in lines[0]
    assert "thread(s) (measured now)" in lines[0]
    assert "time to first token" in lines[1] and "tokens/s" in lines[1]
    assert "MiB" in lines[2] and "MBU" in lines[3]
    code, _, err = run_cli(capsys, *stats, "--max-new-tokens", "2", "--threads", "1")
    assert "1 thread(s) (given with --threads)" in err
    code, _, err = run_cli(capsys, *stats, "--max-new-tokens", "2", "--no-cache")
    assert "KV cache 0.00 MiB" in err


def test_eval_of_the_int8_checkpoint_equals_eval_with_quantize(checkpoints, capsys, tmp_path):
    folder, int8_folder, _, _ = checkpoints
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("to be or not to be, that is the question " * 40)
    scores = []
    for argv in (
        ["--checkpoint", int8_folder],
        ["--checkpoint", folder, "--quantize", "int8"],
        ["--checkpoint", folder],
    ):
        code, out, err = run_cli(capsys, "eval", *argv, "--data", corpus, "--json")
        assert code == 0, err
        scores.append(json.loads(out)["val_loss"])
    assert scores[0] == scores[1]
    assert scores[0] != scores[2]


def test_inspect_reads_the_int8_checkpoint(checkpoints, capsys):
    _, int8_folder, _, _ = checkpoints
    code, out, err = run_cli(
        capsys, "inspect", "lens", "--checkpoint", int8_folder, "--prompt", "to be or", "--json"
    )
    assert code == 0, err
    assert json.loads(out)


def test_the_explorer_reads_the_int8_checkpoint_as_its_float_weights(checkpoints):
    from light_llm.serve import ExplorerModel

    _, int8_folder, _, _ = checkpoints
    explorer = ExplorerModel(int8_folder, "test")
    stored = safetensors.numpy.load_file(int8_folder / "model.safetensors")
    name = "transformer.h.0.attn.c_attn.weight"
    expected = stored[name].astype(np.float32) * stored[name + SCALE_SUFFIX][:, None]
    np.testing.assert_array_equal(explorer.model.state_dict()[name].numpy(), expected)
