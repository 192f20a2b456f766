"""The registry of worked examples: it collects the examples each module declares (their name,
one-line summary, the function that computes the steps and the one that draws the pictures,
side by side in that module), in the order ``light-llm explain`` lists them."""

from __future__ import annotations

from pathlib import Path

from light_llm.errors import ConfigError
from light_llm.explain import (
    attention_examples,
    bpe_examples,
    dynamics_examples,
    efficiency_examples,
    geometry_examples,
    inspect_examples,
    language_model_examples,
    layer_examples,
    masking_examples,
    mlp_examples,
    muon_examples,
    position_examples,
    probability_examples,
    quantization_examples,
    regularization_examples,
    tokenization_examples,
    training_examples,
    transformer_examples,
)
from light_llm.explain.steps import Example, Step

MODULES = (
    attention_examples,
    position_examples,
    layer_examples,
    probability_examples,
    training_examples,
    muon_examples,
    inspect_examples,
    tokenization_examples,
    transformer_examples,
    mlp_examples,
    geometry_examples,
    dynamics_examples,
    language_model_examples,
    efficiency_examples,
    quantization_examples,
    regularization_examples,
    masking_examples,
    bpe_examples,
)
EXAMPLES: dict[str, Example] = {
    example.name: example for module in MODULES for example in module.EXAMPLES
}


def names() -> list[str]:
    """The example names, in the order ``light-llm explain`` lists them."""
    return list(EXAMPLES)


def get(name: str) -> Example:
    """The example called ``name``; ConfigError naming the known ones otherwise."""
    try:
        return EXAMPLES[name]
    except KeyError:
        raise ConfigError(
            f"there is no worked example {name!r}; the examples are: {', '.join(EXAMPLES)}."
        ) from None


def run(name: str) -> list[Step]:
    """The steps of the example called ``name``, computed now."""
    return get(name).steps()


def write_figures(name: str, folder: str | Path) -> list[Path]:
    """Write the PNGs of the example called ``name`` into ``folder``; [] if it has none."""
    example = get(name)
    if example.figures is None:
        return []
    return example.figures(Path(folder))
