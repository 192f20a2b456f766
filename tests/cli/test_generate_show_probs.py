"""``light-llm generate --show-probs``: the distribution of every step, checked against the
model run on the whole text so far without the KV cache."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from light_llm.checkpoints import load, load_tokenizer, save
from light_llm.cli import main
from light_llm.config import ModelConfig
from light_llm.generate import filter_logits
from light_llm.models.gpt import GPT
from light_llm.tokenizers import CharTokenizer

PROMPT = "to be"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    tokenizer = CharTokenizer.from_text("To be, or not to be")
    torch.manual_seed(0)
    config = ModelConfig(
        vocab_size=tokenizer.vocab_size, block_size=12, n_layer=2, n_head=2, n_embd=12
    )
    folder = tmp_path_factory.mktemp("run") / "checkpoint"
    save(GPT(config), folder, tokenizer=tokenizer)
    return folder


def test_each_steps_probabilities_before_and_after_the_filters(capsys, checkpoint):
    argv = [
        "generate",
        "--checkpoint",
        str(checkpoint),
        "--prompt",
        PROMPT,
        "--seed",
        "4",
        "--max-new-tokens",
        "9",
        "--temperature",
        "0.7",
        "--top-p",
        "0.8",
        "--json",
        "--show-probs",
        "4",
    ]
    assert main(argv) == 0
    completion = json.loads(capsys.readouterr().out)["completions"][0]
    steps = completion["steps"]
    assert "".join(step["token"] for step in steps) == completion["completion"]
    model, tokenizer = load(checkpoint), load_tokenizer(checkpoint)
    ids = tokenizer.encode(PROMPT)
    for step in steps:
        with torch.no_grad():
            logits, _ = model(torch.tensor([ids[-12:]]))
        logits = logits[:, -1].float()
        before = torch.softmax(logits, -1)[0]
        after = torch.softmax(filter_logits(logits, 0.7, None, 0.8), -1)[0]
        top = [candidate["id"] for candidate in step["top"]]
        assert top == before.topk(4).indices.tolist()
        np.testing.assert_allclose([c["probability"] for c in step["top"]], before[top], rtol=1e-5)
        np.testing.assert_allclose(
            [c["filtered_probability"] for c in step["top"]], after[top], rtol=1e-5, atol=1e-7
        )
        assert step["probability"] == pytest.approx(after[step["id"]].item(), rel=1e-5)
        ids.append(step["id"])


def test_the_table_and_the_same_text_as_without(capsys, checkpoint):
    base = [
        "generate",
        "--checkpoint",
        str(checkpoint),
        "--prompt",
        PROMPT,
        "--seed",
        "2",
        "--max-new-tokens",
        "6",
    ]
    assert main(base) == 0
    plain = capsys.readouterr().out
    assert main([*base, "--show-probs"]) == 0
    shown = capsys.readouterr().out
    lines = shown.splitlines()
    assert lines[0].startswith("step") and "top 5" in lines[0]
    assert len([line for line in lines if line[:4].strip().isdigit()]) == 6
    assert shown.endswith(plain) and plain.startswith(PROMPT)  # the same sampled text


def test_more_than_the_vocabulary_shows_the_whole_vocabulary(capsys, checkpoint):
    vocab = load_tokenizer(checkpoint).vocab_size
    base = ["generate", "--checkpoint", str(checkpoint), "--prompt", PROMPT, "--json"]
    assert main([*base, "--max-new-tokens", "2", "--show-probs", str(10 * vocab)]) == 0
    steps = json.loads(capsys.readouterr().out)["completions"][0]["steps"]
    assert [len(step["top"]) for step in steps] == [vocab, vocab]
    assert main([*base[:-1], "--max-new-tokens", "1", "--show-probs", str(10 * vocab)]) == 0
    assert f"top {vocab}:" in capsys.readouterr().out.splitlines()[0]


def test_bad_show_probs(capsys, checkpoint):
    base = ["generate", "--checkpoint", str(checkpoint), "--prompt", PROMPT]
    assert main([*base, "--show-probs", "0"]) == 2
    assert "--show-probs must be 1 or more" in capsys.readouterr().err
    assert main([*base, "--show-probs", "--engine", "numpy"]) == 2
    assert "torch engine" in capsys.readouterr().err
