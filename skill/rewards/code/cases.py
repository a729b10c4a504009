"""The tests of one dataset row, as a suite the parent can grade: stdin/stdout pairs, or calls with expected values.

Asserts are converted in the parent (``assert f(x) == 3`` becomes the call ``f(x)`` and the expected ``3``;
``set((4, 5))`` and the like are literals too) so that expected values never enter the sandbox; any other
assert is graded on the truth of its expression, whose candidate parts alone run beside the candidate
(``candidate_parts``). ``assert True, ...`` tests nothing and is skipped. A statement other than an
assert (a loop) is refused unless the caller accepts a hackable reward.

The tests keep their own namespace: their imports, helper functions, classes and constants (and MBPP's
``test_setup_code`` / ``test_imports``) are the suite's ``setup``, run in the sandbox *before* the
candidate's code, in a namespace of their own, and again in the candidate-free checker. Each name a test
uses and does not define is resolved here, in the parent, once: a builtin stays the builtin, a
standard-library module used as ``module.attr`` is the real module, and only the rest (the functions
under test; HumanEval's entry point always) comes from the candidate. A candidate that defines ``class
math`` or its own ``isclose`` therefore changes nothing the tests use.

May import: ``skill.errors``.
"""

from __future__ import annotations

import ast
import builtins
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from skill.errors import SkillError
from skill.python_source import parse

BUILTIN_NAMES = frozenset(dir(builtins))
_SETUP_STATEMENTS = (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign, ast.FunctionDef, ast.ClassDef)


class UnconvertedAssert(SkillError):
    """A test assert the parent cannot turn into (call, expected): running it in the child would let the
    child grade itself."""


@dataclass
class Case:
    """One test: ``stdin`` + ``stdout`` for a program; ``call`` + ``expected`` (within ``tolerance``, absolute,
    or ``rel_tol``, relative, as ``math.isclose``) for a function; or ``stmt``, an assert the child runs and
    grades itself (``allow_unconverted_asserts`` only)."""

    stdin: str | None = None
    stdout: str | None = None
    call: str | None = None
    expected: Any = None
    tolerance: float | None = None
    from_json: bool = False
    stmt: str | None = None
    rel_tol: float | None = None
    truthy: bool | None = None  # ``assert <expr>`` / ``assert not <expr>``: graded on the value's truth


@dataclass
class Suite:
    """A row's cases and what the sandbox needs to run them in the tests' own namespace: the ``setup``
    source, the standard-library ``modules`` the tests use without importing, and the ``names`` they take
    from the candidate module."""

    cases: list[Case]
    setup: str = ""
    modules: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)


_CONSTRUCTORS = {"set": set, "frozenset": frozenset, "tuple": tuple, "list": list, "sorted": sorted}


def _literal(node: ast.AST) -> tuple[bool, Any]:
    """A literal, or a builtin constructor of one (``set((4, 5))``, MBPP's shape), evaluated here."""
    try:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _CONSTRUCTORS:
            if len(node.args) == 1 and not node.keywords:
                return True, _CONSTRUCTORS[node.func.id](ast.literal_eval(node.args[0]))
            return False, None
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def _true_constant(node: ast.AST) -> bool:
    """``assert True, "This prints if this assert fails"`` (HumanEval): tests nothing."""
    ok, value = _literal(node)
    return ok and bool(value)


def _isclose(test: ast.Call) -> Case | None:
    """``math.isclose(<expr>, <literal>, rel_tol=.., abs_tol=..)`` graded in the parent, like ``==``."""
    if ast.unparse(test.func) != "math.isclose" or len(test.args) != 2:
        return None
    (a_ok, a), (b_ok, b) = _literal(test.args[0]), _literal(test.args[1])
    call, expected = (test.args[0], b) if b_ok else (test.args[1], a)
    options = {keyword.arg: _literal(keyword.value) for keyword in test.keywords}
    if not (a_ok or b_ok) or set(options) - {"rel_tol", "abs_tol"} or not all(ok for ok, _ in options.values()):
        return None
    tolerances = {name: value for name, (_, value) in options.items()}
    if not all(isinstance(v, int | float) for v in (expected, *tolerances.values())):
        return None
    return Case(
        call=ast.unparse(call),
        expected=expected,
        tolerance=float(tolerances.get("abs_tol", 0.0)),
        rel_tol=float(tolerances.get("rel_tol", 1e-9)),
    )


def _convert(node: ast.Assert) -> Case:
    """Literal comparisons become (call, expected); any other assert is graded on the truth of its
    expression, evaluated without the candidate (``candidate_parts``)."""
    test = node.test
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return Case(call=ast.unparse(test.operand), truthy=False)
    if isinstance(test, ast.Call):
        return _isclose(test) or Case(call=ast.unparse(test), truthy=True)
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
    return Case(call=ast.unparse(test), truthy=True)


_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


def _uses_own_variables(node: ast.expr, rooted: Callable[[ast.AST], bool]) -> bool:
    """Whether a candidate call inside a comprehension uses a variable the comprehension binds."""
    bound = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    calls = [inner for inner in ast.walk(node) if rooted(inner)]
    return any(isinstance(n, ast.Name) and n.id in bound for call in calls for n in ast.walk(call))


def _whole_comprehension(node: ast.expr, rooted: Callable[[ast.AST], bool], candidate: set[str]) -> ast.expr:
    """A comprehension that calls the candidate with its own variables, evaluated whole beside the candidate
    when that only gathers values (``[f(x) for x in range(3)]``, a generator made a list): its element is a
    candidate call and it uses nothing else but builtins and its own variables. Anything more (``all(f(x) ==
    x * x for x in ...)``) would run a comparison or a helper beside the candidate, which could forge it."""
    element = node.key if isinstance(node, ast.DictComp) else node.elt
    bound = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    generators = [inner for generator in node.generators for inner in ast.walk(generator)]
    if (
        isinstance(node, ast.DictComp)
        or not rooted(element)
        or any(map(rooted, generators))
        or (used - bound - candidate - BUILTIN_NAMES)
    ):
        raise UnconvertedAssert(
            f"The comprehension {ast.unparse(node)[:80]!r} calls the candidate with its own variables and does "
            "more than gather the values: that would run beside the candidate, which could forge it.",
            "Gather the values and compare outside: assert [f(x) for x in range(3)] == [0, 1, 4].",
        )
    return ast.ListComp(node.elt, node.generators) if isinstance(node, ast.GeneratorExp) else node


def candidate_parts(expression: str, names: list[str]) -> tuple[list[str], str]:
    """The outermost sub-expressions of a test that start from a candidate name (``f(x)``, ``Foo(1).bar()``),
    which only the candidate's process evaluates, and the rest of the test with them replaced by
    ``__values__[j]``, which is evaluated without the candidate (here when it is a bare value).

    >>> candidate_parts("near(f(1), g(2)[0])", ["f", "g"])
    (['f(1)', 'g(2)[0]'], 'near(__values__[0], __values__[1])')
    >>> candidate_parts("f(g(1)).x", ["f", "g"])
    (['f(g(1)).x'], '__values__[0]')
    >>> candidate_parts("sorted(f(x) for x in range(3)) == [0, 1, 4]", ["f"])
    (['[f(x) for x in range(3)]'], 'sorted(__values__[0]) == [0, 1, 4]')
    """
    candidate, parts = set(names), []

    def rooted(node: ast.AST) -> bool:
        if isinstance(node, ast.Name):
            return node.id in candidate
        inner = getattr(node, "func", None) if isinstance(node, ast.Call) else getattr(node, "value", None)
        return isinstance(node, ast.Call | ast.Attribute | ast.Subscript) and inner is not None and rooted(inner)

    class Replace(ast.NodeTransformer):
        def visit(self, node: ast.AST) -> ast.AST:
            whole = isinstance(node, _COMPREHENSIONS) and _uses_own_variables(node, rooted)
            if whole:  # its candidate calls use its own variables
                node = _whole_comprehension(node, rooted, candidate)
            if isinstance(node, ast.expr) and (whole or rooted(node)):
                parts.append(ast.unparse(node))
                index = ast.Constant(len(parts) - 1)
                return ast.Subscript(ast.Name("__values__", ast.Load()), index, ast.Load())
            return self.generic_visit(node)

    tree = Replace().visit(parse(expression, mode="eval"))
    return parts, ast.unparse(ast.fix_missing_locations(tree))


class _Rename(ast.NodeTransformer):
    def __init__(self, name: str) -> None:
        self.name = name

    def visit_Name(self, node: ast.Name) -> ast.Name:
        return ast.Name(self.name, node.ctx) if node.id == "candidate" else node


def _statements(source: str, entry_point: str | None) -> list[ast.stmt]:
    """Top-level statements of test source; HumanEval's ``def check(candidate)`` is replaced by its body
    with ``candidate`` renamed to ``entry_point``."""
    try:
        statements = parse(source).body
    except SyntaxError as exc:
        raise SkillError(f"A test does not parse: {exc}.", "Send valid Python asserts.") from None
    result: list[ast.stmt] = []
    for node in statements:
        if isinstance(node, ast.FunctionDef) and node.name == "check":
            if not entry_point:
                raise SkillError(
                    "Tests define check(candidate) but the row has no entry point.",
                    "Add an 'entry_point' column naming the function.",
                )
            result += [ast.fix_missing_locations(_Rename(entry_point).visit(s)) for s in node.body]
        else:
            result.append(node)
    return result


def split_tests(
    source: str, entry_point: str | None = None, allow_unconverted: bool = False
) -> tuple[list[Case], list[str]]:
    """Cases from assert source (top-level asserts, or those in HumanEval's ``def check(candidate)``), and
    the setup statements (imports, helpers, classes, constants) that the tests run in their own namespace.

    >>> cases, setup = split_tests("import math\\nassert add(1, 2) == 3\\nassert not odd(2)")
    >>> [(t.call, t.expected, t.truthy) for t in cases], setup
    ([('add(1, 2)', 3, None), ('odd(2)', None, False)], ['import math'])
    >>> split_tests("assert True, 'never fails'\\nassert add(1, 2) != 4")[0][0].call
    'add(1, 2) != 4'
    >>> split_tests("for i in range(3):\\n    assert f(i)")
    Traceback (most recent call last):
    ...
    skill.rewards.code.cases.UnconvertedAssert: Test statement 'for i in range(3):...' is not an assert: ...
    """
    cases, setup = [], []
    for node in _statements(source, entry_point):
        if isinstance(node, ast.Assert) and _true_constant(node.test):
            continue
        if isinstance(node, ast.Assert):
            cases.append(_convert(node))
        elif isinstance(node, ast.For | ast.While | ast.If | ast.With) and allow_unconverted:
            cases.append(Case(stmt=ast.unparse(node)))  # runs beside the candidate: hackable, and flagged
        elif isinstance(node, _SETUP_STATEMENTS):
            setup.append(ast.unparse(node))
        elif not isinstance(node, ast.Expr | ast.Pass):
            raise UnconvertedAssert(
                f"Test statement {ast.unparse(node).split(chr(10))[0][:80] + '...'!r} is not an assert: a loop "
                "or other statement would have to run beside the candidate, which could then grade itself.",
                "Unroll it into asserts (one per input), or set allow_unconverted_asserts=True (hackable).",
            )
    return cases, setup


def convert_asserts(source: str, entry_point: str | None = None, allow_unconverted: bool = False) -> list[Case]:
    """The cases of assert source (see ``split_tests``; the setup statements are left out).

    >>> [(t.call, t.expected) for t in convert_asserts("assert add(1, 2) == 3\\nassert odd(2) is None")]
    [('add(1, 2)', 3), ('odd(2)', None)]
    """
    return split_tests(source, entry_point, allow_unconverted)[0]


def _names(source: str) -> tuple[set[str], set[str], set[str]]:
    """Names ``source`` reads, names it binds anywhere (assignments, parameters, imports, definitions), and
    names it uses as ``name.attr``."""
    read, bound, bases = set(), set(), set()
    for node in ast.walk(parse(source)):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.alias):
            bound.add(node.asname or node.name.split(".")[0])
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            bases.add(node.value.id)
    return read, bound, bases


def resolve_names(setup: str, expressions: list[str], entry_point: str | None = None) -> tuple[list[str], list[str]]:
    """Which free names of the tests come from the candidate, and which standard-library modules the tests
    use without importing them: a name the tests bind is theirs, the entry point is the candidate's, a
    builtin stays the builtin, ``module.attr`` of a standard-library module is the real module.

    >>> helper = "def close(a, b):\\n    return abs(a - b) < 1e-6"
    >>> resolve_names(helper, ["close(vol(2), 8.0)", "math.isclose(vol(1), 1)"])
    (['vol'], ['math'])
    """
    read, bound, bases = _names(setup)
    for expression in expressions:
        more = _names(expression)
        read, bound, bases = read | more[0], bound | more[1], bases | more[2]
    free = read - bound
    modules = sorted(name for name in free & bases if name in sys.stdlib_module_names and name != entry_point)
    names = sorted(
        name for name in free - set(modules) if name == entry_point or name not in BUILTIN_NAMES | {"__builtins__"}
    )
    return names, modules


def _setup_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
        return "\n".join(value)
    raise SkillError(f"Unrecognised test setup {str(value)[:120]!r}.", "Send setup code as a string or strings.")


def parse_suite(value: Any, entry_point: str | None = None, allow_unconverted: bool = False, setup: Any = ()) -> Suite:
    """The suite of one row: the cases (see ``parse_tests``), the tests' setup (their own import/def lines and
    ``setup``, e.g. MBPP's ``test_setup_code`` or ``test_imports``) and how their free names resolve.

    >>> suite = parse_suite(["assert math.isclose(volume(1), 4.18879, rel_tol=1e-3)"])
    >>> suite.cases[0].call, suite.cases[0].rel_tol, suite.names
    ('volume(1)', 0.001, ['volume'])
    >>> parse_suite(["import math\\ndef near(a, b):\\n    return math.isclose(a, b)", "assert near(f(1), 2.0)"]).names
    ['f']
    """
    parts = [_setup_text(item) for item in (setup if isinstance(setup, list | tuple) else [setup])]
    try:
        for part in parts:
            parse(part)
    except SyntaxError as exc:
        raise SkillError(f"The test setup does not parse: {exc}.", "Send valid Python setup code.") from None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            value = [value]
    if isinstance(value, list) and value and all(isinstance(item, str) for item in value):
        cases: list[Case] = []
        for item in value:
            more_cases, more_setup = split_tests(item, entry_point, allow_unconverted)
            cases, parts = cases + more_cases, parts + more_setup
        if not cases:
            return Suite([])
        source = "\n".join(part for part in parts if part.strip())
        expressions = [case.call or case.stmt or "" for case in cases]
        names, modules = resolve_names(source, expressions, entry_point)
        return Suite(cases, source, modules, names)
    cases = _structured(value)
    if cases[0].stdin is not None:  # a program on stdin: no namespace of the tests' own
        return Suite(cases)
    source = "\n".join(part for part in parts if part.strip())
    names, modules = resolve_names(source, [case.call or "" for case in cases], entry_point)
    return Suite(cases, source, modules, names)


def _structured(value: Any) -> list[Case]:
    if isinstance(value, dict):  # APPS {"inputs", "outputs"}; CodeContests {"input", "output"} (lists)
        for inputs, outputs in (("inputs", "outputs"), ("input", "output")):
            if isinstance(value.get(inputs), list) and isinstance(value.get(outputs), list):
                value = [{"input": i, "output": o} for i, o in zip(value[inputs], value[outputs], strict=True)]
                break
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
        "Send a non-empty list of {'input','output'} or {'call','expected'} objects, assert strings, "
        "HumanEval's check(candidate) source, or {'inputs': [...], 'outputs': [...]}.",
    )


def parse_tests(value: Any, entry_point: str | None = None, allow_unconverted: bool = False) -> list[Case]:
    """The cases of one row: [{"input", "output"}], {"inputs": [...], "outputs": [...]} (APPS),
    {"input": [...], "output": [...]} (CodeContests), [{"call", "expected"}], assert strings, or assert
    source; or any of these as a JSON string.

    >>> parse_tests([{"input": "1 2", "output": "3"}])[0].stdout
    '3'
    >>> parse_tests('[{"call": "f(1)", "expected": [1, 2]}]')[0].expected
    [1, 2]
    """
    return parse_suite(value, entry_point, allow_unconverted).cases
