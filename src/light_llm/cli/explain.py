"""``light-llm explain``: the seeds' worked examples, step by step, and their pictures."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

DESCRIPTION = """\
Run one of the seed documents' worked examples and print every intermediate value, computed by
the same code that trains the models (attention, positions, norms, feed-forward, optimiser,
sampling, tokenizer). Values are printed to 4 decimals; where a seed prints a figure for a step,
the seed's figure is shown beside the exact one and marked * where it differs.

Without NAME, list the examples.
"""

EXAMPLES = """\
examples:
  light-llm explain                       list the examples
  light-llm explain cat-sat               attention on "The cat sat", step by step
  light-llm explain river --json          the same steps as JSON, for programs
  light-llm explain sinusoidal --plot pictures/
  light-llm explain --plot pictures/      the pictures of every example
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "explain",
        help="the seeds' worked examples, step by step (and their pictures)",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("name", nargs="?", metavar="NAME", help="the example to run")
    parser.add_argument(
        "--json",
        action="store_true",
        help="print JSON: the list of examples, or the example's steps (arrays as nested lists; "
        'null where the seed prints no figure; "inf"/"-inf" for masked scores)',
    )
    parser.add_argument(
        "--plot",
        type=Path,
        metavar="DIR",
        help="write the example's pictures (PNG) into DIR (all examples' without NAME)",
    )
    parser.add_argument(
        "--run",
        type=Path,
        metavar="OUT",
        help="lr-schedule only: the schedule of the training run saved in OUT "
        "(default: that of light-llm train with no flags)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from light_llm import explain
    from light_llm.errors import ConfigError

    if args.name is None:
        if args.run is not None:
            raise ConfigError(
                "--run needs the example name: light-llm explain lr-schedule --run OUT."
            )
        if args.plot is not None:
            written = [
                path for name in explain.names() for path in explain.write_figures(name, args.plot)
            ]
            report_written(list(dict.fromkeys(written)))  # shared pictures once
            return 0
        if args.json:
            listing = [{"name": n, "summary": explain.get(n).summary} for n in explain.names()]
            print(json.dumps(listing, ensure_ascii=False, indent=1))
            return 0
        width = max(len(name) for name in explain.names())
        print("Worked examples (light-llm explain NAME):")
        for name in explain.names():
            print(f"  {name:<{width}}  {explain.get(name).summary}")
        return 0

    example = explain.get(args.name)
    if args.run is None:
        steps = example.steps()
    else:
        from light_llm.explain.registry import schedule_figure
        from light_llm.explain.training_examples import lr_schedule, run_schedule

        if example.name != "lr-schedule":
            raise ConfigError("--run applies to the lr-schedule example only.")
        settings = run_schedule(args.run)
        steps = lr_schedule(settings)
    if args.json:
        document = explain.example_json(example.name, example.summary, steps)
        print(json.dumps(document, ensure_ascii=False, indent=1))
    else:
        sys.stdout.write(explain.example_text(example.name, example.summary, steps))
    if args.plot is not None:
        if args.run is None:
            written = explain.write_figures(example.name, args.plot)
        else:
            written = [schedule_figure(args.plot, settings)]
        if not written:
            print(f"note: the {example.name} example has no pictures.", file=sys.stderr)
        report_written(written)
    return 0


def report_written(paths: list[Path]) -> None:
    """One line per picture written, on stderr (stdout stays the steps or the JSON)."""
    for path in paths:
        print(f"wrote {path}", file=sys.stderr)
