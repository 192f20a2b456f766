"""Checked against what nobody here wrote: TransformerLens (``transformer-lens`` 4.x, its
``TransformerBridge`` over HuggingFace's GPT-2) loading a model that light-llm trained and
exported with ``export_hf_gpt2``; the logit lens, per-head direct logit attribution, head
ablation Δloss and residual patching equal TransformerLens's within 1e-4.

TransformerLens's default weight processing folds each head's value bias into the output bias
(``fold_value_biases``); light-llm counts a head's output as everything that flows through its
slice of W_O, value bias included, so that processing is turned off here (LayerNorm folding and
the centring of writing weights stay on: they change no attribution)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformer_lens
from transformer_lens import patching as tl_patching

from light_llm.checkpoints import load
from light_llm.checkpoints.hf_gpt2 import export_hf_gpt2
from light_llm.inspect import (
    ablate_text,
    activation_patching,
    direct_logit_attribution,
    logit_lens,
)
from light_llm.train import TrainConfig, train
from tests.train.helpers import write_corpus


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(light-llm's model, TransformerLens's bridge over its HF export, token ids of text)."""
    from tokenizers import Tokenizer, models
    from transformers import GPT2LMHeadModel, PreTrainedTokenizerFast

    root = tmp_path_factory.mktemp("tl")
    corpus = write_corpus(root / "corpus.txt", n_lines=400)
    settings = dict(
        data=str(corpus),
        out=str(root / "run"),
        preset="nanogpt-cpu",
        n_layer=2,
        n_head=4,
        n_embd=32,
        block_size=32,
        batch_size=8,
        max_iters=60,
        eval_interval=60,
        eval_iters=1,
        sample_tokens=0,
        device="cpu",
        dtype="float32",
        seed=3,
    )
    train(TrainConfig(**settings))
    model = load(root / "run").eval()
    export_hf_gpt2(model, root / "hf")
    hf = GPT2LMHeadModel.from_pretrained(root / "hf", attn_implementation="eager").eval()
    vocab = {f"t{i}": i for i in range(model.config.vocab_size)}
    words = Tokenizer(models.WordLevel(vocab, unk_token="t0"))  # ids are given, never text
    bridge = transformer_lens.TransformerBridge.boot_transformers(
        str(root / "hf"),
        hf_model=hf,
        tokenizer=PreTrainedTokenizerFast(tokenizer_object=words),
        device="cpu",
    )
    bridge.enable_compatibility_mode(
        disable_warnings=True, fold_value_biases=False, center_unembed=False
    )
    from light_llm.checkpoints import load_tokenizer

    ids = np.array(load_tokenizer(root / "run").encode(corpus.read_text()[:400]))
    return model, bridge, ids


def test_the_logit_lens_equals_transformer_lens(trained):
    model, bridge, ids = trained
    prompt = ids[:20]
    _, cache = bridge.run_with_cache(torch.as_tensor(prompt[None]))
    resid, labels = cache.accumulated_resid(apply_ln=True, incl_mid=True, return_labels=True)
    theirs = torch.log_softmax((resid[:, 0] @ bridge.W_U + bridge.b_U).double(), -1)
    ours = logit_lens(model, prompt, keep_log_probs=True)
    assert len(labels) == len(ours.stages)  # embed, then after each attention and each MLP
    np.testing.assert_allclose(ours.log_probs, theirs.detach().numpy(), atol=1e-4)


def test_per_head_attribution_equals_transformer_lens(trained):
    model, bridge, ids = trained
    prompt = ids[:20]
    _, cache = bridge.run_with_cache(torch.as_tensor(prompt[None]))
    heads = cache.stack_head_results(layer=-1, pos_slice=-1, apply_ln=True)  # (L nh, 1, d)
    answer, wrong = int(ids[20]), int(ids[21] if ids[21] != ids[20] else (ids[20] + 1) % 10)
    direction = bridge.tokens_to_residual_directions(answer) - bridge.tokens_to_residual_directions(
        wrong
    )
    theirs = (heads[:, 0] @ direction).detach().numpy()
    ours = direct_logit_attribution(model, prompt, answer, versus=wrong)
    np.testing.assert_allclose(ours.heads.reshape(-1), theirs, atol=1e-4)


def test_head_ablation_delta_loss_equals_transformer_lens(trained):
    model, bridge, ids = trained
    text = ids[:32]  # one context's worth: 31 predictions, in both
    tokens = torch.as_tensor(text[None])
    base = bridge(tokens, return_type="loss").item()
    for layer, head in [(0, 1), (1, 3)]:

        def zero_head(z, hook, head=head):
            z[:, :, head] = 0.0
            return z

        ablated = bridge.run_with_hooks(
            tokens, return_type="loss", fwd_hooks=[(f"blocks.{layer}.attn.hook_z", zero_head)]
        ).item()
        ours = ablate_text(model, text, [f"L{layer}H{head}"])
        assert ours.loss == pytest.approx(base, abs=1e-4)
        assert ours.delta_loss == pytest.approx(ablated - base, abs=1e-4)


def test_residual_patching_equals_transformer_lens(trained):
    model, bridge, ids = trained
    clean = ids[:12].copy()
    corrupt = clean.copy()
    corrupt[4] = (clean[4] + 3) % model.config.vocab_size
    answer, wrong = int(ids[12]), int((ids[12] + 1) % model.config.vocab_size)
    _, clean_cache = bridge.run_with_cache(torch.as_tensor(clean[None]))

    def metric(logits):
        return logits[0, -1, answer] - logits[0, -1, wrong]

    theirs = tl_patching.get_act_patch_resid_pre(
        bridge, torch.as_tensor(corrupt[None]), clean_cache, metric
    )
    ours = activation_patching(model, clean, corrupt, answer, wrong)
    np.testing.assert_allclose(ours.resid_metrics[:-1], theirs.detach().numpy(), atol=1e-4)
