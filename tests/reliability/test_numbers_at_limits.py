"""Class 4 of issue 12: numbers at their limits. A tiny top-p or temperature samples the most
likely token (the limit of the distribution), as greedy decoding does; seeds outside [0, 2^32),
a --max-new-tokens beyond the stated bound and impossible counts are one sentence, exit 2."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from light_llm.generate import sample_next
from light_llm.limits import MAX_NEW_TOKENS, SEED_LIMIT
from light_llm.reference.sampling import sample_next as numpy_sample_next
from tests.reliability.conftest import assert_refused, run_cli, snapshot

TINY = [1e-300, 5e-324, 1e-45, 1e-39]


@pytest.mark.parametrize("tiny", TINY)
@pytest.mark.parametrize("option", ["temperature", "top_p"])
def test_tiny_temperature_or_top_p_is_greedy_in_both_engines(tiny, option):
    logits = torch.randn(4, 50, generator=torch.Generator().manual_seed(1)) * 8
    greedy = logits.argmax(dim=-1)
    kwargs = {"temperature": 1.0, option: tiny}
    assert torch.equal(sample_next(logits, **kwargs), greedy)
    drawn = numpy_sample_next(logits.numpy(), rng=np.random.default_rng(0), **kwargs)
    assert np.array_equal(drawn, greedy.numpy())


def generate(capsys, folder, *flags):
    return run_cli(capsys, "generate", "--checkpoint", folder, "--prompt", "to", *flags)


@pytest.mark.parametrize("tiny", ["1e-300", "5e-324"])
@pytest.mark.parametrize("flag", ["--temperature", "--top-p"])
@pytest.mark.parametrize("engine", ["torch", "numpy"])
def test_cli_tiny_values_answer_like_greedy(capsys, char_checkpoint, tiny, flag, engine):
    common = ["--max-new-tokens", "8", "--no-stream", "--seed", "3", "--engine", engine]
    greedy = generate(capsys, char_checkpoint, "--temperature", "0", *common)
    tiny_run = generate(capsys, char_checkpoint, flag, tiny, *common)
    assert tiny_run[0] == 0 and tiny_run[1] == greedy[1]


BAD_SEEDS = ["-1", str(SEED_LIMIT), str(2**64), str(-(2**70))]


@pytest.mark.parametrize("seed", BAD_SEEDS)
@pytest.mark.parametrize("engine", ["torch", "numpy"])
def test_generate_refuses_a_seed_out_of_range(capsys, char_checkpoint, seed, engine):
    before = snapshot(char_checkpoint)
    code, _, err = generate(capsys, char_checkpoint, "--seed", seed, "--engine", engine)
    assert_refused(code, err, "seed")
    assert snapshot(char_checkpoint) == before


@pytest.mark.parametrize("seed", BAD_SEEDS)
def test_train_and_gradcheck_refuse_a_seed_out_of_range(capsys, tmp_path, corpus, seed):
    code, _, err = run_cli(
        capsys, "train", "--data", corpus, "--out", tmp_path / "o", "--seed", seed
    )
    assert_refused(code, err, "seed")
    assert not (tmp_path / "o").exists()
    code, _, err = run_cli(capsys, "gradcheck", "softmax", "--seed", seed)
    assert_refused(code, err, "seed")


@pytest.mark.parametrize("count", [str(MAX_NEW_TOKENS + 1), "1000000000", "-1"])
def test_max_new_tokens_beyond_its_bound_is_refused(capsys, char_checkpoint, count):
    code, _, err = generate(capsys, char_checkpoint, "--max-new-tokens", count)
    assert_refused(code, err, "--max-new-tokens")
