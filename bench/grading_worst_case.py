"""Worst-case parent-side grading time for one ``unit_tests`` completion, on crafted reports at the output cap.

A candidate that walks to the harness's frame can write any report it likes on the result channel, up to
the run's output cap (``unit_tests.OUTPUT_CAP``, 16 MiB, or 2 MiB per test + 1 MiB when fewer tests). The
parent then reads and grades it: this measures that step alone (``read_results``, ``take_values`` and
``passes`` for every test, as ``grade`` does), for each crafted shape, at the cap. Target: under the
per-completion timeout (``total_timeout_s``, 10 s by default). A second pass, under ``tracemalloc``,
gives each shape's peak parent-side memory (scalars cost memory too: ``MAX_VALUES`` bounds them,
``MAX_CONTAINERS`` the rest).
For reference it also times the old way, a Python ``set`` rebuilt from the child's hash-colliding
elements (quadratic), on a far smaller report.

Run: python bench/grading_worst_case.py [--cap-mib N]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from skill.rewards.code.cases import Case  # noqa: E402
from skill.rewards.code.grading import Budget, passes, read_results, take_values  # noqa: E402
from skill.rewards.code.unit_tests import CASE_OUTPUT_CAP, OUTPUT_CAP  # noqa: E402

MARKER = "0123456789abcdef0123456789abcdef"
COLLIDING = 2**61 - 1  # CPython hashes ints modulo 2**61 - 1: every multiple hashes to 0


def _records(value_text: Callable[[int], str], per_record: int, tests: int) -> str:
    """``tests`` marked records, each a value built to about ``per_record`` bytes."""
    return "".join(f'{MARKER}{{"i": {i}, "values": [{value_text(per_record)}]}}\n' for i in range(tests))


def _colliding_ints(size: int) -> list[int]:
    """As many multiples of 2**61 - 1 as fit in ``size`` bytes of JSON."""
    values, used = [], 0
    while used < size - 64:
        values.append((len(values) + 1) * COLLIDING)
        used += len(str(values[-1])) + 2
    return values


def crafted_reports(cap: int, tests: int) -> dict[str, tuple[str, list[Case]]]:
    """Reports filling ``cap`` bytes over ``tests`` tests, with the cases they claim to answer."""
    per = cap // tests - 64
    colliding = _colliding_ints(per)
    as_set = {"set": colliding}
    as_dict = {"dict": [[k, 0] for k in colliding[: len(colliding) * 26 // 34]]}  # [k, 0] adds 8 bytes
    huge = "9" * 4300  # the most digits JSON will parse (int_max_str_digits)
    deep = '{"tuple": [' * 200 + "1" + "]}" * 200  # the harness encodes 200 levels at most
    stdout_case = "\n".join(["1 2 3 4 5 6 7 8 9"] * (CASE_OUTPUT_CAP // 18))
    return {
        "hash_colliding_set_vs_small_set": (
            _records(lambda _: json.dumps(as_set), per, tests),
            [Case(call="f()", expected={1, 2})] * tests,
        ),
        "hash_colliding_set_vs_same_size_set": (
            _records(lambda _: json.dumps(as_set), per, tests),
            [Case(call="f()", expected=set(range(len(colliding))))] * tests,
        ),
        "large_set_all_but_the_last_element_right": (
            _records(lambda _: json.dumps({"set": [*range(per // 8 - 1, 0, -1), -1]}), per, tests),
            [Case(call="f()", expected=set(range(per // 8)))] * tests,
        ),
        "hash_colliding_dict_vs_same_size_dict": (
            _records(lambda _: json.dumps(as_dict), per, tests),
            [Case(call="f()", expected=dict.fromkeys(range(len(as_dict["dict"])), 0))] * tests,
        ),
        "deep_nesting_200_levels": (
            _records(lambda n: "[" + ", ".join([deep] * (n // len(deep))) + "]", per, tests),
            [Case(call="f()", expected=[(1,)] * (per // len(deep)))] * tests,
        ),
        "huge_ints_vs_float_tolerance": (
            _records(lambda n: "[" + ", ".join([huge] * (n // 4302)) + "]", per, tests),
            [Case(call="f()", expected=[0.5] * (per // 4302), tolerance=1e-6)] * tests,
        ),
        "small_floats_at_the_cap": (
            _records(lambda n: "[" + ", ".join(["1.5"] * (n // 5)) + "]", per, tests),
            [Case(call="f()", expected=[2.5])] * tests,
        ),
        "short_strings_at_the_cap": (
            _records(lambda n: "[" + ", ".join(['"a"'] * (n // 5)) + "]", per, tests),
            [Case(call="f()", expected=["b"])] * tests,
        ),
        "stdout_1mib_per_case": (
            "".join(
                MARKER + json.dumps({"i": i, "exit": 0, "stdout": stdout_case}) + "\n"
                for i in range(min(tests, cap // (CASE_OUTPUT_CAP + 1024)))
            ),
            [Case(stdin="", stdout=stdout_case + " x")] * min(tests, cap // (CASE_OUTPUT_CAP + 1024)),
        ),
    }


def grading_seconds(stdout: str, cases: list[Case]) -> float:
    """The parent's work on one completion's report: read every record, grade every case."""
    start = time.perf_counter()
    budget = Budget()
    records = read_results(stdout, MARKER, len(cases))
    take_values(records, [None if case.stdin is not None else (["f()"], "__values__[0]") for case in cases])
    results = [passes(case, record, budget) for case, record in zip(cases, records, strict=True)]
    elapsed = time.perf_counter() - start
    if any(results):
        raise RuntimeError("a crafted report passed a test")
    return elapsed


def grading_peak_mib(stdout: str, cases: list[Case]) -> float:
    """Peak memory the parent allocates grading one completion's report (``tracemalloc``; slower, so apart)."""
    tracemalloc.start()
    try:
        grading_seconds(stdout, cases)
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def old_rebuild_seconds(elements: int) -> float:
    """The previous parent: ``set(...)`` over the child's hash-colliding elements (quadratic)."""
    values = [k * COLLIDING for k in range(1, elements + 1)]
    start = time.perf_counter()
    set(values)
    return time.perf_counter() - start


def measure(cap: int = OUTPUT_CAP, timeout_s: float = 10.0) -> dict[str, object]:
    """Seconds of parent-side grading per crafted shape, at ``cap`` bytes of report in 1 test and in 16."""
    rows: dict[str, float] = {}
    peaks: dict[str, float] = {}
    for tests in (1, 16):
        total = min(cap, tests * 2 * CASE_OUTPUT_CAP + (1 << 20))  # the run's output cap for that many tests
        for name, (stdout, cases) in crafted_reports(total, tests).items():
            label = f"{name} ({tests} test{'s' if tests > 1 else ''}, {len(stdout) / 2**20:.1f} MiB)"
            rows[label] = grading_seconds(stdout, cases)
            peaks[label] = grading_peak_mib(stdout, cases)
    worst = max(rows.values())
    return {
        "rows": rows,
        "peak_mib": peaks,
        "worst_peak_mib": max(peaks.values()),
        "worst_s": worst,
        "timeout_s": timeout_s,
        "under_timeout": worst < timeout_s,
        "old_set_rebuild_20000_colliding_s": old_rebuild_seconds(20_000),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cap-mib", type=float, default=OUTPUT_CAP / 2**20)
    args = parser.parse_args()
    result = measure(int(args.cap_mib * 2**20))
    peaks = result.pop("peak_mib")
    for name, seconds in result.pop("rows").items():  # type: ignore[union-attr]
        print(f"{name}: {seconds:.3f} s, peak {peaks[name]:.1f} MiB")  # type: ignore[index]
    for key, value in result.items():
        print(f"{key}: {value:.3f}" if isinstance(value, float) else f"{key}: {value}")


if __name__ == "__main__":
    main()
