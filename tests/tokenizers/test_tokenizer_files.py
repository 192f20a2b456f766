"""Finding tokenizers by name and in checkpoint folders; the atomic write."""

from __future__ import annotations

import json
from contextlib import nullcontext

import pytest

from light_llm.errors import CheckpointError, TokenizerError
from light_llm.tokenizers import (
    BertTokenizer,
    CharTokenizer,
    GPT2Tokenizer,
    Tokenizer,
    get_tokenizer,
    load_tokenizer,
)


def test_get_tokenizer_by_name():
    assert isinstance(get_tokenizer("gpt2"), GPT2Tokenizer)
    assert isinstance(get_tokenizer("bert"), BertTokenizer)
    char = get_tokenizer("char", text="abcabc")
    assert isinstance(char, CharTokenizer) and char.vocab_size == 3
    for tokenizer in (get_tokenizer("gpt2"), get_tokenizer("bert"), char):
        assert isinstance(tokenizer, Tokenizer)


def test_get_tokenizer_refuses_unknown_names_and_char_without_text():
    with pytest.raises(TokenizerError, match="known ones are char, gpt2, bert"):
        get_tokenizer("sentencepiece")
    with pytest.raises(TokenizerError, match="needs the corpus text"):
        get_tokenizer("char")


def test_hf_gpt2_folder_means_the_gpt2_tokenizer(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_embd": 768}))
    assert isinstance(load_tokenizer(tmp_path), GPT2Tokenizer)


def test_light_tokenizer_json_takes_precedence(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    CharTokenizer.from_text("xyz").save(tmp_path)
    assert isinstance(load_tokenizer(tmp_path), CharTokenizer)


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "should hold a JSON object"),
        ('{"type": "wordlevel"}', "unknown tokenizer type 'wordlevel'"),
        ('{"type": "char"}', "lacks the 'chars' entry"),
        ('{"type": "char", "chars": ["a", "a"]}', "is corrupt"),
        ('{"type": "char", "chars": 5}', "is corrupt"),
        ('{"type": "bert", "vocab_file": "vocab.txt"}', "lacks the 'lowercase' entry"),
    ],
)
def test_corrupt_tokenizer_file_is_one_sentence(tmp_path, content, message):
    (tmp_path / "light_tokenizer.json").write_text(content)
    with pytest.raises(CheckpointError, match=message) as info:
        load_tokenizer(tmp_path)
    assert "\n" not in str(info.value)


def test_missing_folder_or_tokenizer(tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoint folder"):
        load_tokenizer(tmp_path / "absent")
    with pytest.raises(CheckpointError, match="no tokenizer in"):
        load_tokenizer(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(CheckpointError, match="no tokenizer in"):
        load_tokenizer(tmp_path)
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
    with pytest.raises(CheckpointError, match="no BERT vocabulary"):
        load_tokenizer(tmp_path)


def test_save_into_an_unwritable_place_is_a_checkpoint_error(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(CheckpointError, match="cannot write the tokenizer"):
        CharTokenizer.from_text("ab").save(blocker / "inside")


@pytest.mark.parametrize("kind", ["wordpiece", "wordlevel"])
def test_an_unknown_type_is_not_named_among_the_known_ones(tmp_path, kind):
    # a WordPiece vocabulary is saved as type "bert": "wordpiece" names what get_tokenizer
    # learns, not a type a light_tokenizer.json holds
    (tmp_path / "light_tokenizer.json").write_text(json.dumps({"type": kind}))
    with pytest.raises(CheckpointError, match="the known ones are") as info:
        load_tokenizer(tmp_path)
    known = str(info.value).split("the known ones are ")[1].rstrip(".").split(", ")
    assert kind not in known
    for name in known:  # each one named is read
        (tmp_path / "light_tokenizer.json").write_text(json.dumps({"type": name}))
        with (
            pytest.raises(CheckpointError, match="lacks|corrupt")
            if name != "gpt2"
            else nullcontext()
        ):
            load_tokenizer(tmp_path)
