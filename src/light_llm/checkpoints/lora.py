"""The checkpoint of a LoRA run: the adapters alone, with a reference to the base model they
adapt (:mod:`light_llm.nn.lora`)::

    config.json           {"format": "light-llm", "architecture": "gpt", "model": {ModelConfig},
                           "lora": {"rank", "alpha", "dropout", "targets": [...],
                                    "base": {"path": the base's checkpoint folder,
                                             "sha256": of its weight files}}}
    adapters.safetensors  every lora_A (r, d_in) and lora_B (d_out, r), by state-dict name
    light_tokenizer.json  the tokenizer (the base's)

So it holds r (d_in + d_out) numbers per adapted layer, not the model. Loading it loads the
base, checks that its weights are still those the adapters were trained on (the SHA-256 of
its weight files), adds the adapters and copies them in.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import safetensors.torch
import torch

from light_llm.checkpoints.folder import (
    GPT_ARCHITECTURE,
    ModelFolder,
    gpt_config,
    inspect_folder,
    resolve_checkpoint_dir,
    write_checkpoint,
)
from light_llm.checkpoints.gpt import copy_checked, load_gpt
from light_llm.checkpoints.tensors import read_safetensors_file, weights_checksum
from light_llm.errors import CheckpointError, ConfigError
from light_llm.limits import check_integer, check_real
from light_llm.models.gpt import GPT
from light_llm.nn.lora import add_lora, lora_state

ADAPTERS_FILE = "adapters.safetensors"


@dataclass(frozen=True)
class LoRASettings:
    """What :func:`light_llm.nn.lora.add_lora` is given: rank r, alpha α, dropout, targets."""

    rank: int
    alpha: float
    dropout: float
    targets: tuple[str, ...]

    def to_dict(self) -> dict:
        return {
            "rank": self.rank,
            "alpha": self.alpha,
            "dropout": self.dropout,
            "targets": list(self.targets),
        }

    def apply(self, model: torch.nn.Module) -> list[str]:
        """Add these adapters to ``model`` (its other parameters frozen); the adapted layers'
        names. A's random start draws from a forked generator: loading changes no state."""
        with torch.random.fork_rng(devices=[]):
            return add_lora(model, self.targets, self.rank, self.alpha, self.dropout)


@dataclass(frozen=True)
class BaseReference:
    """The base model of a LoRA run: its checkpoint folder and the SHA-256 of its weights."""

    path: Path
    sha256: str

    @classmethod
    def of(cls, path: str | os.PathLike) -> BaseReference:
        """The reference to the model folder ``path`` names, as it is now."""
        folder = resolve_checkpoint_dir(path).resolve()
        return cls(folder, weights_checksum(folder))

    def to_dict(self) -> dict:
        return {"path": str(self.path), "sha256": self.sha256}

    def check(self, adapters: Path) -> None:
        """CheckpointError when the base is gone or its weights changed since the adapters
        in ``adapters`` were trained on it."""
        if not self.path.is_dir():
            raise CheckpointError(
                f"the base model {self.path} of the LoRA adapters in {adapters} is gone; "
                "restore it there to use them."
            )
        if weights_checksum(self.path) != self.sha256:
            raise CheckpointError(
                f"the base model {self.path} has changed since the LoRA adapters in {adapters} "
                "were trained on it (the SHA-256 of its weights differs); use the base they "
                "were trained on, or train the adapters again."
            )


def read_lora_config(folder: ModelFolder) -> tuple[LoRASettings, BaseReference]:
    """The adapters' settings and base reference in a LoRA checkpoint's config.json."""
    lora = folder.config_json.get("lora")
    source = f'{folder.path / "config.json"}\'s "lora" entry'
    try:
        base = lora["base"]
        # as stored, never converted: 4.9 is not a rank, 1e400 is not a number
        settings = LoRASettings(
            rank=check_integer(f"the rank in {source}", lora["rank"], 1, None, CheckpointError),
            alpha=check_real(
                f"the alpha in {source}",
                lora["alpha"],
                0,
                None,
                low_open=True,
                error=CheckpointError,
            ),
            dropout=check_real(
                f"the dropout in {source}",
                lora["dropout"],
                0.0,
                1.0,
                high_open=True,
                error=CheckpointError,
            ),
            targets=tuple(str(name) for name in lora["targets"]),
        )
        reference = BaseReference(Path(base["path"]), str(base["sha256"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(
            f'{folder.path} has an invalid "lora" entry in its config.json ({exc!r}).'
        ) from None
    return settings, reference


def folders_read(folder: ModelFolder) -> list[Path]:
    """Every model folder that loading ``folder`` reads: itself, and for a LoRA run the base
    its adapters are loaded over (a command's --out must be none of them)."""
    if not folder.holds_adapters:
        return [folder.path]
    return [folder.path, read_lora_config(folder)[1].path]


def load_adapters_into(model: torch.nn.Module, folder: Path) -> None:
    """Copy the adapters saved in ``folder`` into ``model``, which must have adapters of
    exactly these names and shapes, floating-point and finite (:func:`copy_checked`)."""
    path = folder / ADAPTERS_FILE
    if not path.is_file():
        raise CheckpointError(f"{folder} has no {ADAPTERS_FILE}.")
    copy_checked(lora_state(model), read_safetensors_file(path), path)


def load_base(path: str | os.PathLike, config, device: str | torch.device = "cpu") -> GPT:
    """The GPT of the model folder ``path`` (a base, not yet adapted), built with ``config``
    (the run's: the base's shape, perhaps another dropout), in eval mode; CheckpointError when
    ``config`` differs from the base's in anything but the dropout (a run's config.json edited
    by hand would rebuild the base as another model, or fail to hold its weights)."""
    model = load_gpt(inspect_folder(path), device)
    differing = [
        field.name
        for field in dataclasses.fields(config)
        if field.name != "dropout"
        and getattr(config, field.name) != getattr(model.config, field.name)
    ]
    if differing:
        shown = ", ".join(
            f"{name} {getattr(config, name)!r} (the base's: {getattr(model.config, name)!r})"
            for name in differing[:3]
        )
        raise CheckpointError(
            f"the run's model settings differ from those of its base {path}: {shown}; a LoRA "
            "run keeps its base's model (only the dropout may differ)."
        )
    if model.config != config:
        rebuilt = GPT(config).to(device)
        rebuilt.load_state_dict(model.state_dict())
        model = rebuilt.eval()
    return model


def load_lora_gpt(folder: ModelFolder, device: str | torch.device = "cpu") -> GPT:
    """The base GPT with the adapters of the LoRA checkpoint ``folder`` applied (not
    merged), in eval mode; CheckpointError when the base is gone or has changed."""
    settings, base = read_lora_config(folder)
    base.check(folder.path)
    model = load_base(base.path, gpt_config(folder), device)
    try:
        settings.apply(model)
    except ConfigError as exc:
        raise CheckpointError(f"{folder.path}: {exc}") from None
    load_adapters_into(model, folder.path)
    return model.eval()


def save_lora_gpt(
    model: GPT,
    folder: str | os.PathLike,
    settings: LoRASettings,
    base: BaseReference,
    tokenizer=None,
    extra_files: Mapping[str, bytes] | None = None,
) -> None:
    """Write the adapters of ``model`` (with its tokenizer and ``extra_files``) as a LoRA
    checkpoint folder, replaced as a unit."""
    tensors = {
        name: tensor.detach().cpu().contiguous() for name, tensor in lora_state(model).items()
    }
    if not tensors:
        raise CheckpointError("the model has no LoRA adapters to save.")
    write_checkpoint(
        folder,
        GPT_ARCHITECTURE,
        model.config.to_dict(),
        safetensors.torch.save(tensors, metadata={"format": "pt"}),
        tokenizer,
        extra_files,
        weights_file=ADAPTERS_FILE,
        extra_config={"lora": {**settings.to_dict(), "base": base.to_dict()}},
    )
