"""The ``light-llm`` command line: one module per subcommand, each exposing ``register``.

Every subcommand module defines ``register(subparsers)``, which adds its parser and sets
``func`` to a handler ``(args) -> int``. Heavy imports (torch) happen inside handlers so that
``light-llm --help`` is instant. A :class:`~light_llm.errors.LightLLMError` becomes one line
on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import difflib
import errno
import importlib
import os
import re
import sys

from light_llm.errors import LightLLMError, reason

# Subcommand modules, in the order `light-llm --help` lists them.
COMMANDS = [
    "train",
    "generate",
    "eval",
    "info",
    "merge",
    "quantize",
    "export",
    "tokenize",
    "tokenizer",
    "embed",
    "fill_mask",
    "explain",
    "attention",
    "inspect",
    "serve",
    "gradcheck",
]


# argparse's message for an option whose value is missing, or taken for an option (-5s, -hello)
MISSING_VALUE = re.compile(r"^argument ([^:]+): expected one argument$")


class OneLineParser(argparse.ArgumentParser):
    """argparse's parser with its errors in one line, as every other error of light-llm: what
    is wrong, and where the options are described (subcommands' parsers are of this class
    too, as ``add_subparsers`` makes them of their parent's)."""

    def error(self, message: str):
        missing = MISSING_VALUE.match(message)
        if missing:  # argparse takes a value that starts with "-" for another option
            option = missing[1].split("/")[0]
            message += f"; a value that starts with '-' is written {option}=VALUE"
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help).\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="light-llm",
        description="The transformer from its mathematics: train, sample, inspect, explain.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"light_llm.cli.{name}").register(subparsers)
    return parser


def command_parser(parser: argparse.ArgumentParser, args: argparse.Namespace):
    """The parser of the (sub)command ``args`` was parsed for: ``light-llm tokenizer train``'s
    for ``light-llm tokenizer train ...``, the top one for ``light-llm --bogus``."""
    while True:
        chooser = next(
            (a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None
        )
        chosen = getattr(args, chooser.dest, None) if chooser else None
        if chosen is None:
            return parser
        parser = chooser.choices[chosen]


def unrecognized(parser: argparse.ArgumentParser, extras: list[str]) -> str:
    """argparse's "unrecognized arguments" sentence, with the option of ``parser`` nearest to
    a misspelt one (``--tokens`` for ``--token``) where there is one."""
    message = f"unrecognized arguments: {' '.join(extras)}"
    known = [o for a in parser._actions for o in a.option_strings if o.startswith("--")]
    for extra in extras:
        name = extra.split("=", 1)[0]
        if name.startswith("--"):
            near = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
            if near:
                return f"{message}; did you mean {near[0]}?"
    return message


def named_by_flag(parser: argparse.ArgumentParser, message: str) -> str:
    """``message`` with the setting it opens with named by the command's flag where it is
    named as the Python API names it: "--top-k must be ..." for "top_k must be ...", the
    sentence the API raises, so that the command line says what to change on it."""
    name = message.split(" ", 1)[0]
    if not message.startswith(f"{name} must "):
        return message
    for action in parser._actions:
        flags = [option for option in action.option_strings if option.startswith("--")]
        if action.dest == name and flags:
            return flags[0] + message[len(name) :]
    return message


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # (train --processes reruns it)
    if extras:  # said by the subcommand's parser, which knows its options
        owner = command_parser(parser, args)
        owner.error(unrecognized(owner, extras))
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a full disk or a closed pipe shows here, not at exit
        return code
    except LightLLMError as exc:
        message = named_by_flag(command_parser(parser, args), str(exc))
        print(printable(f"light-llm {args.command}: error: {message}"), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"light-llm {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        silence_stdout()
        return 0
    except OSError as exc:  # the output cannot be written (/dev/full), a file cannot be used
        silence_stdout()
        print(printable(f"light-llm {args.command}: error: {os_error(exc)}"), file=sys.stderr)
        return 2


WRITE_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG, errno.EPIPE}


def os_error(exc: OSError) -> str:
    """One sentence for an OSError no command turned into its own: "cannot write" where
    writing failed (the output, a full or read-only disk), else "cannot open" with the file
    and the system's reason (a checkpoint that cannot be read is not one that cannot be
    written)."""
    if not exc.filename:
        return f"cannot write the output: {reason(exc)}."
    verb = "write" if exc.errno in WRITE_ERRORS else "open"
    return f"cannot {verb} {exc.filename}: {reason(exc)}."


def printable(message: str) -> str:
    """``message`` with the bytes of a file name that is not UTF-8 (which Python keeps as
    lone surrogates) written as \\xNN escapes, so that any stream can print it."""
    try:
        raw = message.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate that stands for no byte
        raw = message.encode("utf-8", "backslashreplace")
    return raw.decode("utf-8", "backslashreplace")


def silence_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's final flush of what could not be
    written raises nothing more at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass  # stdout is not a real file (e.g. captured by a test): nothing to flush at exit


if __name__ == "__main__":
    sys.exit(main())
