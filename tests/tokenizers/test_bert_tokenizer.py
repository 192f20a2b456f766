"""BERT WordPiece with encode_plus semantics (seed 003 §3-4), against transformers' BERT
tokenizers loaded from the same packaged vocabulary.

Two references (see conftest.py): ``slow_bert``, all pure Python (basic tokenizer, WordPiece,
truncation, padding), which is independent of everything light-llm runs; and ``fast_bert``,
BertTokenizerFast, which runs HF ``tokenizers`` end to end from the packaged tokenizer.json.
They disagree in three places, so the tests say which one they follow:
- characters the two Unicode tables see differently (code points unassigned in one Unicode
  version and new in another, e.g. U+2E5D, U+0890): light-llm's splitting is HF tokenizers',
  so on arbitrary text it is compared with the fast tokenizer, and with the slow one on
  text from long-assigned scripts;
- longest-first truncation of a pair when the budget splits oddly: HF tokenizers gives the
  odd position to the longer sentence (the second on a tie), the pure-Python one to the first.
  light-llm follows HF tokenizers, what BertTokenizerFast / AutoTokenizer give.
- a capital sigma ending a word: Python's str.lower applies Unicode's final-sigma rule
  ("AΣ" -> "aς"), HF tokenizers lowers every Σ to σ; light-llm follows HF tokenizers, so the
  comparisons with the pure-Python reference leave Σ out of their text.
"""

from __future__ import annotations

import json
import unicodedata

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from light_llm.errors import CheckpointError, TokenizerError
from light_llm.tokenizers import BertTokenizer, get_tokenizer, load_tokenizer
from light_llm.tokenizers.bert import longest_first_lengths, packaged_bert_folder

KEYS = ("input_ids", "attention_mask", "token_type_ids")


def reference_inputs(reference, *texts, **options) -> dict:
    encoded = reference(*texts, return_token_type_ids=True, return_attention_mask=True, **options)
    return {key: list(encoded[key]) for key in KEYS}


@pytest.fixture(scope="module")
def bert() -> BertTokenizer:
    return BertTokenizer.packaged()


def test_special_ids_and_interface(bert):
    assert bert.name == "bert" and bert.vocab_size == 30522
    special = (bert.pad_id, bert.unk_id, bert.cls_id, bert.sep_id, bert.mask_id)
    assert special == (0, 100, 101, 102, 103)  # lines 1, 101-104 of vocab.txt
    assert bert.eos_id == bert.sep_id
    assert bert.encode("I love dogs.") == bert.encode_plus("I love dogs.")["input_ids"][1:-1]


# --- seed 003 §3-4 -------------------------------------------------------------------------
# The seed prints "dogs" as 3988 and, in the pair, "Dogs" as 3899. In this vocabulary 3988 is
# "initial" and 3899 is "dog"; "dogs" (and lower-cased "Dogs") is 6077. The references decide.


def test_seed_single_sentence(bert, slow_bert, fast_bert):
    ours = bert.encode_plus("I love dogs.")
    assert ours == reference_inputs(slow_bert, "I love dogs.")
    assert ours == reference_inputs(fast_bert, "I love dogs.")
    assert bert.tokens(ours["input_ids"]) == ["[CLS]", "i", "love", "dogs", ".", "[SEP]"]
    assert slow_bert.convert_ids_to_tokens([3988, 3899, 6077]) == ["initial", "dog", "dogs"]


def test_seed_sentence_pair(bert, slow_bert, fast_bert):
    ours = bert.encode_plus("I love dogs.", "Dogs are great.")
    assert ours == reference_inputs(slow_bert, "I love dogs.", "Dogs are great.")
    assert ours == reference_inputs(fast_bert, "I love dogs.", "Dogs are great.")
    assert ours["token_type_ids"] == [0] * 6 + [1] * 5


def test_seed_section_4_pair_padded_to_20(bert, slow_bert, fast_bert):
    options = dict(max_length=20, padding="max_length", truncation=True)
    ours = bert.encode_plus(" I love chess", "I love soccer", **options)
    assert ours == reference_inputs(slow_bert, " I love chess", "I love soccer", **options)
    assert ours == reference_inputs(fast_bert, " I love chess", "I love soccer", **options)
    assert len(ours["input_ids"]) == 20 and sum(ours["attention_mask"]) == 9


def test_a_word_final_capital_sigma_is_lowered_as_hf_tokenizers_lowers_it(
    bert, slow_bert, fast_bert
):
    ours = bert.encode_plus("0", "AΣ")
    assert ours == reference_inputs(fast_bert, "0", "AΣ")
    assert bert.tokens(ours["input_ids"])[-2] == "##σ"
    assert slow_bert.tokenize("AΣ") == ["a", "##ς"]  # Python's final-sigma rule


# --- property tests ------------------------------------------------------------------------

# Scripts assigned long ago, on whose characters Python's unicodedata and HF tokenizers agree.
OLD_SCRIPTS = st.characters(
    codec="utf-8",
    categories=None,
    min_codepoint=0,
    max_codepoint=0x52F,  # ASCII, Latin-1, Latin Extended, IPA, accents, Greek, Cyrillic
).filter(lambda char: unicodedata.category(char) not in ("Cn", "Cs") and char != "Σ")
WELL_KNOWN_TEXT = st.lists(
    st.one_of(
        OLD_SCRIPTS,
        st.characters(min_codepoint=0x4E00, max_codepoint=0x9FA5),  # CJK ideographs
        st.characters(min_codepoint=0x3041, max_codepoint=0x3096),  # hiragana
        st.sampled_from(["😀", "\u00a0", "\u3000", "\u200b", " [MASK] ", "[SEP]", "##", " "]),
    ),
    max_size=40,
).map("".join)
ANY_TEXT = st.one_of(st.text(max_size=60), WELL_KNOWN_TEXT)
PADDING = st.sampled_from([False, "max_length", "longest"])


@settings(deadline=None, max_examples=150)
@given(WELL_KNOWN_TEXT, PADDING, st.one_of(st.none(), st.integers(2, 40)))
def test_single_sentences_equal_the_pure_python_reference(
    bert, slow_bert, text, padding, max_length
):
    options = dict(max_length=max_length, padding=padding, truncation=True)
    assert bert.encode_plus(text, **options) == reference_inputs(slow_bert, text, **options)


@settings(deadline=None, max_examples=150)
@given(WELL_KNOWN_TEXT, WELL_KNOWN_TEXT, PADDING)
def test_untruncated_pairs_equal_the_pure_python_reference(bert, slow_bert, first, second, padding):
    assume(first.strip() and second.strip())
    options = dict(max_length=512, padding=padding, truncation=False)
    ours = bert.encode_plus(first, second, **options)
    assert ours == reference_inputs(slow_bert, first, second, **options)


@settings(deadline=None, max_examples=200)
@given(ANY_TEXT, st.one_of(st.none(), ANY_TEXT), PADDING, st.integers(3, 40), st.booleans())
def test_any_text_and_pairs_equal_hf_tokenizers(
    bert, fast_bert, first, second, padding, max_length, truncation
):
    assume(second is None or (first.strip() and second.strip()))
    texts = (first,) if second is None else (first, second)
    options = dict(max_length=max_length, padding=padding, truncation=truncation)
    ours = bert.encode_plus(*texts, **options)
    assert ours == reference_inputs(fast_bert, *texts, **options)
    assert bert.decode(ours["input_ids"]) == fast_bert.decode(
        ours["input_ids"], skip_special_tokens=True
    )


@settings(deadline=None, max_examples=100)
@given(
    st.lists(st.one_of(ANY_TEXT, st.tuples(ANY_TEXT, ANY_TEXT)), min_size=1, max_size=6),
    st.sampled_from(["longest", "max_length"]),
    st.integers(3, 30),
)
def test_batches_pad_like_hf_tokenizers(bert, fast_bert, items, padding, max_length):
    assume(all(isinstance(item, str) or (item[0].strip() and item[1].strip()) for item in items))
    ours = bert.batch_encode_plus(items, max_length=max_length, padding=padding)
    firsts = [item if isinstance(item, str) else item[0] for item in items]
    seconds = [None if isinstance(item, str) else item[1] for item in items]
    expected = {key: [] for key in KEYS}
    for first, second in zip(firsts, seconds, strict=True):  # one call per input: HF batches
        texts = (first,) if second is None else (first, second)  # mix no singles and pairs
        for key, row in reference_inputs(
            fast_bert, *texts, max_length=max_length, truncation=True
        ).items():
            expected[key].append(row)
    width = max(map(len, expected["input_ids"])) if padding == "longest" else max_length
    for key, fill in zip(KEYS, (bert.pad_id, 0, 0), strict=True):
        expected[key] = [row + [fill] * (width - len(row)) for row in expected[key]]
    assert ours == expected


@settings(deadline=None)
@given(st.integers(0, 60), st.integers(0, 60), st.integers(0, 60))
def test_longest_first_lengths_remove_from_the_longer_side(first, second, budget):
    """The same lengths as removing one token at a time from the longer side, where a tie
    takes from the side that was not the longer at the start (the first if they were equal),
    so that the odd position, if any, stays with the side that was longer."""
    first_was_longer = first > second
    kept_first, kept_second = first, second
    while kept_first + kept_second > budget:
        if kept_first > kept_second or (kept_first == kept_second and not first_was_longer):
            kept_first -= 1
        else:
            kept_second -= 1
    assert longest_first_lengths(first, second, budget) == (kept_first, kept_second)


# --- odd truncation, decoding, [MASK] in text ------------------------------------------------


def test_odd_pair_truncation_follows_hf_tokenizers(bert, fast_bert, slow_bert):
    first, second = " ".join(["a"] * 7), " ".join(["b"] * 8)  # 7 + 8 tokens, room for 9
    ours = bert.encode_plus(first, second, max_length=12)
    assert ours == reference_inputs(fast_bert, first, second, max_length=12, truncation=True)
    assert bert.tokens(ours["input_ids"]).count("a") == 4  # the longer second keeps 5
    legacy = reference_inputs(slow_bert, first, second, max_length=12, truncation=True)
    assert legacy["input_ids"].count(bert.encode("a")[0]) == 5  # the legacy rule differs


def test_mask_token_in_text_and_decoding(bert, slow_bert):
    text = "To be or not to [MASK]."
    ids = bert.encode_plus(text)["input_ids"]
    assert ids == slow_bert(text)["input_ids"]
    assert bert.mask_id in ids
    assert bert.decode(ids) == slow_bert.decode(ids, skip_special_tokens=True)
    assert bert.decode(ids, skip_special_tokens=False) == slow_bert.decode(ids)


def test_accents_are_stripped_and_case_folded(bert, slow_bert):
    text = "Héllo WÖRLD, naïve Café"
    assert bert.encode(text) == slow_bert.encode(text, add_special_tokens=False)
    assert bert.encode(text) == bert.encode("hello world, naive cafe")


# --- bad input -----------------------------------------------------------------------------


@pytest.mark.parametrize("pair", [("", "b"), ("a", "   "), ("\n\t", "b")])
def test_a_pair_with_an_empty_side_is_refused(bert, pair):
    with pytest.raises(TokenizerError, match="sentence of a pair is empty"):
        bert.encode_plus(*pair)


@pytest.mark.parametrize(
    "texts, max_length, minimum", [(("a",), 1, 2), (("a", "b"), 2, 3), (("a",), 0, 2)]
)
def test_max_length_below_the_special_tokens_is_refused(bert, texts, max_length, minimum):
    with pytest.raises(TokenizerError, match=f"the minimum is {minimum}"):
        bert.encode_plus(*texts, max_length=max_length)


def test_other_bad_options_are_refused(bert):
    with pytest.raises(TokenizerError, match="padding must be"):
        bert.encode_plus("a", padding="left")
    with pytest.raises(TokenizerError, match="pair"):
        bert.batch_encode_plus([("a", "b", "c")])
    with pytest.raises(TokenizerError, match="a list of sentences"):
        bert.batch_encode_plus("one sentence")
    with pytest.raises(TokenizerError, match="outside"):
        bert.decode([30522])


# --- files ---------------------------------------------------------------------------------


def test_save_load_round_trip(bert, tmp_path):
    bert.save(tmp_path)
    assert (tmp_path / "vocab.txt").read_bytes() == (
        packaged_bert_folder() / "vocab.txt"
    ).read_bytes()
    loaded = load_tokenizer(tmp_path)
    assert isinstance(loaded, BertTokenizer) and loaded.vocab == bert.vocab
    text = ("Ünïcode and 日本語", "second")
    assert loaded.encode_plus(*text) == bert.encode_plus(*text)


def test_hf_folder_with_vocab_txt_loads(bert):
    loaded = load_tokenizer(packaged_bert_folder())  # the packaged HF folder itself
    assert isinstance(loaded, BertTokenizer) and loaded.vocab == bert.vocab
    assert loaded.lowercase and loaded.model_max_length == 512
    assert get_tokenizer("bert").vocab == bert.vocab


def test_cased_vocabulary_keeps_case(tmp_path):
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "Hello", "hello", "é"]
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))
    cased = load_tokenizer(tmp_path)
    assert cased.encode("Hello hello é") == [5, 6, 7]


@pytest.mark.parametrize("split", [True, False])
def test_tokenize_chinese_chars_is_followed_as_transformers_follows_it(tmp_path, split):
    """A folder whose tokenizer_config.json turns tokenize_chinese_chars off keeps a run of
    ideographs one word (北京: 北, ##京), as transformers does (it was split whatever the
    setting); the ids agree with transformers' either way, and the setting survives a save."""
    from transformers import BertTokenizerFast

    (tmp_path / "vocab.txt").write_bytes((packaged_bert_folder() / "vocab.txt").read_bytes())
    settings = {"do_lower_case": True, "tokenize_chinese_chars": split}
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(settings))
    ours = load_tokenizer(tmp_path)
    theirs = BertTokenizerFast(str(tmp_path / "vocab.txt"), tokenize_chinese_chars=split)
    for text in ("我在北京 and 東京", "日本語のテキスト", "mixed漢字text"):
        assert ours.encode_plus(text)["input_ids"] == theirs(text)["input_ids"], text
    ours.save(tmp_path / "saved")
    assert load_tokenizer(tmp_path / "saved").chinese_words is split
    assert ("##京" in ours.tokens(ours.encode("北京"))) is not split  # one word: a piece


def test_vocabulary_without_special_tokens_is_corrupt(tmp_path):
    (tmp_path / "vocab.txt").write_text("a\nb\n", encoding="utf-8")
    (tmp_path / "light_tokenizer.json").write_text(
        json.dumps(
            {
                "type": "bert",
                "vocab_file": "vocab.txt",
                "lowercase": True,
                "strip_accents": None,
                "model_max_length": 512,
            }
        )
    )
    with pytest.raises(CheckpointError, match="lacks the special token"):
        load_tokenizer(tmp_path)


def test_a_lone_surrogate_is_a_tokenizer_error_on_every_path(bert):
    """HuggingFace's engine alone raises a bare TypeError for text UTF-8 cannot hold."""
    for call in (
        lambda: bert.encode("caf\udcc3"),
        lambda: bert.encode_plus("caf\udcc3"),
        lambda: bert.encode_plus("a sentence", "caf\udcc3"),
        lambda: bert.batch_encode_plus(["fine", "caf\udcc3"]),
    ):
        with pytest.raises(TokenizerError, match="UTF-8"):
            call()


@pytest.mark.parametrize("max_length", [2**40, 10**12 + 1])
def test_padding_to_a_length_no_memory_holds_is_refused(bert, max_length):
    # it built max_length ids per input before anything said no (a MemoryError, or the
    # machine's memory); truncating to it allocates nothing and stays allowed
    with pytest.raises(TokenizerError, match="pad"):
        bert.encode_plus("hello", max_length=max_length, padding="max_length")
    assert bert.encode_plus("hello", max_length=max_length) == bert.encode_plus("hello")
