"""``light-llm train``: defaults, flags, bad input (one line on stderr, exit 2, nothing lost)."""

import errno
import os
import shutil
import signal
import socket
from pathlib import Path

import pytest
import torch

from light_llm.checkpoints import load_config
from light_llm.checkpoints.hf_architectures import hf_architecture
from light_llm.checkpoints.run import read_trainer_state
from light_llm.cli import build_parser, main
from light_llm.cli.train import config_from_args
from light_llm.config import PRESETS
from light_llm.data import split_train_val
from light_llm.models.gpt import GPT
from light_llm.train.config import MAX_MTP_WEIGHT
from tests.train.helpers import TINY, tiny_flags, write_corpus

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("corpus") / "corpus.txt")


def error_line(capsys):
    """The single stderr line of a failed command."""
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("light-llm train: error: ")
    return lines[0]


def folder_bytes(folder):
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


@pytest.mark.parametrize("data", [[], ["--data", "my.txt"]])
def test_no_flags_means_the_qwen3_cpu_recipe_with_a_learned_bpe(data):
    config = config_from_args(build_parser().parse_args(["train", *data])).resolve()
    assert config.preset == "qwen3-cpu" and config.tokenizer == "bpe"
    assert config.vocab_size is None  # the default size, TRAINED_TOKENIZER_VOCAB's
    model = config.model_config(768)
    switches = (model.positions, model.norm, model.activation, model.qk_norm)
    assert switches == ("rotary", "rmsnorm", "swiglu", True)
    assert (model.tie_embeddings, model.bias, model.logit_softcap) == (False, False, None)
    assert hf_architecture(model) == "Qwen3"  # the default leaves light-llm
    assert (config.optimizer, config.batch_size) == ("muon", 32)


def test_preset_char_cpu_is_bpe_cpu_on_characters_and_bpe_cpu_the_default_before_it():
    def resolved(*flags):
        return config_from_args(build_parser().parse_args(["train", *flags])).resolve().to_dict()

    char, bpe = resolved("--preset", "char-cpu"), resolved("--preset", "bpe-cpu")
    default = resolved()
    assert char.pop("tokenizer") == "char" and bpe.pop("tokenizer") == "bpe"
    assert char.pop("sample_tokens") == 300 and bpe.pop("sample_tokens") == 150
    assert char.pop("preset") == "char-cpu" and bpe.pop("preset") == "bpe-cpu"
    assert char == bpe
    assert default.pop("preset") == "qwen3-cpu" and default.pop("tokenizer") == "bpe"
    assert default.pop("sample_tokens") == 150
    assert (default.pop("activation"), default.pop("logit_softcap")) == ("swiglu", None)
    assert (bpe.pop("activation"), bpe.pop("logit_softcap")) == ("relu2", 15.0)
    assert (default.pop("lr_schedule"), default.pop("cooldown_fraction")) == ("wsd", 0.5)
    assert (bpe.pop("lr_schedule"), bpe.pop("cooldown_fraction")) == ("cosine", None)
    assert (default.pop("cooldown_shape"), bpe.pop("cooldown_shape")) == ("linear", None)
    assert (default.pop("weight_decay_epochs"), bpe.pop("weight_decay_epochs")) == (1.7, None)
    assert (default.pop("sampling"), bpe.pop("sampling")) == ("passes", "uniform")
    assert (default.pop("beta1"), bpe.pop("beta1")) == (0.8, 0.9)
    assert (default.pop("muon_lr"), bpe.pop("muon_lr")) == (0.025, 0.02)
    assert (default.pop("muon_scale"), bpe.pop("muon_scale")) == ("aspect", "keller")
    assert (default.pop("grad_clip"), bpe.pop("grad_clip")) == (0.0, 1.0)
    assert (default.pop("n_head"), bpe.pop("n_head")) == (2, 4)
    assert (default.pop("n_layer"), bpe.pop("n_layer")) == (3, 4)
    # the float32 length: 2 heads and 3 layers make the default's step 0.73x as long, and
    # on a real AVX2 CPU a step 2-3% shorter again and its margin measured (train/config.py)
    assert (default.pop("max_iters"), bpe.pop("max_iters")) == (1200, 820)
    assert (default.pop("lr_decay_iters"), bpe.pop("lr_decay_iters")) == (1200, 820)
    # one recipe but the schedule, the decay's fit to the corpus, the sampling, AdamW's β1,
    # Muon's rate and scale, the clipping and the length; the models differ only in the MLP,
    # the cap, the heads and the layers
    assert default == bpe


def test_preset_nanogpt_cpu_is_nanogpts_cpu_recipe_on_character_shakespeare():
    args = build_parser().parse_args(["train", "--preset", "nanogpt-cpu"])
    config = config_from_args(args).resolve()
    assert config.data is None and config.tokenizer == "char"  # Shakespeare, characters
    model = config.model_config(65)
    switches = (model.positions, model.norm, model.activation, model.tie_embeddings)
    assert switches == ("learned", "layernorm", "gelu", True) and config.optimizer == "adamw"
    shape = (config.n_layer, config.n_head, config.n_embd, config.block_size, config.dropout)
    assert shape == (4, 4, 128, 64, 0.0)
    assert (config.batch_size, config.grad_accum, config.max_iters) == (12, 1, 2000)
    assert (config.lr, config.min_lr, config.warmup_iters, config.lr_decay_iters) == (
        1e-3,
        1e-4,
        100,
        2000,
    )
    assert (config.beta1, config.beta2, config.weight_decay, config.grad_clip) == (
        0.9,
        0.99,
        0.1,
        1.0,
    )
    assert config.eval_iters == 20 and config.out == "out-light-llm"


def test_a_preset_without_a_char_recipe_uses_the_seed_betas():
    args = build_parser().parse_args(["train", "--preset", "seed-30m"])
    config = config_from_args(args).resolve()
    assert (config.beta1, config.beta2) == (0.9, 0.95)  # seed 000 §7
    assert config.tokenizer == "gpt2"


def test_flags_override_the_recipe():
    argv = ["train", "--lr", "3e-4", "--n-layer", "2", "--positions", "rotary", "--beta2", "0.9"]
    config = config_from_args(build_parser().parse_args(argv)).resolve()
    assert (config.lr, config.n_layer, config.positions, config.beta2) == (3e-4, 2, "rotary", 0.9)
    assert config.n_embd == PRESETS["bpe-cpu"].n_embd  # the rest from the preset


def test_train_runs_and_reports(corpus, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", *tiny_flags(corpus, out, sample_tokens=20)]) == 0
    printed = capsys.readouterr().out
    assert "iter 10: train loss" in printed and "sample:" in printed
    assert (out / "checkpoint" / "trainer_state.json").is_file()
    assert (out / "loss_curve.png").is_file()


@pytest.mark.parametrize(
    ("content", "phrase"),
    [
        (b"", "empty"),
        (b"\x00\x01\x02binary\x00", "binary"),
        (b"caf\xe9 au lait\n" * 50, "UTF-8"),
        (b"too short\n", "tokens"),
    ],
)
def test_bad_corpus_is_one_sentence_and_exit_2(tmp_path, capsys, content, phrase):
    corpus = tmp_path / "bad.txt"
    corpus.write_bytes(content)
    assert main(["train", *tiny_flags(corpus, tmp_path / "out")]) == 2
    assert phrase in error_line(capsys)
    assert not (tmp_path / "out" / "checkpoint").exists()


@pytest.mark.parametrize("engine", ["torch", "numpy"])
def test_a_repeated_character_that_a_bpe_packs_too_tightly_is_told_the_way_out(
    tmp_path, capsys, engine
):
    """One character repeated: the learned BPE merges ever longer runs of it, so each split
    holds a handful of tokens; its characters would fill a block, so the refusal names a
    character tokenizer and a smaller vocabulary, not only a longer corpus."""
    corpus = tmp_path / "a.txt"
    corpus.write_text("a" * 5000, encoding="utf-8")
    block_size = TINY["block_size"]
    train_text, val_text = split_train_val(corpus.read_text(encoding="utf-8"))
    assert min(len(train_text), len(val_text)) > block_size  # characters would fill a block
    out = tmp_path / "out"
    assert main(["train", *tiny_flags(corpus, out), "--engine", engine]) == 2
    line = error_line(capsys)
    assert "--tokenizer char" in line and "--vocab-size" in line and "--block-size" in line
    assert not (out / "checkpoint").exists()


def test_resume_with_another_model_names_the_keys_and_keeps_the_checkpoint(
    corpus, tmp_path, capsys
):
    out = tmp_path / "run"
    assert main(["train", *tiny_flags(corpus, out, max_iters=5)]) == 0
    before = folder_bytes(out / "checkpoint")
    capsys.readouterr()
    code = main(["train", "--resume", "--out", str(out), "--n-layer", "2", "--n-embd", "32"])
    assert code == 2
    line = error_line(capsys)
    assert "n_layer (1 saved, 2 asked)" in line and "n_embd (16 saved, 32 asked)" in line
    assert "n_head" not in line
    assert folder_bytes(out / "checkpoint") == before


def test_resume_with_another_optimizer_is_refused_and_keeps_the_checkpoint(
    corpus, tmp_path, capsys
):
    out = tmp_path / "run"
    assert main(["train", *tiny_flags(corpus, out, max_iters=3, optimizer="muon")]) == 0
    before = folder_bytes(out / "checkpoint")
    capsys.readouterr()
    code = main(["train", "--resume", "--out", str(out), "--optimizer", "adamw"])
    assert code == 2
    assert "optimizer ('muon' saved, 'adamw' asked)" in error_line(capsys)
    assert folder_bytes(out / "checkpoint") == before
    assert main(["train", "--resume", "--out", str(out), "--max-iters", "4"]) == 0


@pytest.mark.parametrize("engine", ["torch", "numpy"])
def test_resume_that_drops_a_setting_names_it_not_what_went_with_it(
    corpus, tmp_path, capsys, engine
):
    """A Muon run with NorMuon and both size warmups, resumed with --optimizer adamw or with
    a warmup turned off: refused in one sentence naming the setting changed, not the flags
    that went with it (and were never given again)."""
    out = tmp_path / "run"
    switches = dict(optimizer="muon", normuon=True, muon_momentum_warmup=2, engine=engine)
    switches.update(batch_warmup=2, batch_warmup_size=2, context_warmup=2, context_warmup_size=8)
    assert main(["train", *tiny_flags(corpus, out, max_iters=3, **switches)]) == 0
    before = folder_bytes(out / "checkpoint")
    changes = [
        (["--optimizer", "adamw"], "optimizer ('muon' saved, 'adamw' asked)"),
        (["--batch-warmup", "0"], "batch_warmup (2 saved, 0 asked)"),
        (["--context-warmup", "0"], "context_warmup (2 saved, 0 asked)"),
    ]
    for flags, difference in changes:
        capsys.readouterr()
        assert main(["train", "--resume", "--out", str(out), *flags]) == 2
        assert difference in error_line(capsys)
    assert folder_bytes(out / "checkpoint") == before


@pytest.mark.parametrize("engine", ["torch", "numpy"])
def test_resume_cannot_zero_initialise_the_saved_weights(corpus, tmp_path, capsys, engine):
    """--zero-init-projections sets how a new model's weights start; a resume's weights are the
    checkpoint's, so asking for it on a run trained without it is refused by name."""
    out = tmp_path / "run"
    assert main(["train", *tiny_flags(corpus, out, max_iters=2, engine=engine)]) == 0
    before = folder_bytes(out / "checkpoint")
    capsys.readouterr()
    resume = ["train", "--resume", "--out", str(out), "--max-iters", "3"]
    assert main([*resume, "--zero-init-projections"]) == 2
    line = error_line(capsys)
    assert "cannot resume from" in line
    assert "zero_init_projections (False saved, True asked)" in line
    assert folder_bytes(out / "checkpoint") == before
    assert not read_trainer_state(out / "checkpoint")["resolved_config"]["zero_init_projections"]


def test_a_numpy_run_resumes_on_the_numpy_engine_only(corpus, tmp_path, capsys):
    """A plain --resume goes on with the run's own engine; --engine torch asked for a NumPy
    run is one sentence, nothing written."""
    out = tmp_path / "run"
    assert main(["train", *tiny_flags(corpus, out, max_iters=2, engine="numpy")]) == 0
    before = folder_bytes(out / "checkpoint")
    capsys.readouterr()
    resume = ["train", "--resume", "--out", str(out), "--max-iters"]
    assert main([*resume, "4", "--engine", "torch"]) == 2
    line = error_line(capsys)
    assert "holds a run of the numpy engine" in line and "--engine numpy" in line
    assert folder_bytes(out / "checkpoint") == before
    assert main([*resume, "4"]) == 0
    assert read_trainer_state(out / "checkpoint")["iteration"] == 4
    assert read_trainer_state(out / "checkpoint")["engine"] == "numpy"


@pytest.mark.parametrize("engine", ["torch", "numpy"])
def test_extending_a_run_at_a_final_rate_of_0_is_one_sentence(corpus, tmp_path, capsys, engine):
    """A run whose decay ended at 0 (the default's) extended without --restretch-schedule would
    change no weight: one sentence naming both ways on, exit 2, the checkpoint untouched."""
    out = tmp_path / "run"
    flags = tiny_flags(corpus, out, max_iters=3, engine=engine, min_lr=0.0, lr_schedule="wsd")
    assert main(["train", *flags]) == 0
    before = folder_bytes(out / "checkpoint")
    capsys.readouterr()
    assert main(["train", "--resume", "--out", str(out), "--max-iters", "5"]) == 2
    line = error_line(capsys)
    assert "would change no weight" in line and "--restretch-schedule" in line
    assert folder_bytes(out / "checkpoint") == before
    resume = ["train", "--resume", "--out", str(out), "--max-iters", "5"]
    assert main([*resume, "--restretch-schedule"]) == 0
    assert read_trainer_state(out / "checkpoint")["iteration"] == 5
    capsys.readouterr()  # a resume asking no more iterations than the run has trains none
    assert main(["train", "--resume", "--out", str(out), "--max-iters", "4"]) == 0
    printed = capsys.readouterr().out
    assert "the run already has 5 iterations (--max-iters 4): nothing to train" in printed
    assert read_trainer_state(out / "checkpoint")["iteration"] == 5


def test_resume_without_a_checkpoint_and_overwrite_protection(corpus, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "--resume", "--out", str(out)]) == 2
    assert "--resume found no checkpoint" in error_line(capsys)
    assert main(["train", *tiny_flags(corpus, out, max_iters=2)]) == 0
    before = folder_bytes(out / "checkpoint")
    capsys.readouterr()
    assert main(["train", *tiny_flags(corpus, out, max_iters=2)]) == 2
    assert "already holds a training checkpoint" in error_line(capsys)
    assert folder_bytes(out / "checkpoint") == before
    assert main(["train", *tiny_flags(corpus, out, max_iters=3), "--overwrite"]) == 0


def test_unwritable_out_is_one_sentence(corpus, tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    assert main(["train", *tiny_flags(corpus, blocker / "out")]) == 2
    assert "cannot write to the output folder" in error_line(capsys)


def test_full_disk_is_one_sentence_and_keeps_the_last_checkpoint(
    corpus, tmp_path, capsys, monkeypatch
):
    out = tmp_path / "run"
    assert main(["train", *tiny_flags(corpus, out, max_iters=5)]) == 0
    before = folder_bytes(out / "checkpoint")
    capsys.readouterr()
    real_fsync = os.fsync
    calls = {"n": 0}

    def fsync_until_full(fd):
        calls["n"] += 1
        if calls["n"] > 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync_until_full)
    assert main(["train", "--resume", "--out", str(out), "--max-iters", "10"]) == 2
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert "No space left on device" in error_line(capsys)
    assert folder_bytes(out / "checkpoint") == before


def test_nan_loss_is_one_sentence_naming_iteration_and_checkpoint(
    corpus, tmp_path, capsys, monkeypatch
):
    original_forward = GPT.forward

    def forward_exploding_at_iteration_6(self, *args, **kwargs):
        logits, loss = original_forward(self, *args, **kwargs)
        if self.training and getattr(self, "calls", 0) == 6:
            loss = loss + float("inf")
        if self.training:
            self.calls = getattr(self, "calls", 0) + 1
        return logits, loss

    monkeypatch.setattr(GPT, "forward", forward_exploding_at_iteration_6)
    out = tmp_path / "run"
    assert main(["train", *tiny_flags(corpus, out)]) == 2
    line = error_line(capsys)
    assert "iteration 6" in line and f"{out / 'checkpoint'} (iteration 5)" in line
    assert read_trainer_state(out / "checkpoint")["iteration"] == 5


def test_float16_on_the_cpu_is_refused(corpus, tmp_path, capsys):
    assert main(["train", *tiny_flags(corpus, tmp_path / "out", dtype="float16")]) == 2
    assert "float16" in error_line(capsys)


def test_bfloat16_on_a_cpu_that_emulates_it_trains_and_says_it_is_slow(
    corpus, tmp_path, capsys, monkeypatch
):
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    out = tmp_path / "out"
    assert main(["train", *tiny_flags(corpus, out, dtype="bfloat16", max_iters=2)]) == 0
    printed = capsys.readouterr().out
    assert "warning: this CPU (AVX2) has no bfloat16 arithmetic" in printed
    assert read_trainer_state(out / "checkpoint")["dtype"] == "bfloat16"


@pytest.mark.parametrize("engine", ["torch", "numpy"])
def test_ctrl_c_saves_and_exits_130_with_how_to_resume(
    corpus, tmp_path, capsys, monkeypatch, engine
):
    """Either engine: the iteration under way ends, is saved, and the run says where it
    stopped and how to go on, never "done" (the NumPy engine said "done: 1 iterations")."""
    from light_llm.reference.model import NumpyGPT

    model_class = GPT if engine == "torch" else NumpyGPT
    original_forward = model_class.forward

    def forward_then_ctrl_c(self, *args, **kwargs):
        if self.training:
            signal.raise_signal(signal.SIGINT)
        return original_forward(self, *args, **kwargs)

    monkeypatch.setattr(model_class, "forward", forward_then_ctrl_c)
    out = tmp_path / "run"
    assert main(["train", *tiny_flags(corpus, out, engine=engine)]) == 130
    printed = capsys.readouterr()
    assert "stopped at iteration 1;" in printed.err
    assert f"Continue with: light-llm train --resume --out {out}" in printed.err
    assert "done:" not in printed.out
    assert read_trainer_state(out / "checkpoint")["iteration"] == 1


def test_the_numpy_engine_trains_from_the_cli_and_its_checkpoint_loads_in_pytorch(
    corpus, tmp_path, capsys
):
    from light_llm.checkpoints import load

    out = tmp_path / "numpy-run"
    assert main(["train", *tiny_flags(corpus, out, engine="numpy", sample_tokens=0)]) == 0
    assert "iter 10: train loss" in capsys.readouterr().out
    torch_model = load(out).eval()
    numpy_model = load(out, engine="numpy")
    idx = torch.randint(0, torch_model.config.vocab_size, (1, 8))
    expected, _ = torch_model(idx)
    logits, _, _ = numpy_model.forward(idx.numpy())
    assert abs(logits - expected.detach().numpy()).max() < 1e-4


RECIPE_FLAGS = [
    "--positions",
    "rotary",
    "--norm",
    "rmsnorm",
    "--activation",
    "relu2",
    "--qk-norm",
    "--untie-embeddings",
    "--no-bias",
    "--logit-softcap",
    "5",
]


@pytest.mark.parametrize("engine", ["torch", "numpy"])
def test_the_recipe_switches_train_and_a_resume_keeps_them(corpus, tmp_path, capsys, engine):
    out = tmp_path / "run"
    assert main(["train", *tiny_flags(corpus, out, max_iters=4, engine=engine), *RECIPE_FLAGS]) == 0
    config = load_config(out)
    switches = (config.qk_norm, config.tie_embeddings, config.bias, config.logit_softcap)
    assert switches == (True, False, False, 5.0)
    assert (config.positions, config.norm, config.activation) == ("rotary", "rmsnorm", "relu2")
    if engine == "torch":  # a resume given none of the flags goes on with the same model
        assert main(["train", "--resume", "--out", str(out), "--max-iters", "6"]) == 0
        assert load_config(out) == config
        assert read_trainer_state(out / "checkpoint")["iteration"] == 6


@pytest.mark.parametrize("value", ["0", "-2", "nan", "inf"])
def test_a_softcap_that_is_not_positive_writes_nothing(corpus, tmp_path, capsys, value):
    out = tmp_path / "out"
    assert main(["train", *tiny_flags(corpus, out), f"--logit-softcap={value}"]) == 2
    assert "--logit-softcap must be a positive number" in error_line(capsys)
    assert not out.exists()


@pytest.mark.parametrize(
    ("flags", "named", "unnamed"),
    [
        (["--vocab-size", "0"], ["--vocab-size"], ["vocab_size"]),
        (["--block-size", "0"], ["--block-size"], ["block_size"]),
        (["--n-layer", "0"], ["--n-layer"], ["n_layer"]),
        (["--n-embd", "18", "--n-head", "4"], ["--n-embd", "--n-head"], ["n_embd", "n_head"]),
        (["--block-size", str(2**50)], ["--block-size", "--n-embd"], ["block_size", "n_embd"]),
    ],
)
def test_a_refused_model_setting_is_named_by_the_flag_typed(
    corpus, tmp_path, capsys, flags, named, unnamed
):
    out = tmp_path / "out"
    assert main(["train", *tiny_flags(corpus, out), *flags]) == 2
    line = error_line(capsys)
    assert all(flag in line for flag in named), line
    assert not any(field in line for field in unnamed), line
    assert not (out / "checkpoint").exists()


def test_n_inner_sets_the_feed_forward_width_and_a_resume_keeps_it(corpus, tmp_path):
    out = tmp_path / "out"
    assert main(["train", *tiny_flags(corpus, out, max_iters=2), "--n-inner", "40"]) == 0
    model = GPT(load_config(out))
    assert model.config.n_inner == 40
    assert model.transformer.h[0].mlp.c_fc.weight.shape[0] == 40  # W_1: (d_ff, d_model)
    assert main(["train", "--resume", "--out", str(out), "--max-iters", "3"]) == 0
    assert load_config(out).n_inner == 40


@pytest.mark.parametrize("value", ["0", "-3"])
def test_an_n_inner_below_1_is_one_sentence_and_writes_nothing(corpus, tmp_path, capsys, value):
    out = tmp_path / "out"
    assert main(["train", *tiny_flags(corpus, out), f"--n-inner={value}"]) == 2
    assert f"--n-inner must be an integer of at least 1, got {value}" in error_line(capsys)
    assert not out.exists()


@pytest.mark.parametrize("engine", ["torch", "numpy"])
def test_position_base_sets_the_rotary_angles_and_a_resume_keeps_it(corpus, tmp_path, engine):
    out = tmp_path / "out"
    flags = tiny_flags(corpus, out, max_iters=2, engine=engine)
    assert main(["train", *flags, "--position-base", "500"]) == 0
    config = load_config(out)
    assert (config.positions, config.position_base) == ("rotary", 500.0)
    rope = GPT(config).rope  # cos(m θ_i) with θ_i = 500^(-2i/hs), computed here in float64
    i = torch.arange(config.head_dim // 2, dtype=torch.float64)
    theta = 500.0 ** (-2 * i / config.head_dim)
    angles = torch.arange(config.block_size, dtype=torch.float64)[:, None] * theta
    torch.testing.assert_close(rope.cos.double(), torch.cos(angles), rtol=0, atol=1e-6)
    torch.testing.assert_close(rope.sin.double(), torch.sin(angles), rtol=0, atol=1e-6)
    assert main(["train", "--resume", "--out", str(out), "--max-iters", "3"]) == 0
    assert load_config(out).position_base == 500.0


@pytest.mark.parametrize("positions", ["learned", "none"])
def test_a_position_base_for_positions_without_angles_is_refused(
    corpus, tmp_path, capsys, positions
):
    out = tmp_path / "out"
    flags = ["--positions", positions, "--position-base", "500"]
    assert main(["train", *tiny_flags(corpus, out), *flags]) == 2
    line = error_line(capsys)
    assert "--position-base sets the angles of rotary and sinusoidal positions" in line
    assert f"this model's positions are {positions}" in line
    assert not out.exists()


@pytest.mark.parametrize("value", ["1", "0", "-5", "nan", "inf"])
def test_a_position_base_of_at_most_1_is_one_sentence_and_writes_nothing(
    corpus, tmp_path, capsys, value
):
    out = tmp_path / "out"
    assert main(["train", *tiny_flags(corpus, out), f"--position-base={value}"]) == 2
    assert "--position-base must be" in error_line(capsys)
    assert not out.exists()


# ---------------------------------------------------------------------- --model bert
def test_model_bert_means_the_bert_shakespeare_masked_lm_recipe():
    config = config_from_args(build_parser().parse_args(["train", "--model", "bert"])).resolve()
    assert (config.model, config.preset, config.tokenizer) == ("bert", "bert-shakespeare", "bert")
    shape = (config.n_layer, config.n_head, config.n_embd, config.block_size)
    assert shape == (4, 4, 256, 64)
    assert (config.positions, config.block_order, config.dropout) == ("rotary", "post", 0.0)
    assert (config.batch_size, config.lr, config.min_lr) == (16, 1e-3, 1e-4)
    assert (config.beta2, config.weight_decay) == (0.98, 0.01)


def test_the_help_names_every_preset_of_both_models():
    from light_llm.config import PRESETS
    from light_llm.models.bert import ENCODER_PRESETS

    help_text = build_parser()._subparsers._group_actions[0].choices["train"].format_help()
    for name in [*PRESETS, *ENCODER_PRESETS]:
        assert name in help_text, name


@pytest.mark.parametrize(
    ("flags", "phrase"),
    [
        (["--model", "bert", "--engine", "numpy"], "no trainer for bert on the numpy engine"),
        (
            ["--model", "bert", "--tokenizer", "char"],
            "trains with the bert or wordpiece tokenizer, not 'char'",
        ),
        (
            ["--model", "bert", "--tokenizer", "gpt2"],
            "trains with the bert or wordpiece tokenizer, not 'gpt2'",
        ),
        (["--model", "bert", "--preset", "char-baby"], "'char-baby' is a gpt shape"),
        (["--preset", "bert-shakespeare"], "'bert-shakespeare' is a bert shape"),
        (["--tokenizer", "bert"], "trains with the char, gpt2 or bpe tokenizer, not 'bert'"),
        (["--model", "bert", "--preset", "nope"], "unknown preset 'nope'; bert presets:"),
        (["--model", "bert", "--attention", "linear"], "the encoder needs softmax"),
        (["--model", "bert", "--logit-softcap", "5"], "soft-capping is a GPT option"),
        (["--model", "bert", "--smear"], "the smear is a GPT option"),
        (
            ["--optimizer", "muon", "--muon-lr", "0"],
            "--muon-lr must be a positive number, got 0.0.",
        ),
        (
            ["--optimizer", "muon", "--muon-momentum", "1"],
            "--muon-momentum must be a finite number in [0, 1)",
        ),
        (
            ["--preset", "nanogpt-cpu", "--muon-lr", "0.01"],
            "--muon-lr sets light-llm's Muon optimizer, but this run uses adamw; add "
            "--optimizer muon.",
        ),
        (
            [
                "--optimizer",
                "adamw",
                "--muon-orthogonaliser",
                "polar-express",
                "--muon-scale",
                "aspect",
            ],
            "--muon-orthogonaliser and --muon-scale set light-llm's Muon optimizer, but this run "
            "uses adamw; add --optimizer muon.",
        ),
        (
            ["--preset", "nanogpt-cpu", "--cautious-weight-decay"],
            "written into light-llm's Muon + AdamW optimizer, and this run uses PyTorch's adamw",
        ),
        (["--cautious-weight-decay", "--weight-decay", "0"], "but weight_decay is 0"),
        (
            ["--preset", "nanogpt-cpu", "--muon-momentum-warmup", "10"],
            "--muon-momentum-warmup warms up the momentum of light-llm's Muon + AdamW "
            "optimizer, and this run uses PyTorch's adamw; add --optimizer muon.",
        ),
        (
            ["--preset", "nanogpt-cpu", "--normuon"],
            "NorMuon normalises the update of light-llm's Muon + AdamW optimizer, and this run "
            "uses PyTorch's adamw; add --optimizer muon.",
        ),
        (
            ["--muon-momentum-warmup", "-1"],
            "--muon-momentum-warmup (0 = off) must be an integer of at least 0, got -1.",
        ),
        (
            ["--lr-schedule", "cosine", "--cooldown-fraction", "0.3"],
            "this run's schedule is cosine: add --lr-schedule wsd, or drop it.",
        ),
        (
            ["--lr-schedule", "wsd", "--cooldown-fraction", "0"],
            "--cooldown-fraction must be a finite number in (0, 1]",
        ),
        (["--lr-schedule", "wsd", "--cooldown-fraction", "nan"], "--cooldown-fraction must be"),
        (
            ["--preset", "bpe-cpu", "--cooldown-shape", "sqrt"],
            "--cooldown-shape sets how the wsd schedule's cooldown falls, and this run's "
            "schedule is cosine: add --lr-schedule wsd, or drop it.",
        ),
        (["--ema-beta", "1"], "--ema-beta must be a finite number in (0, 1), got 1.0."),
        (["--ema-beta", "0"], "--ema-beta must be a finite number in (0, 1), got 0.0."),
        (["--ema-beta", "nan"], "--ema-beta must be a finite number in (0, 1), got nan."),
        (
            ["--ema-beta", "0.9", "--ema-start", "-1"],
            "--ema-start must be an integer of at least 0, got -1.",
        ),
        (
            ["--ema-start", "3"],
            "--ema-start says when the weight average begins, and no --ema-beta sets one: add "
            "--ema-beta B, or drop it.",
        ),
        (
            ["--ema-beta", "0.9", "--ema-start", "11"],
            "--ema-start 11 is past the run's end (--max-iters 10), so the weight average would "
            "never begin: give at most 10.",
        ),
        (
            ["--batch-warmup", "5"],
            "--batch-warmup 5 draws smaller batches for its first iterations and needs their "
            "size: add --batch-warmup-size B0.",
        ),
        (
            ["--batch-warmup-size", "2"],
            "--batch-warmup-size sizes the batches of a batch-size warmup, and no --batch-warmup "
            "N sets one: add it, or drop --batch-warmup-size.",
        ),
        (
            ["--batch-warmup", "0", "--batch-warmup-size", "2"],
            "and no --batch-warmup N sets one",
        ),
        (
            ["--batch-warmup", "5", "--batch-warmup-size", "4"],
            "--batch-warmup-size must be a number of sequences below --batch-size 4, from 1 to "
            "3, got 4.",
        ),
        (["--batch-warmup", "5", "--batch-warmup-size", "0"], "from 1 to 3, got 0."),
        (
            ["--batch-warmup", "-1", "--batch-warmup-size", "2"],
            "--batch-warmup (0 = off) must be an integer of at least 0, got -1.",
        ),
        (
            ["--context-warmup", "5"],
            "--context-warmup 5 trains on shorter windows for its first iterations and needs "
            "their length: add --context-warmup-size T0.",
        ),
        (
            ["--context-warmup-size", "8"],
            "--context-warmup-size sizes the windows of a sequence-length warmup, and no "
            "--context-warmup N sets one: add it, or drop --context-warmup-size.",
        ),
        (
            ["--context-warmup", "5", "--context-warmup-size", "16"],
            "--context-warmup-size must be a number of tokens below --block-size 16, from 1 to "
            "15, got 16.",
        ),
        (["--context-warmup", "5", "--context-warmup-size", "0"], "from 1 to 15, got 0."),
        (
            ["--context-warmup", "-2", "--context-warmup-size", "8"],
            "--context-warmup (0 = off) must be an integer of at least 0, got -2.",
        ),
        (
            ["--model", "bert", "--context-warmup", "5", "--context-warmup-size", "8"],
            "--context-warmup shortens a GPT's windows, and an encoder's examples are whole "
            "blocks between [CLS] and [SEP]: drop it with --model bert.",
        ),
        (
            ["--mtp-weight", "0.5", "--context-warmup", "5", "--context-warmup-size", "1"],
            "--mtp-weight predicts the token after next, which a window of 1 token does not "
            "have: give windows of at least 2 tokens, or drop --mtp-weight.",
        ),
        (["--mtp-weight", "0.5", "--block-size", "1"], "which a window of 1 token does not"),
    ],
)
def test_combinations_that_make_no_sense_are_one_sentence(corpus, tmp_path, capsys, flags, phrase):
    out = tmp_path / "out"
    assert main(["train", *tiny_flags(corpus, out), *flags]) == 2
    assert phrase in error_line(capsys)
    assert not (out / "checkpoint").exists()


@pytest.mark.parametrize("engine", ["torch", "numpy"])
def test_the_initialisation_and_averaging_switches_train_and_are_recorded(corpus, tmp_path, engine):
    out = tmp_path / "run"
    flags = ["--zero-init-projections", "--ema-beta", "0.9", "--ema-start", "2"]
    assert main(["train", *tiny_flags(corpus, out, max_iters=4, engine=engine), *flags]) == 0
    resolved = read_trainer_state(out / "checkpoint")["resolved_config"]
    assert resolved["zero_init_projections"] is True
    assert (resolved["ema_beta"], resolved["ema_start"]) == (0.9, 2)
    raw = (out / "checkpoint" / "raw_weights.safetensors").exists()
    assert raw  # the raw weights beside the average, for a resume
    # a resume given none of the flags keeps them
    resume = ["train", "--resume", "--out", str(out), "--max-iters", "6", "--engine", engine]
    assert main(resume) == 0
    resumed = read_trainer_state(out / "checkpoint")["resolved_config"]
    switches = ("zero_init_projections", "ema_beta", "ema_start")
    assert [resumed[key] for key in switches] == [True, 0.9, 2]


@pytest.mark.parametrize("engine", ["torch", "numpy"])
def test_an_mtp_weight_past_its_bound_is_one_sentence_on_both_engines(
    corpus, tmp_path, capsys, engine
):
    """Above MAX_MTP_WEIGHT (1e39 overflowed torch's float32 loss while float64 NumPy trained
    on) both engines refuse in the same sentence and write nothing; the bound itself is taken."""
    out = tmp_path / "out"
    flags = tiny_flags(corpus, out, engine=engine)
    for weight in (f"{MAX_MTP_WEIGHT + 0.5}", "1e39", "inf"):
        assert main(["train", *flags, "--mtp-weight", weight]) == 2
        line = error_line(capsys)
        assert f"--mtp-weight must be at most {MAX_MTP_WEIGHT}, got {float(weight)!r}:" in line
        assert not out.exists()
    at_bound = ["train", *flags, "--mtp-weight", str(MAX_MTP_WEIGHT)]
    config = config_from_args(build_parser().parse_args(at_bound))
    assert config.resolve().mtp_weight == MAX_MTP_WEIGHT


WARMUPS = ("batch_warmup", "batch_warmup_size", "context_warmup", "context_warmup_size")


@pytest.mark.parametrize("engine", ["torch", "numpy"])
def test_the_size_warmups_train_and_are_recorded(corpus, tmp_path, engine):
    """--batch-warmup 3 --batch-warmup-size 2 --context-warmup 2 --context-warmup-size 8 at
    batch 4, context 16: iterations 0-1 see 2 x 8 tokens, 2 sees 2 x 16, 3 on 4 x 16."""
    out = tmp_path / "run"
    flags = ["--batch-warmup", "3", "--batch-warmup-size", "2"]
    flags += ["--context-warmup", "2", "--context-warmup-size", "8"]
    assert main(["train", *tiny_flags(corpus, out, max_iters=4, engine=engine), *flags]) == 0
    state = read_trainer_state(out / "checkpoint")
    assert [state["resolved_config"][key] for key in WARMUPS] == [3, 2, 2, 8]
    assert state["tokens_seen"] == 2 * 2 * 8 + 2 * 16 + 4 * 16
    if engine == "torch":  # a resume given none of the flags keeps them
        assert main(["train", "--resume", "--out", str(out), "--max-iters", "6"]) == 0
        state = read_trainer_state(out / "checkpoint")
        assert [state["resolved_config"][key] for key in WARMUPS] == [3, 2, 2, 8]
        assert state["tokens_seen"] == 2 * 2 * 8 + 2 * 16 + 3 * 4 * 16


@pytest.mark.parametrize("warmup", ["batch", "context"])
def test_a_size_warmup_with_a_time_budget_is_one_sentence_and_writes_nothing(
    corpus, tmp_path, capsys, warmup
):
    out = tmp_path / "out"
    flags = tiny_flags(corpus, out, max_iters=None, warmup_iters=6)
    flags += ["--time", "2s", f"--{warmup}-warmup", "3", f"--{warmup}-warmup-size", "2"]
    assert main(["train", *flags]) == 2
    smaller = {"batch": "smaller", "context": "shorter"}[warmup]
    assert error_line(capsys).endswith(
        f"--time fixes the run's length from the speed of its first iterations, which "
        f"--{warmup}-warmup makes {smaller} than the rest: give --max-iters instead, or drop "
        f"--{warmup}-warmup."
    )
    assert not out.exists()


def test_zero_init_projections_with_init_from_is_one_sentence_and_writes_nothing(
    corpus, tmp_path, capsys
):
    base, out = tmp_path / "base", tmp_path / "out"
    assert main(["train", *tiny_flags(corpus, base, max_iters=0)]) == 0
    flags = ["--init-from", str(base), "--data", str(corpus), "--out", str(out)]
    assert main(["train", *flags, "--zero-init-projections"]) == 2
    assert error_line(capsys).endswith(
        "--zero-init-projections sets how a new model's weights start, and --init-from starts "
        "from the base model's weights: drop one of them."
    )
    assert not out.exists()


def test_resume_with_init_from_is_one_sentence_and_writes_nothing(corpus, tmp_path, capsys):
    """--resume continues OUT's run, --init-from starts a new one: refused by name, not by the
    model flags the resumed run inherits, on a saved run and on an empty --out."""
    base, out = tmp_path / "base", tmp_path / "out"
    assert main(["train", *tiny_flags(corpus, base, max_iters=2)]) == 0
    before = folder_bytes(base / "checkpoint")
    for folder in (base, out):
        capsys.readouterr()
        flags = ["--resume", "--init-from", str(base), "--out", str(folder)]
        assert main(["train", *flags]) == 2
        assert error_line(capsys).endswith(
            f"--resume continues the run in --out and --init-from starts a new one from {base}: "
            "give one of them."
        )
    assert folder_bytes(base / "checkpoint") == before
    assert not out.exists()


def test_train_model_bert_runs_and_resumes_without_naming_the_model(corpus, tmp_path, capsys):
    out = tmp_path / "bert"
    assert main(["train", "--model", "bert", *tiny_flags(corpus, out, max_iters=5)]) == 0
    printed = capsys.readouterr().out
    assert "BERT-style encoder" in printed and "iter 5: train loss" in printed
    assert main(["train", "--resume", "--out", str(out), "--max-iters", "7"]) == 0
    printed = capsys.readouterr().out
    assert "resuming at iteration 5 of 7" in printed and "fill-mask sample" not in printed
    state = read_trainer_state(out / "checkpoint")
    assert state["iteration"] == 7 and state["resolved_config"]["model"] == "bert"
    assert main(["train", "--resume", "--model", "gpt", "--out", str(out)]) == 2
    assert "holds a bert training run, not a gpt one" in error_line(capsys)


def test_train_model_bert_ends_with_a_fill_mask_sample(corpus, tmp_path, capsys):
    out = tmp_path / "bert"
    flags = tiny_flags(corpus, out, max_iters=2, sample_tokens=1)
    assert main(["train", "--model", "bert", *flags]) == 0
    printed = capsys.readouterr().out
    sample = printed[printed.index("fill-mask sample:") :].splitlines()[1]
    prompt, candidates = sample.split("  ->  ")
    assert prompt == "to be or not to [MASK]" and len(candidates.split(", ")) == 5


@pytest.mark.parametrize(
    ("flags", "phrase"),
    [
        (["--time", "ten minutes"], "--time 'ten minutes' is not a duration"),
        (["--time", "0s"], "--time must be longer than 0 seconds"),
        (["--time", "0.000001"], "--time 0.000001 is too short: the evaluations"),
        (["--time", "5m", "--max-iters", "10"], "give --time or --max-iters, not both"),
        (["--time", "5m", "--warmup-iters", "2"], "needs --warmup-iters of at least 5"),
    ],
)
def test_a_bad_time_budget_is_one_sentence_and_writes_nothing(
    corpus, tmp_path, capsys, flags, phrase
):
    out = tmp_path / "out"
    settings = tiny_flags(corpus, out, max_iters=None, warmup_iters=6)
    assert main(["train", *settings, *flags]) == 2
    assert phrase in error_line(capsys)
    assert not out.exists()


def test_time_cannot_restart_a_saved_run(corpus, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["train", *tiny_flags(corpus, out, max_iters=2)]) == 0
    before = folder_bytes(out / "checkpoint")
    capsys.readouterr()
    assert main(["train", "--resume", "--out", str(out), "--time", "5m"]) == 2
    assert "a resumed run keeps the iteration count" in error_line(capsys)
    assert folder_bytes(out / "checkpoint") == before


def test_a_time_run_prints_its_fixed_count_and_plain_progress_lines(corpus, tmp_path, capsys):
    out = tmp_path / "out"
    flags = tiny_flags(corpus, out, max_iters=None, warmup_iters=6, log_interval=2)
    assert main(["train", *flags, "--time", "2s"]) == 0
    printed = capsys.readouterr().out
    end = read_trainer_state(out / "checkpoint")["config"]["max_iters"]
    assert f"the run is now --max-iters {end}" in printed
    assert "iter 0/?: loss" in printed  # before the count is fixed
    assert f"iter 6/{end}: loss" in printed and "tokens/s" in printed


HELP_DEFAULTS = {
    "--batch-size": "batch_size",
    "--max-iters": "max_iters",
    "--lr": "lr",
    "--warmup-iters": "warmup_iters",
    "--beta1": "beta1",
    "--beta2": "beta2",
    "--optimizer": "optimizer",
    "--muon-lr": "muon_lr",
    "--muon-orthogonaliser": "muon_orthogonaliser",
    "--muon-scale": "muon_scale",
    "--muon-momentum-warmup": "muon_momentum_warmup",
    "--batch-warmup": "batch_warmup",
    "--context-warmup": "context_warmup",
    "--lr-schedule": "lr_schedule",
    "--cooldown-shape": "cooldown_shape",
    "--eval-iters": "eval_iters",
    "--seed": "seed",
}


@pytest.mark.parametrize("flag", HELP_DEFAULTS)
def test_help_states_the_defaults_a_run_without_flags_gets(capsys, flag):
    from light_llm.train.config import TrainConfig

    with pytest.raises(SystemExit):
        main(["train", "--help"])
    lines = capsys.readouterr().out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"  {flag} "))
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].startswith("      "))
    described = " ".join(" ".join(lines[start:end]).split())
    value = getattr(TrainConfig().resolve(), HELP_DEFAULTS[flag])
    shown = f"{value:g}" if isinstance(value, float) else str(value)
    assert f"default {shown}" in described, described
    assert "adamw (default)" not in described  # the default optimizer is the preset's, Muon


def test_a_serve_port_taken_or_out_of_range_is_refused_before_the_run(corpus, tmp_path, capsys):
    out = tmp_path / "run"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["train", *tiny_flags(corpus, out), "--serve", str(port)]) == 2
    message = error_line(capsys)
    assert f"port {port} on 127.0.0.1 is already in use" in message and "--serve" in message
    assert main(["train", *tiny_flags(corpus, out), "--serve", "70000"]) == 2
    assert "--serve must be between 0 and 65535, got 70000" in error_line(capsys)
    assert not out.exists()  # nothing trained


def test_a_run_that_ends_before_the_watcher_looks_still_gets_its_explorer(tmp_path, monkeypatch):
    """train --serve: a run whose first checkpoint the watcher never saw (it ended first)
    starts the explorer at its end; and after the end no watcher starts one (that explorer
    would outlive the command)."""
    from light_llm.checkpoints import CHECKPOINT_SUBFOLDER
    from light_llm.checkpoints.run import TRAINER_STATE_FILE
    from light_llm.cli.train import ExplorerBeside

    monkeypatch.setattr(ExplorerBeside, "watch", lambda self: None)  # a watcher that never looks
    out = tmp_path / "run"
    (out / CHECKPOINT_SUBFOLDER).mkdir(parents=True)
    (out / CHECKPOINT_SUBFOLDER / TRAINER_STATE_FILE).write_text("{}")  # not servable: it exits
    beside = ExplorerBeside(out, 0)
    assert beside.process is None
    assert beside.stay(0) == 0
    assert beside.process is not None and beside.process.returncode is not None  # ran, ended
    beside.process = None  # the end has come: the lock and the flag let no start through
    with beside.lock:
        assert beside.stopped.is_set()
    monkeypatch.undo()
    beside.watch()  # returns at once, starting nothing
    assert beside.process is None


@pytest.mark.parametrize("engine", ["torch", "numpy"])
def test_a_resume_over_an_edited_corpus_says_so(corpus, tmp_path, capsys, engine):
    """Text appended to the corpus since the run started: the resume goes on over the text as
    it is now (training on more text is a reason to go on) and says so, with the sizes then
    and now; a resume over the same text says nothing of the kind."""
    text = tmp_path / "text.txt"
    shutil.copy(corpus, text)
    out = tmp_path / "out"
    assert main(["train", *tiny_flags(text, out, max_iters=2, engine=engine)]) == 0
    resume = ["train", "--resume", "--out", str(out), "--engine", engine]
    assert main([*resume, "--max-iters", "3"]) == 0
    assert "has changed since this run started" not in capsys.readouterr().out
    then = read_trainer_state(out / "checkpoint")["data"]
    with text.open("a", encoding="utf-8") as file:
        file.write("KING: a line the run has not seen before, and another after it\n" * 40)
    assert main([*resume, "--max-iters", "4"]) == 0
    now = read_trainer_state(out / "checkpoint")["data"]
    assert now["train_tokens"] > then["train_tokens"]
    printed = capsys.readouterr().out
    assert f"{text} has changed since this run started" in printed
    assert (
        f"({then['train_tokens']:,} training and {then['val_tokens']:,} validation tokens then, "
        f"{now['train_tokens']:,} and {now['val_tokens']:,} now)"
    ) in printed


@pytest.mark.parametrize("engine", ["torch", "numpy"])
def test_a_resume_that_changes_the_optimizers_settings_says_so(corpus, tmp_path, capsys, engine):
    """--lr and --weight-decay on a resume are taken (a lower rate for the rest of a run is a
    reason to resume), but never without a word: the sentence names each, the saved value and
    the new, and the run records them; a resume that gives the saved value says nothing."""
    out = tmp_path / "out"
    flags = tiny_flags(corpus, out, max_iters=4, engine=engine, lr=2e-3, dtype=None)
    assert main(["train", *flags]) == 0  # the device's dtype, which its config records as None
    saved = read_trainer_state(out / "checkpoint")["resolved_config"]
    resume = ["train", "--resume", "--out", str(out), "--engine", engine]
    dtype = read_trainer_state(out / "checkpoint")["dtype"]  # the config's may say None
    assert main([*resume, "--max-iters", "5", "--lr", "0.002", "--dtype", dtype]) == 0
    assert "this resume changes" not in capsys.readouterr().out
    assert main([*resume, "--max-iters", "7", "--lr", "0.005", "--weight-decay", "0.3"]) == 0
    printed = capsys.readouterr().out
    assert (
        f"this resume changes --lr 0.002 -> 0.005, --weight-decay {saved['weight_decay']!r} -> "
        "0.3: the run goes on with them"
    ) in printed
    resumed = read_trainer_state(out / "checkpoint")["resolved_config"]
    assert (resumed["lr"], resumed["weight_decay"]) == (0.005, 0.3)


def children(pid: int) -> list[int]:
    """The processes ``pid`` has started and not yet reaped (Linux: /proc)."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(child) for child in (task / "children").read_text().split()]
    return found


def read_process_command(pid: int) -> list[str]:
    """The command line of process ``pid`` (Linux: /proc)."""
    return Path(f"/proc/{pid}/cmdline").read_text().split("\0")


def is_gone(pid: int) -> bool:
    """Whether process ``pid`` has ended (a zombie nobody reaps has ended too)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return True
    return fields[0] in ("Z", "X")


def wait_until(condition, what: str, deadline_s: float = 120.0) -> None:
    """Poll ``condition`` until it holds; a test that would hang fails naming ``what``."""
    import time

    end = time.monotonic() + deadline_s
    while not condition():
        assert time.monotonic() < end, f"never: {what}"
        time.sleep(0.1)


def accepts(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def served_run(corpus, out, *flags):
    """``light-llm train --serve PORT`` (and ``flags``) in a process of its own, run until
    training has ended and its explorer listens: the process, the explorer's pid and the port."""
    import subprocess
    import sys

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    command = [sys.executable, "-m", "light_llm", "train", *tiny_flags(corpus, out), *flags]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(
        [*command, "--serve", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    for line in process.stdout:
        if line.startswith("training has ended"):
            break
    else:
        raise AssertionError(f"the run ended without its explorer: {process.wait()}")
    wait_until(lambda: accepts(port), "the explorer listens")
    (explorer,) = children(process.pid)
    return process, explorer, port


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc (Linux)")
@pytest.mark.parametrize(
    "flags", [[], ["--batch-size", "2", "--grad-accum", "2", "--processes", "2"]]
)
def test_sigterm_after_training_ends_the_command_and_its_explorer(corpus, tmp_path, flags):
    """train --serve once training has ended: SIGTERM ends the command as Ctrl-C does,
    stopping the explorer, which leaves the port free (it stayed up, holding the port). With
    --processes the command serves the run and its processes do not (before, each started an
    explorer, and all but one found the port taken)."""
    process, explorer, port = served_run(corpus, tmp_path / "run", *flags)
    try:
        assert read_process_command(explorer)[3:5] == ["serve", "--checkpoint"]
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=120) == 0
        assert is_gone(explorer) and not accepts(port)
        assert process.stderr.read() == ""  # no port found taken, no fatal error at the end
    finally:
        process.kill()
        if not is_gone(explorer):
            os.kill(explorer, signal.SIGKILL)
        process.stdout.close()
        process.stderr.close()


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc (Linux)")
def test_the_explorer_ends_when_its_train_command_is_killed(corpus, tmp_path):
    """train --serve killed outright (kill -9, which it cannot handle): its explorer, in a
    session of its own, sees its parent gone and ends, freeing the port, not orphaned."""
    process, explorer, port = served_run(corpus, tmp_path / "run")
    try:
        process.kill()
        process.wait(timeout=120)
        wait_until(lambda: is_gone(explorer), "the explorer ends")
        wait_until(lambda: not accepts(port), "the port is free")
    finally:
        if not is_gone(explorer):
            os.kill(explorer, signal.SIGKILL)
        process.stdout.close()
        process.stderr.close()
