"""Training with the NumPy engine: the loop, its output folder, the options it refuses, and
(slow) its loss curve against the PyTorch trainer's on char-baby."""

import json

import numpy as np
import pytest
import torch

from light_llm.checkpoints import load
from light_llm.checkpoints.run import read_trainer_state
from light_llm.errors import CheckpointError, ConfigError, TrainingError
from light_llm.reference.model import NumpyGPT
from light_llm.train import TrainConfig, numpy_trainer
from light_llm.train.numpy_trainer import train_numpy
from tests.train.helpers import record_input_shapes

SMALL = dict(
    tokenizer="char",
    n_layer=1,
    n_head=2,
    n_embd=16,
    block_size=16,
    batch_size=4,
    max_iters=8,
    eval_interval=4,
    eval_iters=2,
    sample_tokens=12,
    lr=3e-3,
    warmup_iters=2,
    device="cpu",  # where the NumPy engine runs: the PyTorch trainer compared on it too
)


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.txt"
    line = "to be or not to be, that is the question.\n"
    path.write_text(line * 60, encoding="utf-8")
    return path


def test_train_numpy_writes_a_checkpoint_both_engines_load(corpus, tmp_path, capsys):
    out = tmp_path / "run"
    result = train_numpy(TrainConfig(data=str(corpus), out=str(out), **SMALL))
    assert [record["iter"] for record in result.evaluations] == [0, 4, 8]
    assert result.iteration == 8 and sorted(result.losses) == list(range(8))
    assert result.evaluations[-1]["val_loss"] < result.evaluations[0]["val_loss"]
    lines = [  # the evaluations' lines (training-loss lines come between them)
        line for line in (out / "metrics.jsonl").read_text().splitlines() if '"eval"' in line
    ]
    assert [json.loads(line)["iter"] for line in lines] == [0, 4, 8]
    assert (out / "loss_curve.png").stat().st_size > 0
    assert len(result.sample) == 1 + 12  # the newline prompt and 12 characters
    model = load(out, engine="numpy")
    torch_model = load(out)
    idx = np.array([[1, 2, 3, 4]])
    logits, _ = torch_model(torch.from_numpy(idx))
    assert np.allclose(model.forward(idx)[0], logits.detach().numpy(), atol=1e-5)
    with pytest.raises(TrainingError, match="already holds a training checkpoint"):
        train_numpy(TrainConfig(data=str(corpus), out=str(out), **SMALL))


@pytest.mark.parametrize("sampling", ["uniform", "passes"])
def test_grad_accumulation_steps_with_the_mean_of_the_micro_batch_gradients(
    corpus, tmp_path, sampling
):
    """With grad_accum = 2 one step uses the mean gradient of micro-batches (0, 0) and (0, 1),
    the windows the PyTorch trainer draws for them: at starts drawn by their generators, or
    the run's first 2B windows of its shuffled passes; clipped at 1 (the default clips none;
    the mean's norm here is 1.05-1.08), so that the clipping sees the mean and not a
    micro-batch's gradient."""
    from light_llm.data import TokenDataset, encode_corpus, load_corpus
    from light_llm.reference.optim import AdamW, clip_grad_norm
    from light_llm.schedule import learning_rate
    from light_llm.tokenizers import get_tokenizer
    from light_llm.train.batches import micro_batch_rng, pass_window_starts
    from light_llm.train.numpy_trainer import train_step

    config = TrainConfig(
        data=str(corpus),
        out=str(tmp_path),
        grad_accum=2,
        sampling=sampling,
        grad_clip=1.0,
        **SMALL,
    ).resolve()
    text = load_corpus(config.data)
    tokenizer = get_tokenizer("char", text=text)
    train_path, _ = encode_corpus(text, tokenizer, tmp_path / "data")
    dataset = TokenDataset(train_path, np.uint16, config.block_size)
    model_config = config.model_config(tokenizer.vocab_size)
    stepped, by_hand = NumpyGPT(model_config, seed=1), NumpyGPT(model_config, seed=1)
    loss = train_step(stepped, AdamW(stepped.params, config.lr), dataset, config, 0)
    grads, losses = [], []
    for slot in (0, 1):
        if sampling == "uniform":
            rng = micro_batch_rng(config.seed, 0, slot)
            x, y = dataset.sample_windows(config.batch_size, rng)
        else:
            first, count = slot * config.batch_size, config.batch_size
            starts = pass_window_starts(config.seed, len(dataset), config.block_size, first, count)
            x, y = dataset.window_arrays(starts)
        _, slot_loss, cache = by_hand.forward(x, y)
        grads.append(by_hand.backward(cache))
        losses.append(slot_loss)
    mean = {name: (grads[0][name] + grads[1][name]) / 2 for name in grads[0]}
    clip_grad_norm(mean, config.grad_clip)
    lr = learning_rate(0, config.lr, config.min_lr, config.warmup_iters, config.lr_decay_iters)
    AdamW(by_hand.params, config.lr).step(mean, lr)
    assert loss == pytest.approx(sum(losses) / 2)
    for name, value in stepped.params.items():
        assert np.allclose(value, by_hand.params[name], rtol=1e-6, atol=1e-7), name


@pytest.mark.parametrize(
    "option, message",
    [
        (dict(device="cuda"), "CPU only"),
        (dict(dtype="bfloat16"), "float32 or float64"),
        (dict(compile=True), "cannot honour --compile"),
        (dict(gradient_checkpointing=True), "cannot honour --gradient-checkpointing"),
        (dict(time="5m"), "cannot honour --time"),
    ],
)
def test_options_the_numpy_engine_cannot_honour(option, message, tmp_path):
    with pytest.raises(ConfigError, match=message):
        train_numpy(TrainConfig(out=str(tmp_path / "x"), **option))


@pytest.mark.slow
def test_char_baby_200_iterations_follow_the_pytorch_trainer(tmp_path):
    """Same seed, same initial weights, same batches (micro_batch_rng / eval_batch_rng): the
    validation losses of the two engines stay within 1% of each other, and fall."""
    from light_llm.models.gpt import GPT
    from light_llm.train import train

    settings = dict(
        max_iters=200, eval_interval=50, eval_iters=10, sample_tokens=0, seed=1337, device="cpu"
    )
    torch_result = train(TrainConfig(out=str(tmp_path / "torch"), **settings))
    config = TrainConfig(out=str(tmp_path / "numpy"), engine="numpy", **settings).resolve()
    model_config = load(tmp_path / "torch").config
    torch.manual_seed(config.seed)  # the PyTorch trainer's initial weights
    start = NumpyGPT.from_torch_state_dict(GPT(model_config).state_dict(), model_config)
    numpy_result = train_numpy(config, model=start)
    torch_curve = [r["val_loss"] for r in torch_result.evaluations]
    numpy_curve = [r["val_loss"] for r in numpy_result.evaluations]
    assert len(torch_curve) == len(numpy_curve) == 5
    assert numpy_curve[-1] < numpy_curve[0] - 1.0
    for ours, theirs in zip(numpy_curve, torch_curve, strict=True):
        assert abs(ours - theirs) <= 0.01 * theirs, (numpy_curve, torch_curve)


@pytest.mark.parametrize(
    "switches",
    [
        {},
        {"muon_orthogonaliser": "polar-express", "cautious_weight_decay": True},
        {"muon_scale": "keller"},
        {"lr_schedule": "wsd", "cooldown_fraction": 0.4, "cooldown_shape": "linear"},
        {"lr_schedule": "wsd", "cooldown_fraction": 0.4, "cooldown_shape": "sqrt"},
        {"mtp_weight": 0.5},
        {"value_embeddings": True},
        {"embedding_skip": True},
        {"smear": True},
        {"muon_momentum_warmup": 5},
        {"normuon": True},
        {"zero_init_projections": True},
        {"batch_warmup": 3, "batch_warmup_size": 2, "grad_accum": 2},
        {"context_warmup": 3, "context_warmup_size": 8, "grad_accum": 2},
    ],
)
def test_muon_training_follows_the_pytorch_trainer(corpus, tmp_path, switches):
    """--optimizer muon on both engines from the same weights and batches: the training
    losses of every iteration agree (to 1%, room for a bfloat16 Newton-Schulz on CPUs that
    have bfloat16 arithmetic) and fall (with the default's Muon scale, "aspect"); also with
    Keller Jordan's scale, with Polar Express and cautious weight decay, on the
    warmup-stable-decay schedule (either cooldown), with multi-token prediction, with value
    embeddings (their table at the embedding rate), with the embedding skip, with the smear,
    with Muon's momentum warmup, with NorMuon, from zero-initialised output projections (each
    trainer zeroes them in the weights it starts from), and under a batch-size or
    sequence-length warmup (both draw the same smaller batches, the same shorter windows,
    first)."""
    from light_llm.models.gpt import GPT
    from light_llm.train import train

    settings = dict(SMALL, data=str(corpus), optimizer="muon", muon_lr=0.05, sample_tokens=0)
    settings.update(switches)
    torch_result = train(TrainConfig(out=str(tmp_path / "torch"), dtype="float32", **settings))
    config = TrainConfig(out=str(tmp_path / "numpy"), engine="numpy", **settings).resolve()
    model_config = load(tmp_path / "torch").config
    torch.manual_seed(config.seed)  # the PyTorch trainer's initial weights
    start = NumpyGPT.from_torch_state_dict(GPT(model_config).state_dict(), model_config)
    numpy_result = train_numpy(config, model=start)
    assert sorted(numpy_result.losses) == sorted(torch_result.losses) == list(range(8))
    for iteration, loss in numpy_result.losses.items():
        assert loss == pytest.approx(torch_result.losses[iteration], rel=1e-2), iteration
    assert numpy_result.losses[7] < numpy_result.losses[0] - 0.1


def test_the_weight_average_follows_the_pytorch_trainer(corpus, tmp_path):
    """--ema-beta 0.7 --ema-start 2 on both engines from the same weights and batches
    (AdamW, float32): the training losses are those of the run without an average, the saved
    models (the averages) agree with each other and differ from the raw weights, and so do
    the evaluations."""
    from safetensors.torch import load_file

    from light_llm.models.gpt import GPT
    from light_llm.train import train

    def read(name, file="model.safetensors"):
        return load_file(tmp_path / name / "checkpoint" / file)

    settings = dict(SMALL, data=str(corpus), optimizer="adamw", sample_tokens=0, lr=3e-2)
    averaged = dict(settings, ema_beta=0.7, ema_start=2)
    torch_result = train(TrainConfig(out=str(tmp_path / "torch"), dtype="float32", **averaged))
    results = {}
    for name, run in (("numpy", averaged), ("plain", settings)):
        config = TrainConfig(out=str(tmp_path / name), engine="numpy", **run)
        model_config = load(tmp_path / "torch").config
        torch.manual_seed(config.resolve().seed)  # the PyTorch trainer's initial weights
        start = NumpyGPT.from_torch_state_dict(GPT(model_config).state_dict(), model_config)
        results[name] = train_numpy(config, model=start)
    assert results["numpy"].losses == results["plain"].losses
    for iteration, loss in results["numpy"].losses.items():
        assert loss == pytest.approx(torch_result.losses[iteration], rel=1e-4), iteration
    ours, theirs, plain = read("numpy"), read("torch"), read("plain")
    raw = read("torch", "raw_weights.safetensors")
    assert ours.keys() == theirs.keys() == raw.keys()
    for key, value in ours.items():
        assert torch.allclose(value, theirs[key], rtol=1e-3, atol=1e-5), key
    # the averages are not the trained weights (NumPy's plain run: torch's raw weights)
    assert max(float((ours[k] - plain[k]).abs().max()) for k in ours) > 1e-3
    assert max(float((theirs[k] - raw[k]).abs().max()) for k in raw) > 1e-3
    evaluations = [
        [record["val_loss"] for record in result.evaluations]
        for result in (results["numpy"], torch_result, results["plain"])
    ]
    assert evaluations[0] == pytest.approx(evaluations[1], rel=1e-4)
    assert evaluations[0][-1] != pytest.approx(evaluations[2][-1], rel=1e-3)


def test_the_muon_momentum_warmup_sets_each_steps_momentum(corpus, tmp_path, monkeypatch):
    """--muon-momentum-warmup 4 with μ = 0.9: the NumPy trainer steps with μ = 0.85, 0.8625,
    0.875, 0.8875, then 0.9 (as the PyTorch trainer, light_llm.schedule.muon_momentum)."""
    from light_llm.reference.optim import MuonAdamW

    seen = []
    original = MuonAdamW.step

    def recording(self, grads, lr=None):
        seen.append(self.momentum)
        return original(self, grads, lr)

    monkeypatch.setattr(MuonAdamW, "step", recording)
    settings = dict(SMALL, data=str(corpus), optimizer="muon", sample_tokens=0, max_iters=6)
    config = TrainConfig(out=str(tmp_path / "run"), engine="numpy", **settings)
    config.muon_momentum, config.muon_momentum_warmup = 0.9, 4
    train_numpy(config)
    expected = [0.85, 0.8625, 0.875, 0.8875, 0.9, 0.9]
    assert seen == pytest.approx(expected, rel=1e-12, abs=0)


def test_the_batch_warmup_draws_each_iterations_size_and_counts_its_tokens(
    corpus, tmp_path, monkeypatch
):
    """--batch-warmup 2 --batch-warmup-size 1 at batch 4, context 16, 5 iterations: the NumPy
    step sees windows (1, 16) in iterations 0 and 1, (4, 16) after, and the checkpoint counts
    2 x 1 x 16 + 3 x 4 x 16 = 224 tokens (the probes likewise, at their iterations)."""
    shapes, _ = record_input_shapes(monkeypatch, NumpyGPT)
    settings = dict(SMALL, data=str(corpus), sample_tokens=0, max_iters=5, eval_interval=5)
    settings.update(batch_warmup=2, batch_warmup_size=1, probe_interval=1)
    train_numpy(TrainConfig(out=str(tmp_path / "run"), engine="numpy", **settings))
    assert shapes == [(1, 16)] * 2 + [(4, 16)] * 3
    assert read_trainer_state(tmp_path / "run" / "checkpoint")["tokens_seen"] == 224
    probes = sorted((tmp_path / "run" / "probes").glob("iter-*.json"))
    seen = [json.loads(path.read_text())["tokens_seen"] for path in probes]
    assert seen == [0, 16, 32, 96, 160, 224]


def test_the_context_warmup_trains_on_shorter_windows_and_evaluates_whole_blocks(
    corpus, tmp_path, monkeypatch
):
    """--context-warmup 2 --context-warmup-size 5 (batch 4, context 16), 4 iterations: the NumPy
    step sees windows (4, 5) in iterations 0 and 1, (4, 16) after, every evaluation (4, 16),
    and the checkpoint counts 2 x 4 x 5 + 2 x 4 x 16 = 168 tokens."""
    trained, evaluated = record_input_shapes(monkeypatch, NumpyGPT)
    settings = dict(SMALL, data=str(corpus), sample_tokens=0, max_iters=4, eval_interval=2)
    settings.update(context_warmup=2, context_warmup_size=5, probe_interval=0)
    train_numpy(TrainConfig(out=str(tmp_path / "run"), engine="numpy", **settings))
    assert trained == [(4, 5)] * 2 + [(4, 16)] * 2
    assert evaluated == [(4, 16)] * 2 * 2 * 3  # eval_iters 2, two splits, iterations 0, 2, 4
    assert read_trainer_state(tmp_path / "run" / "checkpoint")["tokens_seen"] == 168


class StopAfter:
    """A StopRequest that asks to stop after ``n`` iterations (Ctrl-C without a signal)."""

    def __init__(self, n):
        self.n = n

    def __call__(self, message=""):
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        return False

    @property
    def requested(self):
        self.n -= 1
        return self.n <= 0


def metrics_lines(out):
    """metrics.jsonl without what depends on the clock."""
    clock = ("elapsed_s", "tokens_per_s", "mfu")
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in record.items() if k not in clock} for record in records]


def checkpoint_arrays(out, file="model.safetensors"):
    from safetensors.numpy import load_file

    return load_file(out / "checkpoint" / file)


def straight_and_resumed(corpus, tmp_path, monkeypatch, stop_at, **settings):
    """The results and folders of a NumPy run of 8 iterations straight and of the same run
    stopped after ``stop_at`` iterations (as by Ctrl-C) and resumed to its end."""
    config = dict(SMALL, data=str(corpus), engine="numpy", **settings)
    straight = train_numpy(TrainConfig(out=str(tmp_path / "straight"), **config))
    with monkeypatch.context() as patch:
        patch.setattr(numpy_trainer, "StopRequest", StopAfter(stop_at))
        first = train_numpy(TrainConfig(out=str(tmp_path / "resumed"), **config))
    assert first.interrupted and first.iteration == stop_at
    resumed = train_numpy(TrainConfig(out=str(tmp_path / "resumed"), engine="numpy", resume=True))
    return straight, {**first.losses, **resumed.losses}, resumed


def assert_resumed_bit_for_bit(tmp_path, straight, losses, resumed, files=("model.safetensors",)):
    assert losses == straight.losses  # bit for bit, every iteration
    assert resumed.iteration == 8 and resumed.sample == straight.sample
    for file in files:
        ours, theirs = (checkpoint_arrays(tmp_path / n, file) for n in ("resumed", "straight"))
        assert ours.keys() == theirs.keys()
        assert all(np.array_equal(ours[k], theirs[k]) for k in ours), file
    assert metrics_lines(tmp_path / "resumed") == metrics_lines(tmp_path / "straight")


@pytest.mark.parametrize(
    "settings",
    [
        dict(),
        dict(optimizer="muon", normuon=True),
        dict(dropout=0.2),
    ],
    ids=["adamw", "normuon", "dropout"],
)
def test_a_resumed_run_continues_bit_for_bit(corpus, tmp_path, monkeypatch, settings):
    """8 iterations straight, and 4 + --resume to 8: the same losses, weights, optimizer
    state, metrics lines and sample (with dropout the generator's state is restored)."""
    runs = straight_and_resumed(corpus, tmp_path, monkeypatch, 4, probe_interval=3, **settings)
    assert_resumed_bit_for_bit(
        tmp_path, *runs, files=("model.safetensors", "optimizer.safetensors")
    )

    def probes(name):  # the probe records, less the clock's fields
        paths = sorted((tmp_path / name / "probes").glob("iter-*.json"))
        clock = ("elapsed_s", "seconds")
        records = [json.loads(path.read_text()) for path in paths]
        return [{k: v for k, v in record.items() if k not in clock} for record in records]

    assert [record["iter"] for record in probes("resumed")] == [0, 3, 4, 6, 8]
    assert probes("resumed") == probes("straight")
    state = read_trainer_state(tmp_path / "resumed" / "checkpoint")
    assert state["engine"] == "numpy" and state["iteration"] == 8


@pytest.mark.parametrize("stop_at", [1, 4])
def test_a_resumed_run_keeps_its_weight_average(corpus, tmp_path, monkeypatch, stop_at):
    """--ema-beta 0.9 --ema-start 2 stopped before (1) and after (4) the average starts:
    the resumed run trains the raw weights and keeps averaging, bit for bit."""
    settings = dict(ema_beta=0.9, ema_start=2, eval_interval=1)
    runs = straight_and_resumed(corpus, tmp_path, monkeypatch, stop_at, **settings)
    files = ("model.safetensors", "raw_weights.safetensors", "optimizer.safetensors")
    assert_resumed_bit_for_bit(tmp_path, *runs, files=files)


def test_normuon_switched_on_by_a_resume_follows_the_pytorch_trainer(corpus, tmp_path):
    """A Muon run of 4 iterations resumed to 8 with --normuon, on both engines from the same
    weights and batches: NorMuon's second moments start at 0 on each, and the resumed
    iterations' losses agree (to 1%, as the straight runs')."""
    from light_llm.models.gpt import GPT
    from light_llm.train import train

    settings = dict(SMALL, data=str(corpus), optimizer="muon", muon_lr=0.05, sample_tokens=0)
    settings.update(max_iters=4)
    train(TrainConfig(out=str(tmp_path / "torch"), dtype="float32", **settings))
    config = TrainConfig(out=str(tmp_path / "numpy"), engine="numpy", **settings).resolve()
    model_config = load(tmp_path / "torch").config
    torch.manual_seed(config.seed)  # the PyTorch trainer's initial weights
    train_numpy(config, model=NumpyGPT.from_torch_state_dict(GPT(model_config).state_dict(),
                                                             model_config))  # fmt: skip
    resume = dict(resume=True, max_iters=8, normuon=True, restretch_schedule=True)
    torch_result = train(TrainConfig(out=str(tmp_path / "torch"), **resume))
    numpy_result = train_numpy(TrainConfig(out=str(tmp_path / "numpy"), engine="numpy", **resume))
    assert sorted(numpy_result.losses) == sorted(torch_result.losses) == [4, 5, 6, 7]
    for iteration, loss in numpy_result.losses.items():
        assert loss == pytest.approx(torch_result.losses[iteration], rel=1e-2), iteration
    assert read_trainer_state(tmp_path / "numpy" / "checkpoint")["resolved_config"]["normuon"]
    moments = checkpoint_arrays(tmp_path / "numpy", "optimizer.safetensors")
    assert any(name.startswith("normuon.second_moment.") for name in moments)


def folder_bytes(folder):
    return {path.name: path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def test_resuming_another_engines_run_or_settings_is_refused(corpus, tmp_path):
    """A torch run resumed by the numpy engine (and the reverse), or a resume that changes
    the optimizer or the model, is refused in one sentence with nothing written."""
    from light_llm.train import train

    settings = dict(SMALL, data=str(corpus), max_iters=2, sample_tokens=0, optimizer="adamw")
    train(TrainConfig(out=str(tmp_path / "torch"), **settings))
    train_numpy(TrainConfig(out=str(tmp_path / "numpy"), engine="numpy", **settings))
    before = {name: folder_bytes(tmp_path / name) for name in ("torch", "numpy")}
    with pytest.raises(TrainingError, match=r"holds a run of the torch engine.*--engine torch"):
        train_numpy(TrainConfig(out=str(tmp_path / "torch"), engine="numpy", resume=True))
    with pytest.raises(TrainingError, match=r"holds a run of the numpy engine.*--engine numpy"):
        train(TrainConfig(out=str(tmp_path / "numpy"), resume=True))
    numpy_out = str(tmp_path / "numpy")
    changed = [
        (dict(optimizer="muon"), "optimizer ('adamw' saved, 'muon' asked)"),
        (dict(n_layer=2), "n_layer (1 saved, 2 asked)"),
    ]
    for change, difference in changed:
        config = TrainConfig(out=numpy_out, engine="numpy", resume=True, **change)
        with pytest.raises(TrainingError, match="cannot resume from") as refused:
            train_numpy(config)
        assert difference in str(refused.value)
    assert {name: folder_bytes(tmp_path / name) for name in ("torch", "numpy")} == before


def test_a_damaged_optimizer_state_is_refused_in_one_sentence(corpus, tmp_path):
    from safetensors.numpy import save_file

    out = tmp_path / "run"
    settings = dict(SMALL, data=str(corpus), max_iters=2, sample_tokens=0, engine="numpy")
    train_numpy(TrainConfig(out=str(out), **settings))
    path = out / "checkpoint" / "optimizer.safetensors"
    saved = checkpoint_arrays(out, "optimizer.safetensors")
    name = next(iter(saved))
    saved[name] = np.zeros((3, 3), np.float32)
    save_file(saved, path, metadata={"engine": "numpy", "adamw_step": "2"})
    with pytest.raises(CheckpointError, match=r"does not fit this run: .* is \(3, 3\)"):
        train_numpy(TrainConfig(out=str(out), engine="numpy", resume=True))
    path.unlink()  # a NumPy run saved before this engine resumed had no optimizer file
    before = checkpoint_arrays(out, "model.safetensors")
    with pytest.raises(CheckpointError, match="holds no optimizer state"):
        train_numpy(TrainConfig(out=str(out), engine="numpy", resume=True))
    after = checkpoint_arrays(out, "model.safetensors")
    assert all(np.array_equal(before[name], after[name]) for name in before)


def test_a_run_that_overflows_stops_in_one_sentence_naming_its_last_checkpoint(corpus, tmp_path):
    """A rate of 1e9 overflows the arithmetic: the run stops on the loss that is not finite,
    naming the last checkpoint as the PyTorch engine does, and NumPy's overflow warnings
    (lines of its source each) are not printed before it."""
    import warnings

    out = tmp_path / "run"
    settings = dict(SMALL, data=str(corpus), engine="numpy", lr=1e9, warmup_iters=0)
    with warnings.catch_warnings(record=True) as caught, pytest.raises(TrainingError) as stop:
        warnings.simplefilter("always")
        train_numpy(TrainConfig(out=str(out), **settings))
    message = str(stop.value)
    assert "loss became nan" in message or "loss became inf" in message
    assert f"the last good checkpoint is {out / 'checkpoint'} (iteration" in message
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)]
