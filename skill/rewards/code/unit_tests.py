"""The ``unit_tests`` reward: run the completion's code against tests in the sandbox, grade in the parent.

Graders that trust the child are fooled by ``sys.exit(0)``, ``os._exit(0)``, an object whose ``__eq__``
is always true, printed fake results or a patched ``print``. Here the child gets only *inputs* (stdin
text, or call expressions); expected outputs never enter it. It sends back, as JSON, what the program
printed or what each call returned: plain values only (exact int, float, str, bool, None, list, tuple,
dict, set, bytes, tagged so a tuple stays a tuple; anything else fails), and the parent compares with
type-aware equality (``True`` is not ``1``). A program that exits early, crashes or forges a report
can at worst report a value, which must still equal the expected one it never saw.

One sandbox per completion: a harness inside runs every test (a fresh fork per stdin/stdout case, so
each case is a clean run of the program; one process for call tests, like HumanEval's ``check``); and,
for tests that are more than a candidate call compared with a literal, a second sandbox without the
candidate's code that evaluates the rest of each test on the reported values (``harness.CHECKER``).

May import: ``skill.rewards.code`` (cases, grading, harness, sandbox), ``skill.rewards`` (base, params,
registry), ``skill.errors``.
"""

from __future__ import annotations

import functools
import json
import re
import secrets
import time
from dataclasses import dataclass
from typing import Annotated, Any

from skill.errors import SkillError
from skill.rewards.base import RewardFunction
from skill.rewards.code.cases import Case, Suite, candidate_parts, parse_suite, parse_tests
from skill.rewards.code.grading import (
    Budget,
    passes,
    read_results,
    read_setup,
    same_output,
    same_value,
    take_values,
)
from skill.rewards.code.harness import CHECKER, HARNESS
from skill.rewards.code.sandbox import run_parallel, run_python, sandbox_isolation
from skill.rewards.params import Param
from skill.rewards.registry import register

_FENCE = re.compile(r"```[ \t]*(python3?|py)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)
STARTUP_SLACK_S = 1.0  # interpreter start and harness set-up, on top of the per-test timeouts
CASE_OUTPUT_CAP = 1 << 20  # bytes of stdout kept per stdin/stdout case; more fails the case
OUTPUT_CAP = 16 << 20  # bytes of reports per completion the parent reads and grades; more fails the rest
__all__ = ["UnitTestsScorer", "build_unit_tests", "extract_code", "grade", "parse_tests", "same_output", "same_value"]


def extract_code(text: str) -> str:
    """The last fenced ```python block (failing that, the last bare fenced block; an unclosed last fence
    runs to the end), else the whole completion.

    >>> extract_code("Try:\\n```python\\nprint(1)\\n```\\nor\\n```python\\nprint(2)\\n```")
    'print(2)\\n'
    >>> extract_code("print(3)")
    'print(3)'
    """
    blocks = _FENCE.findall(text)
    python = [body for language, body in blocks if language]
    return (python or [body for _, body in blocks] or [text])[-1]


class SandboxFailure(RuntimeError):
    """The sandbox did not start Python (not the program's fault): the completion scores None, counted."""


def grade(
    code: str,
    cases: list[Case] | Suite,
    *,
    timeout_s: float = 2.0,
    total_timeout_s: float = 10.0,
    memory_mb: int = 512,
) -> list[bool]:
    """Run ``code`` against a suite (or bare cases) in one sandbox and say which cases pass (SandboxFailure if
    it did not start; SkillError if the tests' own setup failed, which is not the program's fault).

    >>> grade("print(int(input()) * 2)", parse_tests([{"input": "2", "output": "4"}, {"input": "3", "output": "5"}]))
    [True, False]
    >>> grade("import math\\nclass math:\\n    isclose = staticmethod(lambda *a, **k: True)\\nf = lambda r: 3.0",
    ...       parse_suite(["assert math.isclose(f(1), 4.18879, rel_tol=0.001)", "assert near(f(1), 3.0)"],
    ...                   setup="def near(a, b):\\n    return abs(a - b) < 1e-9"))
    [False, True]
    """
    suite = cases if isinstance(cases, Suite) else Suite(cases)
    deadline = time.monotonic() + total_timeout_s
    limits = {"timeout_s": timeout_s, "total_timeout_s": total_timeout_s, "memory_mb": memory_mb}
    payload: dict[str, Any] = {"code": code, "cap": CASE_OUTPUT_CAP, "sweep": sandbox_isolation() != "rlimits"}
    plans = [candidate_parts(case.call, suite.names) if case.call is not None else None for case in suite.cases]
    if suite.cases[0].stdin is not None:
        payload["inputs"] = [case.stdin for case in suite.cases]
    else:
        payload["tests"] = [
            {"stmt": c.stmt} if p is None else {"parts": p[0]} for c, p in zip(suite.cases, plans, strict=True)
        ]
        payload.update(setup=suite.setup, modules=suite.modules, names=suite.names)
    records = _run_harness(HARNESS, payload, len(suite.cases), **limits)
    checks = take_values(records, plans)  # what the candidate-free checker evaluates, by test index
    if checks:  # within what is left of the completion's time (at least the start-up slack)
        payload = {"checks": list(checks.values()), "setup": suite.setup, "modules": suite.modules}
        limits["total_timeout_s"] = max(deadline - time.monotonic(), STARTUP_SLACK_S)
        for index, record in zip(checks, _run_harness(CHECKER, payload, len(checks), **limits), strict=True):
            records[index] = record
    budget = Budget()  # one grading deadline for the whole completion
    return [passes(case, record, budget) for case, record in zip(suite.cases, records, strict=True)]


def _run_harness(
    program: str, payload: dict[str, Any], count: int, *, timeout_s: float, total_timeout_s: float, memory_mb: int
) -> list[dict[str, Any] | None]:
    """Run a harness program in one sandbox: its record per test (SandboxFailure if it did not start,
    SkillError if the tests' own setup failed, which its first record says before any candidate code runs)."""
    marker = secrets.token_hex(16)
    payload = {**payload, "marker": marker, "timeout": timeout_s}
    result = run_python(
        f"PAYLOAD = {json.dumps(payload)!r}\n{program}",
        timeout_s=min(total_timeout_s, timeout_s * (count + 1) + STARTUP_SLACK_S),
        memory_mb=memory_mb,
        max_output_bytes=min(count * 2 * CASE_OUTPUT_CAP + (1 << 20), OUTPUT_CAP),
    )
    if not result.started:
        raise SandboxFailure(f"The sandbox did not start: {result.stderr[:300]}")
    setup_error = read_setup(result.stdout, marker)
    if setup_error is not None:
        raise SkillError(
            f"The tests' own setup failed in the sandbox, before the program ran: {setup_error[:300]}.",
            "Fix the setup (imports, helpers) of this row's tests; the sandbox has the standard library only.",
        )
    return read_results(result.stdout, marker, count)


def _column_text(row: dict[str, Any], column: str) -> list[str]:
    value = row.get(column)
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value) if isinstance(value, list | tuple) else [str(value)]


@dataclass(frozen=True)
class UnitTestsScorer:
    """The ``unit_tests`` reward's batch scorer: a module-level class, so the reward pickles (TRL's rollout
    workers and spawned processes receive rewards by pickle; a closure would not travel)."""

    tests_column: str
    entry_point_column: str
    setup_columns: tuple[str, ...]
    allow_unconverted_asserts: bool
    binary: bool
    workers: int | None
    timeout_s: float
    total_timeout_s: float
    memory_mb: int

    def __post_init__(self) -> None:
        if not (self.timeout_s > 0 and self.total_timeout_s > 0 and self.memory_mb >= 64):
            raise SkillError(
                "unit_tests needs timeouts > 0 and memory_mb >= 64 "
                f"(got {self.timeout_s}, {self.total_timeout_s}, {self.memory_mb}).",
                "Send e.g. timeout_s=2, total_timeout_s=10, memory_mb=512.",
            )
        columns = self.setup_columns
        if isinstance(columns, str) or not all(isinstance(column, str) for column in columns):
            raise SkillError(
                f"setup_columns must be a list of column names (got {columns!r}).",
                'Send e.g. ["test_setup_code", "test_imports"], or [] for none.',
            )
        object.__setattr__(self, "setup_columns", tuple(columns))

    def score_one(self, text: str, row: dict[str, Any]) -> float:
        """One completion against its row's tests (raises SkillError for unusable tests: None, counted)."""
        if self.tests_column not in row:
            raise SkillError(f"No {self.tests_column!r} column for this completion.", "Add it, or set tests_column.")
        setup = [part for column in self.setup_columns for part in _column_text(row, column)]
        suite = parse_suite(
            row[self.tests_column], row.get(self.entry_point_column), self.allow_unconverted_asserts, setup
        )
        if not suite.cases:
            raise SkillError(f"The {self.tests_column!r} value holds no test.", "Send at least one test per row.")
        limits = {"timeout_s": self.timeout_s, "total_timeout_s": self.total_timeout_s, "memory_mb": self.memory_mb}
        passed = grade(extract_code(text), suite, **limits)
        return float(all(passed)) if self.binary else sum(passed) / len(passed)

    def __call__(self, texts: list[str], rows: list[dict[str, Any]], completion_ids: Any) -> list[Any]:
        tasks = [functools.partial(self.score_one, text, row) for text, row in zip(texts, rows, strict=True)]
        return run_parallel(tasks, self.workers)


@register(
    "unit_tests",
    roles=("correctness",),
    reads="tests",
    reasoning="a program is written out whole before the tests run",
    runs_code=True,
)
def build_unit_tests(
    tests_column: Annotated[str, Param("dataset column holding the tests")] = "tests",
    timeout_s: Annotated[float, Param("seconds per test")] = 2.0,
    total_timeout_s: Annotated[float, Param("seconds of sandbox time per completion, all its tests together")] = 10.0,
    memory_mb: Annotated[int, Param("address-space limit per process, in MiB; the whole run gets twice this")] = 512,
    binary: Annotated[bool, Param("1.0 only when every test passes, else 0.0")] = False,
    allow_unconverted_asserts: Annotated[
        bool,
        Param(
            "run test statements other than asserts (loops) beside the candidate, which can then grade itself: HACKABLE"
        ),
    ] = False,
    entry_point_column: Annotated[str, Param("column naming the function for HumanEval's check(candidate)")] = (
        "entry_point"
    ),
    setup_columns: Annotated[
        tuple[str, ...], Param("columns of test setup code run in the tests' namespace (MBPP's), when present")
    ] = ("test_setup_code", "test_imports"),
    workers: Annotated[int | None, Param("parallel sandboxes; null: one per core")] = None,
) -> RewardFunction:
    """The fraction of the row's tests the completion's code passes (``binary``: 1.0 only when all pass), run in
    the sandbox and graded in the parent; unusable tests or a sandbox that cannot start score None (counted).

    The code is the last fenced python block, else the whole completion. Tests per row: ``[{"input",
    "output"}]``, APPS' ``{"inputs": [...], "outputs": [...]}`` or CodeContests' ``{"input": [...],
    "output": [...]}`` (stdin/stdout), ``[{"call", "expected"}]``, MBPP's assert strings (with
    ``test_setup_code`` / ``test_imports`` from ``setup_columns``) or HumanEval's ``def check(candidate)``
    (with ``entry_point``), or any of these as a JSON string. A stdin/stdout case passes when the program
    exits 0 in time and prints the expected lines (whitespace collapsed); a call case when the call returns,
    in time, a plain value equal to the expected one (type-aware: ``True`` is not ``1``; ``math.isclose``
    and ``abs(x - v) < eps`` asserts keep their tolerance; ``assert f(x)`` / ``assert not f(x)`` take the
    value's truth; ``assert True, ...`` is skipped). A syntax error, crash, timeout, early exit, empty
    completion or a report the parent cannot grade fails its cases (0.0, not None).

    Nothing the tests define runs beside the candidate: its process evaluates only the candidate's parts of
    each test (``f(1)`` in ``assert near(f(1), 2.0)``) and reports their plain values (a forged report
    claims values: no better than returning them); the rest (helpers, comparisons) runs in a second,
    candidate-free sandbox on those values, in what is left of ``total_timeout_s``. Statements other than
    asserts (a loop in ``check``) are refused (None) unless ``allow_unconverted_asserts`` (HACKABLE:
    ``reward.hackable``, which inspection flags). Resists ``sys.exit(0)``, ``os._exit(0)``, an always-equal
    ``__eq__``, printed or forged reports, a patched ``print``, shadowing what the tests use; expected
    values never enter the sandbox, and replies are graded in bounded time (``skill.rewards.code.grading``).

    Limits per completion: ``timeout_s`` per test, ``total_timeout_s`` in all; ``memory_mb`` per process, twice
    that per run (processes, tmpfs, memfd) in a memory cgroup where root can make one, else 16 processes x
    ``memory_mb``; 16 MiB per writable mount and per file (fallback levels: the uid's files in ``/tmp``,
    ``/dev/shm``, ``/var/tmp`` are deleted after); 1 MiB output per case, 16 MiB and 10**6 JSON values in all.

    >>> reward = build_unit_tests()
    >>> right = "```python\\ndef add(a, b):\\n    return a + b\\n```"
    >>> reward(["p", "p"], [right, "def add(a, b): return a - b"],
    ...        tests=[["assert add(1, 2) == 3", "assert add(2, 0) == 2"]] * 2)
    [1.0, 0.5]
    """
    limits = (float(timeout_s), float(total_timeout_s), int(memory_mb))  # checked by the scorer
    flags = (bool(allow_unconverted_asserts), bool(binary))
    scorer = UnitTestsScorer(tests_column, entry_point_column, setup_columns, *flags, workers, *limits)
    reward = RewardFunction("unit_tests", batch_score=scorer, doc=build_unit_tests.__doc__ or "")
    reward.hackable = bool(allow_unconverted_asserts)  # type: ignore[attr-defined]
    return reward
