"""A step of a worked example: one labelled value, how it was computed, and what the seed prints;
and the worked example itself (:class:`Example`).

Each worked example of ``light-llm explain`` is a list of :class:`Step` objects. A step holds the
exact value (computed by the library's own code), the place in the seed document it comes from
and, where the seed prints a number for it, the seed's figure, so that a reader sees both and
where they differ.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Step:
    """One labelled intermediate of a worked example.

    Attributes:
        title: what the value is, e.g. "Q·K^T (raw scores)".
        text: how it is computed and what to notice (the assumptions made, if any).
        value: the exact value: a scalar or a NumPy array (1-D: a vector, 2-D: a matrix).
        seed: where the seed shows it, e.g. "seed 001, Attention, Step 1".
        seed_value: the seed's printed figure, same shape as ``value``, NaN where the seed
            prints nothing; None when the seed prints no number for this step.
        seed_decimals: how many decimals the seed printed; its figure agrees with the exact
            value when they differ by at most half a unit in that last place.
        rows, columns: labels of the matrix rows and columns (or of a vector's entries).
        scientific: print the values in scientific notation (for tables that mix very small
            and ordinary numbers; tables of only tiny or only huge numbers switch by
            themselves).
        key: the step's name within its example, e.g. "gpt-weights": what the example's
            pictures and the equations table address it by (its title may be reworded).
    """

    title: str
    text: str
    value: np.ndarray | float
    seed: str
    seed_value: np.ndarray | float | None = None
    seed_decimals: int = 2
    rows: Sequence[str] | None = None
    columns: Sequence[str] | None = None
    scientific: bool = False
    key: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", as_value(self.value))
        if self.seed_value is not None:
            seed_value = np.asarray(self.seed_value, dtype=np.float64)
            if seed_value.shape != np.shape(self.value):
                raise ValueError(
                    f"step {self.title!r}: the seed's figure has shape {seed_value.shape}, "
                    f"the value {np.shape(self.value)}."
                )
            object.__setattr__(self, "seed_value", seed_value)

    @property
    def seed_differs(self) -> np.ndarray | None:
        """Boolean mask (shape of ``value``): True where the seed prints a figure that is not
        the exact value rounded to ``seed_decimals`` decimals; None without a seed figure."""
        if self.seed_value is None:
            return None
        tolerance = 0.5 * 10.0 ** (-self.seed_decimals) + 1e-9
        exact = np.asarray(self.value, dtype=np.float64)
        with np.errstate(invalid="ignore"):
            same = (self.seed_value == exact) | (np.abs(self.seed_value - exact) <= tolerance)
        return ~same & ~np.isnan(self.seed_value)

    @property
    def differs_from_seed(self) -> bool:
        """True if any figure the seed prints for this step differs from the exact value."""
        mask = self.seed_differs
        return bool(mask is not None and mask.any())


@dataclass(frozen=True)
class Example:
    """A worked example: ``steps()`` computes it; ``figures(folder)`` writes its PNGs (None
    when no picture helps) and returns their paths. Each is declared in the module that
    computes its steps and draws its pictures; :mod:`light_llm.explain.registry` collects
    them."""

    name: str
    summary: str
    steps: Callable[[], list[Step]]
    figures: Callable[[Path], list[Path]] | None = None


def as_value(value) -> np.ndarray | float:
    """A torch tensor, list or number as a NumPy array (float64 or int64), a 0-d one as a
    Python number."""
    if hasattr(value, "detach"):  # a torch tensor
        value = value.detach().cpu().numpy()
    array = np.asarray(value)
    if array.dtype.kind in "iub":
        array = array.astype(np.int64)
    else:
        array = array.astype(np.float64)
    if array.ndim == 0:
        return array.item()
    return array


def value_of(steps: Sequence[Step], key: str) -> np.ndarray:
    """The value of the step whose key is ``key``; KeyError naming it when there is none."""
    for step in steps:
        if step.key == key:
            return np.asarray(step.value)
    raise KeyError(f"no step has the key {key!r}")


def by_key(steps: Sequence[Step]) -> dict[str, Step]:
    """The steps of an example by their keys."""
    return {step.key: step for step in steps}
