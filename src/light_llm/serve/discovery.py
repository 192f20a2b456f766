"""Which model ``light-llm serve`` shows when no --checkpoint is given: the newest training run
under the current folder (``OUT/checkpoint``, OUT up to two levels down), else the small run
that ships with light-llm (the main job's recipe on Shakespeare, with its recorded history, so
that the page has a model learning to replay before anything is trained here), else the
packaged MiniLM encoder."""

from __future__ import annotations

from pathlib import Path

from light_llm.assets import packaged_run_folder
from light_llm.checkpoints import CHECKPOINT_SUBFOLDER
from light_llm.checkpoints.folder import CONFIG_FILE, RUN_PATTERNS, WEIGHTS_FILE
from light_llm.tokenizers.bert import packaged_bert_folder


def newest_run(root: str | Path) -> Path | None:
    """The training output folder under ``root`` (``root`` itself or up to two levels below)
    whose checkpoint was written last; None when there is none."""
    root = Path(root)
    weights = [
        path
        for pattern in RUN_PATTERNS
        for path in root.glob(pattern)
        if (path.parent / CONFIG_FILE).is_file()
    ]
    if not weights:
        return None
    newest = max(weights, key=lambda path: path.stat().st_mtime)
    return newest.parent.parent


def default_model(root: str | Path) -> tuple[Path, str]:
    """The folder to serve and a sentence saying how it was chosen."""
    run = newest_run(root)
    if run is not None:
        return run, f"the newest training run under {Path(root).resolve()}"
    shipped = packaged_run_folder()
    if (shipped / CHECKPOINT_SUBFOLDER / WEIGHTS_FILE).is_file():
        return shipped, (
            f"the small run that ships with light-llm (no training run under "
            f"{Path(root).resolve()} yet)"
        )
    return packaged_bert_folder(), (
        f"the packaged MiniLM encoder (no training run under {Path(root).resolve()})"
    )
