"""Numbers at their limits: the one place that says which values light-llm accepts for a
setting (its type and range) and whether a request fits the machine's memory, checked before
anything is built or allocated. No tensor library needed.

Every check raises the caller's typed error (:class:`~light_llm.errors.ConfigError` by
default) with one sentence naming the setting, what it must be and what it got.

    seeds               integers 0 <= seed < 2^32 (:data:`SEED_LIMIT`: NumPy's seed range;
                        PyTorch takes every one of them)
    generated tokens    at most :data:`MAX_NEW_TOKENS` a request
    batch sizes         at most :data:`MAX_BATCH_SIZE` sequences (also when fewer are there)
    evaluation batches  at most :data:`MAX_EVAL_BATCHES` per evaluation (--eval-iters)
    vocabulary sizes    at most :data:`MAX_VOCAB_SIZE` ids for a learned tokenizer (checked
                        before the ``tokenizers`` library, which aborts the process on a
                        size it cannot allocate)
    memory              what a model or a batch would need, against what the machine has
                        free (:func:`check_fits_in_memory`)
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

from light_llm.errors import ConfigError

SEED_LIMIT = 2**32  # seeds are integers in [0, 2^32)
MAX_NEW_TOKENS = 100_000  # tokens one generate request may ask for
MAX_BATCH_SIZE = 65_536  # sequences in one batch (--batch-size): far beyond any CPU or GPU
MAX_EVAL_BATCHES = 100_000  # batches one evaluation draws (--eval-iters)
MAX_VOCAB_SIZE = 2**24  # ids of a learned tokenizer: 64 times the largest in use (Gemma's 262k)
MEMORY_HEADROOM = 0.9  # a request may use at most this fraction of the free memory


def is_integer(value: object) -> bool:
    """An int that is not a bool (``True`` is an int to Python, never a count to a user)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_real(value: object) -> bool:
    """An int or a float that is not a bool (a string such as "0.1" is not a number here)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_integer(
    name: str,
    value: object,
    low: int | None = 1,
    high: int | None = None,
    error: type[Exception] = ConfigError,
) -> int:
    """``value`` if it is an integer in [low, high] (None: unbounded), else ``error``."""
    if (
        not is_integer(value)
        or (low is not None and value < low)
        or (high is not None and value > high)
    ):
        raise error(f"{name} must be {describe_range(low, high, 'an integer')}, got {value!r}.")
    return value


def check_real(
    name: str,
    value: object,
    low: float | None = None,
    high: float | None = None,
    *,
    low_open: bool = False,
    high_open: bool = False,
    error: type[Exception] = ConfigError,
) -> float:
    """``value`` as a float if it is a finite number in the interval from ``low`` to
    ``high`` (each end closed unless ``*_open``; None: unbounded), else ``error``."""
    inside = is_real(value) and math.isfinite(value)
    if inside and low is not None:
        inside = value > low if low_open else value >= low
    if inside and high is not None:
        inside = value < high if high_open else value <= high
    if not inside:
        if low == 0 and low_open and high is None:
            raise error(f"{name} must be a positive number, got {value!r}.")
        interval = describe_interval(low, high, low_open, high_open)
        raise error(f"{name} must be a finite number{interval}, got {value!r}.")
    return float(value)


def check_flag(name: str, value: object, error: type[Exception] = ConfigError) -> bool:
    """``value`` if it is true or false ("no", 0 and None are not), else ``error``."""
    if not isinstance(value, bool):
        raise error(f"{name} must be true or false, got {value!r}.")
    return value


def check_choice(
    name: str, value: object, allowed: Sequence[str], error: type[Exception] = ConfigError
) -> str:
    """``value`` if it is one of ``allowed``, else ``error`` listing them."""
    if not isinstance(value, str) or value not in allowed:
        raise error(f"{name} must be one of {', '.join(allowed)}, got {value!r}.")
    return value


def check_seed(seed: object, error: type[Exception] = ConfigError) -> int:
    """``seed`` if it is an integer in [0, 2^32) (:data:`SEED_LIMIT`), else ``error``."""
    return check_integer("the seed", seed, 0, SEED_LIMIT - 1, error)


def check_new_tokens(count: object, error: type[Exception] = ConfigError) -> int:
    """``count`` if it is an integer from 0 to :data:`MAX_NEW_TOKENS`, else ``error``."""
    if not is_integer(count) or count < 0:
        raise error(f"max_new_tokens must be 0 or more, got {count!r}.")
    if count > MAX_NEW_TOKENS:
        raise error(
            f"max_new_tokens must be at most {MAX_NEW_TOKENS:,} a request, got {count:,}; "
            "generate in several requests for more."
        )
    return count


def check_vocab_size(vocab_size: int, error: type[Exception] = ConfigError) -> int:
    """``vocab_size`` (an integer) if it is at most :data:`MAX_VOCAB_SIZE`, else ``error``:
    checked before a tokenizer library is asked for that many ids."""
    if vocab_size > MAX_VOCAB_SIZE:
        raise error(
            f"the vocabulary size (--vocab-size) must be at most {MAX_VOCAB_SIZE:,} ids, "
            f"got {vocab_size:,}."
        )
    return vocab_size


def describe_range(low: int | None, high: int | None, noun: str) -> str:
    if low is not None and high is not None:
        return f"{noun} from {low:,} to {high:,}"
    if low is not None:
        return f"{noun} of at least {low:,}"
    if high is not None:
        return f"{noun} of at most {high:,}"
    return noun


def describe_interval(
    low: float | None, high: float | None, low_open: bool, high_open: bool
) -> str:
    if low is None and high is None:
        return ""
    if high is None:
        return f" {'>' if low_open else '>='} {low:g}"
    if low is None:
        return f" {'<' if high_open else '<='} {high:g}"
    return f" in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"


# --------------------------------------------------------------------------- memory
def available_memory_bytes() -> int | None:
    """The memory this machine can still give a process: MemAvailable of /proc/meminfo on
    Linux, the physical memory elsewhere when the platform says, None when unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def format_bytes(n_bytes: float) -> str:
    """``n_bytes`` in the largest binary unit that keeps it at least 1 (KiB ... PiB)."""
    value, unit = float(n_bytes), "bytes"
    for next_unit in ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if value < 1024:
            break
        value, unit = value / 1024, next_unit
    return f"{value:,.3g} {unit}" if unit != "bytes" else f"{int(value):,} bytes"


def check_fits_in_memory(
    n_bytes: float, what: str, hint: str = "", error: type[Exception] = ConfigError
) -> None:
    """``error`` when ``what`` would need ``n_bytes``, more than :data:`MEMORY_HEADROOM` of
    the machine's free memory (:func:`available_memory_bytes`), so that it is refused before
    any of it is allocated. ``hint`` says what to change."""
    free = available_memory_bytes()
    if free is None or n_bytes <= MEMORY_HEADROOM * free:
        return
    raise error(
        f"{what} would need about {format_bytes(n_bytes)} of memory and this machine has "
        f"{format_bytes(free)} free{'; ' + hint if hint else ''}."
    )
