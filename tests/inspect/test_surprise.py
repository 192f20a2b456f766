"""Surprise: each token's loss, probability, rank and the model's top guess, against the
model's own cross-entropy over the same windows."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from light_llm.errors import InspectError
from light_llm.inspect import surprise
from light_llm.inspect.text import text_windows
from tests.conftest import VARIANTS
from tests.inspect.conftest import numpy_twin, prompt, shaken_gpt

TEXT = prompt(37, seed=7)  # two windows of 16 and a tail of 4


@pytest.mark.parametrize("variant", ["seed", "recipe"])
def test_each_token_is_scored_as_the_loss_scores_it(variant):
    model = shaken_gpt(torch.float64, **VARIANTS[variant])
    result = surprise(model, TEXT)
    losses, top, ranks = [], [], []
    for inputs, targets, _ in text_windows(TEXT, 16, 10_000):
        logits = model(torch.as_tensor(inputs))[0].detach()
        losses.append(
            F.cross_entropy(
                logits.transpose(1, 2), torch.as_tensor(targets), reduction="none"
            ).reshape(-1)
        )
        top.append(logits.argmax(-1).reshape(-1))
        chosen = logits.gather(-1, torch.as_tensor(targets)[..., None])
        ranks.append((logits > chosen).sum(-1).reshape(-1))
    np.testing.assert_allclose(result.losses, torch.cat(losses).numpy(), atol=1e-10)
    np.testing.assert_allclose(result.probs, np.exp(-result.losses), atol=1e-10)
    assert list(result.top_ids) == torch.cat(top).tolist()
    assert list(result.ranks) == torch.cat(ranks).tolist()
    assert result.mean_loss == pytest.approx(torch.cat(losses).mean().item())
    twin = surprise(numpy_twin(model), TEXT)
    np.testing.assert_allclose(twin.losses, result.losses, atol=1e-9)


def test_an_empty_text_is_one_sentence():
    with pytest.raises(InspectError, match="the text is empty"):
        surprise(shaken_gpt(), [])
