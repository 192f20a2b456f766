"""benchmarks/default_vs_nanogpt.py: its commands pinned to the CPUs of ``--cpus`` with as
many threads, as the child process itself reports them, and ``--cpus`` refused in one
sentence where it names a CPU this process may not use."""

import argparse
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from default_vs_nanogpt import cpu_list, run_child  # noqa: E402

REPORT = "import os; print(sorted(os.sched_getaffinity(0)), os.environ.get('OMP_NUM_THREADS'))"


def test_a_pinned_child_runs_on_those_cpus_with_as_many_threads(tmp_path):
    cpu = min(os.sched_getaffinity(0))
    done = run_child([sys.executable, "-c", REPORT], tmp_path, None, [cpu])
    assert done.returncode == 0 and done.stdout.split() == [f"[{cpu}]", "1"]
    # unpinned: the parent's CPUs, and its own thread setting
    done = run_child([sys.executable, "-c", REPORT], tmp_path, None, None)
    expected = str(sorted(os.sched_getaffinity(0))).replace(" ", "")
    assert done.stdout.replace(" ", "").startswith(expected)


def test_cpus_that_this_process_may_not_use_are_refused(capsys):
    parser = argparse.ArgumentParser(prog="default_vs_nanogpt.py")
    allowed = sorted(os.sched_getaffinity(0))
    assert cpu_list(parser, ",".join(map(str, allowed))) == allowed
    assert cpu_list(parser, None) is None
    for given in (str(max(allowed) + 1), "0,x"):
        with pytest.raises(SystemExit) as stopped:
            cpu_list(parser, given)
        assert stopped.value.code == 2
        (line,) = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
        assert "--cpus" in line
