"""The ``unit_tests`` reward: run the completion's code against tests in the sandbox, grade in the parent.

Graders that trust the child are fooled by ``sys.exit(0)``, ``os._exit(0)``, an object whose ``__eq__``
is always true, printed fake results or a patched ``print``. Here the child gets only *inputs* (stdin
text, or call expressions); expected outputs never enter it. It sends back, as JSON, what the program
printed or what each call returned: plain values only (exact int, float, str, bool, None, list, tuple,
dict, set, bytes, tagged so a tuple stays a tuple; anything else fails), and the parent compares with
type-aware equality (``True`` is not ``1``). A program that exits early, crashes or forges a report
can at worst report a value, which must still equal the expected one it never saw.

One sandbox per completion: a harness inside runs every test (a fresh fork per stdin/stdout case, so
each case is a clean run of the program; one process for call tests, like HumanEval's ``check``).

May import: ``skill.rewards.code`` (cases, harness, sandbox), ``skill.rewards`` (base, params, registry),
``skill.errors``.
"""

from __future__ import annotations

import json
import math
import re
import secrets
from typing import Annotated, Any

from skill.errors import SkillError
from skill.rewards.base import RewardFunction
from skill.rewards.code.cases import Case, parse_tests
from skill.rewards.code.harness import HARNESS
from skill.rewards.code.sandbox import run_parallel, run_python, sandbox_isolation
from skill.rewards.params import Param
from skill.rewards.registry import register

_FENCE = re.compile(r"```[ \t]*(python3?|py)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)
STARTUP_SLACK_S = 1.0  # interpreter start and harness set-up, on top of the per-test timeouts
CASE_OUTPUT_CAP = 1 << 20  # bytes of stdout kept per stdin/stdout case; more fails the case


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


def decode_value(value: Any) -> Any:
    """A child's tagged JSON value back to Python (tuples, sets, dicts with any keys, bytes).

    >>> decode_value({"tuple": [1, {"set": [2]}]})
    (1, {2})
    """
    if isinstance(value, list):
        return [decode_value(item) for item in value]
    if isinstance(value, dict):
        ((tag, inner),) = value.items()  # ValueError unless exactly one tag
        decoders = {
            "tuple": lambda: tuple(map(decode_value, inner)),
            "set": lambda: set(map(decode_value, inner)),
            "dict": lambda: {decode_value(k): decode_value(v) for k, v in inner},
            "bytes": lambda: bytes.fromhex(inner),
        }
        return decoders[tag]()
    return value


def same_value(actual: Any, expected: Any, tolerance: float | None = None, from_json: bool = False) -> bool:
    """Type-aware equality: bools equal only bools; ints and floats compare as numbers (within ``tolerance``
    when given); a tuple is not a list unless ``expected`` came from JSON, which has no tuples.

    >>> same_value(1, True), same_value(2.0, 2), same_value((1, 2), [1, 2]), same_value((1, 2), [1, 2], from_json=True)
    (False, True, False, True)
    """
    if isinstance(actual, bool) or isinstance(expected, bool):
        return type(actual) is bool and type(expected) is bool and actual == expected
    if isinstance(expected, int | float) and isinstance(actual, int | float):
        return (
            actual == expected if tolerance is None else math.isfinite(actual) and abs(actual - expected) <= tolerance
        )
    if from_json and isinstance(expected, list) and isinstance(actual, tuple):
        actual = list(actual)
    if isinstance(expected, list | tuple):
        return (
            type(actual) is type(expected)
            and len(actual) == len(expected)
            and all(same_value(a, e, tolerance, from_json) for a, e in zip(actual, expected, strict=True))
        )
    if isinstance(expected, dict):
        if from_json and type(actual) is dict:  # JSON object keys are strings
            actual = {str(k) if type(k) is int else k: v for k, v in actual.items()}
        return (
            type(actual) is dict
            and actual.keys() == expected.keys()
            and all(same_value(actual[k], expected[k], tolerance, from_json) for k in expected)
        )
    if isinstance(expected, set | frozenset):
        return isinstance(actual, set | frozenset) and actual == expected
    return type(actual) is type(expected) and actual == expected


def read_results(stdout: str, marker: str, count: int) -> list[dict[str, Any] | None]:
    """The harness's record per test index: only well-formed marked lines count; an index reported twice or
    not at all gets None (a failure).

    >>> read_results('junk\\nM{"i": 0, "value": 3}\\nM{"i": 1, "value": 4}\\nM{"i": 1, "value": 5}', "M", 3)
    [{'i': 0, 'value': 3}, None, None]
    """
    records: dict[int, Any] = {}
    for line in stdout.split("\n"):  # not splitlines: JSON may hold a raw U+2028 or U+0085
        try:
            record = json.loads(line[len(marker) :]) if line.startswith(marker) else None
        except (ValueError, RecursionError):
            continue
        index = record.get("i") if isinstance(record, dict) else None
        if type(index) is int and 0 <= index < count:
            records[index] = None if index in records else record
    return [records.get(i) for i in range(count)]


def passes(case: Case, record: dict[str, Any] | None) -> bool:
    """Whether the harness's record for a case meets the case (expected values stay here, in the parent).

    >>> passes(Case(call="f()", expected=True), {"value": 1})
    False
    >>> passes(Case(stdin="", stdout="1"), {"exit": 0, "stdout": "1"})
    True
    """
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
    try:
        return same_value(decode_value(record["value"]), case.expected, case.tolerance, case.from_json)
    except (ValueError, TypeError, KeyError, RecursionError):  # malformed tags, unhashable keys
        return False


class SandboxFailure(RuntimeError):
    """The sandbox did not start Python (not the program's fault): the completion scores None, counted."""


def grade(
    code: str, cases: list[Case], *, timeout_s: float = 2.0, total_timeout_s: float = 10.0, memory_mb: int = 512
) -> list[bool]:
    """Run ``code`` against ``cases`` in one sandbox and say which pass (SandboxFailure if it did not start).

    >>> grade("print(int(input()) * 2)", parse_tests([{"input": "2", "output": "4"}, {"input": "3", "output": "5"}]))
    [True, False]
    """
    marker = secrets.token_hex(16)
    payload: dict[str, Any] = {
        "code": code,
        "marker": marker,
        "timeout": timeout_s,
        "cap": CASE_OUTPUT_CAP,
        "sweep": sandbox_isolation() != "rlimits",
    }
    if cases[0].stdin is not None:
        payload["inputs"] = [case.stdin for case in cases]
    else:
        payload["tests"] = [{"call": case.call} if case.stmt is None else {"stmt": case.stmt} for case in cases]
    result = run_python(
        f"PAYLOAD = {json.dumps(payload)!r}\n{HARNESS}",
        timeout_s=min(total_timeout_s, timeout_s * (len(cases) + 1) + STARTUP_SLACK_S),
        memory_mb=memory_mb,
        max_output_bytes=len(cases) * 2 * CASE_OUTPUT_CAP + (1 << 20),
    )
    if not result.started:
        raise SandboxFailure(f"The sandbox did not start: {result.stderr[:300]}")
    return [
        passes(case, record)
        for case, record in zip(cases, read_results(result.stdout, marker, len(cases)), strict=True)
    ]


@register("unit_tests", roles=("correctness",))
def build_unit_tests(
    tests_column: Annotated[str, Param("dataset column holding the tests")] = "tests",
    timeout_s: Annotated[float, Param("seconds per test")] = 2.0,
    total_timeout_s: Annotated[float, Param("seconds of sandbox time per completion, all its tests together")] = 10.0,
    memory_mb: Annotated[int, Param("address-space limit per process, in MiB")] = 512,
    binary: Annotated[bool, Param("1.0 only when every test passes, else 0.0")] = False,
    allow_unconverted_asserts: Annotated[
        bool, Param("run asserts the parent cannot convert in the child, which then grades itself: HACKABLE")
    ] = False,
    entry_point_column: Annotated[str, Param("column naming the function for HumanEval's check(candidate)")] = (
        "entry_point"
    ),
    workers: Annotated[int | None, Param("parallel sandboxes; null: one per core")] = None,
) -> RewardFunction:
    """The fraction of the row's tests the completion's code passes (``binary``: 1.0 only when all pass), run in
    the sandbox and graded in the parent; unusable tests or a sandbox that cannot start score None (counted).

    The code is the last fenced python block, else the whole completion. Tests per row: ``[{"input",
    "output"}]`` or ``{"inputs": [...], "outputs": [...]}`` (stdin/stdout), ``[{"call", "expected"}]``, assert
    strings or HumanEval's ``def check(candidate)``, or any of these as a JSON string. A stdin/stdout case
    passes when the program exits 0 in time and prints the expected lines (whitespace collapsed); a call case
    when the call returns, in time, a plain value equal to the expected one (type-aware: ``True`` is not
    ``1``). A syntax error, crash, timeout, early exit or empty completion fails its cases (0.0, not None).

    Resists: ``sys.exit(0)``, ``os._exit(0)``, an object whose ``__eq__`` is always true, printing the
    expected output, a patched ``print``: in-process guards are not isolation, and graders that trust the
    child are fooled. Expected values never enter the sandbox (under bubblewrap: no network, a private
    filesystem, its own uid); only plain JSON values come back. ``allow_unconverted_asserts`` undoes this
    (``reward.hackable`` is then True, which inspection flags).

    >>> reward = build_unit_tests()
    >>> right = "```python\\ndef add(a, b):\\n    return a + b\\n```"
    >>> reward(["p", "p"], [right, "def add(a, b): return a - b"],
    ...        tests=[["assert add(1, 2) == 3", "assert add(2, 0) == 2"]] * 2)
    [1.0, 0.5]
    """
    if not (timeout_s > 0 and total_timeout_s > 0 and memory_mb >= 64):
        raise SkillError(
            f"unit_tests needs timeouts > 0 and memory_mb >= 64 (got {timeout_s}, {total_timeout_s}, {memory_mb}).",
            "Send e.g. timeout_s=2, total_timeout_s=10, memory_mb=512.",
        )
    limits = {"timeout_s": float(timeout_s), "total_timeout_s": float(total_timeout_s), "memory_mb": int(memory_mb)}

    def score_one(text: str, row: dict[str, Any]) -> float:
        if tests_column not in row:
            raise SkillError(f"No {tests_column!r} column for this completion.", "Add it, or set tests_column.")
        cases = parse_tests(row[tests_column], row.get(entry_point_column), allow_unconverted_asserts)
        if not cases:
            raise SkillError(f"The {tests_column!r} value holds no test.", "Send at least one test per row.")
        passed = grade(extract_code(text), cases, **limits)
        return float(all(passed)) if binary else sum(passed) / len(passed)

    def batch_score(texts: list[str], rows: list[dict[str, Any]], completion_ids: Any) -> list[Any]:
        return run_parallel([lambda t=t, r=r: score_one(t, r) for t, r in zip(texts, rows, strict=True)], workers)

    reward = RewardFunction("unit_tests", batch_score=batch_score, doc=build_unit_tests.__doc__ or "")
    reward.hackable = bool(allow_unconverted_asserts)  # type: ignore[attr-defined]
    return reward
