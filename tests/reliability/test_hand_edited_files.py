"""Classes 7 and 8 of issue 27: numbers a library cannot take, and hand-edited files.

7. A vocabulary size the ``tokenizers`` library cannot allocate (10^12 aborts the process from
   Rust, 2^64 is an OverflowError) is refused before the library is asked.
8. A metrics.jsonl line without an iteration, a 100,000-deep sentence_bert_config.json, a LoRA
   config whose rank is 1e400 or 4.9: one sentence (or the line skipped), never a traceback, a
   500, or a rank silently truncated.
"""

from __future__ import annotations

import json
import shutil

import pytest

from light_llm.errors import LightLLMError
from light_llm.limits import MAX_VOCAB_SIZE
from light_llm.serve import ExplorerModel, create_app
from light_llm.tokenizers.bert import packaged_bert_folder
from light_llm.tokenizers.registry import train_tokenizer
from tests.reliability.conftest import assert_refused, run_cli, snapshot
from tests.serve.conftest import local_client
from tests.train.helpers import tiny_flags

HUGE = [10**12, 2**64, MAX_VOCAB_SIZE + 1]


@pytest.mark.parametrize("size", HUGE)
@pytest.mark.parametrize("kind", ["bpe", "wordpiece"])
def test_tokenizer_train_refuses_a_vocabulary_the_library_cannot_hold(
    capsys, tmp_path, corpus, size, kind
):
    argv = ["tokenizer", "train", "--data", corpus, "--kind", kind, "--vocab-size", size]
    code, _, err = run_cli(capsys, *argv, "--out", tmp_path / "tok")
    assert_refused(code, err, "--vocab-size", f"{MAX_VOCAB_SIZE:,}")
    assert not (tmp_path / "tok").exists()


@pytest.mark.parametrize("size", HUGE)
def test_train_refuses_a_vocabulary_the_library_cannot_hold(capsys, tmp_path, corpus, size):
    code, _, err = run_cli(capsys, "train", *tiny_flags(corpus, tmp_path / "o", vocab_size=size))
    assert_refused(code, err, "--vocab-size")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("kind", ["bpe", "wordpiece"])
def test_the_api_refuses_it_too(kind):
    with pytest.raises(LightLLMError, match="at most"):
        train_tokenizer(kind, "some text to learn from", 10**12)


# --------------------------------------------------------------------------- class 8
BAD_LINES = [
    {"kind": "train", "loss": 1.0},  # no iter
    {"kind": "eval", "val_loss": 2.0},
    {"kind": "train", "iter": "5", "loss": 1.0},
    {"kind": "train", "iter": 5, "loss": "low"},
    {"kind": "eval", "iter": 5, "val_loss": [1]},
    {"iter": True, "val_loss": 1.0},
    {"kind": 7, "iter": 3},
    [1, 2],
]


@pytest.mark.parametrize("line", BAD_LINES, ids=lambda line: json.dumps(line)[:40])
def test_a_hand_edited_metrics_line_is_skipped_by_every_reader(
    capsys, tmp_path, finished_run, line
):
    out = shutil.copytree(finished_run, tmp_path / "out")
    with open(out / "metrics.jsonl", "a") as log:
        log.write(json.dumps(line) + "\n")
    with local_client(create_app(ExplorerModel(out, "test"))) as client:
        response = client.get("/api/model")
        assert response.status_code == 200
        assert response.json()["training"]["curve"]["val"]
    code, _, err = run_cli(capsys, "train", "--out", out, "--resume", "--max-iters", "4")
    assert code == 0, err
    assert (out / "loss_curve.png").is_file()


def sentence_model_with(tmp_path, name, text):
    """The packaged MiniLM's files, linked, with ``name`` replaced by ``text``."""
    folder = tmp_path / "minilm"
    folder.mkdir()
    for entry in packaged_bert_folder().iterdir():
        if entry.name != name:
            (folder / entry.name).symlink_to(entry)
    (folder / name).write_text(text)
    return folder


@pytest.mark.parametrize(
    "text",
    ["[" * 100_000, '{"max_seq_length":' * 50_000, "[]", "\xff", '{"max_seq_length": 1e400}'],
)
def test_a_hand_edited_sentence_bert_config_is_one_sentence(capsys, tmp_path, text):
    folder = sentence_model_with(tmp_path, "sentence_bert_config.json", text)
    code, out, err = run_cli(capsys, "embed", "--checkpoint", folder, "hello")
    if "1e400" in text:  # parses (as infinity), and is no length: the model's own is used
        assert code == 0, err
        return
    assert_refused(code, err, "sentence_bert_config.json")


LORA_SETTINGS = {
    "rank 1e400": ("rank", 1e400, "rank"),
    "rank 4.9": ("rank", 4.9, "rank"),
    "rank '4'": ("rank", "4", "rank"),
    "rank 0": ("rank", 0, "rank"),
    "alpha -1": ("alpha", -1, "alpha"),
    "alpha 1e400": ("alpha", 1e400, "alpha"),
    "dropout 1.5": ("dropout", 1.5, "dropout"),
}


def edited_lora_run(lora_run, tmp_path, section: str, key: str, edit):
    """A copy of ``lora_run`` whose config.json has ``edit(value)`` for its ``section``'s
    ``key`` ("lora": the adapters' settings, "model": the model's)."""
    run = shutil.copytree(lora_run, tmp_path / "lora")
    config_path = run / "checkpoint" / "config.json"
    config = json.loads(config_path.read_text())
    config[section][key] = edit(config[section][key])
    config_path.write_text(json.dumps(config))  # 1e400 is written as Infinity
    return run


def lora_command(command: str, run, tmp_path) -> list:
    """``generate`` (two tokens) or ``merge`` (into tmp_path/merged) of the LoRA ``run``."""
    if command == "generate":
        return ["generate", "--checkpoint", run, "--prompt", "the", "--max-new-tokens", "2"]
    return ["merge", "--checkpoint", run, "--out", tmp_path / "merged"]


@pytest.mark.parametrize("setting", LORA_SETTINGS.values(), ids=LORA_SETTINGS.keys())
@pytest.mark.parametrize("command", ["generate", "merge"])
def test_a_hand_edited_lora_config_is_one_sentence(capsys, tmp_path, lora_run, setting, command):
    key, value, word = setting
    run = edited_lora_run(lora_run, tmp_path, "lora", key, lambda _: value)
    before = snapshot(tmp_path)
    code, _, err = run_cli(capsys, *lora_command(command, run, tmp_path))
    assert_refused(code, err, word, "config.json")
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize(
    ("field", "edit"),
    [
        ("tie_embeddings", lambda value: not value),  # was read as another model, exit 0
        ("n_layer", lambda value: value + 1),  # was a RuntimeError from load_state_dict
        ("activation", lambda value: "relu" if value != "relu" else "gelu"),  # a RuntimeError
    ],
    ids=["tie_embeddings", "n_layer", "activation"],
)
@pytest.mark.parametrize("command", ["generate", "merge"])
def test_a_lora_runs_model_settings_edited_away_from_its_base_are_one_sentence(
    capsys, tmp_path, lora_run, field, edit, command
):
    """The base's weights were checksummed, but the run's own model settings rebuilt the base
    unchecked; only the dropout may differ from the base's, which a LoRA run may set."""
    run = edited_lora_run(lora_run, tmp_path, "model", field, edit)
    before = snapshot(tmp_path)
    code, _, err = run_cli(capsys, *lora_command(command, run, tmp_path))
    assert_refused(code, err, "differ from those of its base", field)
    assert snapshot(tmp_path) == before


def test_a_lora_runs_own_dropout_still_loads(capsys, tmp_path, lora_run):
    run = edited_lora_run(lora_run, tmp_path, "model", "dropout", lambda _: 0.25)
    code, _, err = run_cli(capsys, *lora_command("generate", run, tmp_path), "--seed", "1")
    assert code == 0, err
