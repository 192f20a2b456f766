"""Numbers at their limits, flag by flag (issue 12, class 4): every command's numeric options
given negative, zero, huge, NaN, infinite or non-numeric values are refused with one line on
stderr that names the option (and its allowed range when it has one) and exit code 2, before
anything is allocated or written; argparse's own refusals are one line too."""

from __future__ import annotations

import pytest

from tests.reliability.conftest import CORPUS, assert_refused, run_cli, snapshot

NOT_NUMBERS = ["abc", "1e30", "nan", "inf", "", "0x10", "１"]
INT_FLAGS = [
    ("eval", "--batch-size"),
    ("eval", "--eval-iters"),
    ("generate", "--max-new-tokens"),
    ("generate", "--top-k"),
    ("train", "--block-size"),
    ("train", "--n-layer"),
    ("train", "--log-interval"),
    ("info", "--vocab-size"),
    ("serve", "--port"),
    ("tokenizer train", "--vocab-size"),
]


@pytest.mark.parametrize("value", NOT_NUMBERS[:4])
@pytest.mark.parametrize(("command", "flag"), INT_FLAGS)
def test_a_count_that_is_not_an_integer_is_one_line(capsys, command, flag, value):
    code, out, err = run_cli(capsys, *command.split(), flag, value)
    assert_refused(code, err, flag, "invalid int value", "--help")
    assert out == ""


@pytest.mark.parametrize("value", ["abc", "", "1.5.2", "nan%"])
@pytest.mark.parametrize(
    ("command", "flag"), [("generate", "--temperature"), ("generate", "--top-p"), ("train", "--lr")]
)
def test_a_real_number_that_does_not_parse_is_one_line(capsys, command, flag, value):
    code, _, err = run_cli(capsys, command, flag, value)
    assert_refused(code, err, flag, "--help")


TRAIN_VALUES = [
    ("--lr", "inf"),
    ("--lr", "nan"),
    ("--lr", "-1"),
    ("--min-lr", "nan"),
    ("--grad-clip", "nan"),
    ("--grad-clip", "inf"),
    ("--grad-clip", "-1"),
    ("--weight-decay", "inf"),
    ("--beta1", "nan"),
    ("--beta2", "1"),
    ("--label-smoothing", "nan"),
    ("--muon-lr", "inf"),
    ("--muon-momentum", "nan"),
    ("--embedding-lr", "nan"),
    ("--batch-size", "0"),
    ("--eval-iters", "-1"),
    ("--dropout", "nan"),
    ("--batch-size", "1000000000"),
    ("--eval-iters", "1000000000"),
]


@pytest.mark.parametrize(("flag", "value"), TRAIN_VALUES)
def test_train_refuses_a_number_out_of_range_before_writing(capsys, tmp_path, corpus, flag, value):
    code, _, err = run_cli(
        capsys, "train", "--data", corpus, "--out", tmp_path / "out", flag, value
    )
    # the message names the flag (LoRA's rank and alpha by their own names)
    name = flag.removeprefix("--lora-") if flag.startswith("--lora-") else flag
    assert_refused(code, err, name)
    assert "Traceback" not in err and not (tmp_path / "out").exists()


@pytest.mark.parametrize("value", ["0", "1", "17", "1000000000"])
def test_embed_max_length_outside_the_context_is_refused_with_the_range(capsys, tmp_path, value):
    from light_llm.checkpoints import save
    from light_llm.models.bert import BertEncoder, EncoderConfig
    from light_llm.tokenizers import BertTokenizer

    tokenizer = BertTokenizer.packaged()
    config = EncoderConfig(
        vocab_size=tokenizer.vocab_size, block_size=16, n_layer=1, n_head=2, n_embd=8
    )
    save(BertEncoder(config), tmp_path / "bert", tokenizer)
    before = snapshot(tmp_path / "bert")
    code, _, err = run_cli(
        capsys, "embed", "--checkpoint", tmp_path / "bert", "--max-length", value, "a b"
    )
    assert_refused(code, err, "--max-length", "from 2 to 16", value)
    assert snapshot(tmp_path / "bert") == before


@pytest.mark.parametrize("value", ["1000000000", "0", "-5"])
def test_eval_batch_size_at_its_limits(capsys, tmp_path, char_checkpoint, value):
    (tmp_path / "text.txt").write_text(CORPUS * 30)
    code, _, err = run_cli(
        capsys,
        "eval",
        "--checkpoint",
        char_checkpoint,
        "--data",
        tmp_path / "text.txt",
        "--batch-size",
        value,
    )
    assert_refused(code, err, "batch")
