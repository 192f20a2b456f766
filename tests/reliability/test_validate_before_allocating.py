"""Class 2 of issue 12: every config field is checked for its type and range, and the memory
a model or a batch needs against what the machine has free, before anything is built; a
tampered checkpoint config or weights file is one sentence, exit code 2, and stays as it was."""

from __future__ import annotations

import json
import math
import resource

import pytest
import safetensors.torch
import torch

from light_llm.checkpoints import load
from light_llm.checkpoints.hf_gpt2 import export_hf_gpt2
from light_llm.config import ModelConfig, batch_memory_bytes, preset
from light_llm.errors import CheckpointError, ConfigError, LightLLMError
from light_llm.limits import MAX_BATCH_SIZE
from light_llm.models.bert import BertEncoder, EncoderConfig
from light_llm.models.gpt import GPT
from light_llm.reference.model import NumpyGPT
from tests.reliability.conftest import CORPUS, assert_refused, run_cli, snapshot
from tests.train.helpers import tiny_flags

BAD_FIELDS = [
    ("dropout", "0.1"),
    ("dropout", 1.0),
    ("dropout", math.nan),
    ("norm_eps", "tiny"),
    ("norm_eps", 0.0),
    ("norm_eps", math.inf),
    ("tie_embeddings", "no"),
    ("bias", 1),
    ("qk_norm", None),
    ("n_layer", 2.0),
    ("n_layer", True),
    ("vocab_size", -3),
    ("n_head", "2"),
    ("position_base", "1e4"),
    ("position_base", 1.0),
    ("logit_softcap", math.nan),
    ("logit_softcap", "15"),
    ("positions", 3),
    ("activation", ["gelu"]),
    ("n_inner", 0),
]
HUGE = [
    {"vocab_size": 10**10},
    {"n_layer": 10**7},
    {"n_embd": 2**20, "n_head": 2},
    {"block_size": 10**10, "positions": "rotary"},
]


def max_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@pytest.mark.parametrize(("field", "value"), BAD_FIELDS)
def test_every_field_is_checked_for_type_and_range(field, value):
    with pytest.raises(ConfigError, match=field) as raised:
        ModelConfig(**{field: value})
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(("field", "value"), BAD_FIELDS[:8])
def test_replace_and_preset_check_too(field, value):
    with pytest.raises(ConfigError, match=field):
        preset("char-cpu", **{field: value})
    with pytest.raises(ConfigError, match=field):
        ModelConfig().replace(**{field: value})


@pytest.mark.parametrize("huge", HUGE, ids=lambda h: ",".join(h))
@pytest.mark.parametrize("build", [GPT, NumpyGPT, lambda c: BertEncoder(EncoderConfig(**c))])
def test_a_model_too_big_for_memory_is_refused_before_allocating(huge, build):
    config = huge if build not in (GPT, NumpyGPT) else ModelConfig(**huge)
    before = max_rss_bytes()
    with pytest.raises(ConfigError, match="memory"):
        build(config)
    assert max_rss_bytes() - before < 2**30  # nothing of the tens of GiB was touched


def tamper_config(folder, **model_changes):
    path = folder / "config.json"
    config = json.loads(path.read_text())
    config["model"].update(model_changes)
    path.write_text(json.dumps(config))


TAMPERED = [{field: value} for field, value in BAD_FIELDS] + HUGE


TAMPER_CASES = [("generate", changes) for changes in TAMPERED] + [
    ("eval", changes) for changes in TAMPERED[::4] + HUGE[:1]
]


@pytest.mark.parametrize(("command", "changes"), TAMPER_CASES, ids=str)
def test_a_tampered_checkpoint_config_is_one_sentence(
    capsys, char_checkpoint, corpus, changes, command
):
    tamper_config(char_checkpoint, **changes)
    before = snapshot(char_checkpoint)
    argv = ["--checkpoint", char_checkpoint]
    if command == "generate":
        argv += ["--prompt", "to", "--max-new-tokens", "2"]
    else:
        argv += ["--data", corpus]
    code, _, err = run_cli(capsys, command, *argv)
    assert_refused(code, err, "memory" if changes in HUGE else next(iter(changes)))
    assert snapshot(char_checkpoint) == before


HF_BAD = [
    ("tie_word_embeddings", "no"),
    ("layer_norm_epsilon", "tiny"),
    ("n_layer", "1"),
    ("resid_pdrop", "0.1"),
    ("scale_attn_weights", "yes"),
    ("activation_function", ["gelu"]),
    ("vocab_size", 10**10),
]


@pytest.mark.parametrize(("key", "value"), HF_BAD)
def test_a_tampered_huggingface_config_is_refused(tmp_path, key, value):
    folder = tmp_path / "hf"
    export_hf_gpt2(
        GPT(ModelConfig(vocab_size=20, block_size=8, n_layer=1, n_head=2, n_embd=16)), folder
    )
    config = json.loads((folder / "config.json").read_text())
    config[key] = value
    (folder / "config.json").write_text(json.dumps(config))
    for engine in ("torch", "numpy"):
        with pytest.raises(LightLLMError) as raised:
            load(folder, engine=engine)
        assert "\n" not in str(raised.value)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.bool, torch.uint8])
@pytest.mark.parametrize("engine", ["torch", "numpy"])
def test_weights_that_are_not_floating_point_are_refused(char_checkpoint, dtype, engine):
    path = char_checkpoint / "model.safetensors"
    tensors = safetensors.torch.load_file(path)
    tensors["transformer.wte.weight"] = tensors["transformer.wte.weight"].to(dtype)
    safetensors.torch.save_file(tensors, path)
    with pytest.raises(CheckpointError, match="floating-point"):
        load(char_checkpoint, engine=engine)


@pytest.mark.parametrize(
    "flags", [{"n_layer": 10**7}, {"n_embd": 2**18}, {"batch_size": 60_000, "block_size": 2**14}]
)
def test_train_refuses_a_run_too_big_for_memory_before_writing(capsys, tmp_path, corpus, flags):
    code, _, err = run_cli(capsys, "train", *tiny_flags(corpus, tmp_path / "out", **flags))
    assert_refused(code, err, "memory")
    assert not (tmp_path / "out" / "checkpoint").exists()


@pytest.mark.parametrize(
    "flags, named",
    [
        ({"block_size": 2**14, "batch_size": 1}, "--block-size"),
        ({"batch_size": 2**16}, "--batch-size"),
    ],
)
def test_a_batch_too_big_names_what_to_lower(capsys, tmp_path, corpus, monkeypatch, flags, named):
    """With 1 GiB free: a context whose single sequence cannot fit names --block-size (a smaller
    batch would not help), a batch of sequences that fit one by one names --batch-size."""
    free = 2**30
    monkeypatch.setattr("light_llm.limits.available_memory_bytes", lambda: free)
    code, _, err = run_cli(capsys, "train", *tiny_flags(corpus, tmp_path / "out", **flags))
    assert_refused(code, err, "memory", named)
    config = preset("char-baby").replace(n_layer=1, n_head=2, n_embd=16, block_size=16)
    context = flags.get("block_size", 16)
    one = batch_memory_bytes(config.replace(block_size=context), 1, context, training=True)
    assert (one > 0.9 * free) == (named == "--block-size")  # the tiny model's one sequence
    assert not (tmp_path / "out" / "checkpoint").exists()


def test_eval_refuses_a_batch_beyond_its_stated_bound(capsys, char_checkpoint, tmp_path):
    text = tmp_path / "text.txt"
    text.write_text(CORPUS * 20)
    argv = ["--checkpoint", char_checkpoint, "--data", text, "--eval-iters", "1"]
    code, _, err = run_cli(capsys, "eval", *argv, "--batch-size", str(10**9))
    assert_refused(code, err, "--batch-size", f"{MAX_BATCH_SIZE:,}")
