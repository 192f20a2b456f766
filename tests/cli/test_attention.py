"""``light-llm attention`` through ``light_llm.cli.main`` on a tiny saved checkpoint."""

from __future__ import annotations

import json

import matplotlib.image
import numpy as np
import pytest
import torch

from light_llm.checkpoints import save
from light_llm.cli import main
from light_llm.config import ModelConfig
from light_llm.explain import plots
from light_llm.explain.attention_maps import prompt_attention
from light_llm.models.gpt import GPT
from light_llm.tokenizers import CharTokenizer
from tests.conftest import tiny_config

N_LAYER, N_HEAD, BLOCK = 2, 3, 12


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    tokenizer = CharTokenizer.from_text("To be, or not to be")
    torch.manual_seed(0)
    config = ModelConfig(
        vocab_size=tokenizer.vocab_size, block_size=BLOCK, n_layer=N_LAYER, n_head=N_HEAD, n_embd=12
    )
    folder = tmp_path_factory.mktemp("run") / "checkpoint"
    save(GPT(config), folder, tokenizer=tokenizer)
    return folder


def run(capsys, *argv):
    code = main(["attention", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def pixels(n_rows, n_cols, n_tokens):
    panel = plots.attention_panel_inches(n_rows * n_cols, n_tokens)
    width = max(plots.MIN_WIDTH_INCHES, panel * n_cols + plots.MARGIN_INCHES)
    return round((panel * n_rows + plots.MARGIN_INCHES) * plots.DPI), round(width * plots.DPI)


def test_all_layers_and_heads_in_one_file(capsys, checkpoint, tmp_path):
    out = tmp_path / "maps.png"
    code, stdout, _ = run(
        capsys, "--checkpoint", str(checkpoint), "--prompt", "to be", "--out", str(out)
    )
    assert code == 0
    assert f"wrote {out}" in stdout
    assert "5 tokens" in stdout
    assert matplotlib.image.imread(out).shape[:2] == pixels(N_LAYER, N_HEAD, 5)


def test_training_output_folder_and_one_layer_into_a_folder(capsys, checkpoint, tmp_path):
    code, stdout, _ = run(
        capsys,
        "--checkpoint",
        str(checkpoint.parent),
        "--prompt",
        "not to",
        "--layer",
        "1",
        "--out",
        str(tmp_path / "pictures"),
    )
    assert code == 0
    written = sorted(p.name for p in (tmp_path / "pictures").iterdir())
    assert written == ["attention_layer1.png"]
    image = matplotlib.image.imread(tmp_path / "pictures" / "attention_layer1.png")
    assert image.shape[:2] == pixels(1, N_HEAD, 6)


def test_one_head_of_one_layer(capsys, checkpoint, tmp_path):
    out = tmp_path / "head.png"
    code, _, _ = run(
        capsys,
        "--checkpoint",
        str(checkpoint),
        "--prompt",
        "or not",
        "--layer",
        "0",
        "--head",
        "2",
        "--out",
        str(out),
    )
    assert code == 0
    assert matplotlib.image.imread(out).shape[:2] == pixels(1, 1, 6)


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--layer", "2"], "the model has layers 0 to 1."),
        (["--head", "3"], "the model has heads 0 to 2."),
        (["--prompt", "to be or not to be"], "at most 12 tokens"),
        (["--prompt", "xyz"], "outside this tokenizer"),
    ],
)
def test_bad_requests_exit_2_with_one_sentence(capsys, checkpoint, tmp_path, extra, message):
    argv = [
        "--checkpoint",
        str(checkpoint),
        "--prompt",
        "to be",
        "--out",
        str(tmp_path / "x.png"),
        *extra,
    ]
    code, stdout, stderr = run(capsys, *argv)
    assert code == 2
    assert stderr.startswith("light-llm attention: error: ")
    assert message in stderr
    assert len(stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x.png").exists()


def test_missing_checkpoint(capsys, tmp_path):
    code, _, stderr = run(capsys, "--checkpoint", str(tmp_path / "none"), "--prompt", "a")
    assert code == 2
    assert "no checkpoint folder" in stderr


def test_the_picture_of_a_run_is_titled_with_the_run(tmp_path):
    from light_llm.checkpoints.folder import run_name

    assert run_name(tmp_path / "my-run" / "checkpoint") == "my-run"
    assert run_name(tmp_path / "my-run" / ".checkpoint.old-0001-ab") == "my-run"
    assert run_name(tmp_path / "a-model") == "a-model"


def test_a_linear_attention_model_prints_its_weights(capsys, tmp_path):
    """Linear attention's weights (seed 002 eq. 48) as --json prints them: causal rows that
    sum to 1, the same as the explain API's (the command refused such a model)."""
    tokenizer = CharTokenizer.from_text("To be, or not to be")
    torch.manual_seed(0)
    config = tiny_config(
        vocab_size=tokenizer.vocab_size, block_size=BLOCK, n_layer=N_LAYER, n_head=N_HEAD,
        n_embd=12, attention="linear",
    )  # fmt: skip
    model = GPT(config)
    save(model, tmp_path / "linear", tokenizer=tokenizer)
    code, stdout, _ = run(
        capsys, "--checkpoint", str(tmp_path / "linear"), "--prompt", "to be", "--json",
        "--out", str(tmp_path / "maps.png"),
    )  # fmt: skip
    assert code == 0
    weights = np.array(json.loads(stdout[stdout.index("{") :])["weights"])
    assert weights.shape == (N_LAYER, N_HEAD, 5, 5)
    np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-5)
    assert np.all(np.triu(weights, k=1) == 0)
    np.testing.assert_allclose(weights, prompt_attention(model, tokenizer, "to be").maps, atol=1e-6)
