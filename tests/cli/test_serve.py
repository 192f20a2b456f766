"""``light-llm serve``'s bad input (one sentence, exit 2) and which model it serves when none
is named (a GPT run, or with --encoder an encoder run; else the one that ships)."""

from __future__ import annotations

import os
import socket

from light_llm.assets import packaged_encoder_folder, packaged_run_folder
from light_llm.checkpoints import load, save
from light_llm.checkpoints.discovery import default_encoder
from light_llm.checkpoints.probes import probe_iterations
from light_llm.cli import main
from light_llm.config import PRESETS, ModelConfig
from light_llm.models.bert import BertEncoder, EncoderConfig
from light_llm.models.gpt import GPT
from light_llm.serve import default_model, newest_run
from light_llm.tokenizers import BertTokenizer, CharTokenizer
from light_llm.tokenizers.bert import packaged_bert_folder
from light_llm.train.config import DEFAULT_PRESETS


def error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("light-llm serve: error: ")
    return err


def test_a_port_in_use_is_one_sentence_and_exit_2(capsys, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = main(["serve", "--checkpoint", str(tmp_path), "--port", str(port)])
    assert code == 2
    assert f"port {port} on 127.0.0.1 is already in use" in error_line(capsys)


def test_bad_port_host_and_folder(capsys, tmp_path):
    assert main(["serve", "--port", "70000"]) == 2
    assert "between 0 and 65535" in error_line(capsys)
    assert main(["serve", "--host", "no.such.host.invalid", "--port", "0"]) == 2
    assert "no.such.host.invalid" in error_line(capsys)
    assert main(["serve", "--checkpoint", str(tmp_path / "missing"), "--port", "0"]) == 2
    assert "no checkpoint folder" in error_line(capsys)


def save_run(out, mtime: float) -> None:
    tokenizer = CharTokenizer.from_text("abc")
    config = ModelConfig(vocab_size=3, block_size=4, n_layer=1, n_head=1, n_embd=4)
    save(GPT(config), out / "checkpoint", tokenizer=tokenizer)
    os.utime(out / "checkpoint" / "model.safetensors", (mtime, mtime))


def test_the_newest_run_under_the_folder_is_served_else_the_shipped_one(tmp_path, monkeypatch):
    assert newest_run(tmp_path) is None
    folder, origin = default_model(tmp_path)
    assert folder == packaged_run_folder() and "ships with light-llm" in origin
    shipped = load(folder).config  # the main job's model: the default preset's
    assert shipped == PRESETS[DEFAULT_PRESETS["gpt"]].replace(vocab_size=shipped.vocab_size)
    assert probe_iterations(folder)  # and its history
    missing = tmp_path / "x"
    monkeypatch.setattr("light_llm.checkpoints.discovery.packaged_run_folder", lambda: missing)
    folder, origin = default_model(tmp_path)
    assert folder == packaged_bert_folder() and "MiniLM" in origin
    save_run(tmp_path / "old", 1_000_000)
    save_run(tmp_path / "runs" / "new", 2_000_000)
    save_run(tmp_path / "runs" / "a" / "b" / "too-deep", 3_000_000)
    assert newest_run(tmp_path) == tmp_path / "runs" / "new"
    folder, origin = default_model(tmp_path)
    assert folder == tmp_path / "runs" / "new" and "newest training run" in origin


def test_serve_encoder_shows_the_newest_encoder_run_else_the_shipped_one(tmp_path, capsys):
    folder, origin = default_encoder(tmp_path)
    assert folder == packaged_encoder_folder() and "ships with light-llm" in origin
    assert load(folder, architecture="bert").mlm_head is not None  # it can fill masks
    tokenizer = BertTokenizer.packaged()
    config = EncoderConfig(vocab_size=tokenizer.vocab_size, block_size=8, n_layer=1, n_head=1)
    save(BertEncoder(config.replace(n_embd=4)), tmp_path / "bert-run" / "checkpoint", tokenizer)
    written = (tmp_path / "bert-run" / "checkpoint" / "model.safetensors").stat().st_mtime
    save_run(tmp_path / "gpt-run", written + 10)  # newer, but a GPT
    assert newest_run(tmp_path) == tmp_path / "gpt-run"
    folder, origin = default_encoder(tmp_path)
    assert folder == tmp_path / "bert-run" and "newest encoder run" in origin
    argv = ["serve", "--encoder", "--checkpoint", str(tmp_path / "bert-run"), "--port", "0"]
    assert main(argv) == 2
    assert "--checkpoint DIR or --encoder, not both" in error_line(capsys)
