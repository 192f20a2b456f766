"""Direct logit attribution: the parts add up to the logit, and a difference of logits is the
difference of the parts."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from light_llm.errors import InspectError
from light_llm.inspect import direct_logit_attribution
from tests.conftest import VARIANTS
from tests.inspect.conftest import PRE_LN_VARIANTS, numpy_twin, prompt, shaken_gpt


@pytest.mark.parametrize("variant", sorted(PRE_LN_VARIANTS))
def test_the_attributions_add_up_to_the_logit(variant):
    model = shaken_gpt(torch.float32, **VARIANTS[variant])
    ids = prompt()
    attribution = direct_logit_attribution(model, ids, 4)
    own = model(torch.as_tensor(ids[None]))[0][0, -1, 4].item()
    assert attribution.output_logit == pytest.approx(own, abs=1e-5)  # float32, heads split
    assert attribution.total == pytest.approx(attribution.logit, abs=1e-5)
    if model.config.logit_softcap is None:
        assert attribution.logit == pytest.approx(own, abs=1e-5)
    else:  # the model outputs the capped logit c tanh(z / c) of the attributed z
        cap = model.config.logit_softcap
        assert cap * np.tanh(attribution.logit / cap) == pytest.approx(own, abs=1e-5)
    n = model.config.n_layer
    assert attribution.heads.shape == (n, model.config.n_head)
    assert attribution.values[attribution.names.index("L1H0")] == attribution.heads[1, 0]


def test_a_logit_difference_is_the_difference_of_the_attributions():
    model = shaken_gpt(torch.float64)
    ids = prompt()
    both = direct_logit_attribution(model, ids, 4, versus=9, position=5)
    first = direct_logit_attribution(model, ids, 4, position=5)
    second = direct_logit_attribution(model, ids, 9, position=5)
    np.testing.assert_allclose(both.values, first.values - second.values, atol=1e-12)
    logits = model(torch.as_tensor(ids[None]))[0][0, 5].detach().numpy()
    assert both.total == pytest.approx(logits[4] - logits[9], abs=1e-10)


def test_both_engines_attribute_alike():
    model = shaken_gpt(torch.float64, **VARIANTS["recipe"])
    ours = direct_logit_attribution(model, prompt(), 3, versus=1)
    twin = direct_logit_attribution(numpy_twin(model), prompt(), 3, versus=1)
    assert ours.names == twin.names
    np.testing.assert_allclose(ours.values, twin.values, atol=1e-9)


@pytest.mark.parametrize(
    ("variant", "options", "message"),
    [
        ("post-ln", {}, "needs a pre-LN model"),
        ("seed", {"position": 11}, "position 11 is out of range: .* run from 0 to 10"),
        ("seed", {"position": -12}, r"position -12 is out of range: .* -11 to -1 from the end"),
        ("seed", {"versus": -1}, "token to compare with -1 is out of range"),
        ("seed", {"versus": 2}, "the token to compare with must differ from the token"),
    ],
)
def test_bad_input_is_one_sentence(variant, options, message):
    with pytest.raises(InspectError, match=message):
        direct_logit_attribution(shaken_gpt(**VARIANTS[variant]), prompt(), 2, **options)
