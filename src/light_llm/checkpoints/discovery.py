"""Which model a command uses when no --checkpoint names one, and a sentence saying which.

``light-llm serve``: the newest training run under the current folder (``OUT/checkpoint``, OUT
up to two levels down), else the small run that ships with light-llm (the main job's recipe on
Shakespeare, with its recorded history, so that the page has a model learning to replay before
anything is trained here), else the packaged MiniLM encoder.

``light-llm fill-mask`` (and ``serve --encoder``): the newest masked-LM encoder run under the
current folder, else the small encoder that ships with light-llm (``light-llm train --model
bert`` on Shakespeare); the packaged MiniLM embeds sentences but has no masked-LM head.
"""

from __future__ import annotations

from pathlib import Path

from light_llm.assets import packaged_encoder_folder, packaged_run_folder
from light_llm.checkpoints.folder import (
    CONFIG_FILE,
    ENCODER_ARCHITECTURE,
    RUN_PATTERNS,
    WEIGHTS_FILE,
    inspect_folder,
)
from light_llm.checkpoints.run import CHECKPOINT_SUBFOLDER
from light_llm.errors import ConfigError, LightLLMError
from light_llm.tokenizers.bert import packaged_bert_folder

TRAIN_AN_ENCODER = "light-llm train --model bert --out out-bert"


def is_architecture(checkpoint: Path, architecture: str) -> bool:
    """Whether the checkpoint folder holds a light-llm model of ``architecture``."""
    try:
        return inspect_folder(checkpoint).architecture == architecture
    except LightLLMError:  # a damaged config.json: not a run to pick
        return False


def newest_run(root: str | Path, architecture: str | None = None) -> Path | None:
    """The training output folder under ``root`` (``root`` itself or up to two levels below)
    whose checkpoint was written last, of ``architecture`` ("gpt" or "bert") when one is
    given; None when there is none."""
    root = Path(root)
    weights = [
        path
        for pattern in RUN_PATTERNS
        for path in root.glob(pattern)
        if (path.parent / CONFIG_FILE).is_file()
        and (architecture is None or is_architecture(path.parent, architecture))
    ]
    if not weights:
        return None
    newest = max(weights, key=lambda path: path.stat().st_mtime)
    return newest.parent.parent


def shipped(folder: Path) -> bool:
    """Whether the run folder that ships with light-llm has its weights (a broken install may
    lack them)."""
    return (folder / CHECKPOINT_SUBFOLDER / WEIGHTS_FILE).is_file()


def default_model(root: str | Path) -> tuple[Path, str]:
    """The folder ``light-llm serve`` shows and a sentence saying how it was chosen."""
    run = newest_run(root)
    if run is not None:
        return run, f"the newest training run under {Path(root).resolve()}"
    if shipped(packaged_run_folder()):
        return packaged_run_folder(), (
            f"the small run that ships with light-llm (no training run under "
            f"{Path(root).resolve()} yet)"
        )
    return packaged_bert_folder(), (
        f"the packaged MiniLM encoder (no training run under {Path(root).resolve()})"
    )


def default_encoder(root: str | Path) -> tuple[Path, str]:
    """The masked-LM encoder run to use and a sentence saying how it was chosen; ConfigError
    when there is none under ``root`` and the shipped one is missing."""
    run = newest_run(root, ENCODER_ARCHITECTURE)
    if run is not None:
        return run, f"the newest encoder run under {Path(root).resolve()}"
    folder = packaged_encoder_folder()
    if not shipped(folder):
        weights = folder / CHECKPOINT_SUBFOLDER / WEIGHTS_FILE
        raise ConfigError(
            f"the encoder that ships with light-llm is missing its weights ({weights}): "
            f"reinstall light-llm, or give --checkpoint DIR of a masked-LM encoder "
            f"(`{TRAIN_AN_ENCODER}` trains one)."
        )
    return folder, (
        f"the small masked-LM encoder that ships with light-llm (no encoder run under "
        f"{Path(root).resolve()} yet)"
    )
