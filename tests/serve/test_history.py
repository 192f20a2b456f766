"""The explorer's training history (/api/runs): curves and probe records as the trainer wrote
them, a run compared beside another, a run folder that disappears, a damaged record, a newer
checkpoint picked up while the server runs."""

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

import light_llm
from light_llm.checkpoints.probes import probe_file, probe_iterations, read_probe
from light_llm.checkpoints.run import MetricsLog, evaluation_records
from light_llm.cli import main
from light_llm.errors import ConfigError
from light_llm.serve import ExplorerModel, create_app
from light_llm.serve.history import RunHistory
from tests.serve.conftest import local_client
from tests.train.helpers import tiny_flags, write_corpus


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two runs of the tiny GPT: one over characters, one over a learned BPE."""
    folder = tmp_path_factory.mktemp("history")
    corpus = write_corpus(folder / "corpus.txt", n_lines=300)
    char, bpe = folder / "char", folder / "bpe"
    assert main(["train", *tiny_flags(corpus, char, tokenizer="char", probe_interval=4)]) == 0
    assert main(["train", *tiny_flags(corpus, bpe, max_iters=6)]) == 0
    return char, bpe


def test_runs_are_the_records_and_probes_on_disk(runs):
    char, bpe = runs
    client = local_client(create_app(ExplorerModel(char, "test"), [RunHistory(bpe)]))
    listed = client.get("/api/runs").json()
    assert [run["name"] for run in listed] == ["char", "bpe"]
    first = listed[0]
    assert first["probes"] == probe_iterations(char) == [0, 4, 5, 8, 10]
    assert first["tokenizer"] == "char" and listed[1]["tokenizer"] == "bpe"
    assert first["objective"] == listed[1]["objective"] == "next-token"
    assert first["live"] is False
    evaluations = evaluation_records(MetricsLog(char).records())
    tokens_per_step = 4 * 16  # TINY's batch and context
    assert first["curves"]["val"] == [
        [r["iter"], r["iter"] * tokens_per_step, r["elapsed_s"], r["val_loss"], r["val_bpb"]]
        for r in evaluations
    ]
    record = client.get("/api/runs/0/probes/8").json()
    assert record == read_probe(char, 8)
    assert client.get("/api/runs/1/probes/6").json()["iter"] == 6


def test_a_size_warmups_curve_counts_its_smaller_steps(tmp_path):
    """--batch-warmup 5 --batch-warmup-size 2 --context-warmup 3 --context-warmup-size 8
    (TINY: batch 4, context 16): the evaluations at iterations 0, 5, 10 have seen 0,
    3 x 2 x 8 + 2 x 2 x 16 = 112 and 112 + 5 x 4 x 16 = 432 tokens."""
    corpus, out = write_corpus(tmp_path / "corpus.txt", n_lines=300), tmp_path / "warm"
    flags = ["--batch-warmup", "5", "--batch-warmup-size", "2"]
    flags += ["--context-warmup", "3", "--context-warmup-size", "8"]
    assert main(["train", *tiny_flags(corpus, out), *flags]) == 0
    curve = RunHistory(out).summary()["curves"]["val"]
    assert [(point[0], point[1]) for point in curve] == [(0, 0), (5, 112), (10, 432)]


def test_a_runs_vocabulary_is_its_tokenizer_files_digest(runs, tmp_path):
    char, bpe = runs
    copy = tmp_path / "char"
    shutil.copytree(char, copy)
    client = local_client(
        create_app(ExplorerModel(char, "test"), [RunHistory(copy), RunHistory(bpe)])
    )
    first, twin, other = (run["vocabulary"] for run in client.get("/api/runs").json())
    expected = hashlib.sha256(
        b"light_tokenizer.json\0" + (char / "checkpoint" / "light_tokenizer.json").read_bytes()
    )
    assert first == twin == expected.hexdigest()[:16] and other != first
    (copy / "checkpoint" / "light_tokenizer.json").write_text('{"type": "char", "chars": "ab"}')
    assert client.get("/api/runs").json()[1]["vocabulary"] != first


def test_unknown_and_damaged_records_are_one_sentence(runs, tmp_path):
    copy = tmp_path / "char"
    shutil.copytree(runs[0], copy)
    client = local_client(create_app(ExplorerModel(copy, "test")))
    missing = client.get("/api/runs/0/probes/7")
    assert missing.status_code == 404
    assert "no probe record of iteration 7" in missing.json()["detail"]
    assert client.get("/api/runs/3/probes/0").status_code == 404
    for path in ("/api/runs/0/probes/8.0", "/api/runs/0.0/probes/8", "/api/runs/0/probes/-8"):
        refused = client.get(path)
        assert refused.status_code == 422 and refused.json()["detail"][0]["loc"][0] == "path"
    probe_file(copy, 4).write_text('{"format": "light-llm-probe", ')
    damaged = client.get("/api/runs/0/probes/4")
    assert damaged.status_code == 422 and "not valid JSON" in damaged.json()["detail"]
    assert client.get("/api/runs/0/probes/8").status_code == 200  # the rest still answers


def test_an_unchanged_run_is_not_read_again_and_a_new_record_is(runs, tmp_path, monkeypatch):
    copy = tmp_path / "char"
    shutil.copytree(runs[0], copy)
    history = RunHistory(copy)
    reads = []
    original = MetricsLog.records

    def counted(self):
        reads.append(self.path)
        return original(self)

    monkeypatch.setattr(MetricsLog, "records", counted)
    first = history.summary()
    assert history.summary() == first and len(reads) == 1  # the page's next poll
    record = {"kind": "train", "iter": 11, "loss": 1.25, "bpb": 1.5, "elapsed_s": 9.0}
    with open(copy / "metrics.jsonl", "a", encoding="utf-8") as log:
        log.write(json.dumps(record) + "\n")
    grown = history.summary()
    assert len(reads) == 2 and grown["curves"]["train"][-1] == [11, 11 * 4 * 16, 9.0, 1.25, 1.5]
    shutil.copy(probe_file(copy, 8), probe_file(copy, 12))  # a new probe alone
    assert history.summary()["probes"][-1] == 12 and len(reads) == 3


def test_a_run_folder_deleted_while_watched_keeps_what_was_read(runs, tmp_path):
    copy = tmp_path / "char"
    shutil.copytree(runs[0], copy)
    client = local_client(create_app(ExplorerModel(copy, "test")))
    before = client.get("/api/runs").json()[0]
    shutil.rmtree(copy)
    after = client.get("/api/runs").json()[0]
    assert after["curves"] == before["curves"] and after["probes"] == before["probes"]
    assert "has gone" in after["warning"]
    assert client.get("/api/model").json()["warning"]  # the model card says so too


def test_a_run_folder_overwritten_by_another_run_is_said_to_be_one(runs, tmp_path):
    """The served folder now holds the BPE run: its curves are listed, and both the list and
    the card say that the model served is still the character run loaded first."""
    char, bpe = runs
    copy = tmp_path / "run"
    shutil.copytree(char, copy)
    client = local_client(create_app(ExplorerModel(copy, "test")))
    before = client.get("/api/runs").json()[0]
    assert before["warning"] is None and client.get("/api/model").json()["warning"] is None
    shutil.rmtree(copy)
    shutil.copytree(bpe, copy)
    after = client.get("/api/runs").json()[0]
    replaced = evaluation_records(MetricsLog(bpe).records())
    assert [point[0] for point in after["curves"]["val"]] == [r["iter"] for r in replaced]
    assert after["tokenizer"] == "bpe" and "now holds another training run" in after["warning"]
    card = client.get("/api/model").json()
    assert card["tokenizer"]["name"] == before["tokenizer"] == "char"  # still the loaded model
    assert "now holds another training run" in card["warning"]


def test_a_run_whose_log_cannot_be_read_leaves_the_others_shown(runs, tmp_path):
    char, bpe = runs
    copy = tmp_path / "bpe"
    shutil.copytree(bpe, copy)
    client = local_client(create_app(ExplorerModel(char, "test"), [RunHistory(copy)]))
    served, before = client.get("/api/runs").json()
    (copy / "metrics.jsonl").unlink()
    (copy / "metrics.jsonl").mkdir()  # unreadable: a folder in the log's place
    response = client.get("/api/runs")
    assert response.status_code == 200
    again, after = response.json()
    assert again == served  # the served run as it was
    assert after["curves"] == before["curves"]  # the last good reading, said to be one
    assert "is a folder, not a file; what was read before is still shown" in after["warning"]
    fresh = local_client(create_app(ExplorerModel(char, "test"), [RunHistory(copy)]))
    listed = fresh.get("/api/runs").json()  # never read: the sentence alone
    assert listed[0] == served and "curves" not in listed[1]
    assert "is a folder, not a file." in listed[1]["warning"]


def test_a_folder_that_is_not_a_run_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="not a training run's folder"):
        RunHistory(tmp_path)
    (tmp_path / "notes.txt").write_text("x")
    command = ["serve", "--checkpoint", "nowhere", "--compare", str(tmp_path), "--port", "0"]
    assert main(command) == 2


def test_runs_of_one_name_are_told_apart_and_a_run_given_twice_is_refused(runs, tmp_path, capsys):
    char, _ = runs
    for parent in ("a", "b"):
        shutil.copytree(char, tmp_path / parent / "run")
    served = ExplorerModel(tmp_path / "a" / "run", "test")
    client = local_client(create_app(served, [RunHistory(tmp_path / "b" / "run")]))
    assert [run["name"] for run in client.get("/api/runs").json()] == ["a/run", "b/run"]
    again = ["serve", "--checkpoint", str(char), "--compare", str(char), "--port", "0"]
    assert main(again) == 2
    twice = ["serve", "--checkpoint", str(char), "--compare", str(tmp_path / "a" / "run")]
    assert main([*twice, str(tmp_path / "a" / "run" / "."), "--port", "0"]) == 2
    captured = capsys.readouterr()
    errors = captured.err.strip().splitlines()
    assert len(errors) == 2 and all("is shown twice" in line for line in errors)
    assert "open http" not in captured.out  # refused before the address is given


def test_a_newer_checkpoint_replaces_the_served_model(runs, tmp_path):
    """After the run saved a newer checkpoint, every answer is the new model's, the first
    request too (next-token with no GET /api/model before it: what a server started on that
    checkpoint gives), then the card and the run's probes."""
    copy = tmp_path / "char"
    shutil.copytree(runs[0], copy)
    explorer = ExplorerModel(copy, "test")
    client = local_client(create_app(explorer))
    before = client.post("/api/next-token", json={"prompt": "the king"}).json()
    resume = ["train", "--resume", "--out", str(copy), "--max-iters", "20"]
    assert main([*resume, "--restretch-schedule"]) == 0  # the learning rate rises again
    after = client.post("/api/next-token", json={"prompt": "the king"}).json()
    fresh = local_client(create_app(ExplorerModel(copy, "test")))
    assert after == fresh.post("/api/next-token", json={"prompt": "the king"}).json()
    assert after["tokens"] != before["tokens"] and explorer.version == 1
    card = client.get("/api/model").json()
    assert card["training"]["iteration"] == 20 and explorer.version == 1
    assert json.dumps(client.get("/api/runs").json()[0]["probes"][-1]) == "20"


def test_train_serve_starts_the_explorer_beside_the_run_and_stops_on_ctrl_c(tmp_path):
    corpus = write_corpus(tmp_path / "corpus.txt", n_lines=300)
    out = tmp_path / "run"
    flags = [str(flag) for flag in tiny_flags(corpus, out, tokenizer="char", max_iters=20)]
    command = [sys.executable, "-m", "light_llm", "train", *flags, "--serve", "0"]
    source = str(Path(light_llm.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([source, os.environ.get("PYTHONPATH", "")])}
    # Ctrl-C as at a terminal: a test run started in the background by a non-interactive shell
    # ignores SIGINT, and its children inherit that (Python then leaves it ignored)
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=tmp_path,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        url, ended = None, False
        for line in process.stdout:  # the server's address; the run's end (either first)
            url = line.split()[1] if line.startswith("open ") else url
            ended = ended or line.startswith("training has ended")  # the explorer stays up
            if url and ended:
                break
        assert url is not None and ended
        runs = httpx.get(url + "api/runs").json()
        assert runs[0]["probes"] == probe_iterations(out) and runs[0]["probes"][-1] == 20
        process.send_signal(signal.SIGINT)
        try:  # a guard against a hang, not a speed limit
            status = process.wait(timeout=120)
        except subprocess.TimeoutExpired:  # (its output is not read: the explorer may hold it)
            pytest.fail("Ctrl-C did not stop `light-llm train --serve` within 120 s")
        assert status == 0
        with pytest.raises(httpx.TransportError):  # the explorer stopped with it
            httpx.get(url + "api/runs", timeout=5)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_an_encoder_run_says_its_loss_is_over_masked_tokens(runs, tmp_path):
    """A masked-LM run compared beside a GPT's: its objective differs (the page says its loss is
    not comparable), and its records have no bits per byte (the page draws nats per token)."""
    char, _ = runs
    corpus = write_corpus(tmp_path / "corpus.txt", n_lines=300)
    encoder = tmp_path / "encoder"
    flags = tiny_flags(corpus, encoder, tokenizer="wordpiece", vocab_size=90, max_iters=2)
    assert main(["train", "--model", "bert", *flags]) == 0
    client = local_client(create_app(ExplorerModel(char, "test"), [RunHistory(encoder)]))
    listed = client.get("/api/runs").json()
    assert [run["objective"] for run in listed] == ["next-token", "masked-LM"]
    assert all(point[4] is None for point in listed[1]["curves"]["val"])
    assert all(point[4] is not None for point in listed[0]["curves"]["val"])


def test_a_non_finite_evaluation_is_told_apart_from_one_not_recorded(runs, tmp_path):
    """An evaluation whose loss is NaN (weights gone bad) or infinite: its point says so, by
    name ("NaN", "Infinity"), where a value not recorded is null (an encoder's bits per
    byte), so that one bad evaluation does not read as a run without bits per byte; the
    other points keep their numbers, and the answer is strict JSON."""
    char, _ = runs
    copy = tmp_path / "char"
    shutil.copytree(char, copy)
    with (copy / "metrics.jsonl").open("a", encoding="utf-8") as log:  # as the trainer writes
        for iteration, loss in ((11, float("nan")), (12, float("inf"))):
            record = {"kind": "eval", "iter": iteration, "train_loss": 4.0, "val_loss": loss}
            record |= {"train_bpb": 2.0, "val_bpb": loss, "elapsed_s": 9.0}
            log.write(json.dumps(record) + "\n")
    client = local_client(create_app(ExplorerModel(copy, "test"), []))
    answer = client.get("/api/runs")
    json.loads(answer.text, parse_constant=pytest.fail)  # no bare NaN: strict JSON
    val = answer.json()[0]["curves"]["val"]
    assert [point[3:] for point in val[-2:]] == [["NaN", "NaN"], ["Infinity", "Infinity"]]
    recorded = evaluation_records(MetricsLog(char).records())
    assert [point[3:] for point in val[:-2]] == [[r["val_loss"], r["val_bpb"]] for r in recorded]
    assert answer.json()[0]["curves"]["train_eval"][-1][3:] == [4.0, 2.0]
