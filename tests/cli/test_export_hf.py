"""``light-llm export --format hf`` for Llama- and Qwen3-shaped models, and the folders it writes
taken back by ``generate``, ``eval`` and ``train --init-from``: a model goes out, is fine-tuned
from there, and goes out again with transformers' logits equal to light-llm's. Bad input is one
sentence, exit 2, nothing written."""

import json
import shutil

import pytest
import safetensors.torch
import torch
import transformers

from light_llm.checkpoints import load, save
from light_llm.checkpoints.hf_architectures import hf_architecture
from light_llm.cli import main
from light_llm.config import ModelConfig, count_parameters, preset
from light_llm.models.gpt import GPT
from light_llm.tokenizers import get_tokenizer, load_tokenizer
from light_llm.tokenizers.bpe import train_bpe
from tests.checkpoints.test_hf_llama import LLAMA_SHAPE, _offline  # noqa: F401 (a fixture)
from tests.cli.test_finetune import RUN, error_line
from tests.conftest import shaken
from tests.train.helpers import write_corpus

pytestmark = pytest.mark.usefixtures("one_thread")

QWEN3_SHAPE = {**LLAMA_SHAPE, "block_size": 16, "n_layer": 1, "n_head": 2, "n_embd": 16,
               "qk_norm": True}  # fmt: skip


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """(a light-llm checkpoint of a Qwen3-shaped model over a BPE learned from a corpus, its
    weights shaken off their initial values; that corpus)."""
    root = tmp_path_factory.mktemp("qwen3")
    corpus = write_corpus(root / "corpus.txt", n_lines=300)
    tokenizer = train_bpe(corpus.read_text(), 300)
    model = shaken(GPT(ModelConfig(vocab_size=tokenizer.vocab_size, **QWEN3_SHAPE)))
    save(model, root / "checkpoint", tokenizer)
    return root / "checkpoint", corpus


def export(checkpoint, out) -> int:
    return main(["export", "--checkpoint", str(checkpoint), "--format", "hf", "--out", str(out)])


def max_logit_difference(folder, ours, idx) -> float:
    theirs = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
    with torch.no_grad():
        return (theirs(idx).logits - ours(idx)[0]).abs().max().item()


def test_out_fine_tuned_and_out_again(checkpoint, tmp_path, capsys):
    checkpoint, corpus = checkpoint
    assert export(checkpoint, tmp_path / "hf") == 0
    assert "as a HuggingFace Qwen3 folder (Qwen3ForCausalLM)" in capsys.readouterr().out
    run = tmp_path / "run"
    argv = ["train", "--init-from", str(tmp_path / "hf"), "--data", str(corpus), "--out", str(run)]
    assert main([*argv, *RUN]) == 0
    assert export(run, tmp_path / "hf-tuned") == 0
    tuned = load(run)
    idx = torch.randint(0, tuned.config.vocab_size, (2, 16))
    assert max_logit_difference(tmp_path / "hf-tuned", tuned, idx) <= 1e-4
    assert max_logit_difference(tmp_path / "hf", tuned, idx) > 1e-3  # it trained


def test_generate_and_eval_read_an_exported_folder(checkpoint, tmp_path, capsys):
    checkpoint, corpus = checkpoint
    assert export(checkpoint, tmp_path / "hf") == 0
    capsys.readouterr()
    argv = ["--checkpoint", str(tmp_path / "hf")]
    assert main(["generate", *argv, "--prompt", "the king", "--max-new-tokens", "4",
                 "--temperature", "0", "--json"]) == 0  # fmt: skip
    expected = main(["generate", "--checkpoint", str(checkpoint), "--prompt", "the king",
                     "--max-new-tokens", "4", "--temperature", "0", "--json"])  # fmt: skip
    first, second = capsys.readouterr().out.strip().splitlines()
    assert expected == 0 and first == second
    assert main(["eval", *argv, "--data", str(corpus), "--json"]) == 0
    loss = json.loads(capsys.readouterr().out)["val_loss"]
    assert main(["eval", "--checkpoint", str(checkpoint), "--data", str(corpus), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["val_loss"] == loss


def test_a_folder_with_other_files_is_not_replaced(checkpoint, tmp_path, capsys):
    checkpoint, _ = checkpoint
    (tmp_path / "notes.txt").write_text("mine")
    assert export(checkpoint, tmp_path) == 2
    assert "folder" in error_line(capsys, "export")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["notes.txt"]


def test_a_model_no_architecture_expresses_is_refused(tmp_path, capsys):
    tokenizer = train_bpe("the king shall come to rome " * 20, 270)
    save(GPT(preset("bpe-cpu", vocab_size=tokenizer.vocab_size)), tmp_path / "ck", tokenizer)
    assert export(tmp_path / "ck", tmp_path / "hf") == 2
    line = error_line(capsys, "export")
    assert "activation='relu2'" in line and "it would export as Qwen3 (Qwen3ForCausalLM)." in line
    assert not (tmp_path / "hf").exists()


def test_a_damaged_folder_given_back_is_one_sentence(checkpoint, tmp_path, capsys):
    checkpoint, _ = checkpoint
    assert export(checkpoint, tmp_path / "hf") == 0
    weights = tmp_path / "hf" / "model.safetensors"
    tensors = safetensors.torch.load_file(weights)
    tensors["model.layers.0.self_attn.k_proj.weight"] = torch.zeros(16, 12)
    safetensors.torch.save_file(tensors, weights)
    capsys.readouterr()
    assert export(tmp_path / "hf", tmp_path / "again") == 2
    line = error_line(capsys, "export")
    assert (
        "model.layers.0.self_attn.k_proj.weight has shape (16, 12) but the config needs (16, 16)"
        in line
    )
    assert not (tmp_path / "again").exists()
    assert main(["generate", "--checkpoint", str(tmp_path / "hf"), "--prompt", "the"]) == 2
    assert "k_proj.weight has shape (16, 12)" in error_line(capsys, "generate")


def test_the_exportable_preset_trains_and_leaves_as_qwen3(checkpoint, tmp_path, capsys):
    _, corpus = checkpoint
    default = preset("qwen3-cpu")
    assert hf_architecture(default) == "Qwen3"
    exportable = count_parameters(default)
    relu2 = count_parameters(preset("bpe-cpu", n_layer=default.n_layer))
    assert exportable["total"] == relu2["total"]  # SwiGLU's 3 matrices hold ReLU²'s 2 a layer
    run = tmp_path / "run"
    small = ["--n-layer", "1", "--n-embd", "16", "--n-head", "2", "--block-size", "16"]
    argv = ["train", "--preset", "qwen3-cpu", "--data", str(corpus), "--out", str(run)]
    assert main([*argv, *small, *RUN]) == 0
    assert export(run, tmp_path / "hf") == 0
    assert "(Qwen3ForCausalLM)" in capsys.readouterr().out
    trained = load(run)
    idx = torch.randint(0, trained.config.vocab_size, (2, 16))
    assert max_logit_difference(tmp_path / "hf", trained, idx) <= 1e-4


@pytest.mark.parametrize("shape", ["qwen3", "gpt2"])
def test_a_multi_token_model_leaves_without_its_training_head(tmp_path, capsys, shape):
    """A model trained with --mtp-weight exports as its architecture (GPT-2 or Qwen3): the
    folder holds no W_mtp and transformers' logits equal light-llm's (the head that predicts
    the token after next is not part of the next-token computation); the output says so."""
    tokenizer = get_tokenizer("char", text="to be or not to be, that is the question\n")
    vocab = tokenizer.vocab_size
    if shape == "qwen3":
        config = ModelConfig(vocab_size=vocab, **QWEN3_SHAPE, mtp_weight=0.5)
    else:
        config = preset("char-baby").replace(
            vocab_size=vocab, n_layer=1, n_head=2, n_embd=16, block_size=16, mtp_weight=0.5
        )
    model = shaken(GPT(config))
    assert model.mtp_proj.weight.abs().max() > 0
    save(model, tmp_path / "checkpoint", tokenizer)
    assert export(tmp_path / "checkpoint", tmp_path / "hf") == 0
    printed = capsys.readouterr().out
    assert "its multi-token head (W_mtp, which only training uses) is left out" in printed
    # the note on the character tokenizer, and what it warns of: AutoTokenizer drops a
    # character outside the vocabulary ("Z") where light-llm refuses the text
    assert f"its character tokenizer knows {vocab} characters" in printed
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    ids = hf_tokenizer("toZ be", add_special_tokens=False)["input_ids"]
    assert ids == tokenizer.encode("to be")
    stored = safetensors.torch.load_file(tmp_path / "hf" / "model.safetensors")
    assert not any("mtp" in name for name in stored)
    idx = torch.randint(0, vocab, (2, 16), generator=torch.Generator().manual_seed(0))
    assert max_logit_difference(tmp_path / "hf", model.eval(), idx) < 1e-4


@pytest.mark.parametrize("command", [["export", "--format", "hf"], ["quantize"]])
def test_an_out_inside_the_folder_read_is_refused(checkpoint, tmp_path, capsys, command):
    # a folder written inside a checkpoint is a file light-llm did not write there: the next
    # save into it (train --resume) would refuse to replace that checkpoint
    source = tmp_path / "model"
    shutil.copytree(checkpoint[0], source)
    before = sorted(path.name for path in source.iterdir())
    for out in (source / "sub", source / "sub" / "deeper"):
        assert main([*command, "--checkpoint", str(source), "--out", str(out)]) == 2
        assert f"is inside {source}, a model folder" in error_line(capsys, command[0])
    assert sorted(path.name for path in source.iterdir()) == before


@pytest.mark.parametrize("command", [["export", "--format", "hf"], ["quantize"]])
def test_an_out_holding_the_folder_read_is_refused_as_such(checkpoint, tmp_path, capsys, command):
    """--out the run folder that holds the checkpoint read: it was called "a folder with files
    in it and no model"."""
    run = tmp_path / "run"
    shutil.copytree(checkpoint[0], run / "checkpoint")
    before = sorted(path.name for path in run.rglob("*"))
    assert main([*command, "--checkpoint", str(run), "--out", str(run)]) == 2
    said = error_line(capsys, command[0])
    assert f"--out {run} holds {run / 'checkpoint'}, a model folder this command reads" in said
    assert sorted(path.name for path in run.rglob("*")) == before


@pytest.mark.parametrize("command", [["export", "--format", "hf"], ["quantize"]])
def test_a_foreign_file_in_out_names_no_flag_the_command_lacks(
    checkpoint, tmp_path, capsys, command
):
    """A model folder at --out holding a file light-llm did not write is refused; export and
    quantize have no --overwrite, so the sentence says where replacing on purpose is offered
    rather than telling them to pass it."""
    out = tmp_path / "out"
    shutil.copytree(checkpoint[0], out)
    (out / "notes.txt").write_text("mine")
    assert main([*command, "--checkpoint", str(checkpoint[0]), "--out", str(out)]) == 2
    line = error_line(capsys, command[0])
    assert "notes.txt" in line and "move those files away (light-llm train's --overwrite" in line
    assert "is not a light-llm checkpoint" not in line  # it may be one light-llm wrote
    assert (out / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("shape", ["qwen3 over a learned BPE", "gpt-2 over characters"])
def test_an_exported_folder_transformers_saved_again_reads_back_with_its_ids(
    checkpoint, tmp_path, capsys, shape
):
    """transformers' save_pretrained keeps the tokenizer.json export wrote and drops
    light_tokenizer.json: light-llm reads that tokenizer.json back, to the same ids as the
    tokenizer trained with (not GPT-2's, which a GPT-2 config.json alone would suggest), and
    generates from the folder what it generates from the export."""
    source, corpus = checkpoint
    text = corpus.read_text()
    if shape.startswith("gpt-2"):
        tokenizer = get_tokenizer("char", text)
        config = ModelConfig(vocab_size=tokenizer.vocab_size, block_size=16, n_layer=1,
                             n_head=2, n_embd=16)  # fmt: skip
        source = tmp_path / "char"
        save(shaken(GPT(config)), source, tokenizer)
    assert export(source, tmp_path / "hf") == 0
    resaved = tmp_path / "resaved"
    transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf").save_pretrained(resaved)
    transformers.AutoTokenizer.from_pretrained(tmp_path / "hf").save_pretrained(resaved)
    assert not (resaved / "light_tokenizer.json").exists()
    original = load_tokenizer(source)
    sample = text[:2000]
    assert load_tokenizer(resaved).encode(sample) == original.encode(sample)
    capsys.readouterr()
    outputs = []
    for folder in (tmp_path / "hf", resaved):
        # one thread each: auto times the thread counts, and another count may round a
        # near-tie of this shaken model's logits the other way (the test failed once under load)
        argv = ["generate", "--checkpoint", str(folder), "--prompt", "the king", "--threads", "1"]
        assert main([*argv, "--max-new-tokens", "6", "--temperature", "0", "--json"]) == 0
        outputs.append(json.loads(capsys.readouterr().out))
    assert outputs[0] == outputs[1] and outputs[0]["completions"][0]["completion"]


def test_a_tokenizer_json_light_llm_did_not_write_is_one_sentence(checkpoint, tmp_path, capsys):
    """A folder whose only tokenizer is a tokenizer.json of another kind (a Unigram here):
    one sentence saying what light-llm reads, never GPT-2's tokenizer assumed for it."""
    from tokenizers import Tokenizer as TokenizerEngine
    from tokenizers import models

    assert export(checkpoint[0], tmp_path / "hf") == 0
    (tmp_path / "hf" / "light_tokenizer.json").unlink()
    engine = TokenizerEngine(models.Unigram([("<unk>", 0.0), ("a", -1.0)], 0))
    (tmp_path / "hf" / "tokenizer.json").write_text(engine.to_str())
    capsys.readouterr()
    argv = ["generate", "--checkpoint", str(tmp_path / "hf"), "--prompt", "a"]
    assert main(argv) == 2
    line = error_line(capsys, "generate")
    assert "is not a tokenizer light-llm wrote (its model is 'Unigram', not a BPE)" in line
