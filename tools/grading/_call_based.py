"""APPS's call-based problems as Python function tests: ``input_output`` with ``fn_name``, whose
``inputs`` are argument lists and ``outputs`` the return values, JSON. Each case becomes a
``test_case_<n>`` function for ``code_eval``'s judge, which calls the function the program
defines at the top level, or the method of that name of its class ``Solution`` (LeetCode's
form, common in APPS), as the judge holds them (``_a2e_program``:
``tools.grading._python_grading.tests_namespace``). A result, taken through JSON (tuples are lists),
equals the expected value, or its only element when that is a one-element list (APPS wraps many
that way). The tests run in the judge, apart from the program
(``tools.grading._python_grading``)."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["call_based_tests"]

_PRELUDE = """
import json as _a2e_json


def _a2e_function(name):
    found = _a2e_program.get(name)
    if callable(found):
        return found
    return getattr(_a2e_program["Solution"](), name)


def _a2e_same(got, expected):
    # Through JSON: an object whose __eq__ says yes to anything is not an answer.
    try:
        got = _a2e_json.loads(_a2e_json.dumps(got))
    except (TypeError, ValueError):
        return False
    if got == expected:
        return True
    return isinstance(expected, list) and len(expected) == 1 and got == expected[0]
"""


def call_based_tests(given: dict[str, Any]) -> str:
    name = given["fn_name"]
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"input_output: fn_name must be a Python name, got {name!r}")
    inputs, outputs = given.get("inputs"), given.get("outputs")
    if not isinstance(inputs, list) or not isinstance(outputs, list) or not inputs:
        raise ValueError("input_output needs non-empty inputs and outputs arrays")
    if len(inputs) != len(outputs):
        raise ValueError(f"input_output has {len(inputs)} inputs but {len(outputs)} outputs")
    parts = [_PRELUDE]
    for number, (arguments, expected) in enumerate(zip(inputs, outputs, strict=True), 1):
        if not isinstance(arguments, list):
            arguments = [arguments]
        parts.append(
            f"\n\ndef test_case_{number}():\n"
            f"    arguments = _a2e_json.loads({json.dumps(json.dumps(arguments))})\n"
            f"    expected = _a2e_json.loads({json.dumps(json.dumps(expected))})\n"
            f"    got = _a2e_function({name!r})(*arguments)\n"
            "    assert _a2e_same(got, expected), f'expected {expected!r}, got {got!r}'\n"
        )
    return "".join(parts)
