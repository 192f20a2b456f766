"""The shared-memory average of light_llm.train.shared_gradients, in real processes: after
every step each process's share of the gradients equals the mean of all processes' gradients
computed here from the same draws, its scalars their sum, the clipped norm the mean's; each
process steps its share alone, and every process ends the step with the parameters and the
joined optimizer state of AdamW stepped in one process on the mean gradients; where the memory
has no room, the temporary folder, and where neither has, one sentence.
The trainer's whole path under torchrun is tests/train/test_distributed.py."""

import errno
import os
import tempfile
import time

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing

from light_llm.errors import TrainingError
from light_llm.train import shared_gradients
from light_llm.train.shared_gradients import (
    SharedGradients,
    owned_tensors,
    shareable,
    shared_file,
)

SHAPES = [(3, 5), (7,), (2, 2, 3), (4,), (6, 2)]  # 50 values in 5 tensors of unequal sizes
STEPS = 3
CLIP = 2.0  # below the mean gradient's norm (about 5), so that clipping scales it


def drawn_gradients(rank: int, step: int) -> list[torch.Tensor]:
    """What process ``rank`` back-propagates at ``step``: a function of both alone."""
    generator = torch.Generator().manual_seed(1000 * step + rank)
    return [torch.randn(shape, generator=generator) for shape in SHAPES]


def first_parameters() -> list[torch.nn.Parameter]:
    generator = torch.Generator().manual_seed(7)
    return [torch.nn.Parameter(torch.randn(shape, generator=generator)) for shape in SHAPES]


def adamw(parameters) -> torch.optim.AdamW:
    return torch.optim.AdamW(parameters, lr=0.1, weight_decay=0.1, fused=True)


def one_process_steps(world_size: int) -> tuple[list[list[torch.Tensor]], dict]:
    """The parameters after each step and the final optimizer state of one process taking
    every step on the mean gradients, clipped to CLIP as torch clips them."""
    parameters = first_parameters()
    optimizer = adamw(parameters)
    after = []
    for step in range(STEPS):
        everyone = [drawn_gradients(r, step) for r in range(world_size)]
        for index, parameter in enumerate(parameters):
            parameter.grad = torch.stack([g[index] for g in everyone]).sum(0) / world_size
        torch.nn.utils.clip_grad_norm_(parameters, CLIP)
        optimizer.step()
        after.append([p.detach().clone() for p in parameters])
    return after, optimizer.state_dict()["state"]


def average_in_process(rank: int, world_size: int, store: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world_size)
    try:
        torch.set_num_threads(1)
        parameters = first_parameters()
        frozen = torch.nn.Parameter(torch.zeros(4), requires_grad=False)
        optimizer = adamw(parameters)
        shared = SharedGradients([*parameters, frozen], rank, world_size)
        assert frozen.grad is None
        expected_parameters, expected_state = one_process_steps(world_size)
        for step in range(STEPS):
            # two backward passes accumulate, as a process's micro-batches do
            mine = drawn_gradients(rank, step)
            for half in (0.25, 0.75):
                loss = sum((p * g * half).sum() for p, g in zip(parameters, mine, strict=True))
                loss.backward()
            summed = shared.average(torch.tensor([rank + 1.0, float(step)]))
            everyone = [drawn_gradients(r, step) for r in range(world_size)]
            means = []
            for index in range(len(SHAPES)):
                # each process's own accumulation (0.25 g + 0.75 g), then the mean
                own = [g[index] * 0.25 + g[index] * 0.75 for g in everyone]
                means.append(torch.stack(own).sum(0) / world_size)
            for parameter, _ in shared.owned:
                index = next(i for i, p in enumerate(parameters) if p is parameter)
                torch.testing.assert_close(parameter.grad, means[index], rtol=0, atol=0)
            assert summed.tolist() == [world_size * (world_size + 1) / 2, world_size * step]
            norm = shared.clip(CLIP)
            expected_norm = torch.linalg.vector_norm(torch.cat([m.flatten() for m in means]))
            assert norm == pytest.approx(float(expected_norm), rel=1e-6)
            shared.step(optimizer)
            for parameter, expected in zip(parameters, expected_parameters[step], strict=True):
                torch.testing.assert_close(parameter.detach(), expected, rtol=1e-6, atol=1e-6)
            assert all(not p.grad.any() for p in parameters)  # zeroed, and shared again
            assert parameters[0].grad.data_ptr() == shared.rows[rank].data_ptr()
        # every process's share of AdamW's state, joined: one process's state
        shares = [None] * world_size
        dist.all_gather_object(shares, shared.owned_state(optimizer))
        joined = SharedGradients.joined_state(shares)
        assert sorted(joined) == sorted(expected_state) == list(range(len(SHAPES)))
        for index, entries in expected_state.items():
            for name, value in entries.items():
                torch.testing.assert_close(joined[index][name], value, rtol=1e-6, atol=1e-6)
    finally:
        dist.destroy_process_group()


def test_each_process_steps_its_share_and_all_end_with_one_process_step(tmp_path):
    """Three processes: shares of 15, 19 and 16 of the 50 values (the tensor edges at 15 and
    34 are the nearest to 50/3 and 100/3; two processes are the trainer's under torchrun,
    tests/train/test_distributed.py)."""
    world_size = 3
    assert [list(share) for share in owned_tensors([15, 7, 12, 4, 12], world_size)] == [
        [0],
        [1, 2],
        [3, 4],
    ]
    torch.multiprocessing.spawn(
        average_in_process, args=(world_size, str(tmp_path / "store")), nprocs=world_size
    )


@pytest.mark.parametrize("world_size", [1, 2, 3, 5, 8])
@pytest.mark.parametrize(
    "sizes", [[15, 7, 12, 4, 12], [1000, 1, 1, 1], [5], [3, 3, 3, 3, 3, 3, 3], [1, 2, 4, 8, 16, 32]]
)
def test_the_shares_are_runs_of_whole_tensors_near_equal_in_size(sizes, world_size):
    """Every tensor in exactly one share, in order; a share is over the equal one by at most
    the largest tensor (the cut falls at the nearest tensor edge); a process may own nothing
    when there are fewer tensors than processes."""
    shares = owned_tensors(sizes, world_size)
    assert len(shares) == world_size
    assert [i for share in shares for i in share] == list(range(len(sizes)))
    equal = sum(sizes) / world_size
    for share in shares:
        assert sum(sizes[i] for i in share) <= equal + max(sizes)
    if world_size == 2 and sizes == [1, 2, 4, 8, 16, 32]:  # 31 before the last tensor, 32 in it
        assert list(shares[1]) == [5]


@pytest.fixture
def group_of_one(tmp_path):
    """A gloo process group of this process alone (the collectives shared_file calls)."""
    store = f"file://{tmp_path / 'store'}"
    dist.init_process_group("gloo", init_method=store, rank=0, world_size=1)
    yield
    dist.destroy_process_group()


@pytest.fixture
def made_files(monkeypatch):
    """The paths of the files shared_gradients creates, as it creates them."""
    paths = []
    make = tempfile.mkstemp

    def recording_mkstemp(**kwargs):
        handle, path = make(**kwargs)
        paths.append(path)
        return handle, path

    monkeypatch.setattr(shared_gradients.tempfile, "mkstemp", recording_mkstemp)
    return paths


def no_room(monkeypatch, failing_calls: int) -> None:
    """The first ``failing_calls`` reservations fail as a full folder does."""
    calls = []
    reserve = getattr(os, "posix_fallocate", None)  # (macOS has none)
    reserve = reserve or (lambda handle, _, size: os.ftruncate(handle, size))

    def fallocate(handle, offset, size):
        calls.append(size)
        if len(calls) <= failing_calls:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        reserve(handle, offset, size)

    monkeypatch.setattr(shared_gradients.os, "posix_fallocate", fallocate, raising=False)


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="needs /dev/shm")
def test_a_full_dev_shm_gives_way_to_the_temporary_folder(monkeypatch, group_of_one, made_files):
    no_room(monkeypatch, failing_calls=1)
    memory = shared_file(1000, rank=0)
    memory[999] = 7  # mapped, and written
    assert memory.shape == (1000,) and int(memory[999]) == 7
    assert made_files[0].startswith("/dev/shm/") and len(made_files) == 2
    assert os.path.dirname(made_files[1]) == tempfile.gettempdir()
    assert not any(os.path.exists(path) for path in made_files)  # both removed


def test_no_room_anywhere_is_one_sentence_and_leaves_no_file(monkeypatch, group_of_one, made_files):
    no_room(monkeypatch, failing_calls=2)
    with pytest.raises(TrainingError, match=r"^no room for the 3\.0 MB of gradients the processes"):
        shared_file(3 * 2**20, rank=0)
    assert made_files and not any(os.path.exists(path) for path in made_files)


def test_only_float32_contiguous_trainable_parameters_are_shared():
    """A frozen parameter of another dtype does not matter; a trainable one sends the run to
    DDP, as does one whose memory is not contiguous."""
    weight = torch.nn.Parameter(torch.zeros(3, 4))
    frozen = torch.nn.Parameter(torch.zeros(2, dtype=torch.bfloat16), requires_grad=False)
    assert shareable([weight, frozen])
    assert not shareable([weight, torch.nn.Parameter(torch.zeros(2, dtype=torch.bfloat16))])
    assert not shareable([torch.nn.Parameter(torch.zeros(4, 3).t())])


def wait_for_a_dead_process(rank: int, world_size: int, store: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world_size)
    shared = SharedGradients([torch.nn.Parameter(torch.zeros(3))], rank, world_size)
    if rank == 1:
        os._exit(0)  # killed, as far as the others can tell
    with pytest.raises(TrainingError, match="^training stopped: process 1 of the 2 ended while"):
        shared.average(torch.zeros(1))


def test_a_process_that_ends_is_noticed_by_the_one_waiting_for_it(tmp_path):
    """Without the check the barrier would spin forever (torchrun ends the others only after
    its own timeout)."""
    store = str(tmp_path / "store")
    context = torch.multiprocessing.spawn(
        wait_for_a_dead_process, args=(2, store), nprocs=2, join=False
    )
    deadline = time.monotonic() + 120  # a hang guard, not a speed limit: it takes 1-2 s
    while not context.join(timeout=1):  # False until every process has ended
        if time.monotonic() > deadline:
            for process in context.processes:
                process.kill()
            pytest.fail("the waiting process never noticed that the other had ended.")
