"""``light-llm train --processes N``: the command starts N processes as torchrun would, and
they train the run one process trains (losses to 1e-6, as tests/train/test_distributed.py
checks torchrun's); what it cannot use is one sentence before any process starts; an error
every process meets is said once; a SIGINT or SIGTERM to the command stops every process at one
iteration, saved, with the command that continues it."""

import os
import signal
import subprocess
import sys
import time

import pytest

from light_llm.checkpoints.probes import probe_iterations
from light_llm.checkpoints.run import MetricsLog, read_trainer_state, training_records
from light_llm.cli import main, train_processes
from tests.train.helpers import TINY, one_thread_environment, tiny_flags, write_corpus

SETTINGS = {"grad_accum": 2, "max_iters": 4, "eval_interval": 2, "log_interval": 1}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("corpus") / "corpus.txt")


def light_llm_command(*flags, **popen) -> subprocess.Popen:
    command = [sys.executable, "-m", "light_llm", "train", *flags]
    return subprocess.Popen(command, env=one_thread_environment(), text=True, **popen)


def finished(process: subprocess.Popen, timeout: float = 300) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=timeout)  # a hang guard, not a speed limit
    return process.returncode, out, err


def test_two_processes_train_the_run_one_process_trains(corpus, tmp_path):
    single, two = tmp_path / "single", tmp_path / "two"
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    code, _, err = finished(light_llm_command(*tiny_flags(corpus, single, **SETTINGS), **pipes))
    assert code == 0, err[-2000:]
    flags = [*tiny_flags(corpus, two, **SETTINGS), "--processes", "2"]
    code, out, err = finished(light_llm_command(*flags, **pipes))
    assert code == 0, err[-2000:]
    assert "2 processes averaging gradients in shared memory" in out
    assert out.count("training a ") == 1  # process 1 stayed silent
    one, many = (training_records(MetricsLog(path).records()) for path in (single, two))
    assert [r["iter"] for r in many] == [r["iter"] for r in one] == [0, 1, 2, 3]
    for a, b in zip(one, many, strict=True):
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-6)
    assert len(read_trainer_state(two / "checkpoint")["rng"]) == 2  # a generator state each


def test_a_run_resumed_at_a_probed_evaluation_goes_on_as_in_one_process(corpus, tmp_path):
    """The checkpoint of an evaluation is also a probe's iteration (here every second), which
    only process 0 can see in the folder: resumed there, the processes agree that it is taken
    (before, process 1 waited for a probe that process 0 did not take, for ever). The resumed
    run ends where the same run resumed in one process ends."""
    outs = {"single": tmp_path / "single", "two": tmp_path / "two"}
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    for iterations in (4, 6):  # 4 iterations (evaluated and probed at 4), then extended to 6
        for name, out in outs.items():
            settings = {**SETTINGS, "max_iters": iterations, "probe_interval": 2}
            flags = tiny_flags(corpus, out, **settings)
            flags += ["--resume"] if iterations == 6 else []
            flags += ["--processes", "2"] if name == "two" else []
            code, _, err = finished(light_llm_command(*flags, **pipes))
            assert code == 0, err[-2000:]
    assert probe_iterations(outs["two"]) == probe_iterations(outs["single"]) == [0, 2, 4, 6]
    one, many = (training_records(MetricsLog(out).records()) for out in outs.values())
    assert [r["iter"] for r in many] == [r["iter"] for r in one] == [0, 1, 2, 3, 4, 5]
    for a, b in zip(one, many, strict=True):
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-6)


@pytest.mark.parametrize(
    ("flags", "cores", "said"),
    [
        (
            ["--processes", "2"],  # TINY's batch of 4 sequences, in one micro-batch
            2,
            "--processes 2 shares each step's micro-batches between the processes, so "
            "--grad-accum (1 here) must be a multiple of 2; the same 4 sequences a step in 2 "
            "processes: --batch-size 2 --grad-accum 2.",
        ),
        (
            ["--processes", "2", "--batch-size", "3"],
            2,
            "--processes 2 shares each step's micro-batches between the processes, so "
            "--grad-accum (1 here) must be a multiple of 2; the same 3 sequences a step in 2 "
            "processes: --batch-size B --grad-accum G with B x G = 3.",
        ),
        (["--processes", "3", "--grad-accum", "3"], 2, "--processes 3 is more than the 2 cores"),
        (["--processes", "0"], 2, "--processes must be 1 or more, got 0."),
        (
            ["--processes", "2", "--grad-accum", "2", "--engine", "numpy"],
            2,
            "--processes trains with PyTorch's data parallelism; the numpy engine runs in one",
        ),
    ],
)
def test_what_the_processes_cannot_do_is_one_sentence_before_any_starts(
    corpus, tmp_path, capsys, monkeypatch, flags, cores, said
):
    assert TINY["batch_size"] == 4  # (the sentences count TINY's batch)
    monkeypatch.setattr(train_processes, "usable_cores", lambda: cores)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    started = []
    monkeypatch.setattr(train_processes, "run_processes", lambda *a: started.append(a) or 0)
    out = tmp_path / "out"
    assert main(["train", *tiny_flags(corpus, out), *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"light-llm train: error: {said}") and err.count("\n") == 1
    assert not started and not out.exists()


def test_processes_other_than_torchruns_are_refused(corpus, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "3")
    out = tmp_path / "out"
    assert main(["train", *tiny_flags(corpus, out, grad_accum=2), "--processes", "2"]) == 2
    err = capsys.readouterr().err
    assert "--processes 2 under torchrun's 3 processes: give the number of processes" in err
    assert not out.exists()


def test_an_error_every_process_meets_is_said_once(tmp_path):
    flags = ["--data", str(tmp_path / "missing.txt"), "--out", str(tmp_path / "out")]
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    code, _, err = finished(
        light_llm_command(*flags, "--grad-accum", "2", "--processes", "2", **pipes)
    )
    assert code == 2
    assert (
        err == f"light-llm train: error: corpus file {tmp_path / 'missing.txt'} does not exist.\n"
    )


@pytest.mark.parametrize(
    ("stop", "to_group"),
    [
        (signal.SIGTERM, False),  # kill, timeout, a service manager
        (signal.SIGINT, False),  # kill -INT PID, a notebook's interrupt
        (signal.SIGINT, True),  # the terminal's Ctrl-C, sent to the foreground process group
    ],
)
def test_a_stop_signal_stops_every_process_at_one_iteration_and_saves(
    corpus, tmp_path, stop, to_group
):
    """Sent to the command (or, as a terminal sends Ctrl-C, to its process group), the signal
    reaches every process once: each stops at the same iteration and saves (a SIGINT that
    reached them twice would quit without saving; one sent to the command alone, before,
    reached none)."""
    out = tmp_path / "out"
    flags = [*tiny_flags(corpus, out, **{**SETTINGS, "max_iters": 100_000, "eval_interval": 50})]
    process = light_llm_command(
        *flags,
        "--processes",
        "2",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        process_group=0,  # a foreground group of its own, as a shell gives a command
    )
    deadline = time.monotonic() + 240  # a hang guard, not a speed limit
    while not (out / "checkpoint" / "trainer_state.json").is_file():  # the first evaluation
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.2)
    if to_group:
        os.killpg(process.pid, stop)
    else:
        process.send_signal(stop)  # to this command alone: it passes it on
    code, _, err = finished(process)
    assert code == 130
    stopped = read_trainer_state(out / "checkpoint")["iteration"]
    assert 0 < stopped < 100_000
    assert f"stopped at iteration {stopped}; " in err
    assert f"Continue with: light-llm train --resume --out {out} --processes 2" in err


@pytest.mark.parametrize(("given", "budget"), [("3", 3), (None, 8), ("0", 8), ("many", 8)])
def test_the_processes_share_the_threads_given_else_the_cores(monkeypatch, given, budget):
    monkeypatch.setattr(train_processes, "usable_cores", lambda: 8)
    if given is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", given)
    assert train_processes.thread_budget() == budget


def test_a_resumed_run_whose_batch_does_not_split_is_told_to_keep_it(corpus, tmp_path, capsys):
    """A resume keeps the saved run's batch, so the sentence does not offer another one."""
    out = tmp_path / "out"
    assert main(["train", *tiny_flags(corpus, out, max_iters=2, eval_interval=2)]) == 0
    capsys.readouterr()
    flags = [*tiny_flags(corpus, out, max_iters=4), "--resume", "--processes", "2"]
    assert main(["train", *flags, "--batch-size", "2", "--grad-accum", "2"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "light-llm train: error: --processes 2 shares each step's micro-batches between the "
        "processes, and the saved run has 1 a step (--grad-accum 1), which a resume keeps: "
        "resume it in one process.\n"
    )
    assert read_trainer_state(out / "checkpoint")["iteration"] == 2  # nothing trained


def test_a_resume_with_nothing_to_resume_says_so_before_the_batch(corpus, tmp_path, capsys):
    """--resume --processes 2 on a folder with no checkpoint: the resume's own sentence, not
    the batch's (whose advice, followed, would only lead to it)."""
    out = tmp_path / "empty"
    out.mkdir()
    assert main(["train", *tiny_flags(corpus, out), "--resume", "--processes", "2"]) == 2
    assert capsys.readouterr().err == (
        f"light-llm train: error: --resume found no checkpoint in {out} to continue from.\n"
    )
    assert list(out.iterdir()) == []
