"""Data parallelism on one CPU without a network: the processes' gradients averaged in shared
memory.

Under ``torchrun``, DistributedDataParallel averages gradients through gloo, which on a CPU
sends them through a local socket: 4.9 ms an all-reduce of nanoGPT's 0.8M gradients on a
2-core AMD EPYC (AVX2), a tenth of a step. Processes on one machine can share the memory the
gradients live in instead. Every process's parameters get gradients that are views into one
shared array of shape (world_size, P), a row each.

The parameters are cut into world_size runs of whole tensors of about P / world_size values
(:func:`owned_tensors`); each process owns one, its share of the P columns. After the last
micro-batch's backward pass each process averages its share over the rows, in its own row,

    g[r, c] = (1 / world_size) Σ_r' g[r', c]   for r this process, c in its share,

and takes the optimizer step for its share alone (AdamW's moments and Muon's orthogonalisation
of the tensors it owns), writes the stepped tensors to a shared copy of the parameters and
reads the others' from it. Every process so ends each step with the parameters one process
taking the whole step would have, and each does 1/world_size of the optimizer's work (as
ZeRO's first stage shares it out between GPUs). A step's loss and stop flag are summed in the
same pass (:meth:`SharedGradients.average`), the norm of every tensor's gradient for clipping
in one more (:meth:`SharedGradients.clip`), so a step needs no other collective. Barriers, a
counter per process in the same shared memory that the others spin on, keep a process from
reading a row or a share that is still being written, or writing the next step's before the
others have read this one's. A checkpoint joins the processes' optimizer states into the one a
single process has (:meth:`SharedGradients.joined_state`).

The sum is the one DDP computes (its bucketed all-reduce, then the division by world_size), so
the processes agree with a single process, within float32's rounding
(tests/train/test_distributed.py).
Measured under ``torchrun --nproc_per_node 2`` at nanoGPT's recipe, 6 sequences a process
(docs/benchmarks.md, "CPU MFU and nanoGPT"): 1.15x the training tokens a second of DDP over
gloo, and 1.04-1.13x those of one process on two threads, when every process took the whole
optimizer step.
"""

from __future__ import annotations

import itertools
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


def owned_tensors(sizes: list[int], world_size: int) -> list[range]:
    """Which tensors each process steps: consecutive runs of the tensors (sizes in values), cut
    at the tensor edges nearest to equal shares of the total, so that each process updates
    about 1/world_size of the parameters (a tensor is never split: an optimizer steps whole
    tensors, Muon whole matrices)."""
    edges = [0, *itertools.accumulate(sizes)]  # where each tensor starts in the flat order
    cuts = [0]
    for rank in range(1, world_size):
        target = rank * edges[-1] / world_size
        cuts.append(min(range(cuts[-1], len(sizes) + 1), key=lambda i: abs(edges[i] - target)))
    cuts.append(len(sizes))
    return [range(cuts[rank], cuts[rank + 1]) for rank in range(world_size)]


class SharedGradients:
    """The gradients of ``parameters`` in shared memory, a row per process, and each process's
    share of the optimizer step (module doc)."""

    def __init__(self, parameters: list[torch.nn.Parameter], rank: int, world_size: int):
        self.parameters = [p for p in parameters if p.requires_grad]
        self.rank, self.world_size = rank, world_size
        sizes = [p.numel() for p in self.parameters]
        count = sum(sizes)
        flag_bytes, scalar_bytes = 8 * world_size, 8 * world_size * SCALARS
        norm_bytes = 4 * len(sizes)
        size = 2 * flag_bytes + scalar_bytes + norm_bytes + 4 * (world_size + 1) * count
        memory = shared_file(size, rank)
        self.flags = memory[:flag_bytes].view(torch.int64)  # (world_size,) barriers passed
        self.process_ids = memory[flag_bytes : 2 * flag_bytes].view(torch.int64)
        memory = memory[2 * flag_bytes :]
        self.scalars = memory[:scalar_bytes].view(torch.float64).view(world_size, SCALARS)
        values = memory[scalar_bytes:].view(torch.float32)
        self.norms = values[: len(sizes)]  # (tensors,) each gradient's L2 norm, for clipping
        values = values[len(sizes) :]
        self.weights = values[:count]  # (P,) each process's stepped parameters, for the others
        self.rows = values[count:].view(world_size, count)  # (world_size, P) gradients
        self.process_ids[rank] = os.getpid()
        dist.barrier()  # every process's id written
        self.passed = 0  # barriers this process has passed
        edges = [0, *itertools.accumulate(sizes)]  # where each tensor starts in a row
        self.offsets = edges[:-1]
        self.mine = owned_tensors(sizes, world_size)[rank]  # the tensors this process steps
        self.columns = slice(edges[self.mine.start], edges[self.mine.stop])  # their values
        placed = list(zip(self.parameters, self.offsets, strict=True))
        self.owned = [placed[i] for i in self.mine]  # (parameter, offset) this process steps
        self.others = [pair for i, pair in enumerate(placed) if i not in self.mine]
        self.attach()

    def attach(self) -> None:
        """Each parameter's gradient made a view of its place in this process's row, zeroed."""
        for parameter, offset in zip(self.parameters, self.offsets, strict=True):
            row = self.rows[self.rank, offset : offset + parameter.numel()]
            parameter.grad = row.view_as(parameter)
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
        """This process's share of the gradients, in its own row, replaced by their mean over
        the processes (module doc); returns the sum over the processes of ``scalars`` (at most
        SCALARS values). The other processes' rows are read until :meth:`step` ends."""
        self.scalars[self.rank, : scalars.numel()] = scalars
        self.barrier()  # every row and every scalar written
        share = self.rows[:, self.columns]  # (world_size, columns of this process)
        share[self.rank] = share.sum(0).div_(self.world_size)  # (the sum reads this row too)
        return self.scalars[:, : scalars.numel()].sum(0).to(scalars.dtype)

    def clip(self, max_norm: float) -> torch.Tensor:
        """The mean gradient scaled so that its global L2 norm is at most ``max_norm``, as
        :func:`light_llm.train.optim.clip_grad_norm` scales one process's (seed 000 §10), from
        the same numbers in the same order, so to the same bit: each process writes the norm of
        each of its tensors' gradients, and every process then takes

            ||g||_2 = || (||g_1||, ..., ||g_n||) ||_2,   g <- min(1, c / (||g||_2 + 1e-6)) g

        for its share; returns ||g||_2 before clipping."""
        if self.mine:  # (torch's clip_grad_norm_ takes each norm from _foreach_norm on a CPU)
            norms = torch._foreach_norm([self.parameters[i].grad for i in self.mine], 2.0)
            self.norms[self.mine.start : self.mine.stop] = torch.stack(norms)
        self.barrier()  # every tensor's norm written
        norm = torch.linalg.vector_norm(self.norms)
        factor = torch.clamp(max_norm / (norm + 1e-6), max=1.0)
        self.rows[self.rank, self.columns].mul_(factor)
        return norm

    def step(self, optimizer: torch.optim.Optimizer) -> None:
        """``optimizer``'s step on this process's share of the parameters alone (the others have
        no gradient for it, so it skips them), then every process's stepped share copied from
        the others: every process ends with the same parameters, as if each had taken the
        whole step. The gradients are then this process's row again, zeroed."""
        for parameter, _ in self.others:
            parameter.grad = None
        optimizer.step()
        with torch.no_grad():
            for parameter, offset in self.owned:
                self.weights[offset : offset + parameter.numel()] = parameter.view(-1)
            self.barrier()  # every share stepped and written; every row read
            for parameter, offset in self.others:
                stepped = self.weights[offset : offset + parameter.numel()]
                parameter.copy_(stepped.view_as(parameter))
        self.attach()

    def owned_state(self, optimizer: torch.optim.Optimizer) -> dict[int, dict]:
        """The entries of ``optimizer``'s state dict (by parameter index) that this process
        keeps up to date: those of the parameters it steps. A checkpoint joins every process's
        (:meth:`joined_state`)."""
        owned = {id(p) for p, _ in self.owned}
        ordered = [p for group in optimizer.param_groups for p in group["params"]]
        state = optimizer.state_dict()["state"]
        return {i: entries for i, entries in state.items() if id(ordered[i]) in owned}

    @staticmethod
    def joined_state(states: list[dict[int, dict]]) -> dict[int, dict]:
        """Every process's :meth:`owned_state` as one optimizer state, as a single process
        would have it."""
        joined: dict[int, dict] = {}
        for state in states:
            joined.update(state)
        return dict(sorted(joined.items()))
