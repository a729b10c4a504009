"""Grading in the parent, bounded: the harness's report against the expected values, which never left here.

Everything the child sends is hostile. A set or dict is never rebuilt from the child's elements (a set of
hash-colliding ints costs quadratic time: 97.6 s for one completion, measured): its size is checked
against the expected one first, then each element is looked up in the *expected* set, whose hashes are
the test author's. Parsing is capped at ``MAX_CONTAINERS`` JSON arrays and objects per completion
(deep nesting costs allocation and garbage-collector time, not bytes) and ``MAX_VALUES`` JSON values of
any kind (16 MiB of ``1.5,`` would be four million float objects), nesting at ``MAX_DEPTH``, a set
or frozenset nested inside a key or element at ``MAX_NESTED_HASHED`` elements, and one completion's
grading at ``GRADING_BUDGET_S`` seconds. Any
exception while grading a test (an ``OverflowError`` from ``10**400`` against a float tolerance, a
malformed tag, the budget running out) fails that test: 0.0 for it, never None for the completion.

May import: ``skill.rewards.code.cases``.
"""

from __future__ import annotations

import json
import math
import re
import time
from typing import Any

from skill.rewards.code.cases import Case

_SCALARS = (int, float, str, bool, type(None))
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')

MAX_DEPTH = 256  # the harness encodes at most 200 levels
MAX_NESTED_HASHED = 1000  # elements of a set that is itself a set element or dict key
MAX_CONTAINERS = 100_000  # JSON arrays and objects parsed per completion, all its reports together
MAX_VALUES = 1_000_000  # JSON values of any kind (scalars too) parsed per completion: bounds parsing's memory
GRADING_BUDGET_S = 5.0  # parent-side comparison for one completion, all its tests together (a backstop)


class GradingLimit(Exception):
    """A report too deep, too large or too slow to grade: the test fails."""


class Budget:
    """A deadline for one completion's grading, checked at every node of every reported value."""

    def __init__(self, seconds: float = GRADING_BUDGET_S) -> None:
        self.deadline = time.monotonic() + seconds
        self.nodes = 0

    def spend(self, depth: int) -> None:
        self.nodes += 1
        if depth > MAX_DEPTH:
            raise GradingLimit(f"nesting deeper than {MAX_DEPTH}")
        if self.nodes % 1024 == 0 and time.monotonic() > self.deadline:
            raise GradingLimit("grading budget spent")


def same_output(actual: str, expected: str) -> bool:
    """Program output check: whitespace inside each line collapsed, trailing blank lines ignored.

    >>> same_output("1  2 \\n3\\n\\n", "1 2\\n3")
    True
    """

    def lines(text: str) -> list[str]:
        result = [" ".join(line.split()) for line in text.splitlines()]
        while result and not result[-1]:
            result.pop()
        return result

    return lines(actual) == lines(expected)


def _tagged(value: Any) -> tuple[str | None, Any]:
    if isinstance(value, dict):
        ((tag, inner),) = value.items()  # ValueError unless exactly one tag
        return tag, inner
    return None, value


def decode_value(value: Any, budget: Budget | None = None, depth: int = 0) -> Any:
    """A child's tagged JSON value back to a hashable Python value (for set elements and dict keys):
    tuples, frozensets of at most ``MAX_NESTED_HASHED`` elements, bytes; a list or dict raises TypeError.

    >>> decode_value({"tuple": [1, {"set": [2]}]})
    (1, frozenset({2}))
    """
    budget = budget or Budget()
    budget.spend(depth)
    tag, inner = _tagged(value)
    if tag is None:
        if isinstance(value, list):
            raise TypeError("a list is not hashable")
        return value
    if tag == "tuple":
        return tuple(decode_value(item, budget, depth + 1) for item in inner)
    if tag == "set":
        if len(inner) > MAX_NESTED_HASHED:
            raise GradingLimit(f"a nested set of more than {MAX_NESTED_HASHED} elements")
        return frozenset(decode_value(item, budget, depth + 1) for item in inner)
    if tag == "bytes":
        return bytes.fromhex(inner)
    raise TypeError(f"a {tag} is not hashable")


def _numbers_match(actual: Any, expected: Any, tolerance: float | None, rel_tol: float | None) -> bool:
    if type(actual) not in (int, float):
        return False
    if tolerance is None and rel_tol is None:
        return actual == expected  # exact, even for an int beyond float range
    if not math.isfinite(actual):  # OverflowError for an int beyond float range: the test fails
        return False
    allowed = max(tolerance or 0.0, (rel_tol or 0.0) * max(abs(actual), abs(expected)))
    return abs(actual - expected) <= allowed


def _members_match(items: Any, expected: Any, budget: Budget, depth: int, from_json: bool) -> bool:
    """Each reported element (or key) looked up in the expected collection; every expected one met once."""
    if not isinstance(items, list) or len(items) != len(expected):
        return False
    canonical = {item: item for item in expected}
    seen = set()
    for item in items:
        key = item if type(item) in _SCALARS else decode_value(item, budget, depth + 1)
        if from_json and type(key) is int:  # JSON object keys are strings
            key = str(key)
        if key not in canonical:
            return False
        seen.add(canonical[key])
    return len(seen) == len(expected)


def matches(
    reported: Any,
    expected: Any,
    tolerance: float | None = None,
    from_json: bool = False,
    rel_tol: float | None = None,
    budget: Budget | None = None,
    depth: int = 0,
) -> bool:
    """Type-aware equality of a reported (tagged) value and the expected one: bools equal only bools; ints
    and floats compare as numbers (within ``tolerance`` / ``rel_tol`` when given); a tuple is not a list
    unless ``expected`` came from JSON, which has no tuples.

    >>> matches(1, True), matches(2.0, 2), matches({"tuple": [1, 2]}, [1, 2]), matches({"set": [2, 1]}, {1, 2})
    (False, True, False, True)
    """
    budget = budget or Budget()
    budget.spend(depth)
    tag, inner = _tagged(reported)
    if isinstance(expected, bool) or type(reported) is bool:
        return type(reported) is bool and type(expected) is bool and reported == expected
    if isinstance(expected, int | float):
        return _numbers_match(reported, expected, tolerance, rel_tol)
    if isinstance(expected, list | tuple):
        kind = tuple if tag == "tuple" else list if tag is None and isinstance(reported, list) else None
        if kind is None or (kind is not type(expected) and not (from_json and kind is tuple)):
            return False
        if len(inner) != len(expected):
            return False
        pairs = zip(inner, expected, strict=True)
        return all(matches(a, e, tolerance, from_json, rel_tol, budget, depth + 1) for a, e in pairs)
    if isinstance(expected, dict):
        if tag != "dict" or not _members_match([pair[0] for pair in inner], expected, budget, depth, from_json):
            return False
        for key, value in inner:
            key = decode_value(key, budget, depth + 1)
            key = str(key) if from_json and type(key) is int else key
            if not matches(value, expected[key], tolerance, from_json, rel_tol, budget, depth + 1):
                return False
        return True
    if isinstance(expected, set | frozenset):
        return tag == "set" and _members_match(inner, expected, budget, depth, from_json)
    if isinstance(expected, bytes):
        return tag == "bytes" and bytes.fromhex(inner) == expected
    return tag is None and type(reported) is type(expected) and reported == expected


def same_value(actual: Any, expected: Any, tolerance: float | None = None, from_json: bool = False) -> bool:
    """``matches`` for a Python value (encoded as the harness would): the parent-side rules, readable.

    >>> same_value(1, True), same_value((1, 2), [1, 2]), same_value((1, 2), [1, 2], from_json=True)
    (False, False, True)
    """
    return matches(_encode(actual), expected, tolerance, from_json)


def _encode(value: Any) -> Any:
    if isinstance(value, list):
        return [_encode(item) for item in value]
    if isinstance(value, tuple | set | frozenset):
        return {"tuple" if isinstance(value, tuple) else "set": [_encode(item) for item in value]}
    if isinstance(value, dict):
        return {"dict": [[_encode(k), _encode(v)] for k, v in value.items()]}
    if isinstance(value, bytes):
        return {"bytes": value.hex()}
    return value


def _shape(text: str) -> tuple[int, int]:
    """JSON arrays and objects in ``text`` (brackets inside strings do not count), what parsing allocates
    and the garbage collector then walks; and an upper bound on its values of any kind (strings, and one
    per comma or opening bracket), each a Python object of some 30 to 60 bytes once parsed.

    >>> _shape('{"a": [1, "[[["], "b": {"tuple": []}}')
    (4, 11)
    """
    outside_strings, strings = _JSON_STRING.subn("", text)
    containers = outside_strings.count("[") + outside_strings.count("{")
    return containers, containers + strings + outside_strings.count(",") + 1


def read_results(stdout: str, marker: str, count: int) -> list[dict[str, Any] | None]:
    """The harness's record per test index: only well-formed marked lines count; an index reported twice or
    not at all gets None (a failure).

    >>> read_results('junk\\nM{"i": 0, "value": 3}\\nM{"i": 1, "value": 4}\\nM{"i": 1, "value": 5}', "M", 3)
    [{'i': 0, 'value': 3}, None, None]
    """
    records: dict[int, Any] = {}
    containers_left, values_left = MAX_CONTAINERS, MAX_VALUES
    for line in stdout.split("\n"):  # not splitlines: JSON may hold a raw U+2028 or U+0085
        if not line.startswith(marker):
            continue
        text = line[len(marker) :]
        containers, values = _shape(text)
        containers_left, values_left = containers_left - containers, values_left - values
        if containers_left < 0 or values_left < 0:  # parsing would cost more than any honest report: it fails
            continue
        try:
            record = json.loads(text)
        except (ValueError, RecursionError):  # ValueError includes an int of more than 4300 digits
            continue
        index = record.get("i") if isinstance(record, dict) else None
        if type(index) is int and 0 <= index < count:
            records[index] = None if index in records else record
    return [records.get(i) for i in range(count)]


def truthy(reported: Any) -> bool:
    """Python's truth of a reported (tagged) value, decided here: empty containers, zero, "" and None are false.

    >>> truthy(0.0), truthy({"tuple": []}), truthy({"set": [0]}), truthy("0")
    (False, False, True, True)
    """
    tag, inner = _tagged(reported)
    if tag is not None:
        if tag not in ("tuple", "set", "dict", "bytes"):
            raise ValueError(f"unknown tag {tag!r}")
        return len(inner) > 0
    if isinstance(reported, list):
        return len(reported) > 0
    return bool(reported)


def read_setup(stdout: str, marker: str) -> str | None:
    """The tests' setup error from the harness's *first* record, written before any candidate code ran (a
    candidate cannot precede it; any later setup record is its forgery and ignored).

    >>> read_setup('M{"setup": "ImportError: x"}\\nM{"setup": null}', "M"), read_setup("", "M")
    ('ImportError: x', None)
    """
    for line in stdout.split("\n"):
        if line.startswith(marker):
            try:
                record = json.loads(line[len(marker) :])
            except ValueError:
                return None
            error = record.get("setup") if isinstance(record, dict) else None
            return str(error) if error is not None else None
    return None


def take_values(records: list[dict[str, Any] | None], plans: list[tuple[list[str], str] | None]) -> dict[int, Any]:
    """Turn the candidate's reports (``{"values": [...]}``, one per candidate part of a test) into gradeable
    records in place: a test that is its candidate part alone gets ``{"value": v}``; a malformed report
    gets None; the rest are returned, by index, as what the candidate-free checker evaluates. A ``plans``
    entry of None (stdin/stdout, an unconverted statement) keeps its record.

    >>> records = [{"values": [3]}, {"values": [2.0]}, {"value": True}]
    >>> take_values(records, [(["f()"], "__values__[0]"), (["f()"], "near(__values__[0], 2.0)"), (["f()"], "x")])
    {1: {'expr': 'near(__values__[0], 2.0)', 'values': [2.0]}}
    >>> records
    [{'value': 3}, None, None]
    """
    checks = {}
    for index, (record, plan) in enumerate(zip(records, plans, strict=True)):
        if plan is None:
            continue
        parts, rest = plan
        values = record.get("values") if isinstance(record, dict) else None
        records[index] = None  # only reported values count; a missing or malformed report fails its test
        if parts and (type(values) is not list or len(values) != len(parts)):
            continue
        if rest == "__values__[0]":
            records[index] = {"value": values[0]}  # type: ignore[index]
        else:
            checks[index] = {"expr": rest, "values": values if parts else []}
    return checks


def passes(case: Case, record: dict[str, Any] | None, budget: Budget | None = None) -> bool:
    """Whether the harness's record for a case meets the case (expected values stay here, in the parent);
    any exception while grading fails the case.

    >>> passes(Case(call="f()", expected=True), {"value": 1})
    False
    >>> passes(Case(call="f()", expected=0.5, tolerance=0.1), {"value": 10**400})
    False
    >>> passes(Case(stdin="", stdout="1"), {"exit": 0, "stdout": "1"})
    True
    """
    try:
        return _passes(case, record, budget or Budget())
    except Exception:  # noqa: BLE001 (whatever the report provokes, this test fails; the others stand)
        return False


def _passes(case: Case, record: dict[str, Any] | None, budget: Budget) -> bool:
    if record is None:
        return False
    if case.stdin is not None:
        return (
            record.get("exit") == 0
            and not record.get("timed_out")
            and not record.get("truncated")
            and isinstance(record.get("stdout"), str)
            and same_output(record["stdout"], case.stdout or "")
        )
    if case.stmt is not None or "value" not in record:
        return case.stmt is not None and record.get("value") is True
    if case.truthy is not None:
        return truthy(record["value"]) == case.truthy
    return matches(record["value"], case.expected, case.tolerance, case.from_json, case.rel_tol, budget)
