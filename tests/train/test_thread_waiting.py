"""light-llm train sets OpenMP's waiting policy before torch loads (thread_waiting)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from light_llm.train.thread_waiting import PASSIVE, WAIT_POLICY, wait_passively

SRC = Path(__file__).resolve().parents[2] / "src"
PROBE = (
    "import os; from light_llm.cli import main; "
    "code = main(['train', '--max-iters', '-5']); "
    "print(os.environ.get('OMP_WAIT_POLICY'), code)"
)


@pytest.mark.parametrize(("given", "expected"), [(None, PASSIVE), ("ACTIVE", "ACTIVE")])
def test_train_sets_the_passive_policy_unless_given_one(given, expected):
    env = {k: v for k, v in os.environ.items() if k != WAIT_POLICY}
    if given:
        env[WAIT_POLICY] = given
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True
    )
    policy, code = done.stdout.split()
    assert (policy, code) == (expected, "2")  # a bad --max-iters: one sentence, exit 2


def test_too_late_once_torch_is_loaded():
    import torch  # noqa: F401  (loaded: libgomp has read its environment)

    environ: dict[str, str] = {}
    assert not wait_passively(environ) and environ == {}
