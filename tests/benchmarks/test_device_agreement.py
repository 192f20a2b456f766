"""benchmarks/device_agreement.py: two devices' JSON outputs compared value by value (the
largest relative difference of the numbers, the other values counted where they differ), and a
failing command reported by its error line; no GPU to compare with is one sentence."""

import json
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from device_agreement import compare, leaves, light_llm, main  # noqa: E402


def test_leaves_name_every_scalar_by_its_path():
    value = {"tokens": ["a", "b"], "p": {"top": [[0.5]]}}
    assert dict(leaves(value)) == {".tokens[0]": "a", ".tokens[1]": "b", ".p.top[0][0]": 0.5}


def test_the_same_output_differs_nowhere():
    out = json.dumps({"ids": [3, 4], "values": [0.25, -7.5]})
    assert compare(out, out) == (
        "4 values, largest relative difference 0.0e+00, 0 other values differ []"
    )


def test_the_largest_relative_difference_and_the_other_values_that_differ():
    a = json.dumps({"ids": [3, 4], "values": [0.5, -8.0], "name": "L0H1"})
    b = json.dumps({"ids": [3, 5], "values": [0.6, -10.0], "name": "L0H1"})
    # |0.6 - 0.5| / max(1, 0.5) = 0.1 and |-10 + 8| / 8 = 0.25: the larger is reported
    assert compare(a, b) == (
        "5 values, largest relative difference 2.5e-01, 1 other values differ ['.ids[1]']"
    )


def test_different_fields_are_named():
    assert compare('{"a": 1.0}', '{"b": 1.0}') == "different fields: ['.a', '.b']"


def test_a_failing_command_gives_its_error_line(tmp_path):
    missing = str(tmp_path / "no-such-run")
    out = light_llm(["inspect", "lens", "--checkpoint", missing, "--prompt", "a"], "cpu")
    assert out.startswith("error: light-llm inspect: error: ") and missing in out


def test_no_gpu_to_compare_with_is_one_sentence_and_exit_2(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(sys, "argv", ["device_agreement.py", "--checkpoint", str(tmp_path)])
    with pytest.raises(SystemExit) as stop:
        main()
    assert stop.value.code == 2
    assert capsys.readouterr().err == (
        "device_agreement.py: PyTorch sees no CUDA GPU here to compare with.\n"
    )
