"""Bad input to the int8 paths: one sentence, exit code 2, nothing written."""

from __future__ import annotations

import json

import pytest
import safetensors.numpy
import torch

from light_llm.checkpoints import save
from light_llm.models.bert import BertEncoder, EncoderConfig
from light_llm.models.gpt import GPT
from light_llm.tokenizers import BertTokenizer
from tests.reliability.conftest import assert_refused, run_cli, snapshot


@pytest.fixture
def int8_checkpoint(tmp_path, char_checkpoint, capsys):
    out = tmp_path / "int8"
    code, _, err = run_cli(capsys, "quantize", "--checkpoint", char_checkpoint, "--out", out)
    assert code == 0, err
    return out


def test_an_unknown_quantization_name_is_refused_everywhere(capsys, tmp_path, char_checkpoint):
    out = tmp_path / "out"
    for argv in (
        ["quantize", "--checkpoint", char_checkpoint, "--out", out, "--method", "int4"],
        ["generate", "--checkpoint", char_checkpoint, "--prompt", "to", "--quantize", "int4"],
        ["eval", "--checkpoint", char_checkpoint, "--quantize", "fp8"],
    ):
        code, out_text, err = run_cli(capsys, *argv)
        assert_refused(code, err, "unknown quantization", "int8")
        assert out_text == ""
    assert not out.exists()


def test_quantizing_an_encoder_says_light_llm_quantizes_gpts(capsys, tmp_path):
    tokenizer = BertTokenizer.packaged()
    config = EncoderConfig(
        vocab_size=tokenizer.vocab_size, block_size=32, n_layer=1, n_head=2, n_embd=16
    )
    save(BertEncoder(config).eval(), tmp_path / "bert", tokenizer)
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, "quantize", "--checkpoint", tmp_path / "bert", "--out", out)
    assert_refused(code, err, "works on GPTs", "encoder")
    code, _, err = run_cli(capsys, "eval", "--checkpoint", tmp_path / "bert", "--quantize", "int8")
    assert_refused(code, err, "--quantize works on GPTs", "encoder")
    assert not out.exists()


@pytest.mark.parametrize("bad", ["nan", "inf"])
def test_weights_holding_nan_or_inf_are_not_quantized(capsys, tmp_path, char_checkpoint, bad):
    path = char_checkpoint / "model.safetensors"
    tensors = safetensors.numpy.load_file(path)
    tensors["transformer.h.0.attn.c_proj.weight"][1, 2] = float(bad)
    safetensors.numpy.save_file(tensors, path)
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, "quantize", "--checkpoint", char_checkpoint, "--out", out)
    assert_refused(code, err, "transformer.h.0.attn.c_proj.weight", "NaN or infinite")
    assert not out.exists()


def test_training_from_an_int8_checkpoint_says_it_needs_float_weights(
    capsys, tmp_path, int8_checkpoint, corpus
):
    out = tmp_path / "ft"
    code, _, err = run_cli(
        capsys, "train", "--init-from", int8_checkpoint, "--data", corpus, "--out", out
    )
    assert_refused(code, err, "int8 weights", "training needs float weights", "--dequantize")
    assert not out.exists()


def test_resuming_into_an_int8_checkpoint_says_it_needs_float_weights(
    capsys, tmp_path, char_checkpoint, corpus
):
    run = tmp_path / "run"
    argv = ["train", "--data", corpus, "--out", run, "--max-iters", "2", "--eval-interval", "2"]
    argv += ["--n-layer", "1", "--n-embd", "16", "--n-head", "2", "--block-size", "16"]
    argv += ["--batch-size", "2", "--eval-iters", "1", "--tokenizer", "char"]
    code, _, err = run_cli(capsys, *argv)
    assert code == 0, err
    checkpoint = run / "checkpoint"
    config = json.loads((checkpoint / "config.json").read_text())
    config["quantization"] = "int8"  # as if light-llm quantize had written it there
    (checkpoint / "config.json").write_text(json.dumps(config))
    before = snapshot(run)
    code, _, err = run_cli(capsys, "train", "--out", run, "--resume", "--max-iters", "4")
    assert_refused(code, err, "int8 weights", "resumed", "float weights")
    assert snapshot(run) == before


def damage_scale(folder):
    path = folder / "model.safetensors"
    tensors = safetensors.numpy.load_file(path)
    tensors["transformer.h.0.mlp.c_fc.weight_scale"][5] = -1.0
    safetensors.numpy.save_file(tensors, path)


def scale_of_wrong_shape(folder):
    path = folder / "model.safetensors"
    tensors = safetensors.numpy.load_file(path)
    tensors["transformer.h.0.mlp.c_fc.weight_scale"] = tensors[
        "transformer.h.0.mlp.c_fc.weight_scale"
    ][:-1]
    safetensors.numpy.save_file(tensors, path)


def float_where_int8_belongs(folder):
    path = folder / "model.safetensors"
    tensors = safetensors.numpy.load_file(path)
    name = "transformer.h.0.attn.c_attn.weight"
    tensors[name] = tensors[name].astype("float32")
    safetensors.numpy.save_file(tensors, path)


def code_below_minus_127(folder):
    """A -128, which int8 holds and quantization never writes (|round(W / s)| <= 127)."""
    path = folder / "model.safetensors"
    tensors = safetensors.numpy.load_file(path)
    tensors["transformer.h.0.mlp.c_proj.weight"][2, 3] = -128
    safetensors.numpy.save_file(tensors, path)


def unknown_quantization_in_config(folder):
    config = json.loads((folder / "config.json").read_text())
    config["quantization"] = "int3"
    (folder / "config.json").write_text(json.dumps(config))


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        (damage_scale, ["weight_scale", "finite positive"]),
        (scale_of_wrong_shape, ["c_fc.weight_scale", "shape"]),
        (float_where_int8_belongs, ["c_attn.weight", "int8"]),
        (code_below_minus_127, ["c_proj.weight holds the code -128", "-127 to 127"]),
        (unknown_quantization_in_config, ["unknown quantization", "int3"]),
    ],
)
@pytest.mark.parametrize("engine", ["torch", "numpy"])
def test_a_damaged_int8_checkpoint_is_one_sentence_before_any_model_is_built(
    capsys, int8_checkpoint, monkeypatch, damage, words, engine
):
    damage(int8_checkpoint)
    built = []
    monkeypatch.setattr(GPT, "__init__", lambda *a, **k: built.append(1) or 1 / 0)
    code, _, err = run_cli(
        capsys, "generate", "--checkpoint", int8_checkpoint, "--prompt", "to", "--engine", engine
    )
    assert_refused(code, err, *words)
    assert not built


def test_stats_with_the_numpy_engine_says_it_measures_the_torch_engine(capsys, char_checkpoint):
    code, _, err = run_cli(
        capsys,
        "generate",
        "--checkpoint",
        char_checkpoint,
        "--prompt",
        "to",
        "--stats",
        "--engine",
        "numpy",
    )
    assert_refused(code, err, "--stats", "torch engine")


def test_threads_must_be_a_count_or_auto(capsys, char_checkpoint):
    code, _, err = run_cli(
        capsys, "generate", "--checkpoint", char_checkpoint, "--prompt", "to", "--threads", "x"
    )
    assert_refused(code, err, "--threads", "auto")


def test_a_model_already_int8_is_not_quantized_again(capsys, tmp_path, int8_checkpoint):
    out = tmp_path / "again"
    code, _, err = run_cli(capsys, "quantize", "--checkpoint", int8_checkpoint, "--out", out)
    assert_refused(code, err, "int8 checkpoint already")
    assert not out.exists()
    assert torch.get_num_threads() >= 1
