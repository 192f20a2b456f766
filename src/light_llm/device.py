"""Where tensors live: ``--device auto|cpu|cuda`` turned into a torch device, for every
command that runs a PyTorch model (train, generate, eval). torch is imported when a device is
resolved, so that the command line can offer the choices without it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from light_llm.errors import ConfigError

if TYPE_CHECKING:
    import torch

DEVICES = ("auto", "cpu", "cuda")


def resolve_device(name: str, local_rank: int = 0) -> torch.device:
    """``auto`` is the GPU when one is visible, else the CPU; ``cuda`` without one is an error.
    Under torchrun each process takes GPU number LOCAL_RANK."""
    import torch

    if name not in DEVICES:
        raise ConfigError(f"device must be one of {', '.join(DEVICES)}, got {name!r}.")
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError("--device cuda was asked for, but PyTorch sees no CUDA GPU.")
        return torch.device("cuda", local_rank)
    return torch.device("cpu")
