"""Worked example: byte-level BPE learned on a tiny text, merge by merge, then used to encode
a word it never saw (seed 003 §2: "subword tokenization for unknown words").

Everything is written out here in plain Python, the way ``light-llm tokenizer train --kind
bpe`` does it with HuggingFace ``tokenizers`` (the tests check that both learn the same
merges and give the same ids):

1. pre-tokenise with GPT-2's regex: the text becomes chunks (" lower", " newest", ...), and a
   merge never crosses from one chunk to the next; equal chunks are counted once, with their
   count;
2. each chunk is its UTF-8 bytes; the vocabulary starts as <|endoftext|> (id 0) and the 256
   bytes (ids 1-256, in GPT-2's byte order);
3. repeat: count every adjacent pair of tokens in every chunk (times the chunk's count), take
   the most frequent (a tie goes to the pair with the smaller ids, as ``tokenizers`` does),
   give the joined token the next id, and replace the pair everywhere, left to right;
4. to encode new text, pre-tokenise it the same way and, inside each chunk, apply the merge
   learned earliest among the adjacent pairs present, again and again, until none applies.

Tokens are shown in GPT-2's printable byte alphabet: "Ġ" is the space byte.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import regex

from light_llm.explain import plots
from light_llm.explain.steps import Example, Step
from light_llm.tokenizers.gpt2 import GPT2_SPLIT_PATTERN, bytes_to_unicode

SEED = "seed 003 §2 (subword tokenization)"
# Sennrich, Haddow and Birch (2016)'s example of BPE: word counts 5, 2, 6, 3.
TINY_TEXT = " ".join(["low"] * 5 + ["lower"] * 2 + ["newest"] * 6 + ["widest"] * 3)
N_MERGES = 10
NEW_WORD = " lowest"  # never in the text: it is built from the learned pieces
SPECIAL_TOKENS = ("<|endoftext|>",)
PAIRS_SHOWN = 6

Word = tuple[int, ...]
Pair = tuple[int, int]


def initial_vocabulary() -> list[str]:
    """The tokens of ids 0.. before any merge: the special tokens, then the 256 bytes as
    GPT-2's printable symbols, in GPT-2's byte order."""
    return [*SPECIAL_TOKENS, *bytes_to_unicode().values()]


def pre_tokenize(text: str) -> list[str]:
    """Step 1: the chunks of ``text`` by GPT-2's regex (words keep their leading space)."""
    return regex.findall(GPT2_SPLIT_PATTERN, text)


def chunk_ids(chunk: str) -> Word:
    """Step 2: the ids of a chunk's UTF-8 bytes."""
    first_byte_id = len(SPECIAL_TOKENS)
    rank = {byte: index for index, byte in enumerate(bytes_to_unicode())}
    return tuple(first_byte_id + rank[byte] for byte in chunk.encode("utf-8"))


def pair_counts(words: Counter[Word]) -> Counter[Pair]:
    """Step 3: how often each adjacent pair occurs, each chunk weighted by its count."""
    counts: Counter[Pair] = Counter()
    for word, count in words.items():
        for pair in zip(word, word[1:], strict=False):
            counts[pair] += count
    return counts


def best_pair(counts: Counter[Pair]) -> Pair:
    """The most frequent pair; among equals, the one whose (left id, right id) is smallest."""
    return min(counts, key=lambda pair: (-counts[pair], pair))


def merge_word(word: Word, pair: Pair, new_id: int) -> Word:
    """``word`` with every occurrence of ``pair`` replaced by ``new_id``, left to right."""
    merged, index = [], 0
    while index < len(word):
        if word[index : index + 2] == pair:
            merged.append(new_id)
            index += 2
        else:
            merged.append(word[index])
            index += 1
    return tuple(merged)


def learn_merges(text: str, n_merges: int) -> tuple[list[Pair], list[Counter[Pair]]]:
    """Steps 1-3: the learned merges in order (merge i makes id 257 + i) and the pair counts
    each was chosen from; stops early when no pair is left."""
    words = Counter(chunk_ids(chunk) for chunk in pre_tokenize(text))
    next_id = len(initial_vocabulary())
    merges, history = [], []
    for _ in range(n_merges):
        counts = pair_counts(words)
        if not counts:
            break
        pair = best_pair(counts)
        merges.append(pair)
        history.append(counts)
        words = Counter({merge_word(word, pair, next_id): n for word, n in words.items()})
        next_id += 1
    return merges, history


def vocabulary(merges: list[Pair]) -> list[str]:
    """Every token in id order: the initial vocabulary, then one per merge."""
    tokens = initial_vocabulary()
    for left, right in merges:
        tokens.append(tokens[left] + tokens[right])
    return tokens


def encode_chunk(chunk: str, merges: list[Pair]) -> tuple[list[int], list[Word]]:
    """Step 4 on one chunk: its ids, and the ids after each merge applied (first: its bytes)."""
    first_merge_id = len(initial_vocabulary())
    rank = {pair: index for index, pair in enumerate(merges)}
    word = chunk_ids(chunk)
    stages = [word]
    while True:
        present = [pair for pair in zip(word, word[1:], strict=False) if pair in rank]
        if not present:
            return list(word), stages
        pair = min(present, key=rank.__getitem__)
        word = merge_word(word, pair, first_merge_id + rank[pair])
        stages.append(word)


def encode(text: str, merges: list[Pair]) -> list[int]:
    """Step 4: the ids of ``text``, chunk by chunk."""
    return [token for chunk in pre_tokenize(text) for token in encode_chunk(chunk, merges)[0]]


def bpe() -> list[Step]:
    """BPE learned from :data:`TINY_TEXT` (N_MERGES merges), then :data:`NEW_WORD` encoded."""
    chunks = Counter(pre_tokenize(TINY_TEXT))
    merges, history = learn_merges(TINY_TEXT, N_MERGES)
    tokens = vocabulary(merges)
    steps = [
        Step(
            "Chunks of the text and their counts",
            f"The text {TINY_TEXT!r} cut by GPT-2's regex: each word keeps its leading space "
            "(shown as Ġ), and pairs are counted inside chunks only. Each chunk starts as its "
            "bytes, ids 1-256 in GPT-2's byte order (not byte value + 1): the printable bytes "
            f"first, ! (byte 33) as id {chunk_ids('!')[0]}, so l (byte {ord('l')}) is id "
            f"{chunk_ids('l')[0]}; the others after them, the space (byte 32, Ġ) as id "
            f"{chunk_ids(' ')[0]}. Id 0 is <|endoftext|>.",
            np.array([[count] for count in chunks.values()]),
            SEED,
            rows=[
                f"{chunk.replace(' ', 'Ġ')} = {' '.join(map(str, chunk_ids(chunk)))}"
                for chunk in chunks
            ],
            columns=["count"],
            key="chunks-of-the-text-and-their-counts",
        )
    ]
    for number, (pair, counts) in enumerate(zip(merges, history, strict=True), start=1):
        shown = sorted(counts, key=lambda p: (-counts[p], p))[:PAIRS_SHOWN]
        new_id = len(initial_vocabulary()) + number - 1
        left, right = tokens[pair[0]], tokens[pair[1]]
        steps.append(
            Step(
                f"Merge {number}: {left} + {right} -> {left + right} (id {new_id})",
                f"The {min(PAIRS_SHOWN, len(counts))} most frequent of {len(counts)} adjacent "
                f"pairs. The most frequent, {left} + {right} ({counts[pair]} times; a tie goes "
                f"to the smaller ids), becomes token {new_id} and replaces the pair everywhere.",
                np.array([[counts[p]] for p in shown]),
                SEED,
                rows=[f"{tokens[a]} + {tokens[b]} ({a}, {b})" for a, b in shown],
                columns=["count"],
                key=f"merge-{number}",
            )
        )
    ids, stages = encode_chunk(NEW_WORD, merges)
    path = " -> ".join(" ".join(tokens[token] for token in stage) for stage in stages)
    steps.append(
        Step(
            f"Encoding the new word {NEW_WORD!r}",
            f"Not in the text, yet nothing is unknown: its bytes, then the earliest-learned "
            f"merge present, again and again: {path}.",
            np.array([[token] for token in ids]),
            SEED,
            rows=[tokens[token] for token in ids],
            columns=["id"],
            key="encoding-the-new-word",
        )
    )
    return steps


def bpe_figures(folder: Path) -> list[Path]:
    """The count of the pair chosen at each merge, and the length of the text in tokens
    after it: frequent pairs go first, and each merge shortens the text by its count."""
    merges, history = learn_merges(TINY_TEXT, N_MERGES)
    tokens = vocabulary(merges)
    counts = np.array([history[k][pair] for k, pair in enumerate(merges)], dtype=float)
    length = sum(len(chunk.encode("utf-8")) for chunk in pre_tokenize(TINY_TEXT))
    lengths = length - np.cumsum(counts)
    labels = [tokens[pair[0]] + tokens[pair[1]] for pair in merges]
    return [
        plots.grouped_bars(
            folder / "bpe_merges.png",
            [("count of the merged pair", counts), ("tokens in the text after it", lengths)],
            labels,
            "BPE merge by merge: the merged pair's count, and the text's length in tokens",
            "count",
            annotate=True,
            x_label="new token (in the order learned)",
            value_format="%d",
        )
    ]


# the worked examples of this module, in the order light-llm explain lists them
EXAMPLES = (
    Example(
        "bpe",
        "byte-level BPE learned merge by merge on a tiny text (the pair counts, the chosen "
        "pair, the new token), then a new word encoded with it (seed 003 §2)",
        bpe,
        bpe_figures,
    ),
)
