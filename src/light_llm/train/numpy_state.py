"""The NumPy trainer's optimizer state and raw weights, for an exact resume (the rest of the
run's state, progress and the dropout generator among it, is ``trainer_state.json``), written
with ``safetensors.numpy``: nothing here needs torch.

    optimizer.safetensors   one array per parameter and moment, named
                              adamw.m.NAME, adamw.v.NAME    AdamW's moments (every parameter
                                                            AdamW trains)
                              muon.momentum.NAME            Muon's momentum buffer M
                              normuon.second_moment.NAME    NorMuon's per-row v, (d_out, 1)
                            and in its metadata ``engine`` = "numpy" and ``adamw_step`` = t
    raw_weights.safetensors with --ema-beta, the trained weights beside the model file's
                            average (:mod:`light_llm.train.averaging`), named as the model's

The PyTorch trainer's ``optimizer.safetensors`` (:mod:`light_llm.train.optimizer_state`)
names its tensors by parameter index; a NumPy run resumes a NumPy run only (the engine in
``trainer_state.json`` says which, :func:`light_llm.train.resume.check_same_engine`).
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from pathlib import Path

import numpy as np
import safetensors
import safetensors.numpy

from light_llm.checkpoints.run import OPTIMIZER_TENSORS_FILE
from light_llm.errors import CheckpointError
from light_llm.reference.optim import AdamW, MuonAdamW
from light_llm.train.averaging import RAW_WEIGHTS_FILE
from light_llm.untrusted import check_regular_file

ENGINE = "numpy"


def optimizer_arrays(optimizer: AdamW | MuonAdamW) -> tuple[dict[str, np.ndarray], int]:
    """The optimizer's state arrays by saved name (they are the optimizer's own, not copies)
    and AdamW's step count t."""
    adamw = optimizer.adamw if isinstance(optimizer, MuonAdamW) else optimizer
    arrays = {f"adamw.m.{name}": value for name, value in adamw.m.items()}
    arrays.update({f"adamw.v.{name}": value for name, value in adamw.v.items()})
    if isinstance(optimizer, MuonAdamW):
        arrays.update({f"muon.momentum.{n}": value for n, value in optimizer.velocity.items()})
        moments = optimizer.second_moment.items()
        arrays.update({f"normuon.second_moment.{n}": value for n, value in moments})
    return arrays, adamw.t


def optimizer_file(optimizer: AdamW | MuonAdamW) -> dict[str, bytes]:
    """``optimizer.safetensors`` holding the optimizer's state (see the module's docstring)."""
    arrays, step = optimizer_arrays(optimizer)
    metadata = {"engine": ENGINE, "adamw_step": str(step)}
    tensors = {name: np.ascontiguousarray(value) for name, value in arrays.items()}
    return {OPTIMIZER_TENSORS_FILE: safetensors.numpy.save(tensors, metadata=metadata)}


def read_arrays(path: Path, what: str) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """The arrays and metadata of a safetensors file; CheckpointError when unreadable."""
    try:
        check_regular_file(path)  # not a FIFO, not /dev/zero
        with safetensors.safe_open(path, framework="numpy") as handle:
            metadata = handle.metadata() or {}
            arrays = {name: handle.get_tensor(name) for name in handle.keys()}  # noqa: SIM118
    except (OSError, ValueError, TypeError, safetensors.SafetensorError) as exc:
        raise CheckpointError(f"the {what} in {path.parent} is unreadable ({exc}).") from None
    return arrays, metadata


def copy_into(
    targets: Mapping[str, np.ndarray], saved: Mapping[str, np.ndarray], path: Path, what: str
) -> None:
    """Copy ``saved`` into ``targets`` (arrays by name) after checking that the names and
    shapes agree; CheckpointError naming the first mismatch."""
    missing = sorted(targets.keys() - saved.keys())
    unknown = sorted(saved.keys() - targets.keys())
    if missing or unknown:
        first = f"lacks {missing[0]!r}" if missing else f"holds an unknown {unknown[0]!r}"
        raise CheckpointError(
            f"the {what} in {path} does not fit this run: it {first} "
            f"({len(missing)} missing, {len(unknown)} unknown)."
        )
    for name, target in targets.items():
        if saved[name].shape != target.shape:
            raise CheckpointError(
                f"the {what} in {path} does not fit this run: {name!r} is "
                f"{tuple(saved[name].shape)}, not {target.shape}."
            )
    for name, target in targets.items():
        target[...] = saved[name]


def load_optimizer_state(
    optimizer: AdamW | MuonAdamW, folder: Path, saved_normuon: bool = True
) -> None:
    """Put the state :func:`optimizer_file` saved in ``folder`` back into ``optimizer``
    (built by the current configuration, which keeps its hyperparameters). A run saved
    without NorMuon (``saved_normuon`` False) and resumed with it has no second moments:
    they start at v = 0, as the PyTorch engine's do."""
    path = folder / OPTIMIZER_TENSORS_FILE  # there: resume.saved_run checked
    saved, metadata = read_arrays(path, "optimizer state")
    if metadata.get("engine") != ENGINE:
        raise CheckpointError(
            f"the optimizer state in {path} was not written by the numpy engine, so it "
            "cannot resume this run."
        )
    try:
        step = int(metadata["adamw_step"])
    except (KeyError, ValueError):
        raise CheckpointError(f"the optimizer state in {path} lacks a valid step count.") from None
    if step < 0:
        raise CheckpointError(f"the optimizer state in {path} has a negative step count.")
    targets, _ = optimizer_arrays(optimizer)
    if not saved_normuon:
        targets = {n: value for n, value in targets.items() if not n.startswith("normuon.")}
    copy_into(targets, saved, path, "optimizer state")
    (optimizer.adamw if isinstance(optimizer, MuonAdamW) else optimizer).t = step


def raw_weights_file(raw: Mapping[str, np.ndarray]) -> dict[str, bytes]:
    """The raw (trained) weights of a run that saves its weight average as the model."""
    tensors = {name: np.ascontiguousarray(value) for name, value in raw.items()}
    return {RAW_WEIGHTS_FILE: safetensors.numpy.save(tensors)}


def load_raw_weights(weights: MutableMapping[str, np.ndarray], folder: Path) -> None:
    """Copy the raw weights :func:`raw_weights_file` saved in ``folder`` into ``weights``
    (the model's parameters by name, in place)."""
    path = folder / RAW_WEIGHTS_FILE
    saved, _ = read_arrays(path, "raw weights")
    copy_into(weights, saved, path, "raw weights")
