"""The table of seed 002's numbered equations stays true: every number 1-53 is listed, every
function it names imports and is callable, every example step it names exists."""

from __future__ import annotations

import pytest

from light_llm import explain
from light_llm.explain.equations import EQUATIONS, equations_json, equations_markdown, resolve


def numbers_covered() -> set[int]:
    covered = set()
    for eq in EQUATIONS:
        low, _, high = eq.number.partition("-")
        covered.update(range(int(low), int(high or low) + 1))
    return covered


def test_every_number_from_1_to_53_is_listed_once():
    assert numbers_covered() == set(range(1, 54))
    assert len(EQUATIONS) == len({eq.number for eq in EQUATIONS})


@pytest.mark.parametrize("eq", EQUATIONS, ids=lambda eq: eq.number)
def test_each_equation_is_computed_or_implemented(eq):
    assert eq.examples or eq.functions
    for dotted in eq.functions:
        assert callable(resolve(dotted)), dotted


@pytest.mark.parametrize(
    "name", sorted({name for eq in EQUATIONS for name, _ in eq.examples}), ids=str
)
def test_every_example_step_named_exists(name):
    keys = {step.key for step in explain.run(name)}  # the table names a step by its key
    for eq in EQUATIONS:
        for example, step in eq.examples:
            if example == name:
                assert step in keys, (eq.number, step)


def test_unknown_function_is_an_import_error():
    with pytest.raises(AttributeError):
        resolve("light_llm.nn.attention.no_such_function")


def test_json_and_markdown_carry_every_equation():
    assert [item["number"] for item in equations_json()] == [eq.number for eq in EQUATIONS]
    page = equations_markdown()
    for eq in EQUATIONS:
        assert f"| ({eq.number}) |" in page
