"""The seeds' worked examples, step by step, computed by the code that trains the models.

    >>> from light_llm import explain
    >>> explain.names()[:3]
    ['cat-sat', 'multi-head', 'tiny-attention']
    >>> steps = explain.run("cat-sat")        # a list of Step
    >>> steps[2].title, steps[2].value        # Q·K^T as a NumPy array
    >>> steps[2].seed_value, steps[2].differs_from_seed

Each :class:`Step` holds a labelled value (NumPy array or number), how it is computed, the
seed section it comes from and, where the seed prints a number, the seed's figure beside the
exact one. :func:`write_figures` writes an example's pictures as PNG files;
:mod:`light_llm.explain.plots` draws them (and the attention maps of a checkpoint).
"""

from light_llm.explain.registry import EXAMPLES, get, names, run, write_figures
from light_llm.explain.render import example_json, example_text
from light_llm.explain.steps import Example, Step

__all__ = [
    "EXAMPLES",
    "Example",
    "Step",
    "example_json",
    "example_text",
    "get",
    "names",
    "run",
    "write_figures",
]
