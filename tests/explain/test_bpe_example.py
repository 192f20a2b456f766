"""``explain bpe``'s plain-Python BPE against HuggingFace ``tokenizers`` trained on the same text
with the same settings (GPT-2's regex, all 256 bytes, <|endoftext|> first): the same merges in
the same order, the same ids for new text; and against light-llm's own ``train_bpe``."""

from __future__ import annotations

import json

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from light_llm import explain
from light_llm.explain import bpe_examples
from light_llm.shakespeare import shakespeare_slice
from light_llm.tokenizers.bpe import train_bpe


def hf_bpe(text: str, n_merges: int) -> Tokenizer:
    engine = Tokenizer(models.BPE())
    engine.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    engine.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=257 + n_merges,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        min_frequency=0,
        show_progress=False,
    )
    engine.train_from_iterator([text], trainer)
    return engine


TEXTS = [
    (bpe_examples.TINY_TEXT, bpe_examples.N_MERGES),
    ("aaaa aaa aa a bbbb aaaaaaa abab", 8),  # overlapping pairs: aa in aaa counts twice
    ("naïve café, déjà vu; 日本語 日本 🙂🙂", 12),  # merges inside multi-byte characters
]


@pytest.mark.parametrize(("text", "n_merges"), TEXTS)
def test_the_same_merges_and_ids_as_tokenizers(text, n_merges):
    reference = hf_bpe(text, n_merges)
    merges, _ = bpe_examples.learn_merges(text, n_merges)
    tokens = bpe_examples.vocabulary(merges)
    learned = [[tokens[left], tokens[right]] for left, right in merges]
    assert learned == json.loads(reference.to_str())["model"]["merges"]
    assert {token: index for index, token in enumerate(tokens)} == reference.get_vocab()
    for probe in (text, bpe_examples.NEW_WORD, "a new text: lowest, newer, naïve 日本"):
        assert bpe_examples.encode(probe, merges) == reference.encode(probe).ids


def test_a_real_text_with_hundreds_of_merges():
    text = shakespeare_slice(20_000)
    merges, _ = bpe_examples.learn_merges(text, 300)
    reference = hf_bpe(text, 300)
    tokens = bpe_examples.vocabulary(merges)
    assert [[tokens[a], tokens[b]] for a, b in merges] == json.loads(reference.to_str())["model"][
        "merges"
    ]
    probe = shakespeare_slice(40_000)[20_000:24_000]
    assert bpe_examples.encode(probe, merges) == reference.encode(probe).ids
    assert bpe_examples.encode(probe, merges) == train_bpe(text, 557).encode(probe)


def test_the_steps_show_each_merge_and_the_new_word():
    steps = explain.run("bpe")
    merges, history = bpe_examples.learn_merges(bpe_examples.TINY_TEXT, bpe_examples.N_MERGES)
    tokens = bpe_examples.vocabulary(merges)
    merge_steps = [step for step in steps if step.title.startswith("Merge ")]
    assert len(merge_steps) == bpe_examples.N_MERGES
    for step, pair, counts in zip(merge_steps, merges, history, strict=True):
        assert f"-> {tokens[pair[0]] + tokens[pair[1]]}" in step.title
        assert step.value[0, 0] == max(counts.values()) == counts[pair]
    final = steps[-1]
    expected = hf_bpe(bpe_examples.TINY_TEXT, bpe_examples.N_MERGES).encode(bpe_examples.NEW_WORD)
    assert final.value[:, 0].tolist() == expected.ids
    assert bpe_examples.NEW_WORD not in bpe_examples.pre_tokenize(bpe_examples.TINY_TEXT)
