"""Data-parallel training across processes: what each process needs to know about the others.

Under ``torchrun`` every process (a *rank*) holds a full copy of the model, trains on its own
micro-batches, and DistributedDataParallel averages the gradients of all ranks during the
backward pass, so every copy takes the same optimiser step. torchrun sets the environment
variables RANK, WORLD_SIZE and LOCAL_RANK; without them training runs in one process and
every collective below is the identity.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist

from light_llm.errors import LightLLMError, TrainingError


@dataclass(frozen=True)
class DistributedContext:
    """Where this process sits: its rank among ``world_size`` processes and its device."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    owns_group: bool = False  # whether init_distributed created the process group

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Rank 0 alone prints, logs and writes files."""
        return self.rank == 0

    def all_reduce_sum(self, values: torch.Tensor) -> torch.Tensor:
        """The element-wise sum of ``values`` over all ranks (``values`` itself in one process)."""
        if self.enabled:
            dist.all_reduce(values, op=dist.ReduceOp.SUM)
        return values

    def any_rank(self, flag: bool, device: torch.device) -> bool:
        """Whether ``flag`` is true on at least one rank: lets every rank take the same branch
        (stop, or fail) so that none is left waiting in a collective."""
        if not self.enabled:
            return flag
        value = torch.tensor([1.0 if flag else 0.0], device=device)
        return bool(self.all_reduce_sum(value).item() > 0)

    def on_main(self, action: Callable[[], object], device: torch.device) -> None:
        """Run ``action`` on rank 0 alone. If it fails with a LightLLMError, every rank raises
        (rank 0 the error itself), so that no rank is left waiting in a collective."""
        error: LightLLMError | None = None
        if self.is_main:
            try:
                action()
            except LightLLMError as exc:
                error = exc
        if self.any_rank(error is not None, device):
            raise error or TrainingError("training stopped: rank 0 failed (see its message).")

    def gather_objects(self, value: object) -> list[object]:
        """``value`` of every rank, in rank order (any value pickle can carry)."""
        if not self.enabled:
            return [value]
        gathered: list[object] = [None] * self.world_size
        dist.all_gather_object(gathered, value)
        return gathered


def environment_world() -> tuple[int, int, int]:
    """(rank, world_size, local_rank) from torchrun's environment variables; (0, 1, 0) when
    they are absent."""
    try:
        world_size = int(os.environ.get("WORLD_SIZE", "1"))
        rank = int(os.environ.get("RANK", "0"))
        local_rank = int(os.environ.get("LOCAL_RANK", str(rank)))
    except ValueError:
        raise TrainingError(
            "RANK, WORLD_SIZE and LOCAL_RANK must be integers when set (torchrun sets them)."
        ) from None
    if world_size < 1 or not 0 <= rank < world_size:
        raise TrainingError(f"rank {rank} is outside a world of {world_size} processes.")
    return rank, world_size, local_rank


def init_distributed(device_type: str) -> DistributedContext:
    """Join the process group torchrun describes: NCCL between GPUs, gloo between CPU
    processes. One process without torchrun's variables gets a context of world size 1."""
    rank, world_size, local_rank = environment_world()
    if world_size == 1:
        return DistributedContext()
    if device_type == "cuda":
        torch.cuda.set_device(local_rank)
    owns_group = not dist.is_initialized()
    if owns_group:
        dist.init_process_group(
            backend="nccl" if device_type == "cuda" else "gloo",
            rank=rank,
            world_size=world_size,
        )
    return DistributedContext(rank, world_size, local_rank, owns_group)


def shutdown_distributed(context: DistributedContext) -> None:
    """Leave the process group, if :func:`init_distributed` created it."""
    if context.owns_group and dist.is_initialized():
        dist.destroy_process_group()
