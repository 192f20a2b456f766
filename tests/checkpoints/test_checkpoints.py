"""Checkpoint folders: round trips for every variant, every refusal, and atomic replacement."""

import json
import os
import pickle
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import safetensors.torch
import torch
import transformers

from light_llm.atomic import write_folder_atomically
from light_llm.checkpoints import (
    load,
    load_config,
    load_tokenizer,
    resolve_checkpoint_dir,
    save,
)
from light_llm.errors import CheckpointError, ConfigError
from light_llm.models.gpt import GPT
from light_llm.tokenizers import CharTokenizer
from tests.conftest import VARIANTS, save_char_checkpoint, tiny_config

SRC = Path(__file__).resolve().parents[2] / "src"


def perturbed(model: GPT) -> GPT:
    """Every parameter moved off its initial value (norms start at exactly 1 and 0)."""
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.01 * torch.randn_like(parameter))
    return model.eval()


def logits_of(model: GPT, idx: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(idx)[0]


def assert_one_sentence(message: str) -> None:
    assert "\n" not in message and "Traceback" not in message
    assert message.endswith(".")


def siblings(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.parent.iterdir() if p.name != folder.name)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_round_trip_gives_identical_logits(tmp_path, variant):
    model = perturbed(GPT(tiny_config(**VARIANTS[variant])))
    save(model, tmp_path / "ck")
    loaded = load(tmp_path / "ck")
    idx = torch.randint(0, 37, (2, 16))
    assert torch.equal(logits_of(loaded, idx), logits_of(model, idx))
    assert loaded.config == model.config
    assert not loaded.training
    if model.config.tie_embeddings:
        assert loaded.lm_head.weight is loaded.transformer.wte.weight


@pytest.mark.parametrize("tied", [True, False])
def test_tied_head_is_stored_once(tmp_path, tied):
    model = GPT(tiny_config(tie_embeddings=tied))
    save(model, tmp_path / "ck")
    stored = safetensors.torch.load_file(tmp_path / "ck" / "model.safetensors")
    expected = set(model.state_dict()) - ({"lm_head.weight"} if tied else set())
    assert set(stored) == expected


def test_config_json_describes_the_model(tmp_path):
    config = tiny_config(positions="rotary", norm="rmsnorm")
    save(GPT(config), tmp_path / "ck")
    written = json.loads((tmp_path / "ck" / "config.json").read_text())
    assert written == {"format": "light-llm", "architecture": "gpt", "model": config.to_dict()}
    assert load_config(tmp_path / "ck") == config


def test_a_checkpoint_older_than_the_recipe_switches_loads_with_their_defaults(tmp_path):
    """config.json written before qk_norm and logit_softcap existed: the model loads, with
    QK-norm off and no soft-cap, and gives the logits it gave."""
    model = perturbed(GPT(tiny_config()))
    save(model, tmp_path / "ck")
    path = tmp_path / "ck" / "config.json"
    written = json.loads(path.read_text())
    for key in ("qk_norm", "logit_softcap"):
        del written["model"][key]
    path.write_text(json.dumps(written))
    loaded = load(tmp_path / "ck")
    assert loaded.config.qk_norm is False and loaded.config.logit_softcap is None
    idx = torch.randint(0, 37, (2, 16))
    assert torch.equal(logits_of(loaded, idx), logits_of(model, idx))


def test_tokenizer_and_extra_files_are_saved(tmp_path):
    tokenizer = CharTokenizer.from_text("to be or not to be")
    model = GPT(tiny_config(vocab_size=tokenizer.vocab_size))
    save(model, tmp_path / "ck", tokenizer, {"train_state.json": b"{}"})
    assert load_tokenizer(tmp_path / "ck").encode("not to be") == tokenizer.encode("not to be")
    assert (tmp_path / "ck" / "train_state.json").read_bytes() == b"{}"


@pytest.mark.parametrize("engine", ["torch", "numpy"])
def test_save_refuses_what_no_loader_would_read_and_writes_nothing(tmp_path, engine):
    """save's bad arguments are one ConfigError each, with nothing written: an ``overwrite``
    that is not a bool ("no" is true, and replaced a folder of the user's files), a path that
    is not one, extra files that are not name -> bytes, a tokenizer with other ids than the
    model's and weights holding NaN (both of which every loader refuses)."""
    tokenizer = CharTokenizer.from_text("to be or not to be")
    model = perturbed(GPT(tiny_config(vocab_size=tokenizer.vocab_size)))
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("my notes")
    if engine == "numpy":  # the same model read by the NumPy engine
        save(model, tmp_path / "torch", tokenizer)
        model = load(tmp_path / "torch", engine="numpy")
        shutil.rmtree(tmp_path / "torch")
    for args, kwargs, said in [
        ((model, folder, tokenizer), {"overwrite": "no"}, "overwrite must be true or false"),
        ((model, None, tokenizer), {}, "folder must be a path"),
        ((model, tmp_path / "a", tokenizer, ["notes.txt"]), {}, "extra_files must map"),
        ((model, tmp_path / "a", tokenizer, {"n": "text"}), {}, "extra_files must map"),
        ((model, tmp_path / "a", CharTokenizer.from_text("xyz")), {}, "has 3 ids but the"),
    ]:
        with pytest.raises(ConfigError, match=said):
            save(*args, **kwargs)
    if engine == "numpy":
        model.params["transformer.wte.weight"][0, 0] = np.nan
    else:
        with torch.no_grad():
            model.transformer.wte.weight[0, 0] = float("nan")
    with pytest.raises(ConfigError, match="transformer.wte.weight holds NaN or infinite values"):
        save(model, tmp_path / "a", tokenizer)
    assert sorted(path.name for path in tmp_path.rglob("*")) == ["mine", "notes.txt"]


def test_training_output_folder_resolves_to_its_checkpoint(tmp_path):
    model = perturbed(GPT(tiny_config()))
    save(model, tmp_path / "out" / "checkpoint")
    assert resolve_checkpoint_dir(tmp_path / "out") == tmp_path / "out" / "checkpoint"
    idx = torch.randint(0, 37, (1, 8))
    assert torch.equal(logits_of(load(tmp_path / "out"), idx), logits_of(model, idx))


def test_from_pretrained_reads_light_llm_and_huggingface_folders(tmp_path):
    hf_config = transformers.GPT2Config(
        n_layer=2,
        n_embd=32,
        n_head=4,
        vocab_size=37,
        n_positions=16,
        bos_token_id=0,
        eos_token_id=0,
    )
    hf_model = transformers.GPT2LMHeadModel(hf_config).eval()
    hf_model.save_pretrained(tmp_path / "hf", safe_serialization=True)
    idx = torch.randint(0, 37, (2, 16))
    with torch.no_grad():
        expected = hf_model(idx).logits
    from_hf = load(tmp_path / "hf")
    assert (logits_of(from_hf, idx) - expected).abs().max().item() <= 1e-5

    save(from_hf, tmp_path / "ours")
    reloaded = load(tmp_path / "ours")
    assert torch.equal(logits_of(reloaded, idx), logits_of(from_hf, idx))


# --------------------------------------------------------------------------- refusals
def write_json(path: Path, value) -> None:
    path.write_text(json.dumps(value))


def edit_config(folder: Path, **model_changes) -> None:
    config = json.loads((folder / "config.json").read_text())
    config["model"].update(model_changes)
    write_json(folder / "config.json", config)


def edit_weights(folder: Path, change) -> None:
    tensors = safetensors.torch.load_file(folder / "model.safetensors")
    change(tensors)
    safetensors.torch.save_file(tensors, folder / "model.safetensors")


BREAKAGES = {
    "folder missing": (lambda f: os.rename(f, f.with_name("elsewhere")), "no checkpoint folder"),
    "config missing": (lambda f: (f / "config.json").unlink(), "no config.json"),
    "config not JSON": (lambda f: (f / "config.json").write_text("{nope"), "not valid JSON"),
    "config not an object": (lambda f: write_json(f / "config.json", [1]), "JSON object"),
    "unknown format": (lambda f: write_json(f / "config.json", {"a": 1}), "neither"),
    "encoder": (
        lambda f: write_json(f / "config.json", {"format": "light-llm", "architecture": "bert"}),
        "light-llm fill-mask",
    ),
    "unknown architecture": (
        lambda f: write_json(f / "config.json", {"format": "light-llm", "architecture": "x"}),
        "unknown architecture 'x'",
    ),
    "invalid model config": (lambda f: edit_config(f, n_head=3), "divisible by n_head"),
    "unknown config key": (lambda f: edit_config(f, colour="red"), "colour"),
    "weights missing": (lambda f: (f / "model.safetensors").unlink(), "model.safetensors is"),
    "weights truncated": (
        lambda f: (f / "model.safetensors").write_bytes(
            (f / "model.safetensors").read_bytes()[:300]
        ),
        "not a readable safetensors file",
    ),
    "weights garbage": (
        lambda f: (f / "model.safetensors").write_bytes(b"\x00" * 64),
        "not a readable safetensors file",
    ),
    "tensor missing": (
        lambda f: edit_weights(f, lambda t: t.pop("transformer.h.1.mlp.c_fc.bias")),
        "lacks the tensor(s) transformer.h.1.mlp.c_fc.bias",
    ),
    "tensor unexpected": (
        lambda f: edit_weights(f, lambda t: t.update({"transformer.h.9.x": torch.zeros(2)})),
        "transformer.h.9.x",
    ),
    "config does not match weights": (
        lambda f: edit_config(f, vocab_size=40),
        "transformer.wte.weight has shape (37, 16) but the config needs (40, 16)",
    ),
}


@pytest.mark.parametrize("breakage", sorted(BREAKAGES))
def test_broken_checkpoint_is_refused_in_one_sentence(tmp_path, breakage):
    folder = tmp_path / "ck"
    save(GPT(tiny_config()), folder)
    breaking, expected_words = BREAKAGES[breakage]
    breaking(folder)
    with pytest.raises(CheckpointError) as caught:
        load(folder)
    assert expected_words in str(caught.value)
    assert_one_sentence(str(caught.value))


@pytest.mark.parametrize("trace", ["metrics.jsonl", ".light-llm.lock", "data"])
def test_a_runs_folder_before_its_first_checkpoint_says_so(tmp_path, trace):
    """OUT of a run still before its first checkpoint (its token cache, lock or log there, no
    config.json) is told as that, with the way to watch a run train, not as a folder that is
    not a checkpoint; a folder with none of them still is one."""
    out = tmp_path / "run"
    out.mkdir()
    (out / trace).mkdir() if trace == "data" else (out / trace).write_text("")
    with pytest.raises(CheckpointError) as caught:
        load(out)
    assert "no checkpoint yet" in str(caught.value) and "--serve" in str(caught.value)
    assert_one_sentence(str(caught.value))
    with pytest.raises(CheckpointError, match="is not a checkpoint"):
        load(tmp_path)


class WritesAFileWhenUnpickled:
    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (str(self.path), "w"))


def test_pickled_weights_are_refused_without_being_opened(tmp_path):
    folder = tmp_path / "hf"
    folder.mkdir()
    write_json(
        folder / "config.json",
        {
            "model_type": "gpt2",
            "n_layer": 1,
            "n_head": 2,
            "n_embd": 8,
            "vocab_size": 10,
            "n_positions": 8,
        },
    )
    sentinel = tmp_path / "the pickle ran"
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps(WritesAFileWhenUnpickled(sentinel)))
    with pytest.raises(CheckpointError, match="only safetensors") as caught:
        load(folder)
    assert not sentinel.exists()
    assert_one_sentence(str(caught.value))


# --------------------------------------------------------------------------- atomic writes
def test_failed_write_leaves_the_previous_checkpoint(tmp_path, monkeypatch):
    folder = tmp_path / "ck"
    old = perturbed(GPT(tiny_config()))
    save(old, folder)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}

    def disk_full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(CheckpointError, match="No space left on device"):
        save(perturbed(GPT(tiny_config())), folder)
    monkeypatch.undo()
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert siblings(folder) == []


def test_failed_swap_puts_the_previous_checkpoint_back(tmp_path, monkeypatch):
    folder = tmp_path / "ck"
    old = perturbed(GPT(tiny_config()))
    save(old, folder)
    real_replace = os.replace
    calls = []

    def replace_failing_second_time(source, target):
        calls.append((source, target))
        if len(calls) == 2:  # new folder -> ck, after ck was moved aside
            raise OSError(5, "Input/output error")
        return real_replace(source, target)

    monkeypatch.setattr(os, "replace", replace_failing_second_time)
    with pytest.raises(CheckpointError, match="previous one is unchanged"):
        save(perturbed(GPT(tiny_config())), folder)
    monkeypatch.undo()
    idx = torch.randint(0, 37, (1, 8))
    assert torch.equal(logits_of(load(folder), idx), logits_of(old, idx))
    assert siblings(folder) == []


KILLED_WRITER = textwrap.dedent(
    """
    import os, shutil, sys
    import torch
    from light_llm.checkpoints import save
    from light_llm.models.gpt import GPT
    from tests.conftest import tiny_config

    folder, where = sys.argv[1], sys.argv[2]
    calls = []
    real_replace = os.replace

    def replace_or_die(source, target):
        calls.append(source)
        if where == f"replace-{len(calls)}":
            os._exit(9)  # killed: no exception handler, no clean-up runs
        return real_replace(source, target)

    def die(*args, **kwargs):
        os._exit(9)

    os.replace = replace_or_die
    if where == "rmtree":
        shutil.rmtree = die
    torch.manual_seed(123)
    save(GPT(tiny_config()), folder)
    """
)


@pytest.mark.parametrize(
    "where, survivor", [("replace-1", "old"), ("replace-2", "old"), ("rmtree", "new")]
)
def test_kill_at_any_moment_leaves_a_loadable_checkpoint(tmp_path, where, survivor):
    folder = tmp_path / "ck"
    old = perturbed(GPT(tiny_config()))
    save(old, folder)
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{SRC.parent}"}
    done = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(folder), where], env=env)
    assert done.returncode == 9
    torch.manual_seed(123)
    new = GPT(tiny_config()).eval()
    idx = torch.randint(0, 37, (1, 8))
    loaded = load(folder)
    expected = old if survivor == "old" else new
    assert torch.equal(logits_of(loaded, idx), logits_of(expected, idx))

    newest = perturbed(GPT(tiny_config()))
    save(newest, folder)  # the next save succeeds and clears the leftovers
    assert torch.equal(logits_of(load(folder), idx), logits_of(newest, idx))
    assert siblings(folder) == []


def test_checkpoint_folder_gets_the_permissions_of_a_normal_folder(tmp_path):
    save(GPT(tiny_config()), tmp_path / "ck")
    (tmp_path / "made by mkdir").mkdir()
    normal_mode = (tmp_path / "made by mkdir").stat().st_mode
    assert (tmp_path / "ck").stat().st_mode == normal_mode


def test_file_names_must_be_plain(tmp_path):
    for name in ("../escape", "sub/file", ".hidden", ""):
        with pytest.raises(CheckpointError, match="plain file names"):
            write_folder_atomically(tmp_path / "ck", {name: b"x"})
    assert not (tmp_path / "ck").exists()


def test_load_tokenizer_accepts_a_training_output_folder(tmp_path):
    tokenizer = CharTokenizer(list("xyz "))
    save(GPT(tiny_config(vocab_size=4)), tmp_path / "out" / "checkpoint", tokenizer)
    assert load_tokenizer(tmp_path / "out").encode("zyx ") == tokenizer.encode("zyx ")


def test_the_numpy_and_torch_engines_read_the_same_huggingface_gpt2_folder(tmp_path):
    """The NumPy engine maps GPT-2's tensors itself (no torch on its path): its logits match
    the PyTorch GPT loaded from the same HF folder."""
    from light_llm.checkpoints.hf_gpt2 import export_hf_gpt2

    export_hf_gpt2(perturbed(GPT(tiny_config())), tmp_path / "hf")
    torch_model = load(tmp_path / "hf")
    numpy_model = load(tmp_path / "hf", engine="numpy", dtype=np.float64)
    idx = torch.randint(0, torch_model.config.vocab_size, (2, 5))
    expected = logits_of(torch_model.double(), idx).numpy()
    np.testing.assert_allclose(numpy_model.forward(idx.numpy())[0], expected, atol=1e-9)


@pytest.mark.parametrize("path", [None, 3, b"out"])
@pytest.mark.parametrize("reader", [load, load_tokenizer, load_config])
def test_a_path_that_is_not_a_path_is_a_checkpoint_error(reader, path):
    # not Python's TypeError from deep inside pathlib: the API names the argument
    with pytest.raises(CheckpointError, match="path"):
        reader(path)


@pytest.mark.parametrize("engine", ["torch", "numpy"])
def test_a_path_part_longer_than_the_file_system_takes_is_a_checkpoint_error(tmp_path, engine):
    """It was a raw OSError ("File name too long") out of load and load_tokenizer."""
    too_long = tmp_path / ("n" * (os.pathconf(tmp_path, "PC_NAME_MAX") + 1))
    for path in (too_long, too_long / "checkpoint"):
        with pytest.raises(CheckpointError, match=r"^cannot read the checkpoint folder .*\.$"):
            load(path, engine=engine)
        with pytest.raises(CheckpointError, match=r"^cannot read the checkpoint folder .*\.$"):
            load_tokenizer(path)


@pytest.mark.parametrize("name", ["config.json", "model.safetensors"])
@pytest.mark.parametrize("kind", ["folder", "link to /dev/zero"])
def test_a_checkpoint_file_that_is_no_regular_file_is_named_as_such(tmp_path, name, kind):
    """A config.json linked to /dev/zero was "no config.json", a model.safetensors that is a
    folder "missing"."""
    folder, _, _ = save_char_checkpoint(tmp_path / "ck", block_size=8, n_layer=1, n_embd=8)
    (folder / name).unlink()
    if kind == "folder":
        (folder / name).mkdir()
    else:
        (folder / name).symlink_to("/dev/zero")
    with pytest.raises(CheckpointError, match=rf"{name} is not a regular file"):
        load(folder)
