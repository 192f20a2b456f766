"""Where tensors live: ``--device auto|cpu|cuda`` turned into a torch device, for every
command that runs a PyTorch model (train, generate, eval). torch is imported when a device is
resolved, so that the command line can offer the choices without it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from light_llm.errors import ConfigError

if TYPE_CHECKING:
    import torch

DEVICES = ("auto", "cpu", "cuda")


def check_device(device: object, name: str = "device") -> torch.device:
    """``device`` (a torch.device, or a name such as "cpu", "cuda", "cuda:1", "auto") as a
    device of this machine; ConfigError naming the argument for one PyTorch does not know
    ("tpu") or this build or machine lacks ("cuda" without a GPU)."""
    import torch

    if device == "auto":
        return resolve_device("auto")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        resolved = None
    if resolved is None or resolved.type not in ("cpu", "cuda", "mps"):
        raise ConfigError(f"{name} must be cpu, cuda, cuda:N, mps or auto, got {device!r}.")
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"{name}={device!r} was asked for, but PyTorch sees no CUDA GPU.")
    if resolved.type == "cuda" and (resolved.index or 0) >= torch.cuda.device_count():
        raise ConfigError(
            f"{name}={device!r} was asked for, but PyTorch sees "
            f"{torch.cuda.device_count()} CUDA GPU(s)."
        )
    if resolved.type == "mps" and not torch.backends.mps.is_available():
        raise ConfigError(f"{name}={device!r} was asked for, but this machine has no MPS GPU.")
    return resolved


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
