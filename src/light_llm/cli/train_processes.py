"""``light-llm train --processes N``: the same command in N processes of one machine, started
as ``torchrun --standalone --nproc_per_node N`` starts them, without its command line.

Each process takes an N-th of the run's micro-batches (``--grad-accum`` must be a multiple of
N) and an N-th of the threads (``OMP_NUM_THREADS`` where set, else the cores); on a CPU they
average their gradients in shared memory and each steps its share of the parameters
(:mod:`light_llm.train.shared_gradients`). At small shapes that beats one process's threads
(nanoGPT's recipe in two one-thread processes: 1.06-1.16x one process's training tokens a
second on a 2-core AVX2 CPU, docs/benchmarks.md). Process 0 prints and writes as a single
process does; the others' errors are shown only where process 0 has none of its own, so that
an error every process meets (a missing file) is one line. The processes run in sessions of
their own (as torchrun starts them), so that the terminal's Ctrl-C reaches this command alone,
which passes it on to each once, as it passes on a SIGINT, SIGTERM or SIGHUP sent to it (a
second Ctrl-C, as in one process, quits without saving); they stop at the same iteration and
save.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable

from light_llm.errors import ConfigError


def usable_cores() -> int:
    """The cores this command may run on (its affinity where the system says, else all)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def thread_budget() -> int:
    """The threads the processes share: OMP_NUM_THREADS where it is set, else the cores."""
    given = os.environ.get("OMP_NUM_THREADS", "")
    return int(given) if given.isdigit() and int(given) > 0 else usable_cores()


def check_processes(
    processes: int, batch_size: int, grad_accum: int, engine: str, resumed: bool = False
) -> None:
    """ConfigError, one sentence, for a --processes other than 1 that the run cannot use
    (``resumed``: the batch is the saved run's, which a resume keeps)."""
    if processes < 1:
        raise ConfigError(f"--processes must be 1 or more, got {processes}.")
    if engine != "torch":
        raise ConfigError(
            f"--processes trains with PyTorch's data parallelism; the {engine} engine runs in "
            "one process: drop --processes or --engine."
        )
    cores = usable_cores()
    if processes > cores:
        raise ConfigError(
            f"--processes {processes} is more than the {cores} cores this command may use; "
            f"give at most {cores}."
        )
    if grad_accum % processes == 0:
        return
    shared = f"--processes {processes} shares each step's micro-batches between the processes"
    if resumed:
        fitting = "one process" if grad_accum == 1 else f"N processes, N dividing {grad_accum}"
        raise ConfigError(
            f"{shared}, and the saved run has {grad_accum} a step (--grad-accum {grad_accum}), "
            f"which a resume keeps: resume it in {fitting}."
        )
    same = (
        f"--batch-size {batch_size // processes} --grad-accum {grad_accum * processes}"
        if batch_size % processes == 0
        else f"--batch-size B --grad-accum G with B x G = {batch_size * grad_accum}"
    )
    raise ConfigError(
        f"{shared}, so --grad-accum ({grad_accum} here) must be a multiple of {processes}; the "
        f"same {batch_size * grad_accum} sequences a step in {processes} processes: {same}."
    )


def check_inside(processes: int) -> None:
    """In a process this command (or torchrun) started: its world must be ``processes``."""
    world = os.environ.get("WORLD_SIZE")
    if processes > 1 and world is not None and world != str(processes):
        raise ConfigError(
            f"--processes {processes} under torchrun's {world} processes: give the number of "
            "processes to torchrun alone."
        )


def free_port() -> int:
    """A TCP port on the loopback that nothing listens on now (the processes' meeting point)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_processes(argv: list[str], processes: int) -> int:
    """``light-llm ARGV`` in ``processes`` processes of rank 0..N-1 (torchrun's variables set,
    the cores shared out); their exit code: process 0's, or another's where process 0 ended
    well."""
    threads = max(1, thread_budget() // processes)
    meeting = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
    command = [sys.executable, "-m", "light_llm", *argv]
    children: list[subprocess.Popen] = []
    errors = []
    forward = forwarding(children)
    passed_on = [
        signal.SIGINT,
        signal.SIGTERM,
        *([signal.SIGHUP] if hasattr(signal, "SIGHUP") else []),
    ]
    previous = {sig: signal.signal(sig, forward) for sig in passed_on}
    try:
        for rank in range(processes):
            environment = {
                **os.environ,
                **meeting,
                "RANK": str(rank),
                "LOCAL_RANK": str(rank),
                "WORLD_SIZE": str(processes),
                "LOCAL_WORLD_SIZE": str(processes),
                "OMP_NUM_THREADS": str(threads),
            }
            # a session of its own, as torchrun starts its workers (see the top): no terminal
            # signal reaches it but through this command, and it may write to the terminal
            own_group = {"start_new_session": True} if os.name == "posix" else {}
            if rank == 0:
                children.append(subprocess.Popen(command, env=environment, **own_group))
                continue
            errors.append(tempfile.TemporaryFile(mode="w+"))
            children.append(
                subprocess.Popen(
                    command,
                    env=environment,
                    stdout=subprocess.DEVNULL,
                    stderr=errors[-1],
                    **own_group,
                )
            )
        codes = [child.wait() for child in children]
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for child in children:  # (only where starting one failed: the rest have ended)
            if child.poll() is None:
                child.terminate()
                child.wait()
    try:
        if codes[0] != 0:
            return codes[0]
        for code, error in zip(codes[1:], errors, strict=True):
            if code != 0:
                error.seek(0)
                lines = error.read().strip().splitlines()
                print(
                    lines[-1] if lines else f"light-llm train: a process ended with {code}.",
                    file=sys.stderr,
                )
                return code
        return 0
    finally:
        for error in errors:
            error.close()


def forwarding(children: list[subprocess.Popen]) -> Callable:
    """A signal handler passing the signal on to every process still running (each takes it as
    a request to stop after the iteration and save; a second SIGINT, to quit)."""

    def forward(signum, _frame) -> None:
        for child in children:
            if child.poll() is None:
                child.send_signal(signum)

    return forward
