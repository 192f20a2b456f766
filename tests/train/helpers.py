"""A small corpus and a tiny model configuration that train in seconds on a CPU."""

from __future__ import annotations

import os
import random
from pathlib import Path

import light_llm

WORDS = (
    "the king shall come to rome and speak of love and death tonight my lord "
    "what say you now good friend i will not go there is no more to tell"
).split()


def write_corpus(path: Path, n_lines: int = 1500, seed: int = 0) -> Path:
    """A deterministic plain-text corpus of short speeches (about 40 KB)."""
    rng = random.Random(seed)
    lines = []
    for index in range(n_lines):
        if index % 5 == 0:
            lines.append(rng.choice(["KING:", "LORD:", "FRIEND:"]))
        lines.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 8))))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


TINY = {
    "n_layer": 1,
    "n_head": 2,
    "n_embd": 16,
    "block_size": 16,
    "batch_size": 4,
    "warmup_iters": 2,
    # a floor above 0, so that a test may extend a finished run (--resume --max-iters beyond
    # its end), which the default's floor of 0 refuses: its new iterations would change nothing
    "min_lr": 1e-5,
    "eval_iters": 2,
    "eval_interval": 5,
    "max_iters": 10,
    "sample_tokens": 0,
    "device": "cpu",
    "dtype": "float32",
    "seed": 7,
}


def tiny_flags(corpus: Path, out: Path, **overrides) -> list[str]:
    """``light-llm train`` arguments for the tiny model on ``corpus``, writing to ``out``."""
    settings = {**TINY, "data": corpus, "out": out, **overrides}
    flags = []
    for key, value in settings.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            flags.append(flag)
        elif value is not False and value is not None:
            flags += [flag, str(value)]
    return flags


def record_input_shapes(monkeypatch, model_class) -> tuple[list, list]:
    """Patch ``model_class.forward`` (a GPT of either engine) to note the shape of every input
    it reads: in training mode in the first list, otherwise (evaluations, probes) the second."""
    trained: list[tuple[int, ...]] = []
    evaluated: list[tuple[int, ...]] = []
    forward = model_class.forward

    def recording(self, idx, *args, **kwargs):
        (trained if self.training else evaluated).append(tuple(idx.shape))
        return forward(self, idx, *args, **kwargs)

    monkeypatch.setattr(model_class, "forward", recording)
    return trained, evaluated


def one_thread_environment() -> dict[str, str]:
    """The environment of a subprocess that runs this checkout's light_llm on one thread, as
    a single process (an outer run's torchrun variables left out)."""
    source = str(Path(light_llm.__file__).resolve().parents[1])
    environment = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join([source, os.environ.get("PYTHONPATH", "")]),
    }
    environment.pop("WORLD_SIZE", None)
    return environment
