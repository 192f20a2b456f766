"""Worked example of BERT's model inputs: "I love dogs." and a sentence pair, with [CLS]/[SEP],
padding, attention masks and token type ids (seed 003 §3-4), by ``light_llm.tokenizers``'
BertTokenizer over the packaged uncased WordPiece vocabulary (30522 tokens)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from light_llm.explain import plots
from light_llm.explain.steps import Example, Step
from light_llm.tokenizers import BertTokenizer

SEED_003_TOKENS = "seed 003 §3"
MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
SINGLE = "I love dogs."
PAIR = ("I love dogs.", "Dogs are great.")
SINGLE_LENGTH = 10  # the seed pads with "0, 0, 0, ..." to an unstated length
PAIR_LENGTH = 14
SEED_SINGLE_IDS = [101, 1045, 2293, 3988, 1012, 102]
SEED_PAIR_IDS = [101, 1045, 2293, 3988, 1012, 102, 3899, 2024, 2307, 1012, 102]


def padded(values: list[int], length: int) -> list[int]:
    """The seed's figures continued with the padding zeros it writes as '0, 0, ...'."""
    return values + [0] * (length - len(values))


def inputs_step(
    tokenizer: BertTokenizer,
    encoding: dict,
    title: str,
    text: str,
    seed: str,
    seed_rows: list[list[int]] | None,
    key: str,
) -> Step:
    """The three model inputs of one encoding as an (L, 3) matrix: one row per token (labelled
    with it), one column per input."""
    table = np.array([encoding[key] for key in MODEL_INPUTS]).T
    return Step(
        title,
        text,
        table,
        seed,
        seed_value=None if seed_rows is None else np.array(seed_rows).T,
        seed_decimals=0,
        rows=tokenizer.tokens(encoding["input_ids"]),
        columns=MODEL_INPUTS,
        key=key,
    )


def tokenization() -> list[Step]:
    """Seed 003 §3: "I love dogs." and the pair "I love dogs." / "Dogs are great."; seed 003 §4:
    encode_plus(" I love chess", "I love soccer", max_length=20, padding='max_length')."""
    tokenizer = BertTokenizer.packaged()
    pieces = tokenizer.encode(SINGLE)
    with_specials = tokenizer.encode_plus(SINGLE)["input_ids"]
    single = tokenizer.encode_plus(SINGLE, max_length=SINGLE_LENGTH, padding="max_length")
    pair = tokenizer.encode_plus(*PAIR, max_length=PAIR_LENGTH, padding="max_length")
    chess = tokenizer.encode_plus(
        " I love chess", "I love soccer", max_length=20, padding="max_length"
    )
    n_pair = len(SEED_PAIR_IDS)
    return [
        Step(
            'WordPiece ids of "I love dogs."',
            "Lower-cased, split into words and punctuation, each looked up in the "
            "vocabulary. The seed prints 3988 for 'dogs', which is 'initial' in BERT's "
            "uncased vocabulary; 'dogs' is 6077 ('dog' is 3899).",
            pieces,
            SEED_003_TOKENS,
            seed_value=SEED_SINGLE_IDS[1:-1],
            seed_decimals=0,
            columns=tokenizer.tokens(pieces),
            key="wordpiece-ids-of-i-love-dogs",
        ),
        Step(
            "With [CLS] (101) first and [SEP] (102) last",
            "The special tokens BERT expects around a sentence.",
            with_specials,
            SEED_003_TOKENS,
            seed_value=SEED_SINGLE_IDS,
            seed_decimals=0,
            columns=tokenizer.tokens(with_specials),
            key="with-cls-101-first-and-sep-102-last",
        ),
        inputs_step(
            tokenizer,
            single,
            f"Padded to {SINGLE_LENGTH}: ids, attention mask, token type ids",
            f"Assumed length {SINGLE_LENGTH} (the seed pads to an unstated length). [PAD] is 0; "
            "the attention mask is 1 on real tokens and 0 on padding; a single sentence has "
            "token type 0 throughout.",
            SEED_003_TOKENS,
            [
                padded(SEED_SINGLE_IDS, SINGLE_LENGTH),
                padded([1] * len(SEED_SINGLE_IDS), SINGLE_LENGTH),
                [0] * SINGLE_LENGTH,
            ],
            "padded-single",
        ),
        inputs_step(
            tokenizer,
            pair,
            f'Pair "I love dogs." + "Dogs are great.", padded to {PAIR_LENGTH}',
            "[CLS] A [SEP] B [SEP]: token type 0 for the first sentence with its [CLS] and "
            "[SEP], 1 for the second with its [SEP], 0 on padding. The seed has 3988 for the "
            "first 'dogs' and 3899 ('dog') for the second; both are 'dogs', 6077, once "
            "lower-cased.",
            "seed 003 §3 (second sentence)",
            [
                padded(SEED_PAIR_IDS, PAIR_LENGTH),
                padded([1] * n_pair, PAIR_LENGTH),
                padded([0] * 6 + [1] * 5, PAIR_LENGTH),
            ],
            "padded-pair",
        ),
        inputs_step(
            tokenizer,
            chess,
            'encode_plus(" I love chess", "I love soccer", max_length=20, padding="max_length")',
            "The seed's program, run with light-llm's tokenizer: every figure agrees with "
            "DistilBertTokenizer's printed output.",
            "seed 003 §4",
            [
                [101, 1045, 2293, 7433, 102, 1045, 2293, 4715, 102] + [0] * 11,
                [1] * 9 + [0] * 11,
                [0] * 5 + [1] * 4 + [0] * 11,
            ],
            "encode-plus-pair",
        ),
    ]


def tokenization_figures(folder: Path) -> list[Path]:
    steps = tokenization()
    pair = next(step for step in steps if step.key == "padded-pair")
    table = np.asarray(pair.value)[:, 1:]  # attention mask, token type ids
    columns = list(MODEL_INPUTS[1:])
    title = 'BERT inputs of "I love dogs." + "Dogs are great." (seed 003 §3)'
    return [
        plots.heatmap_grid(
            folder / "tokenization_pair.png",
            [[("attention mask and token types", table.astype(float))]],
            list(pair.rows),
            columns,
            title,
            x_label="model input",
            y_label="token",
            number_format=".0f",
        )
    ]


# the worked examples of this module, in the order light-llm explain lists them
EXAMPLES = (
    Example(
        "tokenization",
        'BERT inputs for "I love dogs." and a sentence pair: ids, '
        "attention mask, token types (seed 003 §3-4)",
        tokenization,
        tokenization_figures,
    ),
)
