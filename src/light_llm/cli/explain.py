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

Without NAME, list the examples. --markdown writes an example (or all of them) as a Markdown
page with its pictures linked; --equations lists every numbered equation of seed 002 with the
example that computes it and the functions that implement it.
"""

EXAMPLES = """\
examples:
  light-llm explain                       list the examples
  light-llm explain cat-sat               attention on "The cat sat", step by step
  light-llm explain river --json          the same steps as JSON, for programs
  light-llm explain sinusoidal --plot pictures/
  light-llm explain --plot pictures/      the pictures of every example
  light-llm explain tiny-attention --markdown page.md   a page, pictures beside it
  light-llm explain --equations           seed 002's equations 1-53 and their code
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
        "--markdown",
        nargs="?",
        const="-",
        type=Path,
        metavar="FILE",
        help="write a Markdown page instead of text: to FILE (its pictures written beside it, "
        "or into --plot DIR) or, without FILE, to stdout (pictures linked only with --plot DIR); "
        "without NAME, every example in one page",
    )
    parser.add_argument(
        "--equations",
        action="store_true",
        help="list seed 002's numbered equations (1-53): the example computing each and the "
        "functions implementing it (with --json or --markdown in those formats)",
    )
    parser.add_argument(
        "--run",
        type=Path,
        metavar="OUT",
        help="lr-schedule only: the schedule of the training run saved in OUT "
        "(default: that of light-llm train with no flags)",
    )
    parser.set_defaults(func=run)


# the heading of the page of every worked example (one example's page: "`light-llm explain
# NAME`", explain.markdown; the equations' page: explain.equations.EQUATIONS_TITLE)
EXAMPLES_TITLE = "light-llm's worked examples"


def run(args: argparse.Namespace) -> int:
    from light_llm import explain
    from light_llm.errors import ConfigError

    if args.json and args.markdown is not None:
        raise ConfigError("choose one of --json and --markdown.")
    if args.markdown is not None:  # before any picture is drawn
        check_page_path(args.markdown)
    if args.equations:
        if args.name is not None or args.plot is not None or args.run is not None:
            raise ConfigError("--equations takes no NAME, --plot or --run.")
        return print_equations(args)
    if args.plot is not None:  # a folder that cannot take the pictures is said before any text
        from light_llm.atomic import make_folder

        make_folder(args.plot)
    if args.name is None:
        if args.run is not None:
            raise ConfigError(
                "--run needs the example name: light-llm explain lr-schedule --run OUT."
            )
        if args.markdown is not None:
            return write_markdown(args, explain.names())
        pictures = {}
        if args.plot is not None:
            pictures = {name: explain.write_figures(name, args.plot) for name in explain.names()}
            written = [path for paths in pictures.values() for path in paths]
            report_written(list(dict.fromkeys(written)))  # shared pictures once
        if args.json:
            listing = [{"name": n, "summary": explain.get(n).summary} for n in explain.names()]
            if args.plot is not None:
                for item in listing:
                    item["pictures"] = [str(path) for path in pictures[item["name"]]]
            print(json.dumps(listing, ensure_ascii=False, indent=1))
            return 0
        width = max(len(name) for name in explain.names())
        print("Worked examples (light-llm explain NAME):")
        for name in explain.names():
            print(f"  {name:<{width}}  {explain.get(name).summary}")
        return 0

    example = explain.get(args.name)
    if args.markdown is not None:
        if args.run is not None:
            raise ConfigError("--run and --markdown do not go together.")
        return write_markdown(args, [example.name])
    if args.run is None:
        steps = example.steps()
    else:
        from light_llm.explain.training_examples import lr_schedule, run_schedule, schedule_figure

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


def print_equations(args: argparse.Namespace) -> int:
    from light_llm.explain import equations

    if args.json:
        print(json.dumps(equations.equations_json(), ensure_ascii=False, indent=1))
    elif args.markdown is not None:
        write_page(args.markdown, equations.equations_markdown())
    else:
        sys.stdout.write(equations.equations_text())
    return 0


def write_markdown(args: argparse.Namespace, names: list[str]) -> int:
    """The examples ``names`` as one Markdown page, to stdout or to the file --markdown names;
    their pictures into --plot DIR or, for a file, beside it."""
    from light_llm import explain
    from light_llm.explain.markdown import example_markdown, picture_links

    to_file = str(args.markdown) != "-"
    page_folder = args.markdown.parent if to_file else None
    picture_folder = args.plot if args.plot is not None else page_folder
    level = 1 if len(names) == 1 else 2
    pages = []
    for name in names:
        example = explain.get(name)
        written = []
        if picture_folder is not None:
            written = explain.write_figures(name, picture_folder)
            report_written(written)
        links = picture_links(written, page_folder)
        pages.append(example_markdown(name, example.summary, example.steps(), links, level))
    document = "\n".join(pages)
    if len(names) > 1:
        contents = "\n".join(
            f"- [`{n}`](#light-llm-explain-{n}): {explain.get(n).summary}" for n in names
        )
        document = f"# {EXAMPLES_TITLE}\n\n{contents}\n\n{document}"
    if to_file:
        write_page(args.markdown, document)
    else:
        sys.stdout.write(document)
    return 0


def check_page_path(path: Path) -> None:
    """OutputError unless --markdown PATH may take a page: "-" (stdout), a new file, or a page
    light-llm wrote before (its first line one of the pages' headings), never a folder or a
    file of the user's."""
    from light_llm.atomic import refuse_to_replace
    from light_llm.errors import OutputError
    from light_llm.explain.equations import EQUATIONS_TITLE

    if str(path) == "-":
        return
    if path.is_dir():
        raise OutputError(f"--markdown {path} is a folder: give a file name for the page.")
    headings = (f"# {EXAMPLES_TITLE}", f"# {EQUATIONS_TITLE}", "# `light-llm explain ")
    ours = "a page light-llm wrote: it writes over its own pages only"
    refuse_to_replace(path, "--markdown", tuple(h.encode() for h in headings), ours)


def write_page(path: Path, text: str) -> None:
    """Write a Markdown page atomically; a folder that cannot take it is one sentence."""
    from light_llm.atomic import write_atomically
    from light_llm.errors import DataError, reason

    if str(path) == "-":
        sys.stdout.write(text)
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, text.encode("utf-8"))
    except OSError as exc:
        raise DataError(f"cannot write the page {path}: {reason(exc)}.") from None
    print(f"wrote {path}", file=sys.stderr)


def report_written(paths: list[Path]) -> None:
    """One line per picture written, on stderr (stdout stays the steps or the JSON)."""
    for path in paths:
        print(f"wrote {path}", file=sys.stderr)
