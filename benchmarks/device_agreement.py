"""Whether the look-inside analyses, ``eval`` and greedy ``generate`` give the same numbers on
two devices (a GPU against the CPU), as a learner runs them: each ``light-llm inspect``
analysis with ``--json`` on both, compared value by value (the largest relative difference of
the numbers, and every token, id, position and name equal), then the whole-split ``eval`` and
a greedy ``generate`` on each.

    PYTHONPATH=src python benchmarks/device_agreement.py --checkpoint DIR [--devices cpu cuda]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

ANALYSES = {
    "lens, a prompt": ["lens", "--prompt", "ROMEO: What"],
    "lens, a text": ["lens", "--max-tokens", "512"],
    "attribute": ["attribute", "--prompt", "ROMEO: What"],
    "ablate, a prompt": ["ablate", "--prompt", "ROMEO: What", "--components", "L0H1"],
    "ablate, the importance table": ["ablate", "--max-tokens", "512"],
    "patch": [
        "patch",
        "--clean",
        "And the king",  # as many characters, and tokens of the shipped BPE (3), as:
        "--corrupt",
        "And the lord",
        "--answer",
        ",",
        "--wrong",
        ".",
    ],  # fmt: skip
    "heads": ["heads", "--max-tokens", "512"],
    "neurons": ["neurons", "--layer", "1", "--neuron", "7", "--max-tokens", "512"],
    "surprise": ["surprise", "--max-tokens", "256"],
}


def light_llm(arguments: list[str], device: str) -> str:
    """One ``light-llm`` command's standard output on ``device`` (its error line if it fails),
    run by this Python, so that ``PYTHONPATH=src`` decides which light-llm it is."""
    command = [sys.executable, "-m", "light_llm", *arguments, "--device", device]
    done = subprocess.run(command, capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else f"error: {done.stderr.strip()}"


def leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Every scalar of a JSON value with its path (``.stages[2]``)."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from leaves(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from leaves(item, f"{path}[{index}]")
    else:
        yield path, value


def compare(first: str, second: str) -> str:
    """The largest relative difference |a - b| / max(1, |a|) of two JSON outputs' floats, and
    how many of their other values differ."""
    a, b = dict(leaves(json.loads(first))), dict(leaves(json.loads(second)))
    if a.keys() != b.keys():
        return f"different fields: {sorted(set(a) ^ set(b))[:4]}"
    floats = [k for k in a if isinstance(a[k], float) or isinstance(b[k], float)]
    largest = max((abs(a[k] - b[k]) / max(1.0, abs(a[k])) for k in floats), default=0.0)
    others = [k for k in a if k not in floats and a[k] != b[k]]
    return (
        f"{len(a)} values, largest relative difference {largest:.1e}, "
        f"{len(others)} other values differ {others[:4]}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True, help="a trained GPT's folder")
    parser.add_argument("--devices", nargs=2, default=["cpu", "cuda"], metavar="DEVICE")
    args = parser.parse_args()
    first, second = args.devices
    import torch

    if "cuda" in args.devices and not torch.cuda.is_available():
        parser.exit(2, "device_agreement.py: PyTorch sees no CUDA GPU here to compare with.\n")
    for name, analysis in ANALYSES.items():
        arguments = ["inspect", *analysis, "--checkpoint", args.checkpoint, "--json"]
        a, b = light_llm(arguments, first), light_llm(arguments, second)
        failed = [out for out in (a, b) if out.startswith("error: ")]
        print(f"{name}: {failed[0] if failed else compare(a, b)}")
    for device in args.devices:
        report = light_llm(["eval", "--checkpoint", args.checkpoint], device)
        nats = [line for line in report.splitlines() if "nats per character" in line]
        print(f"eval on {device}: {nats[0] if nats else report}")
        greedy = ["generate", "--checkpoint", args.checkpoint, "--prompt", "ROMEO:"]
        text = light_llm([*greedy, "--max-new-tokens", "40", "--temperature", "0"], device)
        print(f"greedy generate on {device}: {text!r}")


if __name__ == "__main__":
    main()
