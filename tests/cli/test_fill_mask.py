"""``light-llm fill-mask``: a tiny encoder trained on one sentence fills its [MASK] back in;
bad input gets one sentence and exit code 2."""

import json

import pytest
import torch

from light_llm.checkpoints import load, save
from light_llm.checkpoints.hf_bert import packaged_minilm_path
from light_llm.cli import main
from light_llm.config import ModelConfig
from light_llm.models.bert import IGNORE_INDEX, BertEncoder, EncoderConfig
from light_llm.models.gpt import GPT
from light_llm.tokenizers import BertTokenizer
from light_llm.tokenizers.bert import SPECIAL_TOKENS

SENTENCE = "to be or not to be"


@pytest.fixture(scope="module")
def trained_checkpoint(tmp_path_factory):
    """An encoder that has seen only SENTENCE, each content position masked in turn, over a
    small WordPiece vocabulary (so that training takes a moment)."""
    tokenizer = BertTokenizer([*SPECIAL_TOKENS, *"to be or not that is the question".split()])
    ids = torch.tensor(tokenizer.encode_plus(SENTENCE)["input_ids"])  # [CLS] ... [SEP]
    positions = range(1, len(ids) - 1)
    inputs = ids.repeat(len(positions), 1)
    labels = torch.full_like(inputs, IGNORE_INDEX)
    for row, position in enumerate(positions):
        inputs[row, position] = tokenizer.mask_id
        labels[row, position] = ids[position]
    torch.manual_seed(0)
    config = EncoderConfig(
        vocab_size=tokenizer.vocab_size, block_size=16, n_layer=1, n_head=2, n_embd=32, dropout=0.0
    )
    model = BertEncoder(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
    for _ in range(60):
        _, loss = model(inputs, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    folder = tmp_path_factory.mktemp("fill") / "bert"
    save(model.eval(), folder, tokenizer)
    return folder, model, tokenizer


def test_fills_in_the_trained_word(trained_checkpoint, capsys):
    folder, model, tokenizer = trained_checkpoint
    text = "to be or not to [MASK]"
    assert main(["fill-mask", "--checkpoint", str(folder), "--json", "--top-k", "3", text]) == 0
    (candidates,) = json.loads(capsys.readouterr().out)
    assert [c["token"] for c in candidates][0] == "be"
    # the probabilities are the softmax of the full logits at the [MASK] position
    ids = torch.tensor([tokenizer.encode_plus(text)["input_ids"]])
    with torch.no_grad():
        logits, _ = model(ids)
    expected = torch.softmax(logits[0, 6], -1).topk(3)
    assert [c["id"] for c in candidates] == expected.indices.tolist()
    torch.testing.assert_close(
        torch.tensor([c["probability"] for c in candidates]), expected.values
    )


def test_text_output_and_several_masks(trained_checkpoint, capsys):
    folder, _, _ = trained_checkpoint
    assert main(["fill-mask", "--checkpoint", str(folder), "[MASK] be or [MASK] to be"]) == 0
    out = capsys.readouterr().out
    assert "[MASK] 1 of 2:" in out and "[MASK] 2 of 2:" in out
    lines = out.splitlines()
    best = [lines[i + 1].split()[0] for i, line in enumerate(lines) if line.endswith("of 2:")]
    assert best == ["to", "not"]


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("light-llm fill-mask: error: ") and "\n" not in err
    return err


def test_bad_input_gets_one_sentence(trained_checkpoint, tmp_path, capsys):
    folder, _, _ = trained_checkpoint
    cases = [
        ([str(folder), "no mask here"], "has no [MASK]"),
        ([str(folder), "to be [MASK]", " "], "second sentence of a pair is empty"),
        ([str(folder), "--top-k", "0", "to [MASK]"], "top_k must be an integer of at least 1"),
        ([str(packaged_minilm_path()), "to be or not to [MASK]"], "no masked-LM head"),
        ([str(folder), "a " * 20 + "[MASK]"], "beyond the model's 16 positions"),
    ]
    save(
        GPT(ModelConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=8)),
        tmp_path / "gpt",
    )
    cases.append(([str(tmp_path / "gpt"), "to [MASK]"], "holds a GPT, not a BERT-style encoder"))
    for argv, message in cases:
        assert main(["fill-mask", "--checkpoint", *argv]) == 2
        assert message in one_error_line(capsys)


def test_fills_in_from_a_training_output_folder(tmp_path, capsys):
    """`light-llm train --model bert` writes OUT/checkpoint; fill-mask takes OUT itself and
    prints the top-k of softmax over the logits the loaded encoder gives at the [MASK]."""
    from light_llm.tokenizers import load_tokenizer
    from tests.train.helpers import tiny_flags, write_corpus

    out = tmp_path / "run"
    corpus = write_corpus(tmp_path / "corpus.txt", n_lines=300)
    assert main(["train", "--model", "bert", *tiny_flags(corpus, out, max_iters=3)]) == 0
    capsys.readouterr()
    text = "the king shall [MASK] to rome"
    assert main(["fill-mask", "--checkpoint", str(out), "--json", text]) == 0
    (candidates,) = json.loads(capsys.readouterr().out)
    model = load(out, architecture="bert")
    tokenizer = load_tokenizer(out / "checkpoint")
    ids = tokenizer.encode_plus(text)["input_ids"]
    with torch.no_grad():
        logits, _ = model(torch.tensor([ids]))
    expected = torch.softmax(logits[0, ids.index(tokenizer.mask_id)], -1).topk(5)
    assert [c["id"] for c in candidates] == expected.indices.tolist()
    torch.testing.assert_close(
        torch.tensor([c["probability"] for c in candidates]), expected.values
    )


def test_without_checkpoint_it_names_an_encoder_run_or_how_to_train_one(
    capsys, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    assert main(["fill-mask", "the [MASK] is"]) == 2
    err = capsys.readouterr().err
    assert "light-llm train --model bert" in err and len(err.strip().splitlines()) == 1
    tokenizer = BertTokenizer.packaged()
    config = EncoderConfig(
        vocab_size=tokenizer.vocab_size, block_size=16, n_layer=1, n_head=2, n_embd=8
    )
    save(
        BertEncoder(config.replace(mlm_head=True)),
        tmp_path / "out-bert" / "checkpoint",
        tokenizer=tokenizer,
    )
    assert main(["fill-mask", "the [MASK] is"]) == 2
    assert "--checkpoint" in (err := capsys.readouterr().err) and "out-bert" in err
