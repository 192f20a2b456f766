"""The probe records of a training run (what they hold: :mod:`light_llm.inspect.probe`), one
JSON file an iteration in the run's folder:

    OUT/probes/iter-00000250.json     the probe taken at iteration 250

Each file is written whole or not at all (:func:`light_llm.atomic.write_atomically`), so a run
killed at any moment leaves every complete record and no half of one; an iteration has one
file, so a resumed run that probes an iteration again replaces it rather than recording it
twice, and first drops the records of iterations after its checkpoint (a killed run's future).
Only files of this name holding this format are light-llm's: anything else in the folder is
neither replaced nor removed. Reading goes through :mod:`light_llm.untrusted` (bounded, never
a FIFO or a device).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from light_llm.atomic import make_folder, remove_stale_temporaries, write_atomically
from light_llm.errors import CheckpointError, TrainingError
from light_llm.untrusted import read_json_object

PROBES_SUBFOLDER = "probes"
PROBE_FORMAT = "light-llm-probe"
PROBE_FILE = re.compile(r"iter-(\d{8})\.json")
# the temporary file of a record being written (light_llm.atomic): .iter-NNNNNNNN.json.PID.X.tmp
PROBE_TEMPORARY = re.compile(r"\.(iter-\d{8}\.json)\.\d+\..+\.tmp")
PROBE_LIMIT = 16 * 2**20  # bytes of a probe record worth reading


def probe_file(out: Path, iteration: int) -> Path:
    """OUT/probes/iter-NNNNNNNN.json."""
    return Path(out) / PROBES_SUBFOLDER / f"iter-{iteration:08d}.json"


def probe_iterations(out: Path) -> list[int]:
    """The iterations that have a probe record in ``out``, in order ([] without any)."""
    folder = Path(out) / PROBES_SUBFOLDER
    try:
        names = [entry.name for entry in folder.iterdir() if entry.is_file()]
    except OSError:
        return []
    return sorted(int(match[1]) for name in names if (match := PROBE_FILE.fullmatch(name)))


def read_probe(out: Path, iteration: int) -> dict[str, Any]:
    """The probe record of ``iteration``; CheckpointError in one sentence when it is missing,
    damaged or not a probe."""
    path = probe_file(out, iteration)
    record = read_json_object(path, "the probe record", limit=PROBE_LIMIT)
    if record.get("format") != PROBE_FORMAT or record.get("iter") != iteration:
        raise CheckpointError(f"{path} is not a light-llm probe record of iteration {iteration}.")
    return record


def is_probe_record(path: Path) -> bool:
    """Whether ``path`` is one of light-llm's probe records (by its name and its format)."""
    if not PROBE_FILE.fullmatch(path.name) or path.is_symlink():
        return False
    try:
        return read_json_object(path, limit=PROBE_LIMIT).get("format") == PROBE_FORMAT
    except CheckpointError:
        return False


def write_probe(out: Path, record: dict[str, Any]) -> Path:
    """Write ``record`` (with its ``iter``) as its iteration's file, whole or not at all;
    TrainingError when a file of that name that is not a probe record is in the way."""
    path = probe_file(out, record["iter"])
    if (path.exists() or path.is_symlink()) and not is_probe_record(path):
        raise TrainingError(
            f"{path} is not a probe record light-llm wrote, so it is left alone and the "
            "probes stop; move it away, or train with --probe-interval 0."
        )
    make_folder(path.parent)
    try:
        write_atomically(path, json.dumps(record, ensure_ascii=False).encode("utf-8"))
    except OSError as exc:
        raise TrainingError(f"cannot write the probe record {path}: {exc.strerror}.") from None
    return path


def drop_probes_after(out: Path, iteration: int | None) -> None:
    """Remove light-llm's probe records of iterations after ``iteration`` (every one when
    None: a fresh run in a folder an earlier run used), and the temporary files of records
    whose writer was killed mid-write (a record this run may never write again, when the
    checkpoint it resumes from was saved before the probe); other files stay."""
    for recorded in probe_iterations(out):
        path = probe_file(out, recorded)
        if (iteration is None or recorded > iteration) and is_probe_record(path):
            path.unlink(missing_ok=True)
    folder = Path(out) / PROBES_SUBFOLDER
    try:
        names = [entry.name for entry in folder.iterdir()]
    except OSError:
        return
    for record in {match[1] for name in names if (match := PROBE_TEMPORARY.fullmatch(name))}:
        remove_stale_temporaries(folder / record)  # a live writer's file stays
