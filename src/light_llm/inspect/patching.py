"""Activation patching (causal tracing: Meng et al. 2022, "Locating and Editing Factual
Associations in GPT"; Wang et al. 2022): which activations carry the difference between two
prompts.

Run a clean prompt and a corrupted one of the same length; the metric is a logit difference at
the last position, m = z[answer] - z[wrong]. Re-run the corrupted prompt with one activation
taken from the clean run, and measure how much of the clean metric comes back:

    restored = (m_patched - m_corrupt) / (m_clean - m_corrupt)

1 means that activation alone carries everything the corruption removed, 0 nothing. Patched
here: the residual stream at every (layer, position) (the input of each layer, and the last
layer's output), and every head's output at all positions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from light_llm.errors import InspectError
from light_llm.inspect.inspector import Inspector
from light_llm.inspect.text import check_token, prompt_ids
from light_llm.interventions import Patch


@dataclass
class PatchingResult:
    """``clean_metric`` / ``corrupt_metric``: z[answer] - z[wrong] on each prompt; ``resid``
    (L + 1, T): the fraction restored by patching the clean residual at each layer's input
    (rows ``resid_labels``) and position; ``heads`` (L, nh): by patching each head's output at
    every position. NaN when two different prompts give the same metric (nothing to restore;
    the same prompt twice is refused)."""

    clean_metric: float
    corrupt_metric: float
    resid_labels: list[str]
    resid: np.ndarray
    heads: np.ndarray
    resid_metrics: np.ndarray
    head_metrics: np.ndarray


def logit_difference(logits: np.ndarray, answer: int, wrong: int) -> np.ndarray:
    """m = z[answer] - z[wrong] at the last position of each row: (B, T, V) -> (B,)."""
    last = np.asarray(logits[:, -1], np.float64)
    return last[:, answer] - last[:, wrong]


def activation_patching(model, clean_ids, corrupt_ids, answer: int, wrong: int) -> PatchingResult:
    """Patch the clean run's residual at every (layer, position), and each head's output, into
    the corrupted run; the fraction of the metric z[answer] - z[wrong] restored by each."""
    inspector = Inspector(model)
    inspector.require_gpt(
        "activation patching",
        "its metric is a difference of next-token logits, and an encoder predicts no next token.",
    )
    config = inspector.config
    clean_ids = prompt_ids(clean_ids, config)
    corrupt_ids = prompt_ids(corrupt_ids, config)
    if len(clean_ids) != len(corrupt_ids):
        raise InspectError(
            f"patching needs two prompts of the same length in tokens; the clean one has "
            f"{len(clean_ids)} and the corrupted one {len(corrupt_ids)}."
        )
    if np.array_equal(clean_ids, corrupt_ids):
        raise InspectError(
            "the clean and the corrupted prompt are the same tokens: both runs give the same "
            "metric, and there is nothing for a patch to restore; change a word of the "
            "corrupted one."
        )
    answer = check_token("answer token", answer, config)
    wrong = check_token("wrong token", wrong, config)
    if wrong == answer:
        raise InspectError(
            "the wrong token must differ from the answer: z[answer] - z[wrong] would be 0 on "
            "every run, with nothing to restore."
        )
    L, T = config.n_layer, len(clean_ids)
    sites = [f"resid_pre.{layer}" for layer in range(L)] + [f"resid_post.{L - 1}"]
    heads = [f"head_out.{layer}" for layer in range(L)]
    clean = inspector.run(clean_ids[None], record=sites + heads)
    corrupt = inspector.run(corrupt_ids[None], record=sites + heads)
    clean_metric = float(logit_difference(clean.logits, answer, wrong)[0])
    corrupt_metric = float(logit_difference(corrupt.logits, answer, wrong)[0])
    resid_metrics = np.zeros((L + 1, T))
    rows = np.arange(T)
    batch = np.repeat(corrupt_ids[None], T, axis=0)
    for row, site in enumerate(sites):
        # row b of the batch is the corrupted residual with position b's taken clean; the run
        # starts there (layer ``row``; after the last layer for the last row's "out")
        value = np.repeat(corrupt.activations[site], T, axis=0)  # (T, T, d)
        value[rows, rows] = clean.activations[site][0]
        trace = inspector.run(batch, start=(row, value))
        resid_metrics[row] = logit_difference(trace.logits, answer, wrong)
    head_metrics = np.zeros((L, config.n_head))
    heads_index = np.arange(config.n_head)
    batch = np.repeat(corrupt_ids[None], config.n_head, axis=0)
    for layer, site in enumerate(heads):
        # row h: the corrupted run with head h's output taken clean (every position)
        value = np.repeat(corrupt.activations[site], config.n_head, axis=0)  # (nh, T, nh, d)
        value[heads_index, :, heads_index] = clean.activations[site][0].transpose(1, 0, 2)
        start = (layer, np.repeat(corrupt.activations[sites[layer]], config.n_head, axis=0))
        trace = inspector.run(batch, patches=[Patch("head_out", layer, value)], start=start)
        head_metrics[layer] = logit_difference(trace.logits, answer, wrong)
    span = clean_metric - corrupt_metric
    return PatchingResult(
        clean_metric,
        corrupt_metric,
        [f"L{layer} in" for layer in range(L)] + [f"L{L - 1} out"],
        (resid_metrics - corrupt_metric) / span if span else np.full_like(resid_metrics, np.nan),
        (head_metrics - corrupt_metric) / span if span else np.full_like(head_metrics, np.nan),
        resid_metrics,
        head_metrics,
    )
