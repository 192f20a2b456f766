"""Quiet wrong answers, the tokenizer half (issue 12, class 7): a model and its tokenizer must
agree on the number of ids. A tokenizer with more ids could encode text to ids the model has no
embedding row for; one with fewer could not turn some predictions into text. Either is one
sentence and exit code 2 before any output, for every kind of checkpoint (light-llm GPT and
encoder, HuggingFace GPT-2 and BERT folders) and every command that runs a model."""

from __future__ import annotations

import pytest

from light_llm import GPT, ModelConfig
from light_llm.checkpoints import load_tokenizer, save
from light_llm.checkpoints.hf_gpt2 import export_hf_gpt2
from light_llm.checkpoints.hf_tokenizer import exported_tokenizer_files
from light_llm.errors import CheckpointError
from light_llm.models.bert import BertEncoder, EncoderConfig
from light_llm.serve.session import ExplorerModel
from light_llm.tokenizers import BertTokenizer, CharTokenizer
from tests.reliability.conftest import assert_refused, run_cli, snapshot

LETTERS = "abcdefghij"
DIFFERENCES = [-3, -1, 1, 4]  # model ids minus tokenizer ids


def gpt_folder(tmp_path, difference, hf: bool):
    tokenizer = CharTokenizer.from_text(LETTERS)
    config = ModelConfig(
        vocab_size=tokenizer.vocab_size + difference, block_size=8, n_layer=1, n_head=2, n_embd=8
    )
    if hf:  # exported alone (export refuses such a pair), the tokenizer's files put beside it
        export_hf_gpt2(GPT(config), tmp_path / "model")
        for name, data in exported_tokenizer_files(tokenizer, config.block_size).items():
            (tmp_path / "model" / name).write_bytes(data)
    else:  # the model saved alone (save refuses such a pair), the tokenizer put beside it
        save(GPT(config), tmp_path / "model")
        tokenizer.save(tmp_path / "model")
    return tmp_path / "model"


def encoder_folder(tmp_path, difference, hf: bool):
    tokenizer = BertTokenizer.packaged()
    size = tokenizer.vocab_size + difference
    if not hf:
        config = EncoderConfig(vocab_size=size, block_size=16, n_layer=1, n_head=2, n_embd=8)
        save(BertEncoder(config), tmp_path / "model")  # (as the GPT's above)
        tokenizer.save(tmp_path / "model")
        return tmp_path / "model"
    from transformers import BertConfig, BertForMaskedLM

    hf_config = BertConfig(
        vocab_size=size,
        hidden_size=8,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=16,
        max_position_embeddings=16,
    )
    BertForMaskedLM(hf_config).save_pretrained(tmp_path / "model")
    tokenizer.save(tmp_path / "model")
    return tmp_path / "model"


KINDS = {
    "light-llm GPT": (gpt_folder, False),
    "HF GPT-2": (gpt_folder, True),
    "light-llm encoder": (encoder_folder, False),
    "HF BERT": (encoder_folder, True),
}
COMMANDS = {
    "light-llm GPT": [
        ["generate", "--prompt", "abc", "--max-new-tokens", "2"],
        ["generate", "--prompt", "abc", "--max-new-tokens", "2", "--engine", "numpy"],
        ["eval", "--data", "TEXT"],
        ["attention", "--prompt", "abc", "--json"],
    ],
    "HF GPT-2": [["generate", "--prompt", "abc", "--max-new-tokens", "2"]],
    "light-llm encoder": [
        ["fill-mask", "a [MASK] b"],
        ["embed", "a sentence"],
        ["attention", "--prompt", "a b", "--json"],
    ],
    "HF BERT": [["fill-mask", "a [MASK] b"], ["embed", "a sentence"]],
}
CASES = [
    pytest.param(kind, argv, difference, id=f"{kind}-{argv[0]}-{difference:+d}")
    for kind in KINDS
    for argv in COMMANDS[kind]
    for difference in DIFFERENCES[1:3]
]


@pytest.mark.parametrize(("kind", "argv", "difference"), CASES)
def test_every_command_refuses_a_tokenizer_of_another_size_before_any_output(
    capsys, tmp_path, kind, argv, difference
):
    make, hf = KINDS[kind]
    folder = make(tmp_path, difference, hf)
    (tmp_path / "text.txt").write_text(LETTERS * 40)
    argv = [str(tmp_path / "text.txt") if arg == "TEXT" else arg for arg in argv]
    before = snapshot(folder)
    capsys.readouterr()  # what transformers printed while writing the folder
    code, out, err = run_cli(capsys, argv[0], "--checkpoint", folder, *argv[1:])
    assert_refused(code, err, "tokenizer", "ids", "inconsistent")
    assert out == ""
    assert snapshot(folder) == before


@pytest.mark.parametrize("difference", DIFFERENCES)
@pytest.mark.parametrize("kind", KINDS)
def test_the_api_and_the_explorer_say_the_same(tmp_path, kind, difference):
    make, hf = KINDS[kind]
    folder = make(tmp_path, difference, hf)
    for call in (
        lambda: load_tokenizer(folder, check_model=True),
        lambda: ExplorerModel(folder, "test"),
    ):
        with pytest.raises(CheckpointError, match="ids but the model has"):
            call()


@pytest.mark.parametrize("kind", KINDS)
def test_a_tokenizer_of_the_model_s_size_loads(tmp_path, kind):
    make, hf = KINDS[kind]
    tokenizer = load_tokenizer(make(tmp_path, 0, hf), check_model=True)
    assert tokenizer.vocab_size in (len(LETTERS), BertTokenizer.packaged().vocab_size)
