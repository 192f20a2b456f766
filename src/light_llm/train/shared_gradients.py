"""Data parallelism on one CPU without a network: the processes' gradients averaged in shared
memory.

Under ``torchrun``, DistributedDataParallel averages gradients through gloo, which on a CPU
sends them through a local socket: 4.9 ms an all-reduce of nanoGPT's 0.8M gradients on a
2-core AMD EPYC (AVX2), a tenth of a step. Processes on one machine can share the memory the
gradients live in instead. Every process's parameters get gradients that are views into one
shared array of shape (world_size, P), a row each; after the last micro-batch's backward pass
each process averages its own share of the P columns over the rows,

    g[r, c] = (1 / world_size) Σ_r' g[r', c]   for every row r, for c in this process's share,

so that every row then holds the mean gradient and every process takes the same optimizer
step. A step's loss and stop flag are summed in the same pass (:meth:`SharedGradients.average`),
so a step needs no other collective. Two barriers around the sum, a counter per process in
the same shared memory that the others spin on, keep a process from reading a row that is
still being written, or writing the next step's before the others have read this one's.

The sum is the one DDP computes (its bucketed all-reduce, then the division by world_size),
so the two agree with a single process to the last bit (tests/train/test_distributed.py).
Measured under ``torchrun --nproc_per_node 2`` at nanoGPT's recipe, 6 sequences a process
(docs/benchmarks.md, "CPU MFU and nanoGPT"): 1.15x the training tokens a second of DDP over
gloo, and 1.04-1.13x those of one process on two threads.
"""

from __future__ import annotations

import os
import tempfile
import time

import torch
import torch.distributed as dist

from light_llm.errors import TrainingError

SCALARS = 4  # values a step sums besides its gradients (its loss and stop flag)
SPINS_BEFORE_YIELD = 2000  # flag reads before a waiting process lets others run between reads
YIELDS_BETWEEN_CHECKS = 10_000  # yields between two looks at whether the others still live


def on_one_machine() -> bool:
    """Whether every process of the torchrun group runs on this machine (its local world is
    the whole world), so that they can share memory."""
    return int(os.environ.get("LOCAL_WORLD_SIZE", "0")) == dist.get_world_size()


def shareable(parameters: list[torch.nn.Parameter]) -> bool:
    """Whether the trainable ``parameters`` can take gradients from one float32 array: all
    float32 and contiguous (every model the trainer builds; anything else goes to DDP)."""
    trainable = [p for p in parameters if p.requires_grad]
    return all(p.dtype == torch.float32 and p.is_contiguous() for p in trainable)


def reserved_file(size: int) -> str:
    """A new file of ``size`` bytes whose blocks are reserved, so that writing it later cannot
    fail for want of space (which would kill the process with SIGBUS): in /dev/shm, memory,
    where it has the room (a container's is often 64 MB), else in the temporary folder.
    OSError when neither has it."""
    if os.path.isdir("/dev/shm"):
        try:
            return reserved_file_in("/dev/shm", size)
        except OSError:
            pass  # no room in memory: the temporary folder
    return reserved_file_in(None, size)


def reserved_file_in(folder: str | None, size: int) -> str:
    """:func:`reserved_file` in ``folder`` (None: the temporary folder); nothing is left
    there when it fails."""
    handle, path = tempfile.mkstemp(prefix="light-llm-gradients-", dir=folder)
    try:
        if hasattr(os, "posix_fallocate"):  # (macOS has none: its files grow on demand)
            os.posix_fallocate(handle, 0, size)
        else:
            os.ftruncate(handle, size)
    except OSError:
        os.unlink(path)
        raise
    finally:
        os.close(handle)
    return path


def shared_file(size: int, rank: int) -> torch.Tensor:
    """``size`` bytes that every process of the group maps (MAP_SHARED), zeroed: a file that
    rank 0 creates (:func:`reserved_file`) and removes again once every process has mapped
    it, so nothing is left behind whatever happens next. TrainingError on every process when
    there is no room for it."""
    path_or_error: list[object] = [None, None]
    if rank == 0:
        try:
            path_or_error[0] = reserved_file(size)
        except OSError as exc:
            path_or_error[1] = (
                f"no room for the {size / 2**20:.1f} MB of gradients the processes share, in "
                f"/dev/shm or the temporary folder ({exc.strerror or exc}): free some, or "
                "point TMPDIR at a folder with room."
            )
    dist.broadcast_object_list(path_or_error, src=0)
    if path_or_error[1] is not None:
        raise TrainingError(str(path_or_error[1]))
    memory = torch.from_file(str(path_or_error[0]), shared=True, size=size, dtype=torch.uint8)
    dist.barrier()  # every process has mapped it
    if rank == 0:
        os.unlink(str(path_or_error[0]))
    return memory


class SharedGradients:
    """The gradients of ``parameters`` in shared memory, a row per process (module doc)."""

    def __init__(self, parameters: list[torch.nn.Parameter], rank: int, world_size: int):
        self.parameters = [p for p in parameters if p.requires_grad]
        self.rank, self.world_size = rank, world_size
        count = sum(p.numel() for p in self.parameters)
        flag_bytes, scalar_bytes = 8 * world_size, 8 * world_size * SCALARS
        memory = shared_file(2 * flag_bytes + scalar_bytes + 4 * world_size * count, rank)
        self.flags = memory[:flag_bytes].view(torch.int64)  # (world_size,) barriers passed
        self.process_ids = memory[flag_bytes : 2 * flag_bytes].view(torch.int64)
        memory = memory[2 * flag_bytes :]
        self.scalars = memory[:scalar_bytes].view(torch.float64).view(world_size, SCALARS)
        self.rows = memory[scalar_bytes:].view(torch.float32)
        self.rows = self.rows.view(world_size, count)  # (world_size, P) gradients
        self.process_ids[rank] = os.getpid()
        dist.barrier()  # every process's id written
        self.passed = 0  # barriers this process has passed
        share = -(-count // world_size)  # ceil(P / world_size) columns a process
        self.columns = slice(min(rank * share, count), min((rank + 1) * share, count))
        self.attach()

    def attach(self) -> None:
        """Each parameter's gradient made a view of its place in this process's row, zeroed."""
        offset = 0
        for parameter in self.parameters:
            n = parameter.numel()
            parameter.grad = self.rows[self.rank, offset : offset + n].view_as(parameter)
            offset += n
        self.rows[self.rank].zero_()

    def barrier(self) -> None:
        """Wait until every process has passed as many barriers as this one."""
        self.passed += 1
        self.flags[self.rank] = self.passed
        spins = 0
        while int(self.flags.min()) < self.passed:
            spins += 1
            if spins >= SPINS_BEFORE_YIELD:
                time.sleep(0)  # a waiting process that has spun long enough yields its core
                if spins % YIELDS_BETWEEN_CHECKS == 0:
                    self.check_others_live()

    def check_others_live(self) -> None:
        """TrainingError when another process of the group has ended (killed, or failed
        outside a collective): a barrier would wait for it forever."""
        for rank, process_id in enumerate(self.process_ids.tolist()):
            try:
                os.kill(process_id, 0)
            except ProcessLookupError:
                raise TrainingError(
                    f"training stopped: process {rank} of the {self.world_size} ended while "
                    "this one waited for its gradients."
                ) from None

    def average(self, scalars: torch.Tensor) -> torch.Tensor:
        """Every process's gradients replaced by their mean over the processes (module doc);
        returns the sum over the processes of ``scalars`` (at most SCALARS values)."""
        self.scalars[self.rank, : scalars.numel()] = scalars
        self.barrier()  # every row and every scalar written
        share = self.rows[:, self.columns]  # (world_size, columns of this process)
        share.copy_(share.sum(0).div_(self.world_size).expand_as(share))
        summed = self.scalars[:, : scalars.numel()].sum(0).to(scalars.dtype)
        self.barrier()  # every share averaged and every scalar read
        return summed

    def zero(self) -> None:
        """This process's gradients set to zero in place: they stay views of its row (an
        optimizer's zero_grad(set_to_none=True) would drop them)."""
        self.rows[self.rank].zero_()
