"""Sandbox throughput: small candidate programs x 3 stdin/stdout tests through the ``unit_tests`` reward,
in executions (sandboxed program runs) per second, against the bare ceiling measured in the same run:
``/usr/bin/python3.11 -I -S -c pass`` spawned in parallel on every core, no isolation, no grading.
Target: at least half the ceiling with isolation on: bubblewrap with a read-only root and sized tmpfs
mounts, a dropped uid, rlimits, and a memory cgroup per run where the host allows one (``memory_cgroup``).

Run: python bench/sandbox_throughput.py [--programs N]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from skill.rewards.code.cgroup import memory_cgroup_root  # noqa: E402
from skill.rewards.code.sandbox import default_workers, sandbox_isolation, sandbox_python  # noqa: E402
from skill.rewards.code.unit_tests import build_unit_tests  # noqa: E402

TESTS_PER_PROGRAM = 3
# Eight variants of "sum the numbers on the line": two wrong, so grading is exercised both ways.
VARIANTS = [
    "print(sum(map(int, input().split())))",
    "import sys\nprint(sum(int(x) for x in sys.stdin.read().split()))",
    "a = [int(x) for x in input().split()]\nprint(sum(a))",
    "def main():\n    print(sum(map(int, input().split())))\n\nmain()",
    "total = 0\nfor x in input().split():\n    total += int(x)\nprint(total)",
    "print(eval('+'.join(input().split())))",
    "print(max(map(int, input().split())))",
    "print(0)",
]


def ceiling(executions: int, workers: int) -> float:
    """Bare spawns per second: the interpreter started and stopped, nothing else."""
    command = [sandbox_python(), "-I", "-S", "-c", "pass"]
    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(lambda _: subprocess.run(command, check=True), range(executions)))
    return executions / (time.perf_counter() - start)


CALL_TESTS = {  # the same function under tests compared with literals (one sandbox per completion) and
    # under a helper predicate of the tests' own (a second, candidate-free sandbox evaluates the helper)
    "literal": ["assert add(1, 2) == 3", "assert add(2, 2) == 4", "assert add(0, 5) == 5"],
    "helper": [
        "def near(a, b):\n    return abs(a - b) < 1e-9",
        "assert near(add(1, 2), 3)",
        "assert near(add(2, 2), 4)",
    ],
}


def call_completions_per_s(programs: int) -> dict[str, float]:
    """Completions per second for function tests: literal comparisons vs a helper predicate."""
    reward = build_unit_tests(timeout_s=5, total_timeout_s=20)
    completions = ["def add(a, b):\n    return a + b"] * programs
    rates = {}
    for name, tests in CALL_TESTS.items():
        start = time.perf_counter()
        scores = reward(["p"] * programs, completions, tests=[tests] * programs)
        rates[f"call_tests_{name}_completions_per_s"] = programs / (time.perf_counter() - start)
        if scores != [1.0] * programs:
            raise RuntimeError(f"unexpected scores: {scores}")
    return rates


def measure(programs: int = 64) -> dict[str, float | str]:
    """Executions per second through ``unit_tests`` vs the bare ceiling; both measured twice, interleaved,
    best kept (a 2-core machine is noisy)."""
    workers = default_workers()
    reward = build_unit_tests(timeout_s=5, total_timeout_s=20)
    completions = [f"```python\n{VARIANTS[i % len(VARIANTS)]}\n```" for i in range(programs)]
    tests = [{"input": f"{i} {i + 1} {i + 2}", "output": str(3 * i + 3)} for i in range(TESTS_PER_PROGRAM)]
    executions = programs * TESTS_PER_PROGRAM
    sandbox_isolation()  # probe once, outside the timing
    reward(["p"], completions[:1], tests=[tests])  # warm the page cache
    bare, sandboxed, scores = [], [], []
    for _ in range(2):
        bare.append(ceiling(executions, workers))
        start = time.perf_counter()
        scores = reward(["p"] * programs, completions, tests=[tests] * programs)
        sandboxed.append(executions / (time.perf_counter() - start))
    expected = [0.0 if i % len(VARIANTS) in (6, 7) else 1.0 for i in range(programs)]
    if scores != expected:
        raise RuntimeError(f"unexpected scores: {scores}")
    return {
        "isolation": sandbox_isolation(),
        "memory_cgroup": "yes" if memory_cgroup_root() is not None else "no",
        "workers": workers,
        "executions": executions,
        "sandboxed_executions_per_s": max(sandboxed),
        "bare_ceiling_per_s": max(bare),
        "ratio": max(sandboxed) / max(bare),
        "target_ratio": 0.5,
        **call_completions_per_s(programs),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--programs", type=int, default=64)
    args = parser.parse_args()
    for key, value in measure(args.programs).items():
        print(f"{key}: {value:.3f}" if isinstance(value, float) else f"{key}: {value}")


if __name__ == "__main__":
    main()
