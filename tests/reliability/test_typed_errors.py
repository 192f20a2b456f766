"""Class 6 of issue 12: the Python API raises light-llm's typed errors (subclasses of
LightLLMError with one sentence), never IndexError / TypeError from inside torch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from light_llm import GPT, ModelConfig, preset
from light_llm.checkpoints import save
from light_llm.errors import LightLLMError
from light_llm.generate import generate
from light_llm.reference.model import NumpyGPT
from light_llm.reference.sampling import generate as numpy_generate

CONFIG = dict(vocab_size=70, block_size=16, n_layer=1, n_head=2, n_embd=16)
BAD_IDS = {
    "beyond the vocabulary": torch.tensor([[999]]),
    "the last id plus one": torch.tensor([[70]]),
    "negative": torch.tensor([[-1]]),
    "float": torch.tensor([[1.5]]),
    "bool": torch.tensor([[True]]),
    "one dimension": torch.tensor([3]),
}


@pytest.mark.parametrize("ids", BAD_IDS.values(), ids=BAD_IDS.keys())
def test_bad_token_ids_are_a_typed_error_in_both_engines(ids):
    model = GPT(ModelConfig(**CONFIG))
    for call in (lambda: generate(model, ids, 3), lambda: model(ids)):
        with pytest.raises(LightLLMError) as raised:
            call()
        assert "\n" not in str(raised.value)
    numpy_model = NumpyGPT(ModelConfig(**CONFIG))
    if ids.dim() == 2:
        with pytest.raises(LightLLMError):
            numpy_generate(numpy_model, np.asarray(ids), 3)


CALLS = {
    "GPT(None)": lambda: GPT(None),
    "GPT(a dict)": lambda: GPT(dict(CONFIG)),
    "preset(name, bogus=1)": lambda: preset("char-cpu", bogus=1),
    "preset(42)": lambda: preset(42),
    "ModelConfig(dropout='0.1')": lambda: ModelConfig(dropout="0.1"),
    "NumpyGPT(config, dtype='int8')": lambda: NumpyGPT(ModelConfig(**CONFIG), dtype="int8"),
    "NumpyGPT(config, seed=-1)": lambda: NumpyGPT(ModelConfig(**CONFIG), seed=-1),
    "save(None, folder)": lambda: save(None, "unused-folder"),
    "generate(model, list)": lambda: generate(GPT(ModelConfig(**CONFIG)), [[1, 2]], 2),
}


@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
def test_wrong_arguments_are_a_typed_error(call):
    with pytest.raises(LightLLMError) as raised:
        call()
    assert "\n" not in str(raised.value)
