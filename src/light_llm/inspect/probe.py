"""A probe: one fixed prompt and one fixed slice of text seen through the analyses of this
package at once, as a small JSON-ready record. The trainer takes one at every evaluation and
every ``--probe-interval`` iterations (:mod:`light_llm.train.probes`), so that a run's history
shows the model learning: the first words, a previous-token head, an induction head appearing.
The explorer takes the same probe of a loaded model, and its numbers are the ones recorded.

    next_token    P = softmax(logits) at the prompt's last position (seed 000 §8), the top k
    attention     A = softmax(Q K^T / sqrt(d_k)) of every layer and head on the prompt
    lens          the logit lens (lens.py): each stage's top token and the probability it
                  gives the token that really follows
    head_roles    previous-token, first-token and induction scores (heads.py)
    importance    Δloss of zero-ablating each head and each MLP over the slice (ablation.py),
                  and the slice's loss itself (``slice_loss``)
    sample        a continuation of the prompt at temperature 0.8 with a fixed seed

An encoder's probe has the attention, the lens through its masked-LM head and the importance
on its masked-LM loss; the next token, head roles and the sample belong to a causal GPT.
Probabilities are rounded to 5 decimals (a probe of the default model is ~40 KB).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from light_llm.checkpoints.probes import PROBE_FORMAT
from light_llm.inspect.ablation import head_importance
from light_llm.inspect.heads import head_roles, patterns
from light_llm.inspect.inspector import Inspector
from light_llm.inspect.lens import logit_lens, top_tokens

PROBE_VERSION = 1
PROBE_TOP_K = 10  # next tokens kept
PROBE_DECIMALS = 5
PROBE_SAMPLE_TOKENS = 24  # new tokens of the probe's sample (a line of text: cheap to draw)
PROBE_SAMPLE_TEMPERATURE = 0.8  # as the end-of-run sample
PROBE_ROLE_SEQUENCES = 4  # random sequences of the induction test


def rounded(values: np.ndarray) -> list:
    """``values`` as nested lists of floats rounded to PROBE_DECIMALS, NaN as None (JSON)."""
    values = np.round(np.asarray(values, dtype=np.float64), PROBE_DECIMALS)
    return np.where(np.isnan(values), None, values).tolist()


def take_probe(
    model,
    tokenizer,
    prompt_ids: list[int],
    slice_ids: np.ndarray,
    *,
    sample: str | None = None,
) -> dict[str, Any]:
    """The probe record of ``model`` (either engine's GPT, or an encoder with its masked-LM
    head) on ``prompt_ids`` and the text ``slice_ids``; ``sample``, the continuation the
    caller drew with the model's own sampler, is stored as given. Fields as the module
    docstring; iteration, tokens and time are the trainer's to add."""
    inspector = Inspector(model)
    config = inspector.config
    ids = np.asarray(prompt_ids, dtype=np.int64)
    record: dict[str, Any] = {
        "format": PROBE_FORMAT,
        "version": PROBE_VERSION,
        "prompt": {"ids": ids.tolist(), "tokens": tokenizer.tokens(ids.tolist())},
    }
    pattern, _ = patterns(inspector, ids[None])  # (L, 1, nh, T, T)
    record["attention"] = rounded(pattern[:, 0])
    lens = logit_lens(inspector, ids, top_k=1, keep_log_probs=True)
    record["lens"] = {
        "stages": lens.stages,
        "top_ids": lens.top_ids[..., 0].tolist(),
        "top_tokens": [tokenizer.tokens(row.tolist()) for row in lens.top_ids[..., 0]],
        "top_probs": rounded(lens.top_probs[..., 0]),
        "target_probs": rounded(lens.target_probs),
    }
    table = head_importance(inspector, slice_ids, tokenizer=tokenizer)
    record["slice_loss"] = round(float(table.loss), PROBE_DECIMALS)
    record["importance"] = {
        "heads": rounded(table.heads),
        "mlps": rounded(table.mlps),
        "tokens": int(table.n_tokens),
    }
    if inspector.encoder:
        return record
    probs = np.exp(lens.log_probs[-1, -1])  # the last stage is the model's output: (V,)
    top = top_tokens(probs, min(PROBE_TOP_K, config.vocab_size))
    record["next_token"] = {
        "ids": top.tolist(),
        "tokens": tokenizer.tokens(top.tolist()),
        "probs": rounded(probs[top]),
    }
    if config.block_size >= 4:
        roles = head_roles(
            inspector,
            length=min(32, config.block_size // 2),
            n_sequences=PROBE_ROLE_SEQUENCES,
        )
        record["head_roles"] = {
            "previous_token": rounded(roles.previous_token),
            "first_token": rounded(roles.first_token),
            "induction": rounded(roles.induction),
            "loss_first_copy": round(roles.loss_first_copy, PROBE_DECIMALS),
            "loss_second_copy": round(roles.loss_second_copy, PROBE_DECIMALS),
        }
    if sample is not None:
        record["sample"] = sample
    return record
