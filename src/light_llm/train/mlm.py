"""Masked-language-model training: BERT's masking rule, batches, and the trainer for the encoder.

Seed 003 §29: "randomly masks some of the input words"; the model learns to predict them
from both sides. The rule is BERT's:

1. each real token (not [CLS], [SEP], [PAD], [MASK], [UNK]) is *chosen* with probability 15%;
2. of the chosen tokens, 80% are replaced by [MASK], 10% by a token drawn uniformly from the
   vocabulary, and 10% are left unchanged (so the model cannot tell from the input which
   positions it is scored on, and learns a representation of every token);
3. the label of a chosen position is its original token, every other position gets
   :data:`~light_llm.models.bert.IGNORE_INDEX`; the loss is the mean cross-entropy over the
   chosen positions only (:func:`light_llm.models.bert.masked_lm_loss`).

:class:`MaskedLMDataset` wraps a :class:`~light_llm.data.TokenDataset` of WordPiece ids and
has its ``get_batch(batch_size, generator, device)``, returning ``(inputs, labels)`` in place
of ``(x, y)``, so the trainer's loop, evaluation and exact resume work unchanged: window
offsets and masking are drawn from the same generator, one after the other.
:class:`EncoderSubject` is what :class:`~light_llm.train.trainer.Trainer` trains for
``light-llm train --model bert``: a :class:`~light_llm.models.bert.BertEncoder` on these
batches.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch

from light_llm.checkpoints import load_config
from light_llm.checkpoints.encoder import load_state, save_encoder
from light_llm.checkpoints.folder import WEIGHTS_FILE
from light_llm.checkpoints.tensors import read_weights
from light_llm.data import TokenDataset, encode_corpus, token_dtype
from light_llm.errors import ConfigError, TokenizerError
from light_llm.models.bert import (
    IGNORE_INDEX,
    BertEncoder,
    EncoderConfig,
    predict_masked,
)
from light_llm.tokenizers import BertTokenizer
from light_llm.train.config import TrainConfig
from light_llm.train.evaluate import unigram_log_probabilities
from light_llm.train.subject import GPTSubject

MASK_PROBABILITY = 0.15  # share of real tokens chosen for prediction
MASK_TOKEN_SHARE = 0.8  # of the chosen: replaced by [MASK]
RANDOM_TOKEN_SHARE = 0.1  # of the chosen: replaced by a random token (the rest: unchanged)
SEQUENTIAL_MASK_SEED = 0  # masks of the deterministic evaluation (sequential_batches)
# filled in at the end of training
SAMPLE_PROMPTS = ("to be or not to [MASK]", "i [MASK] you, my lord.", "what is your [MASK]?")


def uniform(
    generator: torch.Generator | np.random.Generator, shape: tuple[int, ...]
) -> torch.Tensor:
    """Uniform numbers in [0, 1) of ``shape`` (float64, on the CPU) from a torch or NumPy
    generator, so that the generator's state alone decides them."""
    if isinstance(generator, np.random.Generator):
        return torch.from_numpy(generator.random(shape))
    if isinstance(generator, torch.Generator):
        drawn = torch.rand(shape, generator=generator, dtype=torch.float64, device=generator.device)
        return drawn.cpu()
    raise TypeError(
        f"generator must be a torch.Generator or a numpy Generator, not {type(generator).__name__}."
    )


def mask_tokens(
    input_ids: torch.Tensor,
    *,
    mask_id: int,
    vocab_size: int,
    special_ids: set[int] | frozenset[int],
    generator: torch.Generator | np.random.Generator,
    attention_mask: torch.Tensor | None = None,
    mask_probability: float = MASK_PROBABILITY,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masking rule (seed 003 §29), see the module docstring: (inputs, labels).

    input_ids (B, T); ``special_ids`` and padding (``attention_mask`` 0) are never chosen.
    Returns the corrupted inputs and the labels (the original id at each chosen position,
    IGNORE_INDEX elsewhere), both (B, T) on the device of ``input_ids``.
    """
    if not 0.0 < mask_probability < 1.0:
        raise ConfigError(f"mask_probability must lie in (0, 1), got {mask_probability}.")
    ids = input_ids.cpu()
    shape = tuple(ids.shape)
    eligible = ~torch.isin(ids, torch.tensor(sorted(special_ids), dtype=ids.dtype))
    if attention_mask is not None:
        eligible &= attention_mask.cpu().bool()
    chosen = eligible & (uniform(generator, shape) < mask_probability)  # step 1
    action = uniform(generator, shape)  # step 2: which replacement, for the chosen
    to_mask = chosen & (action < MASK_TOKEN_SHARE)
    to_random = (
        chosen & (action >= MASK_TOKEN_SHARE) & (action < MASK_TOKEN_SHARE + RANDOM_TOKEN_SHARE)
    )
    random_ids = (uniform(generator, shape) * vocab_size).long().clamp_max(vocab_size - 1)
    inputs = torch.where(to_mask, torch.full_like(ids, mask_id), ids)
    inputs = torch.where(to_random, random_ids, inputs)
    labels = torch.where(chosen, ids, torch.full_like(ids, IGNORE_INDEX))  # step 3
    return inputs.to(input_ids.device), labels.to(input_ids.device)


class MaskedLMDataset:
    """Masked-LM batches from one split of a corpus's WordPiece ids.

    Each example is ``[CLS] w_1 ... w_n [SEP]`` for a window of n = ``block_size`` - 2
    consecutive ids at a random offset, masked by :func:`mask_tokens`. There is no padding,
    so the model needs no attention mask and token types are all 0.
    """

    def __init__(
        self,
        tokens: TokenDataset,
        tokenizer: BertTokenizer,
        mask_probability: float = MASK_PROBABILITY,
    ) -> None:
        if not isinstance(tokenizer, BertTokenizer):
            raise TokenizerError(
                f"masked-LM training needs the bert tokenizer (with [MASK]), not {tokenizer.name}."
            )
        self.tokens = tokens
        self.tokenizer = tokenizer
        self.mask_probability = mask_probability
        self.block_size = tokens.block_size + 2  # with [CLS] and [SEP]
        t = tokenizer
        self.special_ids = frozenset({t.cls_id, t.sep_id, t.pad_id, t.mask_id, t.unk_id})

    def __len__(self) -> int:
        return len(self.tokens)

    def get_batch(
        self,
        batch_size: int,
        generator: torch.Generator | np.random.Generator,
        device: str | torch.device = "cpu",
        context: int | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(inputs, labels), int64 tensors of shape (B, block_size), drawn from ``generator``;
        ``context``, when given, must be block_size: an example is a whole block (no
        sequence-length warmup, which TrainConfig refuses for the encoder)."""
        if context not in (None, self.block_size):
            raise ConfigError(
                f"an encoder's examples are whole blocks of {self.block_size}, not {context}."
            )
        windows, _ = self.tokens.get_batch(batch_size, generator, "cpu")  # (B, n)
        inputs, labels = self._mask(self._examples(windows), generator)
        return inputs.to(device), labels.to(device)

    def sequential_batches(
        self,
        batch_size: int,
        device: str | torch.device = "cpu",
        max_batches: int | None = None,
        mask_seed: int = SEQUENTIAL_MASK_SEED,
    ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """(inputs, labels) for consecutive windows from the start of the split, ``batch_size``
        at a time: every token of the whole windows is in exactly one, and the tokens after
        the last whole window (fewer than a window) are left out, since a window over the
        split's end would mask tokens already scored again. Window k is masked by a generator
        seeded with (``mask_seed``, k), so the masks, and the loss, depend on neither the
        batch size nor the order of evaluation."""
        first_window = 0
        for windows, _ in self.tokens.sequential_batches(
            batch_size, "cpu", max_batches, tail=False
        ):
            examples = self._examples(windows)  # (b, n + 2)
            masked = [
                self._mask(example[None], np.random.default_rng([mask_seed, first_window + row]))
                for row, example in enumerate(examples)
            ]
            first_window += len(examples)
            inputs, labels = (torch.cat(parts) for parts in zip(*masked, strict=True))
            yield inputs.to(device), labels.to(device)

    def _examples(self, windows: torch.Tensor) -> torch.Tensor:
        """[CLS] window [SEP] for each row of ``windows`` (b, n): (b, n + 2)."""
        cls = torch.full((len(windows), 1), self.tokenizer.cls_id, dtype=windows.dtype)
        sep = torch.full((len(windows), 1), self.tokenizer.sep_id, dtype=windows.dtype)
        return torch.cat([cls, windows, sep], dim=1)

    def _mask(
        self, examples: torch.Tensor, generator: torch.Generator | np.random.Generator
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return mask_tokens(
            examples,
            mask_id=self.tokenizer.mask_id,
            vocab_size=self.tokenizer.vocab_size,
            special_ids=self.special_ids,
            generator=generator,
            mask_probability=self.mask_probability,
        )


def mlm_datasets(
    text: str,
    tokenizer: BertTokenizer,
    cache_dir: str | os.PathLike,
    block_size: int,
    mask_probability: float = MASK_PROBABILITY,
) -> tuple[MaskedLMDataset, MaskedLMDataset]:
    """Train and validation masked-LM batches over ``text`` (90/10 split, ids cached in
    ``cache_dir`` by :func:`light_llm.data.encode_corpus`), examples of ``block_size``
    positions with [CLS] and [SEP] (the encoder's ``block_size``)."""
    check_mlm_block(block_size)  # before the corpus is encoded into cache_dir
    train_path, val_path = encode_corpus(text, tokenizer, cache_dir)
    return tuple(
        mlm_split(path, tokenizer, block_size, mask_probability) for path in (train_path, val_path)
    )


def check_mlm_block(block_size: int) -> None:
    """ConfigError for a block too short to hold [CLS], a token and [SEP]."""
    if block_size < 3:
        raise ConfigError(f"a masked-LM block needs [CLS], a token and [SEP]: got {block_size}.")


def mlm_split(
    path: str | os.PathLike,
    tokenizer: BertTokenizer,
    block_size: int,
    mask_probability: float = MASK_PROBABILITY,
) -> MaskedLMDataset:
    """Masked-LM batches over one split's cached ids at ``path`` (:func:`mlm_datasets`)."""
    check_mlm_block(block_size)
    dtype = token_dtype(tokenizer.vocab_size)
    return MaskedLMDataset(TokenDataset(path, dtype, block_size - 2), tokenizer, mask_probability)


class EncoderSubject(GPTSubject):
    """What the GPT's loop (schedule, evaluation, checkpoints, resume, progress) trains for
    ``--model bert``: a :class:`BertEncoder` with its MLM head on :class:`MaskedLMDataset`
    batches; the loss is the mean cross-entropy over the masked positions (seed 003 §29). A
    checkpoint is an encoder checkpoint (:func:`save_encoder`) plus the trainer's state, so
    ``light-llm fill-mask``, ``embed`` and ``eval`` read it and ``--resume`` continues it
    exactly."""

    architecture = "bert"
    label = "BERT-style encoder"
    model_class = BertEncoder
    reports_bits = False  # a loss over the masked tokens only, not per byte of the text
    takes_probes = False  # no next token, head roles or sample to record

    def model_config(self, config: TrainConfig, tokenizer) -> EncoderConfig:
        # masked-LM needs the head
        return super().model_config(config, tokenizer).replace(mlm_head=True)

    def build_model(self, model_config: EncoderConfig, train_data: MaskedLMDataset) -> BertEncoder:
        """A fresh encoder whose MLM output bias b starts at the log unigram frequencies of
        the training split (:func:`unigram_log_probabilities`). The other weights start
        small, so the untrained model predicts the unigram distribution (loss near the
        unigram entropy, not log V) and training spends its steps on the context."""
        model = self.model_class(model_config)
        bias = model.mlm_head.decoder.bias
        if bias is not None:
            tokens = train_data.tokens.tokens
            with torch.no_grad():
                bias.copy_(unigram_log_probabilities(tokens, model_config.vocab_size))
        return model

    def datasets(
        self, text: str, tokenizer, cache: Path, block_size: int
    ) -> tuple[MaskedLMDataset, MaskedLMDataset]:
        return mlm_datasets(text, tokenizer, cache, block_size)

    def stored_model_config(self, folder: Path) -> EncoderConfig:
        return load_config(folder, architecture="bert")

    def load_weights(self, model: BertEncoder, folder: Path) -> None:
        load_state(model, read_weights(folder), folder / WEIGHTS_FILE)

    def save(
        self, model, folder: Path, tokenizer, extra_files: dict[str, bytes], overwrite: bool
    ) -> None:
        save_encoder(model, folder, tokenizer, extra_files, overwrite)

    def printed_sample(self, sample: str, tokenizer, val_data, config: TrainConfig) -> str:
        return f"fill-mask sample:\n{sample}"

    def sample(self, model, tokenizer, val_data: MaskedLMDataset, config: TrainConfig) -> str:
        """The five most probable tokens for the [MASK] of each of ``SAMPLE_PROMPTS`` that
        fits in the model's context."""
        block_size = model.config.block_size
        prompts = [p for p in SAMPLE_PROMPTS if len(tokenizer.encode(p)) + 2 <= block_size]
        if not prompts:
            return f"(none: every sample prompt is longer than the context of {block_size})"
        model.eval()
        lines = []
        for prompt in prompts:
            (candidates,) = predict_masked(model, tokenizer, prompt)
            shown = ", ".join(f"{c.token} {c.probability:.1%}" for c in candidates)
            lines.append(f"{prompt}  ->  {shown}")
        model.train()
        return "\n".join(lines)
