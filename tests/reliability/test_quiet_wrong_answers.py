"""Class 7 of issue 12: no quiet wrong answers. NaN weights, a tokenizer smaller than the
model's vocabulary, [MASK]s that do not fit, a parent path that is a file, output to a full
device: each is one sentence and exit code 2, not a number printed with exit code 0."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import safetensors.torch

from light_llm.checkpoints import save
from light_llm.limits import MAX_BATCH_SIZE
from light_llm.models.bert import BertEncoder, EncoderConfig
from light_llm.serve import ExplorerModel, create_app
from light_llm.tokenizers import BertTokenizer, CharTokenizer
from tests.reliability.conftest import CORPUS, assert_refused, run_cli, snapshot
from tests.serve.conftest import local_client
from tests.train.helpers import tiny_flags

SRC = Path(__file__).resolve().parents[2] / "src"


def poison(folder, value):
    path = folder / "model.safetensors"
    tensors = safetensors.torch.load_file(path)
    tensors["transformer.wte.weight"][3, 5] = value
    safetensors.torch.save_file(tensors, path)


NON_FINITE = [
    ("generate", float("nan")),
    ("generate", float("inf")),
    ("generate", float("-inf")),
    ("eval", float("nan")),
    ("attention", float("inf")),
]


@pytest.mark.parametrize(("command", "value"), NON_FINITE)
def test_non_finite_weights_are_refused_by_every_command(
    capsys, char_checkpoint, tmp_path, value, command
):
    poison(char_checkpoint, value)
    text = tmp_path / "text.txt"
    text.write_text(CORPUS * 20)
    before = snapshot(char_checkpoint)
    argv = {
        "eval": ["--data", text],
        "generate": ["--prompt", "to", "--max-new-tokens", "3"],
        "attention": ["--prompt", "to be", "--out", tmp_path / "maps"],
    }[command]
    code, _, err = run_cli(capsys, command, "--checkpoint", char_checkpoint, *argv)
    assert_refused(code, err, "NaN or infinite")
    assert snapshot(char_checkpoint) == before


@pytest.mark.parametrize("missing", [1, 3, 5])
def test_a_tokenizer_smaller_than_the_model_is_refused(capsys, char_checkpoint, missing):
    chars = json.loads((char_checkpoint / "light_tokenizer.json").read_text())["chars"]
    CharTokenizer(chars[:-missing]).save(char_checkpoint)
    code, _, err = run_cli(capsys, "generate", "--checkpoint", char_checkpoint, "--prompt", "to")
    assert_refused(code, err, "tokenizer")


@pytest.fixture
def bert_checkpoint(tmp_path):
    tokenizer = BertTokenizer.packaged()
    config = EncoderConfig(
        vocab_size=tokenizer.vocab_size, block_size=32, n_layer=1, n_head=2, n_embd=16
    )
    save(BertEncoder(config).eval(), tmp_path / "bert", tokenizer)
    return tmp_path / "bert"


@pytest.mark.parametrize("n_masks", [31, 40, 200])
def test_fill_mask_with_more_masks_than_fit_says_so(capsys, bert_checkpoint, n_masks):
    text = " ".join(["[MASK]"] * n_masks)
    code, _, err = run_cli(capsys, "fill-mask", "--checkpoint", bert_checkpoint, text)
    assert_refused(code, err, f"{n_masks} [MASK]s")


def test_fill_mask_within_the_context_still_answers_every_mask(capsys, bert_checkpoint):
    code, out, _ = run_cli(
        capsys, "fill-mask", "--checkpoint", bert_checkpoint, "--json", "[MASK] is [MASK]"
    )
    assert code == 0 and len(json.loads(out)) == 2


@pytest.mark.parametrize("depth", ["file/out", "file/a/b/c"])
def test_a_parent_that_is_a_file_is_named(capsys, char_checkpoint, tmp_path, depth):
    (tmp_path / "file").write_text("x")
    code, _, err = run_cli(
        capsys,
        "attention",
        "--checkpoint",
        char_checkpoint,
        "--prompt",
        "to",
        "--out",
        tmp_path / depth,
    )
    assert_refused(code, err, "is a file")
    assert "File exists" not in err


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize(
    "argv",
    [
        ["tokenize", "--tokenizer", "gpt2", "hello world"],
        ["info", "--preset", "char-cpu"],
        ["explain"],
    ],
)
def test_output_to_a_full_device_is_one_sentence(argv):
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "light_llm", *argv],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"},
        )
    assert_refused(done.returncode, done.stderr, "No space left on device")


# issue 27, class 11: flags that contradict each other or exceed a bound, refused up front
@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--resume", "--overwrite"], ["--resume", "--overwrite"]),
        (["--time", "1000000h"], ["--time", "365 days"]),
        (["--time", "1e300"], ["--time"]),
    ],
)
def test_train_flags_that_cannot_hold_are_refused(capsys, tmp_path, finished_run, flags, words):
    out = shutil.copytree(finished_run, tmp_path / "out")
    before = snapshot(out)
    code, _, err = run_cli(capsys, "train", "--out", out, *flags)
    assert_refused(code, err, *words)
    assert snapshot(out) == before


def test_generate_refuses_more_prompts_than_a_batch(capsys, char_checkpoint, monkeypatch):
    monkeypatch.setattr("light_llm.cli.generate.MAX_BATCH_SIZE", 3)  # argparse is quadratic
    prompts = [arg for _ in range(4) for arg in ("--prompt", "a")]
    code, _, err = run_cli(capsys, "generate", "--checkpoint", char_checkpoint, *prompts)
    assert_refused(code, err, "--prompt", "more than the 3 prompts")
    assert MAX_BATCH_SIZE == 65_536  # the bound itself, stated in --help


def test_the_card_says_when_its_folder_holds_another_run(capsys, tmp_path, corpus, finished_run):
    out = shutil.copytree(finished_run, tmp_path / "out")
    with local_client(create_app(ExplorerModel(out, "test"))) as client:
        before = client.get("/api/model").json()
        assert before["warning"] is None
        flags = tiny_flags(corpus, out, max_iters=3, eval_interval=3, seed=11, overwrite=True)
        assert run_cli(capsys, "train", *flags)[0] == 0  # another run at the same path
        after = client.get("/api/model").json()
    assert "another training run" in after["warning"]
    assert after["training"] == before["training"]  # the loaded model's facts, not mixed
