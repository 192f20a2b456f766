"""The worked example of seed 003 §29: BERT's masking rule on a sentence, with a fixed seed.

The rule is the one the encoder trains with (``light_llm.train.mlm.mask_tokens``): each real
token is chosen with probability 15%; a chosen token becomes [MASK] (80%), a random token
(10%) or stays as it is (10%); only chosen positions are scored. The sentence is tokenised by
the packaged BERT WordPiece tokenizer; the draws come from ``numpy.random.default_rng(SEED)``.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import torch

from light_llm.explain import plots
from light_llm.explain.steps import Example, Step
from light_llm.models.bert import IGNORE_INDEX
from light_llm.tokenizers import BertTokenizer
from light_llm.train.mlm import (
    MASK_PROBABILITY,
    MASK_TOKEN_SHARE,
    RANDOM_TOKEN_SHARE,
    mask_tokens,
)

SEED = 0
SEED_003_MLM = "seed 003 §29"
SENTENCE = (
    "The bank of the river was flooded after the storm, so the town moved its market to "
    "the hill above the old bridge."
)
DRAWS = 4  # masked copies of the sentence, as in four epochs
COUNT_DRAWS = 4000  # copies for the measured shares
KEEP, MASKED, RANDOM, UNCHANGED = 0, 1, 2, 3  # what happened to each position


def special_ids(tokenizer: BertTokenizer) -> frozenset[int]:
    """The ids never chosen: [CLS], [SEP], [PAD], [MASK], [UNK] (as the MLM trainer)."""
    t = tokenizer
    return frozenset({t.cls_id, t.sep_id, t.pad_id, t.mask_id, t.unk_id})


def masked_copies(
    tokenizer: BertTokenizer, ids: list[int], copies: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """``copies`` masked versions of ``ids`` by the trainer's rule: (inputs, labels), each
    (copies, T), drawn from default_rng(seed)."""
    batch = torch.tensor([ids] * copies)
    inputs, labels = mask_tokens(
        batch,
        mask_id=tokenizer.mask_id,
        vocab_size=tokenizer.vocab_size,
        special_ids=special_ids(tokenizer),
        generator=np.random.default_rng(seed),
    )
    return inputs.numpy(), labels.numpy()


def outcomes(ids: list[int], inputs: np.ndarray, labels: np.ndarray, mask_id: int) -> np.ndarray:
    """KEEP / MASKED / RANDOM / UNCHANGED for every position of every copy."""
    original = np.array(ids)[None]
    chosen = labels != IGNORE_INDEX
    result = np.full(inputs.shape, KEEP)
    result[chosen & (inputs == mask_id)] = MASKED
    result[chosen & (inputs != mask_id) & (inputs != original)] = RANDOM
    result[chosen & (inputs == original)] = UNCHANGED
    return result


@functools.cache
def measured_shares() -> np.ndarray:
    """(Computed once, read-only.) Over COUNT_DRAWS masked copies (seed SEED + 1): the share
    of real tokens chosen, and of the chosen the shares that became [MASK], a random token
    (a different one) or stayed."""
    tokenizer = BertTokenizer.packaged()
    ids = tokenizer.encode_plus(SENTENCE)["input_ids"]
    inputs, labels = masked_copies(tokenizer, ids, COUNT_DRAWS, SEED + 1)
    result = outcomes(ids, inputs, labels, tokenizer.mask_id)
    real = ~np.isin(np.array(ids), list(special_ids(tokenizer)))
    chosen = result[:, real] != KEEP
    shares = np.array(
        [
            chosen.mean(),
            *(
                (result[:, real] == kind).sum() / chosen.sum()
                for kind in (MASKED, RANDOM, UNCHANGED)
            ),
        ]
    )
    shares.setflags(write=False)
    return shares


def bert_masking() -> list[Step]:
    """BERT's masking rule (seed 003 §29) on one sentence, four masked copies, with the shares
    measured over many copies against the rule's 15% / 80% / 10% / 10%."""
    tokenizer = BertTokenizer.packaged()
    ids = tokenizer.encode_plus(SENTENCE)["input_ids"]
    tokens = tokenizer.tokens(ids)
    inputs, labels = masked_copies(tokenizer, ids, DRAWS, SEED)
    result = outcomes(ids, inputs, labels, tokenizer.mask_id)
    copies = tuple(f"copy {i + 1}" for i in range(DRAWS))
    corrupted = "; ".join(
        f"copy {i + 1}: '{' '.join(tokenizer.tokens(row.tolist())[1:-1])}'"
        for i, row in enumerate(inputs)
    )
    random_share = RANDOM_TOKEN_SHARE
    unchanged_share = 1 - MASK_TOKEN_SHARE - RANDOM_TOKEN_SHARE
    return [
        Step(
            "The sentence's WordPiece ids",
            "Assumed sentence (the seed gives the rule only), by the packaged BERT tokenizer; "
            "[CLS] and [SEP] are never chosen.",
            ids,
            SEED_003_MLM,
            columns=tokens,
            key="the-sentence-s-wordpiece-ids",
        ),
        Step(
            "Chosen positions (1 = chosen), four masked copies",
            f"Each real token is chosen with probability {MASK_PROBABILITY:.0%}, independently, "
            "in every copy: the same sentence is masked differently each epoch. NumPy's "
            f"generator with seed {SEED}.",
            (result != KEEP).astype(int),
            SEED_003_MLM,
            rows=copies,
            columns=tokens,
            key="chosen-positions-1-chosen-four-masked-copies",
        ),
        Step(
            "What a chosen token becomes: 1 [MASK], 2 random token, 3 unchanged",
            f"Of the chosen, {MASK_TOKEN_SHARE:.0%} become [MASK], {random_share:.0%} a token "
            f"drawn uniformly from the {tokenizer.vocab_size} of the vocabulary, "
            f"{unchanged_share:.0%} stay: the model cannot tell from the input which positions "
            "it is scored on, so it must represent every token well (0 = not chosen).",
            result,
            SEED_003_MLM,
            rows=copies,
            columns=tokens,
            key="what-a-chosen-token-becomes-1-mask",
        ),
        Step(
            "Inputs after masking (ids)",
            f"{corrupted}.",
            inputs,
            SEED_003_MLM,
            rows=copies,
            columns=tokens,
            key="inputs-after-masking-ids",
        ),
        Step(
            "Labels: the original id where chosen, -1 elsewhere",
            "The loss is the cross-entropy at the chosen positions only; -1 positions are ignored.",
            labels,
            SEED_003_MLM,
            rows=copies,
            columns=tokens,
            key="labels-the-original-id-where-chosen-1-elsewhere",
        ),
        Step(
            f"Shares over {COUNT_DRAWS} masked copies against the rule",
            "Measured: the share of real tokens chosen, then of the chosen those that became "
            "[MASK], a different random token, or stayed the same (a random draw that hits the "
            "original token counts as unchanged, 1 in 30522).",
            np.stack(
                [
                    measured_shares(),
                    [MASK_PROBABILITY, MASK_TOKEN_SHARE, random_share, unchanged_share],
                ]
            ),
            SEED_003_MLM,
            rows=("measured", "rule"),
            columns=("chosen", "[MASK]", "random", "unchanged"),
            key="shares-against-the-rule",
        ),
    ]


def bert_masking_figures(folder: Path) -> list[Path]:
    shares = measured_shares()
    rule = np.array(
        [
            MASK_PROBABILITY,
            MASK_TOKEN_SHARE,
            RANDOM_TOKEN_SHARE,
            1 - MASK_TOKEN_SHARE - RANDOM_TOKEN_SHARE,
        ]
    )
    return [
        plots.grouped_bars(
            folder / "bert_masking_shares.png",
            [("BERT's rule", rule), (f"measured over {COUNT_DRAWS} copies", shares)],
            ["chosen (of real tokens)", "→ [MASK] (of chosen)", "→ random", "→ unchanged"],
            "BERT's masking rule (seed 003 §29): the shares it is built to give, and measured",
            "share",
            y_range=(0.0, 1.0),
            annotate=True,
        )
    ]


# the worked examples of this module, in the order light-llm explain lists them
EXAMPLES = (
    Example(
        "bert-masking",
        "BERT's masking rule on a sentence: which tokens are chosen, which become [MASK], "
        "random or stay, with a fixed seed; the shares measured (seed 003 §29)",
        bert_masking,
        bert_masking_figures,
    ),
)
