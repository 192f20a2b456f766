"""metrics.jsonl and its picture: bits per byte by another route, the moving average against
its closed form, and a loss curve drawn from both kinds of record."""

import math

import numpy as np
import pytest

from light_llm.checkpoints.run import evaluation_records, training_records
from light_llm.train.metrics import bits_per_unit, centred_mean, plot_loss_curve


def test_bits_per_byte_is_the_total_information_in_bits_over_the_bytes():
    nats_per_token, n_tokens, n_bytes = 2.5, 300, 1234
    total_bits = n_tokens * nats_per_token * math.log2(math.e)  # log2 x = ln x * log2 e
    assert bits_per_unit(nats_per_token, n_tokens, n_bytes) == pytest.approx(
        total_bits / n_bytes, rel=1e-12
    )
    assert math.isnan(bits_per_unit(1.0, 5, 0))


def test_the_centred_mean_is_each_windows_mean_and_does_not_lag():
    rng = np.random.default_rng(0)
    values = rng.normal(3.0, 0.5, size=200)
    half = round(200 / 20)
    for k in (0, 5, 100, 199):
        window = values[max(0, k - half) : k + half + 1]
        assert centred_mean(list(values), 20)[k] == pytest.approx(window.mean(), rel=1e-12)
    line = list(np.linspace(5.0, 1.0, 300))  # a falling loss: the mean stays on it
    assert centred_mean(line)[5:-5] == pytest.approx(line[5:-5], rel=1e-12)


def test_the_loss_curve_reads_both_kinds_and_older_lines(tmp_path):
    records = [
        {"iter": 0, "train_loss": 4.0, "val_loss": 4.1},  # an evaluation of an older run
        *({"kind": "train", "iter": i, "loss": 4.0 - 0.1 * i} for i in range(0, 10, 2)),
        {"kind": "eval", "iter": 10, "train_loss": 3.0, "val_loss": 3.2},
    ]
    assert [r["iter"] for r in evaluation_records(records)] == [0, 10]
    assert [r["iter"] for r in training_records(records)] == [0, 2, 4, 6, 8]
    path = tmp_path / "loss_curve.png"
    plot_loss_curve(records, path, "tiny")
    assert path.read_bytes().startswith(b"\x89PNG")


def test_the_loss_curve_has_a_bits_per_byte_axis_when_the_log_gives_it(tmp_path, monkeypatch):
    import matplotlib.figure

    factor = 2.0 / (math.log(2) * 3.1)  # tokens / (ln 2 x bytes) of a split
    records = [
        {"kind": "eval", "iter": 0, "train_loss": 4.0, "val_loss": 4.1, "val_bpb": 4.1 * factor},
        {"kind": "eval", "iter": 5, "train_loss": 3.0, "val_loss": 3.2, "val_bpb": 3.2 * factor},
    ]
    axes_seen = []
    real_savefig = matplotlib.figure.Figure.savefig

    def remember_axes(figure, *args, **kwargs):
        axes_seen.extend(child for axes in figure.axes for child in [axes, *axes.child_axes])
        return real_savefig(figure, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", remember_axes)
    plot_loss_curve(records, tmp_path / "with.png", "bpe")
    labels = [axis.get_ylabel() for axis in axes_seen]
    assert "validation bits per byte" in labels
    right = next(axis for axis in axes_seen if axis.get_ylabel() == "validation bits per byte")
    forward, _ = right._functions
    assert forward(3.2) == pytest.approx(3.2 * factor, rel=1e-12)
    axes_seen.clear()
    plot_loss_curve([{**r, "val_bpb": None} for r in records], tmp_path / "without.png")
    assert "validation bits per byte" not in [axis.get_ylabel() for axis in axes_seen]
