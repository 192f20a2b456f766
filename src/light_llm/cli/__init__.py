"""The ``light-llm`` command line: one module per subcommand, each exposing ``register``.

Every subcommand module defines ``register(subparsers)``, which adds its parser and sets
``func`` to a handler ``(args) -> int``. Heavy imports (torch) happen inside handlers so that
``light-llm --help`` is instant. A :class:`~light_llm.errors.LightLLMError` becomes one line
on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from light_llm.errors import LightLLMError

# Subcommand modules, in the order `light-llm --help` lists them.
COMMANDS = [
    "train",
    "generate",
    "eval",
    "info",
    "merge",
    "export",
    "tokenize",
    "tokenizer",
    "embed",
    "fill_mask",
    "explain",
    "attention",
    "serve",
    "gradcheck",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="light-llm",
        description="The transformer from its mathematics: train, sample, inspect, explain.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"light_llm.cli.{name}").register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        return int(args.func(args) or 0)
    except LightLLMError as exc:
        print(f"light-llm {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"light-llm {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
