"""``light-llm fill-mask``: a tiny encoder trained on one sentence fills its [MASK] back in;
bad input gets one sentence and exit code 2."""

import json
import shutil

import numpy as np
import pytest
import torch

from light_llm.assets import packaged_encoder_folder
from light_llm.checkpoints import load, load_tokenizer, save
from light_llm.checkpoints.hf_bert import packaged_minilm_path
from light_llm.cli import main
from light_llm.config import ModelConfig
from light_llm.models.bert import IGNORE_INDEX, BertEncoder, EncoderConfig, predict_masked
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


def test_text_beyond_the_models_positions_is_said_to_be_cut(trained_checkpoint, capsys):
    """A [MASK] within the model's 16 positions is filled in from the text that fits, and the
    tokens cut off are counted in a note (the predictions did not see them)."""
    folder, model, tokenizer = trained_checkpoint
    text = "to be or not to [MASK] " + "that is the question " * 5
    full = len(tokenizer.encode_plus(text, max_length=512)["input_ids"])
    assert main(["fill-mask", "--checkpoint", str(folder), "--json", text]) == 0
    captured = capsys.readouterr()
    assert f"so {full - 16} tokens of the text (no [MASK] among them) were cut" in captured.err
    assert main(["fill-mask", "--checkpoint", str(folder), "--json", "to be or [MASK]"]) == 0
    assert "cut" not in capsys.readouterr().err


def test_a_checkpoints_tokenizer_takes_no_more_tokens_than_the_model_has_positions(
    trained_checkpoint,
):
    """A WordPiece tokenizer saved with BERT's 512 serves a 16-position encoder: loaded for
    the model, it truncates and pads to 16, which the model takes."""
    folder, model, _ = trained_checkpoint
    assert load_tokenizer(folder).model_max_length == 512  # as saved
    tokenizer = load_tokenizer(folder, check_model=True)
    assert tokenizer.model_max_length == 16
    batch = tokenizer.batch_encode_plus(["to be " * 20, "or not"], padding="max_length")
    assert {len(ids) for ids in batch["input_ids"]} == {16}
    with torch.no_grad():
        model(
            torch.tensor(batch["input_ids"]), attention_mask=torch.tensor(batch["attention_mask"])
        )


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
        ([str(folder), "--top-k", "0", "to [MASK]"], "--top-k must be an integer of at least 1"),
        ([str(packaged_minilm_path()), "to be or not to [MASK]"], "no masked-LM head"),
        ([str(folder), "a " * 20 + "[MASK]"], "beyond the model's 16 positions"),
        # a byte that is not UTF-8, as Python's argv keeps it ("surrogateescape")
        ([str(folder), "to \udcc3 [MASK]"], "cannot be encoded as UTF-8"),
        ([str(folder), "to [MASK]", "or \udcc3"], "cannot be encoded as UTF-8"),
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
    from tests.train.helpers import tiny_flags, write_corpus

    out = tmp_path / "run"
    corpus = write_corpus(tmp_path / "corpus.txt", n_lines=300)
    assert main(["train", "--model", "bert", *tiny_flags(corpus, out, max_iters=3)]) == 0
    capsys.readouterr()
    text = "the king shall [MASK] to rome"
    assert main(["fill-mask", "--checkpoint", str(out), "--json", text]) == 0
    (candidates,) = json.loads(capsys.readouterr().out)
    model = load(out, architecture="bert")
    tokenizer = load_tokenizer(out)
    ids = tokenizer.encode_plus(text)["input_ids"]
    with torch.no_grad():
        logits, _ = model(torch.tensor([ids]))
    expected = torch.softmax(logits[0, ids.index(tokenizer.mask_id)], -1).topk(5)
    assert [c["id"] for c in candidates] == expected.indices.tolist()
    torch.testing.assert_close(
        torch.tensor([c["probability"] for c in candidates]), expected.values
    )


def shipped_answer(text: str, top_k: int = 5) -> list[tuple[int, float]]:
    """The shipped encoder's top ``top_k`` (id, probability) at the [MASK] of ``text``, from
    its own forward: softmax over the MLM head's logits at that position."""
    folder = packaged_encoder_folder()
    model = load(folder, architecture="bert")
    tokenizer = load_tokenizer(folder)
    ids = tokenizer.encode_plus(text)["input_ids"]
    with torch.no_grad():
        logits, _ = model(torch.tensor([ids]))
    top = torch.softmax(logits[0, ids.index(tokenizer.mask_id)], -1).topk(top_k)
    return list(zip(top.indices.tolist(), top.values.tolist(), strict=True))


def test_without_checkpoint_the_shipped_encoder_answers(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no encoder run here
    text = "to be or not to [MASK]"
    assert main(["fill-mask", "--json", text]) == 0
    captured = capsys.readouterr()
    (candidates,) = json.loads(captured.out)
    assert captured.err.strip().splitlines() == [
        f"fill-mask: using {packaged_encoder_folder()}, the small masked-LM encoder that ships "
        f"with light-llm (no encoder run under {tmp_path.resolve()} yet)."
    ]
    expected = shipped_answer(text)
    assert [c["id"] for c in candidates] == [i for i, _ in expected]
    np.testing.assert_allclose([c["probability"] for c in candidates], [p for _, p in expected])
    # the Python API on the same checkpoint gives the same answer
    folder = packaged_encoder_folder()
    (api,) = predict_masked(load(folder, architecture="bert"), load_tokenizer(folder), text)
    assert [c._asdict() for c in api] == candidates


def test_an_encoder_run_here_or_an_explicit_checkpoint_comes_before_the_shipped_one(
    trained_checkpoint, capsys, tmp_path, monkeypatch
):
    folder, _, _ = trained_checkpoint
    monkeypatch.chdir(tmp_path)
    text = "to be or not to [MASK]"
    assert main(["fill-mask", "--checkpoint", str(folder), "--json", text]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)[0][0]["token"] == "be" and captured.err == ""
    # a GPT run here is not an encoder: the shipped encoder still answers
    save(
        GPT(ModelConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=8)),
        tmp_path / "out-gpt" / "checkpoint",
    )
    assert main(["fill-mask", "--json", text]) == 0
    assert "ships with light-llm" in capsys.readouterr().err
    shutil.copytree(folder, tmp_path / "runs" / "out-bert" / "checkpoint")
    assert main(["fill-mask", "--json", text]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)[0][0]["token"] == "be"  # the run's, not the shipped one's
    assert f"using {tmp_path.resolve() / 'runs' / 'out-bert'}, the newest encoder run" in (
        captured.err
    )


@pytest.mark.parametrize("damage", ["weights missing", "weights cut short", "vocabulary missing"])
def test_a_damaged_shipped_encoder_is_one_sentence(damage, capsys, tmp_path, monkeypatch):
    shipped = tmp_path / "shipped"
    shutil.copytree(packaged_encoder_folder(), shipped)
    weights = shipped / "checkpoint" / "model.safetensors"
    if damage == "weights missing":
        weights.unlink()
    elif damage == "weights cut short":
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    else:
        (shipped / "checkpoint" / "vocab.txt").unlink()
    monkeypatch.setattr("light_llm.checkpoints.discovery.packaged_encoder_folder", lambda: shipped)
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")  # no encoder run here
    assert main(["fill-mask", "the [MASK] is"]) == 2
    err = one_error_line(capsys)
    assert str(shipped / "checkpoint") in err
    if damage == "weights missing":
        assert "ships with light-llm is missing its weights" in err
        assert "light-llm train --model bert" in err
