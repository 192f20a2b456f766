"""``light-llm eval`` against a loss computed in the test from the model's logits."""

import json
import math
import re

import pytest
import torch
import torch.nn.functional as F

from light_llm.checkpoint import load_model
from light_llm.cli import main
from light_llm.tokenizers import load_tokenizer
from tests.train.helpers import tiny_flags, write_corpus


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    folder = tmp_path_factory.mktemp("eval")
    corpus = write_corpus(folder / "corpus.txt")
    out = folder / "run"
    assert main(["train", *tiny_flags(corpus, out, max_iters=10, lr=1e-2)]) == 0
    return corpus, out


def printed_loss(capsys):
    text = capsys.readouterr().out
    match = re.search(r"val loss (\S+), perplexity (\S+)", text)
    assert match, text
    return float(match.group(1)), float(match.group(2))


def loss_by_hand(out, text):
    """Mean CE over consecutive windows of the last 10% of ``text`` (by characters)."""
    model = load_model(out)
    tokenizer = load_tokenizer(out / "checkpoint")
    ids = torch.tensor(tokenizer.encode(text[int(len(text) * 0.9) :]))
    T = model.config.block_size
    starts = range(0, len(ids) - T, T)
    x = torch.stack([ids[s : s + T] for s in starts])
    y = torch.stack([ids[s + 1 : s + T + 1] for s in starts])
    with torch.no_grad():
        logits, _ = model(x)
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)).double(), y.reshape(-1)).item()


def test_eval_scores_the_training_corpus_validation_split(trained, capsys):
    corpus, out = trained
    assert main(["eval", "--checkpoint", str(out)]) == 0
    loss, ppl = printed_loss(capsys)
    expected = loss_by_hand(out, corpus.read_text())
    assert loss == pytest.approx(expected, abs=1e-4)
    assert ppl == pytest.approx(math.exp(expected), rel=1e-3)


def test_eval_iters_reproduces_the_trainers_last_val_loss(trained, capsys):
    _, out = trained
    last = json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])
    assert main(["eval", "--checkpoint", str(out), "--eval-iters", "2"]) == 0
    loss, _ = printed_loss(capsys)
    assert loss == pytest.approx(last["val_loss"], abs=1e-4)


def test_eval_on_another_file(trained, tmp_path, capsys):
    _, out = trained
    other = write_corpus(tmp_path / "other.txt", n_lines=400, seed=5)
    assert main(["eval", "--checkpoint", str(out), "--data", str(other)]) == 0
    loss, _ = printed_loss(capsys)
    assert loss == pytest.approx(loss_by_hand(out, other.read_text()), abs=1e-4)


def test_eval_bad_input_is_one_sentence(trained, tmp_path, capsys):
    _, out = trained
    binary = tmp_path / "binary.bin"
    binary.write_bytes(b"\x00\xff" * 100)
    for argv in (
        ["eval", "--checkpoint", str(tmp_path / "missing")],
        ["eval", "--checkpoint", str(out), "--data", str(binary)],
        ["eval", "--checkpoint", str(out), "--eval-iters", "0"],
    ):
        assert main(argv) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("light-llm eval: error: ")
