"""The shared-memory average of light_llm.train.shared_gradients, in real processes: after
every step each process's gradients equal the mean of all processes' gradients computed here
from the same draws, its scalars their sum, and zeroing leaves the gradients shared.
The trainer's whole path under torchrun is tests/train/test_distributed.py."""

import torch
import torch.distributed as dist
import torch.multiprocessing

from light_llm.train.shared_gradients import SharedGradients

SHAPES = [(3, 5), (7,), (2, 2, 3)]  # 34 values: unequal shares among 3 processes
STEPS = 3


def drawn_gradients(rank: int, step: int) -> list[torch.Tensor]:
    """What process ``rank`` back-propagates at ``step``: a function of both alone."""
    generator = torch.Generator().manual_seed(1000 * step + rank)
    return [torch.randn(shape, generator=generator) for shape in SHAPES]


def average_in_process(rank: int, world_size: int, store: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world_size)
    try:
        torch.set_num_threads(1)
        parameters = [torch.nn.Parameter(torch.zeros(shape)) for shape in SHAPES]
        frozen = torch.nn.Parameter(torch.zeros(4), requires_grad=False)
        shared = SharedGradients([*parameters, frozen], rank, world_size)
        assert frozen.grad is None
        for step in range(STEPS):
            # two backward passes accumulate, as a process's micro-batches do
            mine = drawn_gradients(rank, step)
            for half in (0.25, 0.75):
                loss = sum((p * g * half).sum() for p, g in zip(parameters, mine, strict=True))
                loss.backward()
            summed = shared.average(torch.tensor([rank + 1.0, float(step)]))
            everyone = [drawn_gradients(r, step) for r in range(world_size)]
            for index, parameter in enumerate(parameters):
                # each process's own accumulation (0.25 g + 0.75 g), then the mean
                own = [g[index] * 0.25 + g[index] * 0.75 for g in everyone]
                expected = torch.stack(own).sum(0) / world_size
                torch.testing.assert_close(parameter.grad, expected, rtol=0, atol=0)
            assert summed.tolist() == [world_size * (world_size + 1) / 2, world_size * step]
            shared.zero()
            assert all(not p.grad.any() for p in parameters)
            assert parameters[0].grad.data_ptr() == shared.rows[rank].data_ptr()
    finally:
        dist.destroy_process_group()


def test_every_process_holds_the_mean_gradient_after_each_step(tmp_path):
    """Three processes: shares of 12, 12 and 10 of the 34 values (two processes are the
    trainer's under torchrun, tests/train/test_distributed.py)."""
    world_size = 3
    torch.multiprocessing.spawn(
        average_in_process, args=(world_size, str(tmp_path / "store")), nprocs=world_size
    )
