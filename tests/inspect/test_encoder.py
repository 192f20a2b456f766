"""Looking inside an encoder with its masked-LM head: the instrumented forward gives its own
logits, the lens after the last layer is its masked-LM output, ablation measures its masked-LM
loss (checked against the encoder's own loss with the ablated weights zeroed), and what needs a
GPT says so."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from light_llm.checkpoints import load_tokenizer
from light_llm.errors import InspectError
from light_llm.inspect import (
    ablate_prompt,
    ablate_text,
    activation_patching,
    direct_logit_attribution,
    head_importance,
    head_roles,
    lens_over_text,
    logit_lens,
    surprise,
    top_activations,
)
from light_llm.inspect.instrumented import run_instrumented
from light_llm.inspect.text import masked_windows
from light_llm.models.bert import BertEncoder, EncoderConfig
from light_llm.tokenizers.bert import packaged_bert_folder

SHAPES = {
    "bert": {},
    "rotary": {"positions": "rotary"},
    "pre-ln-rmsnorm": {"block_order": "pre", "norm": "rmsnorm"},
}


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(packaged_bert_folder())


def shaken_encoder(vocab_size: int, **overrides) -> BertEncoder:
    torch.manual_seed(0)
    config = EncoderConfig(
        vocab_size=vocab_size,
        block_size=16,
        n_layer=2,
        n_head=2,
        n_embd=16,
        dropout=0.0,
        **overrides,
    )
    model = BertEncoder(config).double().eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.3 * torch.randn_like(parameter))
    return model


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_forward_and_the_lens_are_the_encoders_own(shape, tokenizer):
    model = shaken_encoder(tokenizer.vocab_size, **SHAPES[shape])
    ids = np.array(tokenizer.encode_plus("to be or not to [MASK]")["input_ids"])
    own = model(torch.as_tensor(ids[None]))[0]
    trace = run_instrumented(model, torch.as_tensor(ids[None]), record=True)
    assert torch.allclose(trace.logits, own, atol=1e-10)
    lens = logit_lens(model, ids, keep_log_probs=True)
    np.testing.assert_allclose(
        lens.log_probs[-1], torch.log_softmax(own[0], -1).detach().numpy(), atol=1e-10
    )
    assert list(lens.target_ids) == list(ids)  # each position's own token


def masked_lm_loss(model, batches) -> float:
    total, count = 0.0, 0
    for inputs, labels, _ in batches:
        _, loss = model(torch.as_tensor(inputs), torch.as_tensor(labels))
        n = int((labels != -1).sum())
        total += loss.item() * n
        count += n
    return total / count


def test_ablation_measures_the_masked_lm_loss(tokenizer):
    model = shaken_encoder(tokenizer.vocab_size)
    text = np.array(tokenizer.encode("to be, or not to be, that is the question: " * 6))
    result = ablate_text(model, text, ["L1H0"], tokenizer=tokenizer)
    batches = list(masked_windows(text, 16, tokenizer))
    assert result.loss == pytest.approx(masked_lm_loss(model, batches), abs=1e-6)  # its float32
    zeroed = copy.deepcopy(model)
    with torch.no_grad():
        zeroed.h[1].attn.c_proj.weight[:, :8] = 0.0
    assert result.ablated_loss == pytest.approx(masked_lm_loss(zeroed, batches), abs=1e-6)
    table = head_importance(model, text, tokenizer=tokenizer)
    assert table.heads[1, 0] == pytest.approx(result.delta_loss, abs=1e-10)


def test_an_encoders_prompt_ablation_asks_for_its_masks_position(tokenizer):
    """The default position, the last, is an encoder's [SEP]: ablate_prompt followed it in
    silence where its docstring promised the [MASK]'s."""
    model = shaken_encoder(tokenizer.vocab_size)
    ids = np.array(tokenizer.encode_plus("to be or [MASK] to be")["input_ids"])
    with pytest.raises(InspectError, match="an encoder predicts at its \\[MASK\\]: give position="):
        ablate_prompt(model, ids, ["L0H1"])


def test_prompt_mean_ablation_takes_the_mean_over_the_prompt_as_given(tokenizer):
    model = shaken_encoder(tokenizer.vocab_size)
    ids = np.array(tokenizer.encode_plus("to be or [MASK] to be")["input_ids"])
    t = int(np.flatnonzero(ids == tokenizer.mask_id)[0])
    captured = []  # head 1 of layer 0: its part of W_O's input, every position of the prompt
    projection = model.h[0].attn.c_proj
    handle = projection.register_forward_pre_hook(lambda _, args: captured.append(args[0]))
    with torch.no_grad():
        model(torch.as_tensor(ids[None]))
    handle.remove()
    mean = (captured[0][0, :, 8:] @ projection.weight[:, 8:].T).mean(0)  # (d,)
    result = ablate_prompt(model, ids, ["L0H1"], method="mean", position=t)
    zeroed = copy.deepcopy(model)
    with torch.no_grad():
        zeroed.h[0].attn.c_proj.weight[:, 8:] = 0.0
        zeroed.h[0].attn.c_proj.bias += mean
        expected = torch.softmax(zeroed(torch.as_tensor(ids[None]))[0][0, t], -1).numpy()
    np.testing.assert_allclose(result.ablated_probs, expected, atol=1e-10)


@pytest.mark.parametrize(
    "analysis",
    [
        lambda model, ids, tokenizer: ablate_text(model, ids, ["L0H0"], tokenizer=tokenizer),
        lambda model, ids, tokenizer: head_importance(model, ids, tokenizer=tokenizer),
        lambda model, ids, tokenizer: lens_over_text(model, ids, tokenizer=tokenizer),
    ],
)
def test_a_text_with_nothing_to_mask_is_one_sentence(analysis, tokenizer):
    model = shaken_encoder(tokenizer.vocab_size)
    ids = np.array(tokenizer.encode("[MASK] [MASK] [MASK]"))  # special: never chosen
    assert all(
        (labels == -1).all() for _, labels, _ in masked_windows(ids, 16, tokenizer)
    )  # no loss to measure
    with pytest.raises(InspectError, match="no token of the text was chosen to be masked"):
        analysis(model, ids, tokenizer)


@pytest.mark.parametrize("length", [2, 14, 15, 29, 30])
def test_the_masked_windows_hold_every_token_of_the_text(length, tokenizer):
    ids = np.array(tokenizer.encode("to be, or not to be, that is the question: " * 6))[:length]
    held = []
    for inputs, _, starts in masked_windows(ids, 16, tokenizer):
        for row, start in zip(inputs, starts, strict=True):
            assert row[0] == tokenizer.cls_id and row[-1] == tokenizer.sep_id
            held.extend(range(start, start + len(row) - 2))
    assert held == list(range(length))  # windows of 14 ids between [CLS] and [SEP]


def test_a_units_values_are_read_as_the_encoder_reads_a_text(tokenizer):
    model = shaken_encoder(tokenizer.vocab_size)
    ids = np.array(tokenizer.encode("to be, or not to be, that is the question: " * 2))
    captured = []  # unit 5 of layer 1, from the encoder's own forward on [CLS] window [SEP]
    projection = model.h[1].mlp.c_proj
    handle = projection.register_forward_pre_hook(lambda _, args: captured.append(args[0]))
    with torch.no_grad():
        for start in range(0, len(ids), 14):
            example = [tokenizer.cls_id, *ids[start : start + 14], tokenizer.sep_id]
            model(torch.as_tensor([example]))
    handle.remove()
    values = torch.cat([hidden[0, 1:-1, 5] for hidden in captured]).numpy()
    assert len(values) == len(ids)
    result = top_activations(model, ids, 1, 5, k=len(ids), tokenizer=tokenizer)
    np.testing.assert_allclose(result.activations, values[result.positions], atol=1e-10)
    assert sorted(result.positions) == list(range(len(ids)))
    with pytest.raises(InspectError, match="needs the encoder's WordPiece tokenizer"):
        top_activations(model, ids, 1, 5)


def test_what_needs_a_gpt_says_so(tokenizer):
    model = shaken_encoder(tokenizer.vocab_size)
    ids = np.array(tokenizer.encode_plus("to be or not")["input_ids"])
    calls = [
        lambda: head_roles(model),
        lambda: surprise(model, ids),
        lambda: direct_logit_attribution(model, ids, 5),
        lambda: activation_patching(model, ids, ids, 5, 6),
        lambda: ablate_text(model, ids, ["L0H0"]),  # no tokenizer to mask with
    ]
    for call in calls:
        with pytest.raises(InspectError, match="needs a GPT|needs the encoder's WordPiece"):
            call()
    with pytest.raises(InspectError, match="`light-llm inspect ablate` scores its masked-LM"):
        surprise(model, ids)  # the command a learner runs, not a function's name


def test_an_encoder_without_a_masked_lm_head_is_one_sentence(tokenizer):
    config = EncoderConfig(
        vocab_size=50, block_size=8, n_layer=1, n_head=2, n_embd=8, mlm_head=False
    )
    with pytest.raises(InspectError, match="no masked-LM head"):
        logit_lens(BertEncoder(config), [1, 2, 3])
