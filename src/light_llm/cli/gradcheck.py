"""``light-llm gradcheck``: check the NumPy engine's hand-written gradients against central
finite differences, operation by operation."""

from __future__ import annotations

import argparse

DESCRIPTION = """\
Check a hand-written backward pass of the NumPy engine against central finite differences.

For an operation y = f(θ) and a random upstream gradient G, the backward's dL/dθ of
L = Σ G ⊙ y is compared, entry by entry, with (L(θ + h) - L(θ - h)) / 2h. One line per
parameter gives the relative error max|a - n| / (max|a| + max|n|): about 1e-9 in float64
means the derivation is right; float32 shows what rounding alone does (about 1e-3).
Without OP, the operations are listed; OP "all" checks every one.
"""

EXAMPLES = """\
examples:
  light-llm gradcheck                 list the operations
  light-llm gradcheck attention       softmax(QK^T/sqrt(d_k))V: dQ, dK, dV
  light-llm gradcheck gpt             every parameter of a tiny GPT, through the loss
  light-llm gradcheck default         the same for the model light-llm trains by default
  light-llm gradcheck all --dtype float32
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "gradcheck",
        help="check the NumPy engine's gradients against finite differences",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("op", nargs="?", metavar="OP", help="the operation to check, or 'all'")
    parser.add_argument(
        "--dtype",
        choices=["float64", "float32"],
        default="float64",
        help="precision of the check (default float64)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from light_llm.reference.gradcheck import OPS, check_op

    if args.op is None:
        width = max(len(name) for name in OPS)
        print("operations (light-llm gradcheck OP):")
        for name, make in OPS.items():
            print(f"  {name:<{width}}  {make().description}")
        print(f"  {'all':<{width}}  every operation above")
        return 0
    names = list(OPS) if args.op == "all" else [args.op]
    dtype = np.float64 if args.dtype == "float64" else np.float32
    results = [result for name in names for result in check_op(name, dtype, args.seed)]
    print_table(results, args.dtype)
    failed = [r for r in results if not r.ok]
    if failed:
        print(f"{len(failed)} of {len(results)} gradients exceed the tolerance.")
        return 1
    print(f"all {len(results)} gradients within {results[0].tolerance:g} ({args.dtype}).")
    return 0


def print_table(results, dtype_name: str) -> None:
    op_width = max(len("op"), *(len(r.op) for r in results))
    name_width = max(len("parameter"), *(len(r.parameter) for r in results))
    shape_width = max(len("shape"), *(len(str(r.shape)) for r in results))
    print(
        f"{'op':<{op_width}}  {'parameter':<{name_width}}  {'shape':<{shape_width}}  "
        f"{'max |grad|':>10}  {'rel. error':>10}  {dtype_name}"
    )
    for r in results:
        print(
            f"{r.op:<{op_width}}  {r.parameter:<{name_width}}  {str(r.shape):<{shape_width}}  "
            f"{r.max_abs_gradient:>10.3e}  {r.relative_error:>10.2e}  "
            f"{'ok' if r.ok else 'FAIL'}"
        )
