"""The length a new run takes on this machine (light_llm.train.prepare.with_machine_length):
recorded as --max-iters, and said to be the default's when the run's model or batch is not."""

import pytest
import torch

from light_llm.train.config import (
    LARGE_TEXT_VOCAB,
    LARGE_VOCAB_STEP_RATIO,
    TRAINED_TOKENIZER_VOCAB,
    CpuKind,
    TrainConfig,
)
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


@pytest.mark.parametrize(
    ("kind", "dtype"),
    [(CpuKind("AVX2"), "float32"), (CpuKind("AVX512", True, True), "bfloat16")],
)
def test_a_run_over_the_large_texts_vocabulary_takes_the_count_over_its_steps_ratio(
    monkeypatch, kind, dtype
):
    """A default run whose BPE learned 1536 ids from a large text takes the count fitted over
    768 ids divided by the two steps' ratio on its kind (as much time), says so, and is the
    default's run (not told its model differs); one over 768 ids keeps the count."""
    monkeypatch.setattr("light_llm.train.prepare.this_cpu", lambda: kind)
    given = TrainConfig(dtype=dtype)
    cfg = given.resolve()
    lengths = {}
    for vocab_size in (TRAINED_TOKENIZER_VOCAB["bpe"], LARGE_TEXT_VOCAB):
        model_config = cfg.model_config(vocab_size)
        _, run, note = with_machine_length(
            given, cfg, model_config, torch.device("cpu"), dtype, DistributedContext()
        )
        lengths[vocab_size] = run.max_iters, note
    (counted, _), (scaled, note) = lengths.values()
    ratio = LARGE_VOCAB_STEP_RATIO[kind.count_key(dtype)]
    assert scaled == round(counted / ratio) < counted
    assert f"a step takes {ratio:.3f}x as long, so {scaled} iterations" in note
    assert "differs" not in note
    # a --vocab-size asked for is the run's own choice: the default's count, and said to differ
    asked = TrainConfig(dtype=dtype, vocab_size=LARGE_TEXT_VOCAB)
    _, run, note = with_machine_length(
        asked,
        asked.resolve(),
        cfg.model_config(LARGE_TEXT_VOCAB),
        torch.device("cpu"),
        dtype,
        DistributedContext(),
    )
    assert run.max_iters == counted and "differs" in note
