"""The length a new run takes on this machine (light_llm.train.prepare.with_machine_length):
recorded as --max-iters, and said to be the default's when the run's model or batch is not."""

import pytest
import torch

from light_llm.train.config import CpuKind, TrainConfig
from light_llm.train.distributed import DistributedContext
from light_llm.train.prepare import with_machine_length


@pytest.mark.parametrize(
    ("flags", "differs"),
    [
        ({}, False),
        ({"seed": 2, "data": "some.txt"}, False),  # neither changes a step
        ({"n_layer": 2}, True),
        ({"n_embd": 64}, True),
        ({"batch_size": 16}, True),
        ({"block_size": 128}, True),
        ({"grad_accum": 2}, True),
        ({"tokenizer": "char"}, True),  # 65-odd ids, not 768: a cheaper head
    ],
)
def test_the_length_note_says_when_the_run_is_not_the_default_it_was_fitted_for(
    monkeypatch, flags, differs
):
    """On the AVX2 kind (the recipe's 1200 float32 iterations) every new default run takes
    the fitted count, and one whose model or batch differs from the default's is told that
    the count is the default's, so its time is not nanoGPT's."""
    monkeypatch.setattr("light_llm.train.prepare.this_cpu", lambda: CpuKind("AVX2"))
    given = TrainConfig(**flags, dtype="float32")
    cfg = given.resolve()
    vocab_size = 65 if flags.get("tokenizer") == "char" else 768
    model_config = cfg.model_config(vocab_size)
    cpu = torch.device("cpu")
    given, cfg, note = with_machine_length(
        given, cfg, model_config, cpu, "float32", DistributedContext()
    )
    assert note.startswith("1200 iterations: float32 on this CPU (AVX2)")
    assert cfg.max_iters == 1200
    assert ("That length is the default's: this run's model or batch differs" in note) is differs
