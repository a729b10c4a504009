"""The tests of one dataset row, as cases the parent can grade: stdin/stdout pairs, or calls with expected values.

Asserts are converted in the parent (``assert f(x) == 3`` becomes the call ``f(x)`` and the expected ``3``)
so that expected values never enter the sandbox; an assert that does not convert is refused unless the
caller accepts a hackable reward.

May import: ``skill.errors``.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from typing import Any

from skill.errors import SkillError


class UnconvertedAssert(SkillError):
    """A test assert the parent cannot turn into (call, expected): running it in the child would let the
    child grade itself."""


@dataclass
class Case:
    """One test: ``stdin`` + ``stdout`` for a program; ``call`` + ``expected`` (within ``tolerance``) for a
    function; or ``stmt``, an assert the child runs and grades itself (``allow_unconverted_asserts`` only)."""

    stdin: str | None = None
    stdout: str | None = None
    call: str | None = None
    expected: Any = None
    tolerance: float | None = None
    from_json: bool = False
    stmt: str | None = None


def _literal(node: ast.AST) -> tuple[bool, Any]:
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def _convert(node: ast.Assert) -> Case:
    test = node.test
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and isinstance(test.operand, ast.Call):
        return Case(call=ast.unparse(test.operand), expected=False)
    if isinstance(test, ast.Call):
        return Case(call=ast.unparse(test), expected=True)
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, op, right = test.left, test.ops[0], test.comparators[0]
        (left_ok, left_value), (right_ok, right_value) = _literal(left), _literal(right)
        if isinstance(op, ast.Eq | ast.Is) and (left_ok or right_ok):
            call, expected = (left, right_value) if right_ok else (right, left_value)
            if not isinstance(op, ast.Is) or expected in (True, False, None):
                return Case(call=ast.unparse(call), expected=expected)
        inner = left.args[0] if isinstance(left, ast.Call) and len(left.args) == 1 else None
        if (
            isinstance(op, ast.Lt | ast.LtE)
            and ast.unparse(getattr(left, "func", left)) == "abs"
            and right_ok
            and isinstance(inner, ast.BinOp)
            and isinstance(inner.op, ast.Sub)
        ):  # abs(<expr> - <lit>) < eps
            (a_ok, a), (b_ok, b) = _literal(inner.left), _literal(inner.right)
            call, expected = (inner.left, b) if b_ok else (inner.right, a)
            if (a_ok or b_ok) and all(isinstance(v, int | float) for v in (expected, right_value)):
                return Case(call=ast.unparse(call), expected=expected, tolerance=float(right_value))
    raise UnconvertedAssert(
        f"Cannot grade {ast.unparse(node)!r} in the parent: only 'assert <expr> == <literal>', 'assert <call>', "
        "'assert not <call>' and 'assert abs(<expr> - <literal>) < <eps>' convert.",
        "Rewrite the test in one of those shapes, send {'call': ..., 'expected': ...} tests, or set "
        "allow_unconverted_asserts=True (the child then grades itself: the reward is hackable).",
    )


class _Rename(ast.NodeTransformer):
    def __init__(self, name: str) -> None:
        self.name = name

    def visit_Name(self, node: ast.Name) -> ast.Name:
        return ast.Name(self.name, node.ctx) if node.id == "candidate" else node


def convert_asserts(source: str, entry_point: str | None = None, allow_unconverted: bool = False) -> list[Case]:
    """Cases from assert source: top-level asserts, or those in HumanEval's ``def check(candidate)``
    (``candidate`` renamed to ``entry_point``).

    >>> [(t.call, t.expected) for t in convert_asserts("assert add(1, 2) == 3\\nassert not odd(2)")]
    [('add(1, 2)', 3), ('odd(2)', False)]
    >>> convert_asserts("assert add(1, 2) != 4")
    Traceback (most recent call last):
    ...
    skill.rewards.code.cases.UnconvertedAssert: Cannot grade 'assert add(1, 2) != 4' in the parent: ...
    """
    try:
        statements = ast.parse(source).body
    except SyntaxError as exc:
        raise SkillError(f"A test does not parse: {exc}.", "Send valid Python asserts.") from None
    for node in list(statements):
        if isinstance(node, ast.FunctionDef) and node.name == "check":
            if not entry_point:
                raise SkillError(
                    "Tests define check(candidate) but the row has no entry point.",
                    "Add an 'entry_point' column naming the function.",
                )
            statements = [ast.fix_missing_locations(_Rename(entry_point).visit(s)) for s in node.body]
    cases = []
    for node in statements:
        if isinstance(node, ast.Assert):
            try:
                cases.append(_convert(node))
            except UnconvertedAssert:
                if not allow_unconverted:
                    raise
                cases.append(Case(stmt=ast.unparse(node)))
        elif not isinstance(node, ast.Expr | ast.Pass | ast.Import | ast.ImportFrom | ast.Assign | ast.FunctionDef):
            raise UnconvertedAssert(
                f"Test statement {ast.unparse(node)[:80]!r} is not an assert.",
                "Send asserts only (or allow_unconverted_asserts=True: hackable).",
            )
    return cases


def parse_tests(value: Any, entry_point: str | None = None, allow_unconverted: bool = False) -> list[Case]:
    """The cases of one row: [{"input", "output"}], {"inputs": [...], "outputs": [...]}, [{"call", "expected"}],
    assert strings, or assert source; or any of these as a JSON string.

    >>> parse_tests([{"input": "1 2", "output": "3"}])[0].stdout
    '3'
    >>> parse_tests('[{"call": "f(1)", "expected": [1, 2]}]')[0].expected
    [1, 2]
    """
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return convert_asserts(value, entry_point, allow_unconverted)
    if isinstance(value, dict) and isinstance(value.get("inputs"), list) and isinstance(value.get("outputs"), list):
        value = [{"input": i, "output": o} for i, o in zip(value["inputs"], value["outputs"], strict=True)]
    if isinstance(value, list) and value and all(isinstance(item, str) for item in value):
        return [case for item in value for case in convert_asserts(item, entry_point, allow_unconverted)]
    if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
        if all("input" in item and "output" in item for item in value):
            text = [
                ["\n".join(map(str, v)) if isinstance(v, list) else str(v) for v in (i["input"], i["output"])]
                for i in value
            ]
            return [Case(stdin=stdin, stdout=stdout) for stdin, stdout in text]
        if all(isinstance(item.get("call"), str) and "expected" in item for item in value):
            return [
                Case(call=i["call"], expected=i["expected"], tolerance=i.get("tolerance"), from_json=True)
                for i in value
            ]
    raise SkillError(
        f"Unrecognised tests value {str(value)[:120]!r}.",
        "Send a non-empty list of {'input','output'} or {'call','expected'} objects, or assert strings.",
    )
