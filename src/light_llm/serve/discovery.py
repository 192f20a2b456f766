"""Which model ``light-llm serve`` shows when no --checkpoint is given: the newest training run
under the current folder (``OUT/checkpoint``, OUT up to two levels down), else the packaged
MiniLM encoder."""

from __future__ import annotations

from pathlib import Path

from light_llm.checkpoints.folder import CONFIG_FILE, RUN_PATTERNS
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
    return packaged_bert_folder(), (
        f"the packaged MiniLM encoder (no training run under {Path(root).resolve()})"
    )
