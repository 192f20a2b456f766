"""What a PyTorch training run trains, chosen once when the run is prepared
(:func:`light_llm.train.prepare.prepare`): a new GPT (:class:`GPTSubject`), a GPT fine-tuned
from a trained model, every weight or LoRA adapters
(:class:`~light_llm.train.finetune.FineTuning`), or a new BERT-style encoder trained by
masked-LM (:class:`~light_llm.train.mlm.EncoderSubject`). The loop asks its subject, and only
its subject, for what differs between them: the tokenizer of a new run, the model and its
config, the datasets, how a checkpoint's model is read and written, the final sample.

A subject's datasets' ``get_batch(batch_size, generator, device)`` return (inputs, targets)
for ``model(inputs, targets, label_smoothing=...) -> (out, loss)``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from light_llm.checkpoints import load_config
from light_llm.checkpoints.gpt import load_weights_into, save_gpt
from light_llm.checkpoints.tensors import read_weights
from light_llm.config import ModelConfig
from light_llm.data import TokenDataset, encode_corpus, token_dtype
from light_llm.generate import generate_text
from light_llm.models.gpt import GPT
from light_llm.train.config import TrainConfig
from light_llm.train.records import printed_sample, sample_prompt
from light_llm.train.result import SAMPLE_TEMPERATURE
from light_llm.train.run_tokenizer import tokenizer_for_run


class GPTSubject:
    """A GPT trained from weights drawn N(0, 0.02) (seed 000 §10) on next-token windows."""

    architecture = "gpt"  # TrainConfig.model of the runs it trains
    label = "GPT"  # what messages call the model
    model_class: type[torch.nn.Module] = GPT
    reports_bits = True  # a next-token loss, so also in bits per byte / character
    takes_probes = True  # light_llm.train.probes: the probes belong to a causal GPT

    def tokenizer(self, config: TrainConfig, text: str):
        """The tokenizer of a new run (a resumed run reads its own from its checkpoint)."""
        return tokenizer_for_run(config, text)

    def model_config(self, config: TrainConfig, tokenizer) -> ModelConfig:
        return config.model_config(tokenizer.vocab_size)

    def check_model(self, model_config: ModelConfig, tokenizer) -> None:
        """An error, before anything is written, for a model that cannot be trained."""

    def datasets(
        self, text: str, tokenizer, cache: Path, block_size: int
    ) -> tuple[TokenDataset, TokenDataset]:
        """Next-token windows of ``block_size`` over the corpus's ids cached in ``cache``."""
        train_path, val_path = encode_corpus(text, tokenizer, cache)
        dtype = token_dtype(tokenizer.vocab_size)
        train = TokenDataset(train_path, dtype, block_size)
        return train, TokenDataset(val_path, dtype, block_size)

    def build_model(self, model_config: ModelConfig, train_data) -> torch.nn.Module:
        return self.model_class(model_config)

    def stored_model_config(self, folder: Path) -> ModelConfig:
        """The model config of the checkpoint in ``folder`` (the run being resumed)."""
        return load_config(folder)

    def load_weights(self, model: torch.nn.Module, folder: Path) -> None:
        """Copy the weights of the checkpoint in ``folder`` into ``model``."""
        load_weights_into(model, read_weights(folder), folder)

    def save(
        self, model, folder: Path, tokenizer, extra_files: dict[str, bytes], overwrite: bool
    ) -> None:
        """Write the model, its tokenizer and ``extra_files`` as the checkpoint folder,
        replaced as a unit."""
        save_gpt(model, folder, tokenizer, extra_files, overwrite)

    def describe(self, model: torch.nn.Module) -> str | None:
        """A line for the start of the run saying what is trained from where, if anything."""
        return None

    def state_fields(self) -> dict[str, Any]:
        """Fields of its own for ``trainer_state.json``."""
        return {}

    def printed_sample(
        self, sample: str, tokenizer, val_data: TokenDataset, config: TrainConfig
    ) -> str:
        """The final sample with a heading saying what it was sampled from."""
        prompt = sample_prompt(tokenizer, int(val_data.tokens[0]))
        return printed_sample(sample, prompt, config)

    def sample(self, model, tokenizer, val_data: TokenDataset, config: TrainConfig) -> str:
        """A short continuation of a newline (or of the validation split's first token),
        sampled at temperature 0.8 with the run's seed."""
        prompt = sample_prompt(tokenizer, int(val_data.tokens[0]))
        model.eval()
        (continuation,) = generate_text(
            model,
            tokenizer,
            [prompt],
            config.sample_tokens,
            temperature=SAMPLE_TEMPERATURE,
            seed=config.seed,
        )
        model.train()
        return prompt + continuation
