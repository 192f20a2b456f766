"""benchmarks/recipe_sweep.py: the trainer's step that the speed benchmarks time
(``bench_train.py``, ``bench_precision.py`` and the sweep's equal-time ratios) runs for every
CPU preset, whatever its recipe's clipping."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from recipe_sweep import seconds_per_step, step_timer  # noqa: E402

# qwen3-cpu, the default, does not clip: the case that broke the benchmarks
CPU_PRESETS = {"nanogpt-cpu": 65, "char-cpu": 65, "bpe-cpu": 768, "qwen3-cpu": 768}


@pytest.mark.parametrize("preset", sorted(CPU_PRESETS))
def test_step_timer_runs_each_cpu_preset(preset):
    step = step_timer(["--preset", preset], CPU_PRESETS[preset])
    assert seconds_per_step(step, 1) > 0
