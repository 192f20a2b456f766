"""Scoring a checkpoint on a corpus's validation split (``light-llm eval``, and any program that
wants the same numbers): the mean next-token cross-entropy (nats per token, seed 000 §7), its
perplexity exp(loss) (seed 002 §10.2, eq. 44), the same loss in bits per byte and per
character of the text the predicted tokens cover (loss x tokens / (ln 2 x bytes): every
token of the split but its first, and its text but the first token's), and the unigram
baseline; for
a BERT-style encoder, the masked-LM loss over masks drawn with a fixed seed (seed 003 §29).

By default every validation token is scored once, in consecutive windows of the model's
context; ``eval_iters`` instead scores that many batches at the random offsets the trainer's
evaluations use, reproducing its ``val_loss``.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from light_llm.checkpoints import ModelFolder, inspect_folder, load, load_tokenizer
from light_llm.checkpoints.run import (
    CHECKPOINT_SUBFOLDER,
    DATA_SUBFOLDER,
    TRAINER_STATE_FILE,
    read_trainer_state,
)
from light_llm.config import check_batch_fits
from light_llm.data import (
    TokenDataset,
    encode_corpus,
    load_corpus,
    predicted_sizes,
    shakespeare_stand_in,
    split_sizes,
    token_dtype,
)
from light_llm.device import resolve_device
from light_llm.errors import CheckpointError, flag
from light_llm.limits import MAX_BATCH_SIZE, MAX_EVAL_BATCHES, check_integer
from light_llm.models.quantize import quantize_gpt
from light_llm.reference.quantize import check_quantizable, check_quantization
from light_llm.train.config import GENERAL_DEFAULTS
from light_llm.train.evaluate import (
    sampled_loss,
    sequential_loss,
    unigram_log_probabilities,
    unigram_loss,
)
from light_llm.train.metrics import bits_per_unit, perplexity
from light_llm.train.mlm import SEQUENTIAL_MASK_SEED, mlm_split

SEQUENTIAL_BATCH_SIZE = 32  # windows a batch when every token is scored


@dataclass(frozen=True)
class Score:
    """A checkpoint's loss on a validation split, and what was scored."""

    checkpoint: Path
    corpus: str | None  # the text file; None for Shakespeare
    # whether the folder records the corpus it was trained on (a run's does; export's,
    # quantize's and merge's do not, so Shakespeare stands in for it unless --data is given)
    corpus_recorded: bool
    encoder: bool  # a masked-LM loss (no bits per byte)
    val_loss: float  # nats per scored token
    tokens_scored: int
    scored: str  # what was scored, in words
    val_bytes: int  # of the text the predicted tokens cover (a GPT's: all but the first's)
    val_chars: int
    unigram_baseline: float | None  # None when a sample of batches was scored

    @property
    def perplexity(self) -> float:
        """PPL = exp(loss) (seed 002 §10.2, eq. 44)."""
        return perplexity(self.val_loss)

    @property
    def bits_per_byte(self) -> float:
        """loss x tokens scored / (ln 2 x bytes of the text they cover)."""
        return bits_per_unit(self.val_loss, self.tokens_scored, self.val_bytes)

    @property
    def bits_per_char(self) -> float:
        """loss x tokens scored / (ln 2 x characters of the text they cover)."""
        return bits_per_unit(self.val_loss, self.tokens_scored, self.val_chars)

    @property
    def nats_per_char(self) -> float:
        """bits per character x ln 2: the loss per character of text, comparable between a
        BPE model and a character model."""
        return self.bits_per_char * math.log(2)


def score_checkpoint(
    checkpoint: str | os.PathLike,
    data: str | os.PathLike | None = None,
    *,
    eval_iters: int | None = None,
    batch_size: int | None = None,
    device: str = "auto",
    quantize: str | None = None,
    on_batch: Callable[[], object] | None = None,
    batches_expected: Callable[[int], object] | None = None,
) -> Score:
    """The validation loss of the model in ``checkpoint`` on ``data`` (else the corpus it was
    trained on, as recorded by light-llm train, else Shakespeare); see the module docstring.
    ``batches_expected(n)`` is told how many batches a whole-split score will take and
    ``on_batch()`` is called after each (a progress bar). ``quantize="int8"`` scores the GPT
    with its weights rounded to int8 (:func:`light_llm.models.quantize.quantize_gpt`)."""
    for name, value, most in (
        ("eval_iters", eval_iters, MAX_EVAL_BATCHES),
        ("batch_size", batch_size, MAX_BATCH_SIZE),
    ):
        if value is not None:
            check_integer(flag(name), value, 1, most)
    if quantize is not None:
        check_quantization(quantize)
    model_folder = inspect_folder(checkpoint)
    if quantize is not None:
        check_quantizable(model_folder, "--quantize")
    folder = model_folder.path
    trained = {}
    if (folder / TRAINER_STATE_FILE).is_file():
        trained = read_trainer_state(folder)["resolved_config"]
    # realpath, not Path.resolve: a symlink loop is for load_corpus to report, not a RuntimeError
    corpus = os.path.realpath(Path(data).expanduser()) if data else trained.get("data")
    torch_device = resolve_device(device)
    encoder = model_folder.holds_encoder
    model = load_scored_model(model_folder, encoder, torch_device)
    if quantize is not None:
        model = quantize_gpt(model)
    tokenizer = load_tokenizer(model_folder, check_model=True)
    text = load_corpus(corpus)
    with tempfile.TemporaryDirectory(prefix="light-llm-eval-") as scratch:
        cache = Path(scratch)
        own = folder.parent / DATA_SUBFOLDER  # the run's token cache, not rebuilt; none is
        ours = trained and corpus == trained.get("data") and folder.name == CHECKPOINT_SUBFOLDER
        if ours and own.is_dir():  # written into a run without one (a shipped run)
            cache = own
        with shakespeare_stand_in(corpus, folder, "--data FILE"):
            train_tokens, dataset = split_datasets(
                text, tokenizer, cache, model.config.block_size, encoder
            )
        # the predicted tokens and the text they cover (an encoder's: the split's, unused)
        val_size = (split_sizes(cache) if encoder else predicted_sizes(cache, tokenizer))["val"]
        baseline = None
        if eval_iters is not None:
            batch_size = batch_size or trained.get("batch_size", GENERAL_DEFAULTS["batch_size"])
            seed = trained.get("seed", GENERAL_DEFAULTS["seed"])
            check_batch_fits(model.config, batch_size)
            total, targets = sampled_loss(
                model,
                dataset,
                "val",
                batch_size=batch_size,
                n_batches=eval_iters,
                seed=seed,
                device=torch_device,
            )
            loss = total.item() / eval_iters
            # a GPT's sample mean stands for every token the whole-split score predicts (all
            # but the first of the split, each predicted from the ones before it); an
            # encoder's scored tokens are the masked ones of the batches
            n_scored = int(targets) if encoder else val_size["tokens"]
            block_size = model.config.block_size
            scored = f"{eval_iters} random batches of {batch_size} x {block_size} tokens"
        else:
            batch_size = batch_size or SEQUENTIAL_BATCH_SIZE
            windows = dataset.tokens if encoder else dataset  # the TokenDataset cut up
            n_windows = max(1, (len(windows) - 1) // windows.block_size)
            check_batch_fits(model.config, min(batch_size, n_windows))
            if batches_expected is not None:
                batches_expected(-(-sequential_windows(windows, encoder) // batch_size))
            loss, n_scored = sequential_loss(
                model, dataset, batch_size=batch_size, device=torch_device, on_batch=on_batch
            )
            scored = scored_windows(n_scored, model.config.block_size, encoder)
            log_p = unigram_log_probabilities(train_tokens, tokenizer.vocab_size)
            baseline = unigram_loss(log_p, dataset, batch_size=batch_size)
    if not math.isfinite(loss):
        raise CheckpointError(
            f"the validation loss of {folder} is {loss}: the model's outputs overflow or its "
            "weights are corrupt, so there is nothing meaningful to report."
        )
    return Score(
        checkpoint=folder,
        corpus=corpus,
        corpus_recorded=bool(trained),
        encoder=encoder,
        val_loss=loss,
        tokens_scored=n_scored,
        scored=scored,
        val_bytes=val_size["bytes"],
        val_chars=val_size["chars"],
        unigram_baseline=baseline,
    )


def load_scored_model(folder: ModelFolder, encoder: bool, device):
    """The GPT, or the encoder with its MLM head, in ``folder``, on ``device``."""
    if not encoder:
        return load(folder, device=device)
    model = load(folder, architecture="bert", device=device)
    if model.mlm_head is None:
        raise CheckpointError(
            f"{folder.path} holds an encoder without a masked-LM head (a sentence-embedding "
            "model), so it has no masked-LM loss to measure."
        )
    return model


def split_datasets(text: str, tokenizer, cache: Path, block_size: int, encoder: bool):
    """(training split's ids, validation dataset): next-token windows of ``block_size``, or
    for an encoder masked windows of ``block_size`` - 2 tokens in [CLS] ... [SEP]."""
    train_path, val_path = encode_corpus(text, tokenizer, cache)
    dtype = token_dtype(tokenizer.vocab_size)
    # only the validation split is scored: the training split may be shorter than a window
    if encoder:
        val = mlm_split(val_path, tokenizer, block_size)
    else:
        val = TokenDataset(val_path, dtype, block_size)
    return np.fromfile(train_path, dtype=dtype), val


def sequential_windows(windows: TokenDataset, encoder: bool) -> int:
    """How many windows a whole-split score cuts the split into (a GPT's last, shorter window
    included: :meth:`TokenDataset.sequential_batches`)."""
    n_windows = len(range(0, len(windows) - windows.block_size, windows.block_size))
    if not encoder and n_windows * windows.block_size < len(windows) - 1:
        n_windows += 1
    return n_windows


def scored_windows(n_tokens: int, block_size: int, encoder: bool) -> str:
    """What a whole-split score scored, in words."""
    if encoder:
        return (
            f"{n_tokens:,} masked tokens in windows of {block_size}, masks drawn with seed "
            f"{SEQUENTIAL_MASK_SEED}"
        )
    return f"{n_tokens:,} tokens in windows of {block_size}"
