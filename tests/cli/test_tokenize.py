"""``light-llm tokenize`` through ``light_llm.cli.main``, with references computed independently
(HF tokenizers' GPT-2 BPE, transformers' pure-Python BERT tokenizer)."""

from __future__ import annotations

import json

import pytest
import transformers
from tokenizers import ByteLevelBPETokenizer

from light_llm.checkpoints import save
from light_llm.cli import main
from light_llm.config import ModelConfig
from light_llm.reference.model import NumpyGPT
from light_llm.tokenizers import CharTokenizer
from light_llm.tokenizers.bert import packaged_bert_folder
from light_llm.tokenizers.gpt2 import gpt2_vocabulary_files


@pytest.fixture(scope="module")
def hf_gpt2():
    encoder_file, merges_file = gpt2_vocabulary_files()
    tokenizer = ByteLevelBPETokenizer(str(encoder_file), str(merges_file))
    tokenizer.add_special_tokens(["<|endoftext|>"])
    return tokenizer


@pytest.fixture(scope="module")
def slow_bert():
    vocab_file = packaged_bert_folder() / "vocab.txt"
    pure_python = getattr(transformers, "BertTokenizerLegacy", None) or transformers.BertTokenizer
    return pure_python(vocab_file=str(vocab_file), model_max_length=512)


def run(capsys, *argv):
    code = main(["tokenize", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_gpt2_json_has_the_reference_ids(capsys, hf_gpt2):
    text = "Hello world! Ünïcode 😀\n\n<|endoftext|>"
    code, out, err = run(capsys, "--tokenizer", "gpt2", text, "--json")
    assert code == 0 and err == ""
    result = json.loads(out)
    assert result["input_ids"] == hf_gpt2.encode(text).ids
    assert len(result["tokens"]) == len(result["input_ids"])


def test_gpt2_table_lists_index_id_and_token(capsys, hf_gpt2):
    code, out, _ = run(capsys, "Hello world")  # gpt2 is the default
    assert code == 0
    ids = hf_gpt2.encode("Hello world").ids
    rows = out.splitlines()
    assert rows[0].split() == ["index", "id", "token"]
    assert rows[1].split() == ["0", str(ids[0]), "'Hello'"]
    assert rows[2].split(maxsplit=2) == ["1", str(ids[1]), "' world'"]
    assert f"Input Ids: {ids}" in out
    assert f"{len(ids)} tokens" in out


def test_gpt2_file_input(capsys, hf_gpt2, tmp_path):
    text = "First line.\nSecond line, with ünïcode.\n"
    path = tmp_path / "input.txt"
    path.write_text(text, encoding="utf-8")
    code, out, _ = run(capsys, "--file", str(path), "--json")
    assert code == 0
    assert json.loads(out)["input_ids"] == hf_gpt2.encode(text).ids


def test_bert_prints_seed_003_section_4(capsys, slow_bert):
    argv = [" I love chess", "I love soccer", "--max-length", "20", "--padding", "max_length"]
    code, out, _ = run(capsys, "--tokenizer", "bert", *argv)
    assert code == 0
    expected = slow_bert(
        " I love chess",
        "I love soccer",
        max_length=20,
        padding="max_length",
        truncation=True,
        return_token_type_ids=True,
    )
    assert f"Input Ids: {expected['input_ids']}" in out.splitlines()
    assert f"Attention mask: {expected['attention_mask']}" in out.splitlines()
    assert f"Token type ids: {expected['token_type_ids']}" in out.splitlines()
    assert "'chess'" in out and "'[PAD]'" in out


def test_bert_json_has_exactly_the_three_model_inputs(capsys, slow_bert):
    code, out, _ = run(capsys, "--tokenizer", "bert", "I love dogs.", "Dogs are great.", "--json")
    assert code == 0
    result = json.loads(out)
    expected = slow_bert("I love dogs.", "Dogs are great.", return_token_type_ids=True)
    assert set(result) == {"input_ids", "attention_mask", "token_type_ids"}
    assert result == {key: list(expected[key]) for key in result}


def test_char_without_checkpoint_builds_the_vocabulary_from_the_text(capsys):
    code, out, err = run(capsys, "--tokenizer", "char", "hello", "--json")
    assert code == 0
    assert "built from this text" in err
    # sorted distinct characters: e=0, h=1, l=2, o=3
    assert json.loads(out) == {"input_ids": [1, 0, 2, 2, 3], "tokens": list("hello")}


def test_checkpoint_tokenizer_is_used(capsys, tmp_path):
    CharTokenizer(list("eloh ")).save(tmp_path)  # not sorted: the saved order counts
    code, out, _ = run(capsys, "--checkpoint", str(tmp_path), "hole", "--json")
    assert code == 0
    assert json.loads(out)["input_ids"] == [3, 2, 1, 0]


def test_a_tokenizer_folder_given_as_tokenizer_is_read_as_checkpoint(capsys, tmp_path):
    """--tokenizer DIR, as light-llm train takes a tokenizer folder: the same ids as
    --checkpoint DIR; a name that is neither a tokenizer nor a folder, or a folder given
    beside --checkpoint, is one sentence."""
    CharTokenizer(list("eloh ")).save(tmp_path)
    code, out, _ = run(capsys, "--tokenizer", str(tmp_path), "hole", "--json")
    assert code == 0
    assert json.loads(out)["input_ids"] == [3, 2, 1, 0]
    code, _, err = run(capsys, "--tokenizer", "sentencepiece", "hole")
    assert code == 2 and "--tokenizer must be one of char, gpt2, bert, bpe or a folder" in err
    code, _, err = run(capsys, "--tokenizer", str(tmp_path), "--checkpoint", str(tmp_path), "a")
    assert code == 2 and "give the tokenizer's folder once" in err


def test_a_training_output_folder_gives_its_checkpoints_tokenizer(capsys, tmp_path):
    """OUT, as every other command accepts it: the tokenizer of OUT/checkpoint."""
    tokenizer = CharTokenizer(list("eloh "))
    config = ModelConfig(
        vocab_size=tokenizer.vocab_size, block_size=8, n_layer=1, n_head=2, n_embd=8
    )
    save(NumpyGPT(config), tmp_path / "out" / "checkpoint", tokenizer)
    code, out, _ = run(capsys, "--checkpoint", str(tmp_path / "out"), "hole", "--json")
    assert code == 0
    assert json.loads(out)["input_ids"] == tokenizer.encode("hole")


@pytest.mark.parametrize(
    "argv, message",
    [
        ([], "give a TEXT to tokenize"),
        (["--tokenizer", "bert", "a", "   "], "second sentence of a pair is empty"),
        (["--tokenizer", "bert", "a", "b", "--max-length", "2"], "the minimum is 3"),
        (["--tokenizer", "bert", "a", "--max-length", "1"], "the minimum is 2"),
        (["--tokenizer", "gpt2", "a", "b"], "apply to the bert tokenizer only"),
        (["--file", "/nonexistent/input.txt"], "no such file"),
        (["--checkpoint", "/nonexistent/ckpt", "a"], "no checkpoint folder"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert err.startswith("light-llm tokenize: error: ") and message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_not_utf8_file_and_unknown_character(capsys, tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("café".encode("latin-1"))
    code, _, err = run(capsys, "--file", str(path))
    assert code == 2 and "is not valid UTF-8: byte 0xe9 at offset 3" in err
    assert err.count("\n") == 1

    binary = tmp_path / "binary.dat"
    binary.write_bytes(b"ELF\x00\x01")  # worded as train words it (test_data.py)
    code, _, err = run(capsys, "--file", str(binary))
    assert code == 2 and "looks binary (it holds NUL bytes at offset 3" in err

    CharTokenizer(list("abc")).save(tmp_path / "ckpt")
    code, _, err = run(capsys, "--checkpoint", str(tmp_path / "ckpt"), "abz")
    assert code == 2 and "'z'" in err and "3-character vocabulary" in err


def test_checkpoint_and_tokenizer_must_agree(capsys, tmp_path):
    CharTokenizer(list("abc")).save(tmp_path)
    code, _, err = run(capsys, "--checkpoint", str(tmp_path), "--tokenizer", "gpt2", "abc")
    assert code == 2 and "uses the char tokenizer, not gpt2" in err


def test_bert_padding_to_a_huge_length_is_one_sentence(capsys):
    code = main(["tokenize", "--tokenizer", "bert", "hello", "--max-length", str(10**11),
                 "--padding", "max_length"])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "pad" in err[0], err


def test_a_file_is_read_as_train_and_eval_read_it(capsys, tmp_path):
    # Windows line ends and a byte-order mark: train and eval read "\n" and no mark, so
    # tokenize --file showed ids (and --stats counts, "unknown" characters) no run ever saw
    from light_llm.data import load_corpus
    from light_llm.tokenizers import GPT2Tokenizer

    path = tmp_path / "windows.txt"
    path.write_bytes("\ufeffROMEO:\r\nBut soft!\r\rWhat light\r\n".encode())
    code, out, _ = run(capsys, "--tokenizer", "gpt2", "--file", str(path), "--json")
    assert code == 0
    assert json.loads(out)["input_ids"] == GPT2Tokenizer().encode(load_corpus(path))
