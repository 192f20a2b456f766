"""Fine-tuning: a training run that starts from a trained model (``--init-from``), updating
every weight or, with ``--lora-rank``, only LoRA adapters on a frozen base
(:mod:`light_llm.nn.lora`, Hu et al. 2021).

The model folder may be a light-llm checkpoint, a training output folder or a HuggingFace
GPT-2 folder. The run takes its model (shape and weights) and its tokenizer from there; its
optimizer and learning-rate schedule start afresh (iteration 0), on the run's own ``--data``.
The checkpoint records where the run started: ``trainer_state.json`` holds
``"started_from": {"path", "sha256"}`` (the base's folder and the SHA-256 of its weight files),
and a LoRA run's checkpoint holds only the adapters, with the same reference to the base
(:mod:`light_llm.checkpoints.lora`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from light_llm.checkpoints import check_tokenizer_matches_model, inspect_folder, load_tokenizer
from light_llm.checkpoints.gpt import load_weights_into, save_gpt
from light_llm.checkpoints.lora import (
    BaseReference,
    LoRASettings,
    load_adapters_into,
    load_base,
    read_lora_config,
    save_lora_gpt,
)
from light_llm.checkpoints.tensors import read_weights
from light_llm.config import ModelConfig
from light_llm.errors import CheckpointError, TokenizerError, TrainingError
from light_llm.models.gpt import GPT
from light_llm.nn.lora import parse_targets
from light_llm.train.config import TrainConfig
from light_llm.train.subject import GPTSubject


def lora_settings(config: TrainConfig) -> LoRASettings | None:
    """The adapters a (resolved) config asks for; None for a run that trains every weight."""
    if config.lora_rank is None:
        return None
    return LoRASettings(
        rank=config.lora_rank,
        alpha=float(config.lora_alpha),
        dropout=float(config.lora_dropout),
        targets=tuple(parse_targets(config.lora_targets)),
    )


def check_encodable(text: str, tokenizer, source: str) -> None:
    """TokenizerError naming the characters of ``text`` that the checkpoint's tokenizer
    cannot encode (a character vocabulary that never saw them)."""
    try:
        tokenizer.encode("".join(sorted(set(text))))
    except TokenizerError as exc:
        raise TokenizerError(f"the training text cannot be encoded by {source}: {exc}") from None


class FineTuning(GPTSubject):
    """A GPT trained from a trained model (see the module docstring): the subject of a run
    with ``init_from``. ``resume_folder`` is the checkpoint being continued, or None for a new
    run."""

    def __init__(self, config: TrainConfig, resume_folder: Path | None, saved: dict | None):
        self.init_from = Path(config.init_from)
        if inspect_folder(self.init_from).holds_adapters:
            raise CheckpointError(
                f"{self.init_from} holds LoRA adapters, not a whole model; fold them into the "
                "weights with light-llm merge and fine-tune from the merged model."
            )
        self.lora = lora_settings(config)
        self.resuming = resume_folder is not None
        if self.lora is not None and resume_folder is not None:
            _, self.base = read_lora_config(inspect_folder(resume_folder))
            self.base.check(resume_folder)  # the adapters were trained on this very base
        elif saved is not None and "started_from" in saved:
            stored = saved["started_from"]
            self.base = BaseReference(Path(stored["path"]), stored["sha256"])
        else:
            self.base = BaseReference.of(self.init_from)

    def state_fields(self) -> dict[str, Any]:
        """Where the run started: the base's folder and the SHA-256 of its weights."""
        return {"started_from": self.base.to_dict()}

    def tokenizer(self, config: TrainConfig, text: str):
        """The base's tokenizer, checked against the training text."""
        tokenizer = load_tokenizer(self.base.path)
        check_encodable(text, tokenizer, f"the tokenizer of {self.init_from}")
        return tokenizer

    def check_model(self, model_config: ModelConfig, tokenizer) -> None:
        """ConfigError, before anything is written, when the adapters cannot be added
        (a target naming no layer, a rank too large): tried on a model without storage.
        CheckpointError when the tokenizer's ids are not the model's."""
        check_tokenizer_matches_model(tokenizer, model_config.vocab_size, self.init_from)
        if self.lora is not None:
            with torch.device("meta"):
                self.lora.apply(GPT(model_config))

    def build_model(self, model_config: ModelConfig, train_data) -> GPT:
        """The model to train: the base's weights (a resumed full fine-tune takes its own
        from its checkpoint instead), with the adapters added for LoRA; in training mode."""
        if self.resuming and self.lora is None:
            return GPT(model_config)
        try:
            model = load_base(self.base.path, model_config)
        except CheckpointError as exc:
            raise TrainingError(f"cannot fine-tune from {self.init_from}: {exc}") from None
        if self.lora is not None:
            self.lora.apply(model)
        return model.train()

    def load_weights(self, model: GPT, folder: Path) -> None:
        """The resumed run's trained tensors: the adapters alone for LoRA, else every one."""
        if self.lora is not None:
            load_adapters_into(model, folder)
        else:
            load_weights_into(model, read_weights(folder), folder)

    def save(
        self, model: GPT, folder: Path, tokenizer, extra_files: dict[str, bytes], overwrite: bool
    ) -> None:
        """The adapters and the reference to the base (LoRA), or the whole model."""
        if self.lora is not None:
            save_lora_gpt(model, folder, self.lora, self.base, tokenizer, extra_files)
        else:
            save_gpt(model, folder, tokenizer, extra_files, overwrite)

    def describe(self, model: GPT) -> str:
        """One line for the start of the run: what is trained, from where."""
        if self.lora is None:
            return f"fine-tuning every weight of {self.base.path}, from a fresh optimizer"
        trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
        total = sum(p.numel() for p in model.parameters())
        return (
            f"LoRA on {self.base.path}: rank {self.lora.rank}, alpha {self.lora.alpha:g} on "
            f"{','.join(self.lora.targets)}; {trainable:,} trainable of {total:,} parameters "
            f"({100 * trainable / total:.2f}%), the base frozen"
        )
