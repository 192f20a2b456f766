"""``light-llm train --init-from``, ``merge``, ``export --format hf`` and ``info`` on a LoRA
run: a model fine-tuned from a HuggingFace GPT-2 folder comes back out as one that
``transformers`` loads and that gives light-llm's logits; bad input is one sentence, exit 2."""

import json

import pytest
import torch
import transformers

from light_llm.checkpoints import load, save
from light_llm.cli import main
from light_llm.models.gpt import GPT
from light_llm.nn.lora import merge_lora
from light_llm.tokenizers import GPT2Tokenizer
from tests.conftest import tiny_config
from tests.train.helpers import write_corpus

pytestmark = pytest.mark.usefixtures("one_thread")

RUN = [
    "--batch-size", "2", "--max-iters", "3", "--warmup-iters", "1", "--eval-interval", "3",
    "--eval-iters", "1", "--sample-tokens", "0", "--device", "cpu", "--dtype", "float32",
]  # fmt: skip


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("corpus") / "corpus.txt", n_lines=400)


@pytest.fixture(scope="module")
def hf_folder(tmp_path_factory):
    """A tiny random GPT-2 (GPT-2's vocabulary, 1 layer, 32 wide), saved by transformers."""
    torch.manual_seed(3)
    config = transformers.GPT2Config(n_layer=1, n_head=2, n_embd=32, n_positions=32)
    folder = tmp_path_factory.mktemp("hf") / "gpt2-tiny"
    transformers.GPT2LMHeadModel(config).save_pretrained(folder, safe_serialization=True)
    return folder


def error_line(capsys, command):
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"light-llm {command}: error: ")
    return lines[0]


def hf_logits(folder, idx):
    model = transformers.GPT2LMHeadModel.from_pretrained(folder).eval()
    with torch.no_grad():
        return model(idx).logits


def ours(model, idx):
    with torch.no_grad():
        return model(idx)[0]


@pytest.mark.parametrize("lora", [False, True])
def test_fine_tuned_from_hf_gpt2_exports_to_the_same_logits(
    hf_folder, corpus, tmp_path, lora, capsys
):
    out = tmp_path / "run"
    flags = ["--lora-rank", "4", "--lora-targets", "c_attn,mlp.c_proj"] if lora else []
    argv = ["train", "--init-from", str(hf_folder), "--data", str(corpus), "--out", str(out)]
    assert main([*argv, *RUN, *flags]) == 0
    assert "gpt2 tokenizer" in capsys.readouterr().out
    tuned = load(out)
    idx = torch.randint(0, 50257, (2, 24))
    assert not torch.equal(ours(tuned, idx), ours(load(hf_folder), idx))  # it trained
    exported = tmp_path / "hf-out"
    assert main(["export", "--checkpoint", str(out), "--format", "hf", "--out", str(exported)]) == 0
    reference = ours(merge_lora(load(out)), idx)
    assert (hf_logits(exported, idx) - reference).abs().max().item() <= 1e-4
    assert (ours(tuned, idx) - reference).abs().max().item() <= 1e-5
    if not lora:  # GPT-2's tokenizer files go with it, under HuggingFace's names
        text = "Fine-tuned, then exported: transformers reads it."
        hf_tokenizer = transformers.GPT2TokenizerFast.from_pretrained(exported)
        assert hf_tokenizer.encode(text) == GPT2Tokenizer().encode(text)


def test_merge_writes_a_plain_checkpoint_with_the_adapters_folded_in(
    hf_folder, corpus, tmp_path, capsys
):
    out = tmp_path / "lora"
    argv = ["train", "--init-from", str(hf_folder), "--data", str(corpus), "--out", str(out)]
    assert main([*argv, *RUN, "--lora-rank", "2"]) == 0
    merged = tmp_path / "merged"
    assert main(["merge", "--checkpoint", str(out), "--out", str(merged)]) == 0
    config = json.loads((merged / "config.json").read_text())
    assert "lora" not in config and (merged / "model.safetensors").is_file()
    idx = torch.randint(0, 50257, (1, 16))
    assert (ours(load(merged), idx) - ours(load(out), idx)).abs().max().item() <= 1e-5
    capsys.readouterr()
    assert main(["info", "--checkpoint", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["lora"]
    d, r = 32, 2
    per_layer = r * (d + 3 * d) + r * (d + d) + r * (d + 4 * d) + r * (4 * d + d)
    assert report["trainable"] == per_layer  # c_attn, attn.c_proj, c_fc, mlp.c_proj
    assert report["frozen"] == sum(p.numel() for p in load(hf_folder).parameters())
    assert report["base"]["state"] == "unchanged"
    assert main(["info", "--checkpoint", str(out)]) == 0
    assert "trainable" in capsys.readouterr().out


def test_no_model_is_written_over_a_training_runs_checkpoint(hf_folder, corpus, tmp_path, capsys):
    """quantize, export and merge refuse --out OTHER_RUN/checkpoint (the folder a resume
    continues from: they would replace its trainer state and optimizer with a bare model),
    one sentence, exit 2, every file of it left as it was; the run still resumes."""
    victim, lora = tmp_path / "victim", tmp_path / "lora"
    assert main(["train", "--init-from", str(hf_folder), "--data", str(corpus), "--out",
                 str(victim), *RUN]) == 0  # fmt: skip
    assert main(["train", "--init-from", str(hf_folder), "--data", str(corpus), "--out",
                 str(lora), *RUN, "--lora-rank", "2"]) == 0  # fmt: skip
    checkpoint = victim / "checkpoint"
    before = {path.name: path.read_bytes() for path in checkpoint.iterdir() if path.is_file()}
    capsys.readouterr()
    for command in (
        ["quantize", "--checkpoint", str(lora)],
        ["export", "--checkpoint", str(lora), "--format", "hf"],
        ["merge", "--checkpoint", str(lora)],
    ):
        assert main([*command, "--out", str(checkpoint)]) == 2
        assert "holds a training run's checkpoint" in error_line(capsys, command[0])
    after = {path.name: path.read_bytes() for path in checkpoint.iterdir() if path.is_file()}
    assert after == before
    assert main(["train", "--resume", "--out", str(victim), "--max-iters", "4"]) == 0


def test_merge_of_a_plain_checkpoint_and_export_of_a_rotary_model_are_refused(tmp_path, capsys):
    folder = tmp_path / "rotary"
    save(GPT(tiny_config(positions="rotary")), folder)
    assert main(["merge", "--checkpoint", str(folder), "--out", str(tmp_path / "m")]) == 2
    assert "no LoRA adapters" in error_line(capsys, "merge")
    out = tmp_path / "hf"
    assert main(["export", "--checkpoint", str(folder), "--format", "hf", "--out", str(out)]) == 2
    assert "positions='rotary'" in error_line(capsys, "export")
    assert not out.exists()


@pytest.mark.parametrize(
    ("flags", "phrase"),
    [
        (["--lora-rank", "2", "--lora-targets", "wq"], "c_attn, c_fc, c_proj, lm_head"),
        (["--lora-rank", "0"], "rank must be a positive"),
        (["--lora-rank", "33"], "at most 32"),
        (["--lora-rank", "2", "--lora-targets", "lm_head"], "tied"),
        (["--n-embd", "64"], "drop --n-embd"),
    ],
)
def test_bad_fine_tuning_flags_are_one_sentence(hf_folder, corpus, tmp_path, capsys, flags, phrase):
    out = tmp_path / "out"
    argv = ["train", "--init-from", str(hf_folder), "--data", str(corpus), "--out", str(out)]
    assert main([*argv, *RUN, *flags]) == 2
    assert phrase in error_line(capsys, "train")
    assert not out.exists()


def test_init_from_a_folder_that_is_not_a_model(corpus, tmp_path, capsys):
    argv = ["train", "--init-from", str(tmp_path), "--data", str(corpus), "--out", str(tmp_path)]
    assert main([*argv, *RUN]) == 2
    assert "no config.json" in error_line(capsys, "train")


@pytest.mark.parametrize("command", [["export", "--format", "hf"], ["quantize"], ["merge"]])
def test_a_lora_runs_base_is_not_written_over(hf_folder, corpus, tmp_path, capsys, command):
    # the base the adapters are loaded over is read as much as the run itself: writing --out
    # there would replace it, and the adapters would never load again
    base = tmp_path / "base"
    save(load(hf_folder), base, tokenizer=GPT2Tokenizer())
    out = tmp_path / "lora"
    argv = ["train", "--init-from", str(base), "--data", str(corpus), "--out", str(out)]
    assert main([*argv, *RUN, "--lora-rank", "2"]) == 0
    before = {path.name: path.read_bytes() for path in base.iterdir()}
    capsys.readouterr()
    assert main([*command, "--checkpoint", str(out), "--out", str(base)]) == 2
    assert "reads from" in error_line(capsys, command[0])
    assert {path.name: path.read_bytes() for path in base.iterdir()} == before
    load(out)  # the adapters still load over their base
