"""``light-llm eval`` against a loss computed in the test from the model's logits: a GPT's
next-token loss and a BERT-style encoder's masked-LM loss, each with its unigram baseline."""

import json
import math
import re
import shutil

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from light_llm.checkpoints import load
from light_llm.checkpoints.hf_bert import packaged_minilm_path
from light_llm.checkpoints.run import read_trainer_state
from light_llm.cli import main
from light_llm.models.bert import IGNORE_INDEX
from light_llm.tokenizers import load_tokenizer
from light_llm.train.mlm import mask_tokens
from tests.train.helpers import tiny_flags, write_corpus

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    folder = tmp_path_factory.mktemp("eval")
    corpus = write_corpus(folder / "corpus.txt")
    out = folder / "run"
    assert main(["train", *tiny_flags(corpus, out, max_iters=10, lr=1e-2, tokenizer="char")]) == 0
    return corpus, out


def printed_loss(capsys):
    text = capsys.readouterr().out
    match = re.search(r"val loss (\S+), perplexity (\S+)", text)
    assert match, text
    return float(match.group(1)), float(match.group(2))


def token_losses_by_hand(out, text):
    """-log p of every token of the last 10% of ``text`` (by characters) but the first, in
    float64: the tokens in consecutive windows of the context length, each seen with the
    tokens before it in its window, and those after the last whole window in one window
    ending at the split's end."""
    model = load(out)
    tokenizer = load_tokenizer(out / "checkpoint")
    ids = torch.tensor(tokenizer.encode(text[int(len(text) * 0.9) :]))
    T = model.config.block_size
    starts = list(range(0, len(ids) - T, T))
    whole = len(starts) * T  # targets 1 .. whole
    x = torch.stack([ids[s : s + T] for s in starts])
    y = torch.stack([ids[s + 1 : s + T + 1] for s in starts])
    with torch.no_grad():
        logits, _ = model(x)
        losses = F.cross_entropy(
            logits.reshape(-1, logits.size(-1)).double(), y.reshape(-1), reduction="none"
        )
        if whole < len(ids) - 1:
            tail = len(ids) - 1 - whole
            tail_logits, _ = model(ids[-T - 1 : -1][None])
            tail_losses = F.cross_entropy(
                tail_logits[0, -tail:].double(), ids[-tail:], reduction="none"
            )
            losses = torch.cat([losses, tail_losses])
    assert len(losses) == len(ids) - 1
    return losses


def covered_text(tokenizer, text):
    """The text of every token of ``text`` but the first: what the predicted tokens cover."""
    return tokenizer.decode(tokenizer.encode(text)[1:])


def loss_by_hand(out, text):
    """Mean CE over every token of the last 10% of ``text`` but the first."""
    return token_losses_by_hand(out, text).mean().item()


def test_eval_scores_the_training_corpus_validation_split(trained, capsys):
    corpus, out = trained
    assert main(["eval", "--checkpoint", str(out)]) == 0
    loss, ppl = printed_loss(capsys)
    expected = loss_by_hand(out, corpus.read_text())
    assert loss == pytest.approx(expected, abs=1e-4)
    assert ppl == pytest.approx(math.exp(expected), rel=1e-3)


def test_eval_iters_reproduces_the_trainers_last_val_loss(trained, capsys):
    _, out = trained
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    last = [line for line in lines if line["kind"] == "eval"][-1]
    assert main(["eval", "--checkpoint", str(out), "--eval-iters", "2"]) == 0
    loss, _ = printed_loss(capsys)
    assert loss == pytest.approx(last["val_loss"], abs=1e-4)


def test_eval_iters_bits_per_byte_count_the_tokens_the_whole_split_predicts(trained, capsys):
    """A sample's mean loss stands for every token the whole-split score predicts: all the
    split's tokens but the first, counted here from the text by the tokenizer."""
    corpus, out = trained
    assert main(["eval", "--checkpoint", str(out), "--eval-iters", "2", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    text = corpus.read_text()
    val_text = text[int(len(text) * 0.9) :]
    tokenizer = load_tokenizer(out / "checkpoint")
    predicted = len(tokenizer.encode(val_text)) - 1
    assert report["tokens_scored"] == predicted
    covered = covered_text(tokenizer, val_text).encode("utf-8")
    expected = report["val_loss"] * predicted / math.log(2) / len(covered)
    assert report["bits_per_byte"] == pytest.approx(expected, rel=1e-12)


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


def test_a_model_that_records_no_corpus_and_cannot_read_shakespeare_says_so(
    trained, tmp_path, capsys
):
    """A character model's bare checkpoint (as export or quantize write it: no trainer state,
    so no corpus) falls back on Shakespeare, whose letters its vocabulary lacks: one sentence
    that says which text was read and that --data gives another; with --data it scores."""
    corpus, out = trained
    bare = tmp_path / "bare"
    shutil.copytree(out / "checkpoint", bare, ignore=shutil.ignore_patterns("trainer_state*"))
    assert main(["eval", "--checkpoint", str(bare)]) == 2
    line = capsys.readouterr().err.strip()
    assert "records no corpus of its own, so the text read was Shakespeare's validation" in line
    assert "outside this tokenizer's" in line and line.endswith("give the text with --data FILE.")
    assert main(["eval", "--checkpoint", str(bare), "--data", str(corpus)]) == 0


def test_a_quantized_folder_that_can_read_shakespeare_says_it_scored_shakespeare(tmp_path, capsys):
    """A byte-level model reads any text, so a folder that records no corpus (quantize writes
    none) is scored on Shakespeare without an error: the output says so and how to score the
    text it learned, and the same model's run, which records its corpus, says nothing of it.
    (A byte-level BPE learned from the corpus, of 300 ids: GPT-2's 50,257 would make scoring
    Shakespeare's validation split a minute's work.)"""
    corpus = write_corpus(tmp_path / "corpus.txt")
    out = tmp_path / "run"
    flags = tiny_flags(corpus, out, max_iters=1, tokenizer="bpe", vocab_size=300)
    assert main(["train", *flags]) == 0
    assert main(["quantize", "--checkpoint", str(out), "--out", str(tmp_path / "q8")]) == 0
    capsys.readouterr()
    assert main(["eval", "--checkpoint", str(tmp_path / "q8")]) == 0
    text = capsys.readouterr().out
    assert "validation split of Shakespeare" in text
    assert "records no corpus of its own" in text and "--data FILE scores" in text
    for flags in (
        ["--checkpoint", str(out)],
        ["--checkpoint", str(tmp_path / "q8"), "--data", str(corpus)],
    ):
        assert main(["eval", *flags]) == 0
        text = capsys.readouterr().out
        assert f"validation split of {corpus.resolve()}" in text or str(corpus) in text
        assert "records no corpus" not in text


def printed_baseline(text):
    match = re.search(r"unigram baseline (\S+)", text)
    assert match, text
    return float(match.group(1))


def unigram_by_hand(train_ids, vocab_size, targets, alpha=1.0):
    """Mean -log p(y) with p the frequencies of the training ids, add-one smoothed."""
    counts = np.bincount(np.asarray(train_ids), minlength=vocab_size)
    log_p = np.log((counts + alpha) / (len(train_ids) + alpha * vocab_size))
    return float(-log_p[np.asarray(targets)].mean())


def test_eval_prints_the_gpt_unigram_baseline(trained, capsys):
    corpus, out = trained
    assert main(["eval", "--checkpoint", str(out)]) == 0
    baseline = printed_baseline(capsys.readouterr().out)
    text = corpus.read_text()
    tokenizer = load_tokenizer(out / "checkpoint")
    split = int(len(text) * 0.9)
    train_ids, val_ids = tokenizer.encode(text[:split]), tokenizer.encode(text[split:])
    expected = unigram_by_hand(train_ids, tokenizer.vocab_size, val_ids[1:])
    assert baseline == pytest.approx(expected, abs=1e-4)


@pytest.fixture(scope="module")
def trained_bert(tmp_path_factory):
    folder = tmp_path_factory.mktemp("eval-bert")
    corpus = write_corpus(folder / "corpus.txt")
    out = folder / "run"
    flags = tiny_flags(corpus, out, max_iters=10, lr=1e-2)
    assert main(["train", "--model", "bert", *flags]) == 0
    return corpus, out


def masked_lm_by_hand(out, text):
    """The masked-LM loss over consecutive windows of the last 10% of ``text``: window k is
    [CLS] + block_size - 2 ids + [SEP], masked by BERT's rule with the generator seeded (0, k)
    (the documented fixed seed); the loss is CE over the chosen positions of full logits.
    Also returns the chosen labels and the training split's ids."""
    model = load(out, architecture="bert")
    tokenizer = load_tokenizer(out / "checkpoint")
    split = int(len(text) * 0.9)
    ids = tokenizer.encode(text[split:])
    n = model.config.block_size - 2
    t = tokenizer
    specials = {t.cls_id, t.sep_id, t.pad_id, t.mask_id, t.unk_id}
    masked = [
        mask_tokens(
            torch.tensor([[t.cls_id, *ids[start : start + n], t.sep_id]]),
            mask_id=t.mask_id,
            vocab_size=t.vocab_size,
            special_ids=specials,
            generator=np.random.default_rng([0, k]),
        )
        for k, start in enumerate(range(0, len(ids) - n, n))
    ]
    inputs = torch.cat([pair[0] for pair in masked])
    labels = torch.cat([pair[1] for pair in masked])
    with torch.no_grad():
        logits, _ = model(inputs)  # (B, T, V)
    chosen = labels != IGNORE_INDEX
    loss = F.cross_entropy(logits[chosen].double(), labels[chosen]).item()
    return loss, labels[chosen], tokenizer.encode(text[:split])


def test_eval_of_a_bert_checkpoint_is_its_masked_lm_loss(trained_bert, capsys):
    corpus, out = trained_bert
    assert main(["eval", "--checkpoint", str(out)]) == 0
    printed = capsys.readouterr().out
    match = re.search(r"val masked-LM loss (\S+), perplexity (\S+)", printed)
    assert match, printed
    expected, targets, train_ids = masked_lm_by_hand(out, corpus.read_text())
    assert float(match.group(1)) == pytest.approx(expected, abs=1e-4)
    assert float(match.group(2)) == pytest.approx(math.exp(expected), rel=1e-3)
    assert f"{len(targets):,} masked tokens" in printed
    vocab_size = load_tokenizer(out / "checkpoint").vocab_size
    baseline = unigram_by_hand(train_ids, vocab_size, targets)
    assert printed_baseline(printed) == pytest.approx(baseline, abs=1e-4)
    # the masks do not depend on the batch size: the same loss, batched otherwise
    assert main(["eval", "--checkpoint", str(out), "--batch-size", "5"]) == 0
    assert printed_loss_of(capsys, "masked-LM loss") == pytest.approx(float(match.group(1)))


def printed_loss_of(capsys, name):
    match = re.search(rf"val {name} (\S+),", capsys.readouterr().out)
    assert match
    return float(match.group(1))


def test_bert_eval_iters_reproduces_the_trainers_last_val_loss(trained_bert, capsys):
    _, out = trained_bert
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    last = [line for line in lines if line["kind"] == "eval"][-1]
    assert main(["eval", "--checkpoint", str(out), "--eval-iters", "2"]) == 0
    assert printed_loss_of(capsys, "masked-LM loss") == pytest.approx(last["val_loss"], abs=1e-4)
    # what it scored: the masked tokens of those 2 batches (about 15% of their tokens), not
    # every token of the split
    assert main(["eval", "--checkpoint", str(out), "--eval-iters", "2", "--json"]) == 0
    scored = json.loads(capsys.readouterr().out)["tokens_scored"]
    config = read_trainer_state(out / "checkpoint")["resolved_config"]
    tokens = 2 * config["batch_size"] * config["block_size"]
    assert 0.05 * tokens <= scored <= 0.3 * tokens


def test_an_encoder_without_a_masked_lm_head_is_one_sentence(capsys):
    assert main(["eval", "--checkpoint", str(packaged_minilm_path())]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "without a masked-LM head" in lines[0]


def printed_bits(text):
    match = re.search(r"(\S+) bits per byte, (\S+) bits per character", text)
    assert match, text
    return float(match.group(1)), float(match.group(2))


def test_eval_prints_bits_per_byte_of_a_character_model(trained, capsys):
    _, out = trained
    assert main(["eval", "--checkpoint", str(out)]) == 0
    text = capsys.readouterr().out
    loss = float(re.search(r"val loss (\S+),", text).group(1))
    bpb, bpc = printed_bits(text)
    # ASCII under a character tokenizer: one token = one byte = one character, and every
    # token but the first is scored, over the characters but the first
    assert bpb == bpc == pytest.approx(loss / math.log(2), abs=2e-4)


def test_eval_bits_per_byte_of_gpt2_tokens_is_total_nats_over_utf8_bytes(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(write_corpus(tmp_path / "plain.txt").read_text() + "café – naïve\n" * 40)
    out = tmp_path / "run"
    assert main(["train", *tiny_flags(corpus, out, max_iters=1, tokenizer="gpt2")]) == 0
    capsys.readouterr()
    assert main(["eval", "--checkpoint", str(out)]) == 0
    text = capsys.readouterr().out
    loss = float(re.search(r"val loss (\S+),", text).group(1))
    bpb, bpc = printed_bits(text)
    val_text = corpus.read_text()[int(len(corpus.read_text()) * 0.9) :]
    tokenizer = load_tokenizer(out / "checkpoint")
    n_scored = len(tokenizer.encode(val_text)) - 1
    covered = covered_text(tokenizer, val_text)
    total_bits = loss * n_scored / math.log(2)
    assert bpb == pytest.approx(total_bits / len(covered.encode("utf-8")), abs=2e-4)
    assert bpc == pytest.approx(total_bits / len(covered), abs=2e-4)
    assert bpc > bpb  # the accented letters take two bytes, the dash three
    nats = float(re.search(r"= (\S+) nats per character", text).group(1))
    assert nats == pytest.approx(loss * n_scored / len(covered), abs=2e-4)


def test_eval_bits_per_byte_of_a_bpe_model_is_the_sum_of_token_losses(tmp_path, capsys):
    """Issue 13: bits per byte = (sum of the token losses) / (UTF-8 bytes) / ln 2, to 1e-6."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(write_corpus(tmp_path / "plain.txt").read_text() + "déjà – ✓ 🙂\n" * 40)
    out = tmp_path / "run"
    flags = tiny_flags(corpus, out, max_iters=4, tokenizer="bpe", vocab_size=300)
    assert main(["train", *flags]) == 0
    capsys.readouterr()
    assert main(["eval", "--checkpoint", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    text = corpus.read_text()
    losses = token_losses_by_hand(out, text)
    covered = covered_text(load_tokenizer(out / "checkpoint"), text[int(len(text) * 0.9) :])
    val_bytes = len(covered.encode("utf-8"))
    expected = losses.sum().item() / val_bytes / math.log(2)
    assert report["bits_per_byte"] == pytest.approx(expected, abs=1e-6)
    assert report["tokens_scored"] == len(losses) and report["bytes"] == val_bytes
    assert report["val_loss"] == pytest.approx(losses.mean().item(), abs=1e-6)
    val_chars = len(covered)  # the unit: nats per character
    assert report["chars"] == val_chars
    assert report["nats_per_char"] == pytest.approx(losses.sum().item() / val_chars, abs=1e-6)


def test_a_run_without_its_token_cache_gets_none_written(trained, tmp_path, capsys):
    """A run folder that ships without data/ (light_llm/runs/*, inside the installed package)
    is scored from a scratch cache, to the same loss, and left as it was."""
    _, out = trained
    assert main(["eval", "--checkpoint", str(out), "--json"]) == 0
    with_cache = json.loads(capsys.readouterr().out)
    bare = tmp_path / "shipped"
    shutil.copytree(out, bare, ignore=shutil.ignore_patterns("data"))
    before = sorted(path.relative_to(bare) for path in bare.rglob("*"))
    assert main(["eval", "--checkpoint", str(bare), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["val_loss"] == with_cache["val_loss"]
    assert sorted(path.relative_to(bare) for path in bare.rglob("*")) == before


@pytest.mark.parametrize("model", ["gpt", "bert"])
def test_a_corpus_too_short_names_the_split_eval_reads(
    trained, trained_bert, tmp_path, capsys, model
):
    """eval scores the validation split; an encoder's was refused for its training split."""
    corpus, out = trained if model == "gpt" else trained_bert
    short = tmp_path / "short.txt"
    short.write_text(corpus.read_text()[:40])  # characters the model's tokenizer knows
    assert main(["eval", "--checkpoint", str(out), "--data", str(short)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "the val split has" in lines[0], lines
