"""The demo's reader: a program that labels the addition samples blind, by its own check of each answer.

It imports nothing from ``skill.rewards``: its judgment is its own reading of the task ("What is a + b? Answer
with just the number."), not the reward's code, so the comparison ``record_review`` makes is a real one. It is
stamped as reviewer kind ``program``: a program's read is never mistaken for a person's. It judges only this
task; a user's task needs a person, an agent, or a checker written for it.
"""

from __future__ import annotations

import re
from typing import Any

from skill.inspection.schema import InspectionReport

READER = "demo-addition-checker"
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def judge(completion: str, answer: str) -> dict[str, str]:
    """Pass or fail for correctness (the last number written is the sum) and format (just a number, as asked: a
    wrong one, a decimal among them, is still just a number).

    >>> judge(" 21", "21"), judge("The answer is 21.", "21")
    ({'correctness': 'pass', 'format': 'pass'}, {'correctness': 'pass', 'format': 'fail'})
    >>> judge("22", "21"), judge("11.45", "21")
    ({'correctness': 'fail', 'format': 'pass'}, {'correctness': 'fail', 'format': 'pass'})
    >>> judge("21.0", "21")
    {'correctness': 'pass', 'format': 'pass'}
    """
    numbers = NUMBER.findall(completion)
    right = bool(numbers) and float(numbers[-1]) == float(answer)
    just_a_number = NUMBER.fullmatch(completion.strip()) is not None
    return {"correctness": "pass" if right else "fail", "format": "pass" if just_a_number else "fail"}


def read_blind(report: InspectionReport) -> dict[int, dict[str, Any]]:
    """Labels for every sample and read role, from the prompt's reference answer alone (no score is looked at)."""
    labels = {}
    for sample in report.samples:
        verdicts = judge(sample.completion, str(sample.columns["answer"]))
        labels[sample.id] = {role: verdicts[role] for role in report.read_roles}
    return labels
