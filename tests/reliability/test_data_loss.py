"""Class 1 of issue 12, data loss: saving never removes a file light-llm did not write.

Every writer of a model folder (the PyTorch GPT, the NumPy GPT, the encoder, the HuggingFace
GPT-2 export) refuses a folder holding anything it did not write, before writing anything,
and names ``overwrite=True`` / ``--overwrite``; what was there is byte for byte as before."""

from __future__ import annotations

import json
import os

import pytest

from light_llm.atomic import FOLDER_MANIFEST
from light_llm.checkpoints import load, save
from light_llm.checkpoints.hf_gpt2 import export_hf_gpt2
from light_llm.config import ModelConfig
from light_llm.errors import OutputError
from light_llm.models.bert import BertEncoder, EncoderConfig
from light_llm.models.gpt import GPT
from light_llm.reference.model import NumpyGPT
from tests.reliability.conftest import assert_refused, run_cli, snapshot
from tests.train.helpers import tiny_flags

TINY = dict(vocab_size=20, block_size=8, n_layer=1, n_head=2, n_embd=16)


def gpt_writer(folder, **options):
    save(GPT(ModelConfig(**TINY)), folder, **options)


def numpy_writer(folder, **options):
    save(NumpyGPT(ModelConfig(**TINY), seed=int.from_bytes(os.urandom(4))), folder, **options)


def encoder_writer(folder, **options):
    save(BertEncoder(EncoderConfig(**TINY)), folder, **options)


def hf_writer(folder, **options):
    export_hf_gpt2(GPT(ModelConfig(**TINY)), folder, **options)


WRITERS = {"gpt": gpt_writer, "numpy": numpy_writer, "encoder": encoder_writer, "hf": hf_writer}


def user_file(folder):
    folder.mkdir()
    (folder / "thesis.txt").write_text("precious\n")


def hidden_file(folder):
    folder.mkdir()
    (folder / ".notes").write_bytes(b"\x00secret")


def subfolder(folder):
    (folder / "chapters").mkdir(parents=True)
    (folder / "chapters" / "one.md").write_text("# one\n")


def checkpoint_plus_user_file(folder):
    gpt_writer(folder)
    (folder / "README.md").write_text("my notes on this model\n")


def foreign_config(folder):
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "my-own"}))


FOREIGN = {
    "user file": user_file,
    "hidden file": hidden_file,
    "subfolder": subfolder,
    "checkpoint plus a user file": checkpoint_plus_user_file,
    "another program's config.json": foreign_config,
}


@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize("content", FOREIGN)
def test_saving_into_a_folder_with_foreign_files_is_refused_and_keeps_them(
    tmp_path, writer, content
):
    folder = tmp_path / "mydocs"
    FOREIGN[content](folder)
    before = snapshot(folder)
    with pytest.raises(OutputError, match="overwrite=True") as raised:
        WRITERS[writer](folder)
    assert "\n" not in str(raised.value)
    assert snapshot(folder) == before
    assert sorted(os.listdir(tmp_path)) == ["mydocs"]  # no staging folder left behind


@pytest.mark.parametrize("writer", WRITERS)
def test_a_file_where_the_folder_should_be_is_refused_even_with_overwrite(tmp_path, writer):
    target = tmp_path / "model"
    target.write_text("not a folder\n")
    for overwrite in (False, True):
        with pytest.raises(OutputError, match="is a file"):
            WRITERS[writer](target, overwrite=overwrite)
    assert target.read_text() == "not a folder\n"


@pytest.mark.parametrize("writer", WRITERS)
def test_a_folder_light_llm_wrote_is_replaced_as_a_unit(tmp_path, writer):
    folder = tmp_path / "ck"
    WRITERS[writer](folder)
    first = snapshot(folder)
    WRITERS[writer](folder)  # a fresh model: new weights, same file names
    second = snapshot(folder)
    assert set(second) == set(first)
    assert second["model.safetensors"] != first["model.safetensors"]
    listed = set((folder / FOLDER_MANIFEST).read_text().split())
    assert listed == set(second) - {FOLDER_MANIFEST}


@pytest.mark.parametrize("writer", WRITERS)
def test_overwrite_replaces_a_foreign_folder_when_asked(tmp_path, writer):
    folder = tmp_path / "mydocs"
    user_file(folder)
    WRITERS[writer](folder, overwrite=True)
    assert not (folder / "thesis.txt").exists()
    assert (folder / "model.safetensors").is_file()


def test_an_empty_folder_is_written_into(tmp_path):
    (tmp_path / "empty").mkdir()
    gpt_writer(tmp_path / "empty")
    assert load(tmp_path / "empty").config == ModelConfig(**TINY)


def test_a_checkpoint_written_before_manifests_is_still_replaced(tmp_path):
    folder = tmp_path / "old"
    gpt_writer(folder)
    (folder / FOLDER_MANIFEST).unlink()  # as every checkpoint before this change
    gpt_writer(folder)
    assert (folder / FOLDER_MANIFEST).is_file()


@pytest.mark.parametrize("content", ["user file", "subfolder", "checkpoint plus a user file"])
def test_train_refuses_a_checkpoint_folder_it_did_not_write(capsys, tmp_path, corpus, content):
    out = tmp_path / "out"
    out.mkdir()
    FOREIGN[content](out / "checkpoint")
    before = snapshot(tmp_path)
    code, _, err = run_cli(capsys, "train", *tiny_flags(corpus, out, max_iters=1))
    assert_refused(code, err, "--overwrite", str(out / "checkpoint"))
    after = snapshot(tmp_path)
    assert {k: v for k, v in after.items() if k in before} == before
    assert not any("checkpoint" in name for name in set(after) - set(before))


@pytest.mark.parametrize("out", ["a-file", "a-file/below"])
def test_train_into_a_path_under_a_file_names_the_file(capsys, tmp_path, corpus, out):
    (tmp_path / "a-file").write_text("keep me\n")
    code, _, err = run_cli(capsys, "train", *tiny_flags(corpus, tmp_path / out, max_iters=1))
    assert_refused(code, err, "is a file")
    assert "File exists" not in err
    assert (tmp_path / "a-file").read_text() == "keep me\n"
