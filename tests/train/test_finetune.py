"""Fine-tuning (--init-from), full and LoRA: the run starts from the base's weights and
tokenizer with a fresh optimizer, records the base, leaves it untouched, trains only A and B,
saves only them, and resumes bit for bit."""

import hashlib
import json
import shutil
import struct

import pytest
import safetensors.torch
import torch

from light_llm.checkpoints import load
from light_llm.checkpoints.lora import ADAPTERS_FILE
from light_llm.cli import main
from light_llm.errors import CheckpointError, ConfigError, TokenizerError
from light_llm.nn.lora import LORA_PARAMETERS, merge_lora
from light_llm.train.config import TrainConfig
from light_llm.train.trainer import Trainer, train
from tests.train.helpers import TINY, write_corpus

SHAPE = ("n_layer", "n_head", "n_embd", "block_size")
RUN = {key: value for key, value in TINY.items() if key not in SHAPE}  # the base decides
LORA = {"lora_rank": 2, "lora_alpha": 4.0, "lora_targets": "c_attn,c_fc"}


@pytest.fixture(scope="module")
def new_text(tmp_path_factory):
    """Another text over the same characters (the base's vocabulary covers it)."""
    return write_corpus(tmp_path_factory.mktemp("new") / "new.txt", n_lines=500, seed=5)


@pytest.fixture(scope="module")
def base(tmp_path_factory, corpus):
    """A tiny trained character-level model: its training output folder."""
    out = tmp_path_factory.mktemp("base") / "run"
    settings = {**TINY, "data": str(corpus), "out": str(out), "max_iters": 4, "tokenizer": "char"}
    train(TrainConfig(**settings))
    return out


def run_config(base, data, out, **overrides):
    paths = {"init_from": str(base), "data": str(data), "out": str(out)}
    return TrainConfig(**{**RUN, **paths, **overrides})


def folder_bytes(folder):
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


def read_state(out):
    return json.loads((out / "checkpoint" / "trainer_state.json").read_text())


def test_full_fine_tune_starts_from_the_base_with_its_tokenizer_and_a_fresh_optimizer(
    base, new_text, tmp_path
):
    out = tmp_path / "ft"
    start = train(run_config(base, new_text, out, max_iters=0))  # evaluates and saves only
    assert start.iteration == 0
    base_model, tuned = load(base), load(out)
    for (name, a), (_, b) in zip(
        base_model.state_dict().items(), tuned.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), name
    tokenizer_file = "light_tokenizer.json"
    assert (out / "checkpoint" / tokenizer_file).read_bytes() == (
        base / "checkpoint" / tokenizer_file
    ).read_bytes()
    weights = (base / "checkpoint" / "model.safetensors").read_bytes()
    started = read_state(out)["started_from"]
    assert started == {
        "path": str((base / "checkpoint").resolve()),
        "sha256": hashlib.sha256(weights).hexdigest(),
    }

    result = train(run_config(base, new_text, tmp_path / "ft3", max_iters=3))
    assert sorted(result.losses) == [0, 1, 2]  # iteration 0 of a new schedule
    moments = safetensors.torch.load_file(tmp_path / "ft3" / "checkpoint" / "optimizer.safetensors")
    steps = {float(value) for name, value in moments.items() if name.endswith(".step")}
    assert steps == {3.0}  # a fresh AdamW: not the base's 4 steps and more
    assert read_state(tmp_path / "ft3")["resolved_config"]["init_from"] == str(base)


def test_text_outside_the_base_vocabulary_is_refused_naming_the_characters(base, tmp_path):
    text = tmp_path / "other.txt"
    text.write_text("the king shall come\n" * 200 + "Zebra Qat\n", encoding="utf-8")
    with pytest.raises(TokenizerError, match="'Q', 'Z', 'b'"):
        Trainer(run_config(base, text, tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_the_shape_comes_from_the_checkpoint(base, new_text, tmp_path):
    with pytest.raises(ConfigError, match="drop --tokenizer, --n-layer"):
        run_config(base, new_text, tmp_path, n_layer=3, tokenizer="char").resolve()
    with pytest.raises(ConfigError, match="come from --init-from .*; drop --vocab-size."):
        run_config(base, new_text, tmp_path, vocab_size=400).resolve()  # not ignored
    with pytest.raises(CheckpointError, match="no config.json"):
        run_config(tmp_path, new_text, tmp_path / "out").resolve()


@pytest.fixture(scope="module")
def lora_run(base, new_text, tmp_path_factory):
    before = folder_bytes(base / "checkpoint")
    out = tmp_path_factory.mktemp("lora") / "run"
    train(run_config(base, new_text, out, max_iters=6, dropout=0.1, lora_dropout=0.1, **LORA))
    return out, before


def test_the_base_is_bit_identical_after_a_lora_run(base, lora_run):
    _, before = lora_run
    assert folder_bytes(base / "checkpoint") == before


def test_only_a_and_b_changed(base, lora_run):
    out, _ = lora_run
    base_state = load(base).state_dict()
    adapted = load(out).state_dict()
    changed = {name for name in adapted if name not in base_state}
    assert changed and {name.rsplit(".", 1)[-1] for name in changed} == set(LORA_PARAMETERS)
    for name, tensor in base_state.items():
        assert torch.equal(adapted[name], tensor), name
    assert all(adapted[name].abs().max() > 0 for name in changed if name.endswith("lora_B"))


def test_the_optimizer_holds_only_a_and_b(base, new_text, tmp_path):
    trainer = Trainer(run_config(base, new_text, tmp_path / "out", **LORA))
    held = {id(p) for group in trainer.prepared.optimizer.param_groups for p in group["params"]}
    adapters = {
        id(p)
        for name, p in trainer.prepared.raw_model.named_parameters()
        if name.rsplit(".", 1)[-1] in LORA_PARAMETERS
    }
    assert held == adapters and len(adapters) == 2 * 2  # c_attn and c_fc of the one block


def test_lora_by_default_adapts_every_matrix_of_a_swiglu_block(base, new_text, tmp_path):
    """With no --lora-targets: the fused QKV, both output projections, and SwiGLU's gate
    c_fc and value c_v (every linear layer inside the block)."""
    assert load(base).config.activation == "swiglu"  # the default preset's MLP
    trainer = Trainer(run_config(base, new_text, tmp_path / "out", lora_rank=2))
    parameters = [name for name, _ in trainer.prepared.raw_model.named_parameters()]
    adapted = {name.rsplit(".", 1)[0] for name in parameters if name.endswith(".lora_A")}
    in_blocks = [name for name in parameters if ".h." in name and ".ln_" not in name]
    matrices = {name.removesuffix(".weight") for name in in_blocks if name.endswith(".weight")}
    assert adapted == matrices and any(name.endswith("mlp.c_v") for name in adapted)


def test_the_adapter_checkpoint_holds_only_the_adapters(base, lora_run):
    out, _ = lora_run
    folder = out / "checkpoint"
    assert not (folder / "model.safetensors").exists()
    d, hidden = TINY["n_embd"], load(base).config.ffn_hidden
    r = LORA["lora_rank"]
    floats = r * (d + 3 * d) + r * (d + hidden)  # A (r x in), B (out x r): c_attn, c_fc
    data = (folder / ADAPTERS_FILE).read_bytes()
    (header_size,) = struct.unpack("<Q", data[:8])
    assert len(data) - 8 - header_size == 4 * floats  # float32, nothing else
    assert len(data) < 2 * 4 * floats + 8 + header_size  # the bound
    config = json.loads((folder / "config.json").read_text())
    assert config["lora"]["rank"] == r and len(config["lora"]["base"]["sha256"]) == 64


def test_merged_and_unmerged_logits_agree_after_training(lora_run):
    out, _ = lora_run
    model = load(out)
    idx = torch.randint(0, model.config.vocab_size, (2, TINY["block_size"]))
    with torch.no_grad():
        unmerged = model(idx)[0]
        merged = merge_lora(model)(idx)[0]
    assert (merged - unmerged).abs().max().item() <= 1e-5


def test_a_changed_base_is_refused(base, new_text, tmp_path):
    copy = tmp_path / "base"
    shutil.copytree(base / "checkpoint", copy)
    out = tmp_path / "lora"
    train(run_config(copy, new_text, out, max_iters=2, **LORA))
    load(out)  # fine while the base is unchanged
    path = copy / "model.safetensors"
    tensors = safetensors.torch.load_file(path)
    tensors["transformer.wte.weight"][0, 0] += 1.0
    safetensors.torch.save_file(tensors, path)
    with pytest.raises(CheckpointError, match="has changed"):
        load(out)
    with pytest.raises(CheckpointError, match="has changed"):
        train(TrainConfig(out=str(out), resume=True, max_iters=4))
    assert main(["merge", "--checkpoint", str(out), "--out", str(tmp_path / "merged")]) == 2
    assert not (tmp_path / "merged").exists()


def test_fine_tuning_from_adapters_asks_for_a_merge_first(lora_run, new_text, tmp_path):
    out, _ = lora_run
    with pytest.raises(CheckpointError, match="light-llm merge"):
        Trainer(run_config(out, new_text, tmp_path / "again"))


def test_resume_of_a_lora_run_is_bit_exact(base, new_text, tmp_path):
    common = {"dropout": 0.1, "lora_dropout": 0.2, "eval_interval": 3, "lr_decay_iters": 6, **LORA}
    straight = train(run_config(base, new_text, tmp_path / "straight", max_iters=6, **common))
    train(run_config(base, new_text, tmp_path / "split", max_iters=3, **common))
    resumed = train(TrainConfig(out=str(tmp_path / "split"), resume=True, max_iters=6))
    assert sorted(resumed.losses) == [3, 4, 5]
    for iteration, loss in resumed.losses.items():
        assert loss == straight.losses[iteration], iteration
    for name in (ADAPTERS_FILE, "optimizer.safetensors"):
        first = safetensors.torch.load_file(tmp_path / "straight" / "checkpoint" / name)
        second = safetensors.torch.load_file(tmp_path / "split" / "checkpoint" / name)
        assert first.keys() == second.keys()
        for key in first:
            assert torch.equal(first[key], second[key]), (name, key)
