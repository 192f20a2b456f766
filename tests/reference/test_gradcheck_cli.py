"""``light-llm gradcheck``: the list of operations, a table per operation, one-sentence errors."""

from light_llm.cli import main
from light_llm.reference.gradcheck import OPS


def test_without_an_op_it_lists_the_operations(capsys):
    assert main(["gradcheck"]) == 0
    out = capsys.readouterr().out
    for name in OPS:
        assert f"  {name} " in out


def test_an_op_prints_one_row_per_parameter(capsys):
    assert main(["gradcheck", "layernorm"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["op", "parameter", "shape"]
    rows = [line.split() for line in lines[1:-1]]
    assert [row[1] for row in rows] == ["x", "weight", "bias"]
    assert all(row[-1] == "ok" and float(row[-2]) <= 1e-6 for row in rows)
    assert lines[-1] == "all 3 gradients within 1e-06 (float64)."


def test_float32_shows_rounding(capsys):
    assert main(["gradcheck", "softmax", "--dtype", "float32"]) == 0
    row = capsys.readouterr().out.splitlines()[1].split()
    assert 1e-9 < float(row[-2]) <= 1e-2


def test_unknown_op_is_one_line_and_exit_2(capsys):
    assert main(["gradcheck", "convolution"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("light-llm gradcheck: error: unknown operation 'convolution'")
    assert "attention" in captured.err and "Traceback" not in captured.err
    assert len(captured.err.strip().splitlines()) == 1
