"""Classes 1-3 of issue 27: everything `light-llm train` writes in its output folder keeps the
promise "saving never deletes a file light-llm did not write".

1. A user's own file where a run writes (metrics.jsonl, the token cache, the loss curve, the
   lock) is refused before anything is written; the corpus itself (--data) is never written,
   whatever the flags.
2. A link in a run folder (one that came in someone else's tarball) is never written through,
   even where the folder's manifest names the file.
3. A checkpoint from before manifests has only light-llm's own file names replaced: a user's
   notes.txt beside it survives `train --resume`, `merge --out` and `save`.
"""

from __future__ import annotations

import os
import shutil

import pytest
import torch

from light_llm.atomic import FOLDER_MANIFEST
from light_llm.checkpoints import load, save
from light_llm.checkpoints.run import RUN_FILES, RUN_FOLDERS, TRAINER_STATE_FILE
from light_llm.errors import OutputError
from tests.conftest import CHAR_CORPUS
from tests.reliability.conftest import assert_refused, run_cli, snapshot
from tests.train.helpers import tiny_flags


def copy_of(run, tmp_path):
    return shutil.copytree(run, tmp_path / "out", symlinks=True)


# --------------------------------------------------------------------------- class 1
@pytest.mark.parametrize("name", RUN_FILES)
@pytest.mark.parametrize("overwrite", [False, True], ids=["", "overwrite"])
def test_a_users_file_where_train_writes_is_refused(capsys, tmp_path, corpus, name, overwrite):
    out = tmp_path / "out"
    (out / name).parent.mkdir(parents=True, exist_ok=True)
    (out / name).write_bytes(b"the user's own bytes\n")
    before = snapshot(tmp_path)
    flags = tiny_flags(corpus, out, max_iters=1, overwrite=overwrite)
    code, _, err = run_cli(capsys, "train", *flags)
    if overwrite:  # asked for: replaced, as --overwrite replaces a foreign checkpoint folder
        assert code == 0, err
        return
    assert_refused(code, err, str(out / name), "--overwrite")
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("name", [*RUN_FILES, "checkpoint/notes.txt"])
@pytest.mark.parametrize("overwrite", [False, True], ids=["", "overwrite"])
@pytest.mark.parametrize("how", ["itself", "hard link"])
def test_the_corpus_is_never_written(capsys, tmp_path, corpus, name, overwrite, how):
    out = tmp_path / "out"
    data = out / name
    data.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(corpus, data)
    if how == "hard link":
        os.link(data, tmp_path / "corpus.txt")
        data = tmp_path / "corpus.txt"
    before = snapshot(tmp_path)
    code, _, err = run_cli(capsys, "train", *tiny_flags(data, out, overwrite=overwrite))
    assert_refused(code, err, "corpus")
    assert snapshot(tmp_path) == before


def test_a_run_folder_from_before_manifests_is_continued(capsys, tmp_path, finished_run):
    out = copy_of(finished_run, tmp_path)
    (out / FOLDER_MANIFEST).unlink()  # as every run folder before this change
    code, _, err = run_cli(capsys, "train", "--out", out, "--resume", "--max-iters", "4")
    assert code == 0, err
    assert (out / FOLDER_MANIFEST).is_file()


def test_a_run_is_started_again_in_its_own_folder(capsys, tmp_path, corpus, finished_run):
    out = copy_of(finished_run, tmp_path)
    code, _, err = run_cli(capsys, "train", *tiny_flags(corpus, out, max_iters=2, overwrite=True))
    assert code == 0, err


# --------------------------------------------------------------------------- class 2
def link_out(out, name, target):
    path = out / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    path.symlink_to(target)


@pytest.mark.parametrize("name", [*RUN_FILES, *RUN_FOLDERS])
@pytest.mark.parametrize("folder", ["fresh", "finished run", "run without manifest"])
def test_a_link_in_a_run_folder_is_never_written_through(
    capsys, tmp_path, corpus, finished_run, name, folder
):
    if folder == "fresh":
        out = tmp_path / "out"
        out.mkdir()
    else:
        out = copy_of(finished_run, tmp_path)
        if folder == "run without manifest":
            (out / FOLDER_MANIFEST).unlink()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    target = elsewhere / "bashrc"
    target.write_text("export PATH=/usr/bin\n")
    if name in RUN_FOLDERS:
        shutil.rmtree(out / name, ignore_errors=True)
        target = elsewhere
    link_out(out, name, target)
    before = snapshot(elsewhere)
    resume = folder != "fresh" and name not in ("checkpoint",)
    flags = ["--out", out, "--resume", "--max-iters", "4"] if resume else tiny_flags(corpus, out)
    code, _, err = run_cli(capsys, "train", *flags)
    assert_refused(code, err, "link", str(out / name))
    assert snapshot(elsewhere) == before
    assert (out / name).is_symlink()


@pytest.mark.parametrize("name", ["metrics.jsonl", ".light-llm.lock"])
def test_a_hard_link_written_in_place_is_refused(capsys, tmp_path, finished_run, name):
    out = copy_of(finished_run, tmp_path)
    precious = tmp_path / "bashrc"
    precious.write_text("export PATH=/usr/bin\n")
    (out / name).unlink(missing_ok=True)
    os.link(precious, out / name)  # listed in the manifest, yet the user's file
    code, _, err = run_cli(capsys, "train", "--out", out, "--resume", "--max-iters", "4")
    assert_refused(code, err, "hard link", name)
    assert precious.read_text() == "export PATH=/usr/bin\n"


def test_a_fifo_where_train_writes_is_refused(capsys, tmp_path, corpus):
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / "metrics.jsonl")
    code, _, err = run_cli(capsys, "train", *tiny_flags(corpus, out, overwrite=True))
    assert_refused(code, err, "regular file")


# --------------------------------------------------------------------------- class 3
def without_manifest_and_with_notes(checkpoint):
    (checkpoint / FOLDER_MANIFEST).unlink()
    (checkpoint / "notes.txt").write_text("what I learned from this model\n")


def test_train_resume_keeps_a_users_file_in_a_checkpoint_from_before_manifests(
    capsys, tmp_path, finished_run
):
    out = copy_of(finished_run, tmp_path)
    without_manifest_and_with_notes(out / "checkpoint")
    before = snapshot(out / "checkpoint")
    code, _, err = run_cli(capsys, "train", "--out", out, "--resume", "--max-iters", "4")
    assert_refused(code, err, "notes.txt", "--overwrite")
    assert snapshot(out / "checkpoint") == before


def test_merge_keeps_a_users_file_in_a_checkpoint_from_before_manifests(
    capsys, tmp_path, lora_run, finished_run
):
    target = shutil.copytree(finished_run / "checkpoint", tmp_path / "merged")
    (target / TRAINER_STATE_FILE).unlink()  # a model folder (a run's checkpoint is refused whole)
    without_manifest_and_with_notes(target)
    before = snapshot(target)
    code, _, err = run_cli(capsys, "merge", "--checkpoint", lora_run, "--out", target)
    assert_refused(code, err, "notes.txt")
    assert snapshot(target) == before


def test_save_replaces_only_light_llms_names_in_a_checkpoint_from_before_manifests(
    tmp_path, finished_run
):
    target = shutil.copytree(finished_run / "checkpoint", tmp_path / "ck")
    model = load(target)
    (target / TRAINER_STATE_FILE).unlink()  # a model folder (a run's checkpoint is refused whole)
    (target / FOLDER_MANIFEST).unlink()
    save(model, target)  # only light-llm's names: replaced
    without_manifest_and_with_notes(target)
    before = snapshot(target)
    with pytest.raises(OutputError, match="notes.txt"):
        save(model, target)
    assert snapshot(target) == before


def test_save_refuses_a_runs_checkpoint_and_its_folder_and_the_run_resumes(
    capsys, tmp_path, finished_run
):
    """The API's save() over a run's checkpoint would have replaced its trainer state and
    optimizer (every file light-llm's, so the manifest let it), leaving `train --resume` nothing
    to resume: refused, as `merge --out` and `quantize --out` refuse it, and over the run's
    folder too; the run then resumes. overwrite=True ends the run on purpose."""
    out = copy_of(finished_run, tmp_path)
    model = load(out)
    before = snapshot(out)
    with pytest.raises(OutputError, match="training run's checkpoint.*overwrite=True"):
        save(model, out / "checkpoint")
    with pytest.raises(OutputError, match="is a training run's folder"):
        save(model, out, overwrite=False)
    assert snapshot(out) == before
    code, _, err = run_cli(capsys, "train", "--out", out, "--resume", "--max-iters", "3")
    assert code == 0, err
    save(model, out / "checkpoint", overwrite=True)
    assert not (out / "checkpoint" / TRAINER_STATE_FILE).exists()
    assert torch.equal(load(out / "checkpoint").lm_head.weight, model.lm_head.weight)


# ------------------------------------------------- a corpus too short: nothing left behind
@pytest.mark.parametrize("engine", ["torch", "numpy"])
@pytest.mark.parametrize("where", ["new", "nested", "empty"])
def test_a_corpus_too_short_for_one_window_leaves_nothing(capsys, tmp_path, engine, where):
    """The split is checked once the corpus is encoded into OUT/data, after the folder is
    claimed: the refusal removes what the claim made (a new folder and the parents it created)
    and empties again a folder that was there empty."""
    short = tmp_path / "short.txt"
    short.write_text("to be or not\n")  # fewer ids than a window of the tiny block (16 + 1)
    out = {"new": tmp_path / "out", "nested": tmp_path / "a" / "b" / "out"}.get(where)
    if where == "empty":
        out = tmp_path / "out"
        out.mkdir()
    code, _, err = run_cli(capsys, "train", *tiny_flags(short, out, engine=engine))
    assert_refused(code, err, "split has", "use a longer corpus", "a new run's --block-size")
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(
        ["short.txt", *(["out"] if where == "empty" else [])]
    )
    if where == "empty":
        assert list(out.iterdir()) == []


def test_a_corpus_too_short_leaves_a_folder_that_held_files_as_it_was_otherwise(
    capsys, tmp_path, finished_run
):
    """A run folder with a checkpoint is never removed by a refused run in it."""
    out = copy_of(finished_run, tmp_path)
    short = tmp_path / "short.txt"
    short.write_text("to be or not\n")
    code, _, err = run_cli(capsys, "train", *tiny_flags(short, out, overwrite=True))
    assert_refused(code, err, "split has")
    assert snapshot(out / "checkpoint") == snapshot(finished_run / "checkpoint")


@pytest.mark.parametrize("engine", ["torch", "numpy"])
@pytest.mark.parametrize("where", ["checkpoint", "checkpoint/inner"])
def test_an_out_at_or_inside_a_model_folder_is_refused(
    capsys, tmp_path, corpus, finished_run, engine, where
):
    """A run's checkpoint/, data/ and metrics written into another run's checkpoint folder
    would end that run (its --resume then finds files light-llm did not write there): one
    sentence, and nothing of the run changed; the run then resumes as before."""
    run = copy_of(finished_run, tmp_path)
    before = snapshot(run)
    flags = [*tiny_flags(corpus, run / where, max_iters=1), "--engine", engine]
    code, _, err = run_cli(capsys, "train", *flags)
    assert_refused(code, err, "model folder", "give a folder outside it")
    assert snapshot(run) == before
    code, _, err = run_cli(capsys, "train", "--out", run, "--resume", "--max-iters", "3")
    assert code == 0, err


def test_an_empty_out_is_refused_not_the_current_folder(capsys, tmp_path, corpus, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(capsys, "train", *tiny_flags(corpus, "", max_iters=1))
    assert_refused(code, err, "--out is empty")
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(
        [corpus.name] if corpus.parent == tmp_path else []
    )


def test_a_corpus_too_short_to_evaluate_offers_no_flag_eval_lacks(
    capsys, tmp_path, char_checkpoint
):
    """eval reads the model's context, which it cannot change: its refusal of a corpus
    shorter than one window named "a smaller block size", which eval has no flag for."""
    short = tmp_path / "short.txt"
    short.write_text(CHAR_CORPUS[:40])  # the checkpoint's characters, 4 in the val split
    code, _, err = run_cli(capsys, "eval", "--checkpoint", char_checkpoint, "--data", short)
    assert_refused(code, err, "split has", "use a longer corpus")
    assert err.rstrip().endswith("or a model of a shorter context (a new run's --block-size).")
