"""A program reader for tests: it labels each sample blind, by its own check of the completion against the
reference column, and never looks at a score.

Its judgment is its own: it imports nothing from ``skill.rewards``. Correctness: the answer the completion
commits to equals the reference (numbers compared as numbers, letters A-D, yes/no words, else the text without
case). The committed answer is the one in ``<answer>`` tags when there are tags (one answer, said once or
repeated; where the task asks for tags, only a tagged answer is one), else the last answer-like token of the
completion, a trailing "Check: ..." being the model checking its answer and not a new one. Format: the
completion is just the answer (``bare``), or the structure named by ``form`` (``answer_tag``,
``think_answer``). Its reviews are stamped with reviewer kind ``program``.
"""

from __future__ import annotations

import itertools
import os
import random
import re
from typing import Any

from skill.data import ADDITION_QUESTION
from skill.inspection.gate import record_review
from skill.inspection.schema import InspectionReport, ReviewRequest

_NUMBER = r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
_LETTER = r"\b[A-D]\b"
_YES_NO = r"\b(?:yes|no)\b"
_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def _kind(reference: str) -> str:
    """How the reference is written: a number, a letter A-D, a yes/no word, or text."""
    if _number(reference) is not None:
        return "number"
    if re.fullmatch(r"[A-D]", reference):
        return "letter"
    if reference.casefold() in ("yes", "no"):
        return "yes_no"
    return "text"


def _token(kind: str) -> str:
    return {"number": _NUMBER, "letter": _LETTER, "yes_no": _YES_NO}[kind]


def committed_answer(completion: str, reference: str, form: str = "bare") -> str | None:
    """The answer the completion commits to, read as a person would; None when it commits to none. Where the
    task asks for a tagged answer (``form`` other than bare), only a tagged answer is one."""
    tagged = [answer.strip() for answer in _TAG.findall(completion)]
    if tagged or form != "bare":
        return tagged[0] if tagged and len(set(tagged)) == 1 and tagged[0] else None
    kind = _kind(reference)
    said = completion.split("Check:")[0]  # what follows is the model checking its answer
    if kind == "text":
        return said.strip().rstrip(".") or None
    found = re.findall(_token(kind), said, flags=re.IGNORECASE if kind == "yes_no" else 0)
    return found[-1] if found else None


def _same(answer: str, reference: str) -> bool:
    if _kind(reference) == "number":
        return _number(answer) is not None and _number(answer) == _number(reference)
    return answer.strip().rstrip(".").casefold() == reference.strip().casefold()


def is_right(completion: str, reference: str, form: str = "bare") -> bool:
    answer = committed_answer(completion, reference, form)
    return answer is not None and _same(answer, reference)


def is_well_formed(completion: str, reference: str, form: str = "bare") -> bool:
    """The completion has the structure asked for: just the answer (``bare``), one non-empty answer tag after
    optional text (``answer_tag``), or a thought then one non-empty answer tag and nothing after (``think_answer``)."""
    if form == "bare":
        kind = _kind(reference)
        if kind == "text":
            return bool(completion.strip()) and "\n" not in completion.strip()
        flags = re.IGNORECASE if kind == "yes_no" else 0
        return re.fullmatch(rf"\s*{_token(kind)}\s*", completion, flags) is not None
    body = r"<answer>[^<]*\S[^<]*</answer>\s*"
    if form == "answer_tag":
        return re.fullmatch(rf"[^<]*{body}", completion, re.DOTALL) is not None
    if form == "think_answer":
        return re.fullmatch(rf"\s*<think>[^<]*</think>\s*{body}", completion, re.DOTALL) is not None
    raise ValueError(f"unknown form {form!r}")


def judge(sample: Any, roles: list[str], form: str = "bare", reference: str = "answer") -> dict[str, str]:
    """One sample's blind labels for ``roles``: a SampleResult or a sample as the MCP tools show it (a dict)."""
    completion = sample["completion"] if isinstance(sample, dict) else sample.completion
    columns = sample["columns"] if isinstance(sample, dict) else sample.columns
    gold = str(columns[reference])
    checks = {
        "correctness": lambda: is_right(completion, gold, form),
        "judge": lambda: is_right(completion, gold, form),
        "format": lambda: is_well_formed(completion, gold, form),
    }
    return {role: "pass" if checks[role]() else "fail" for role in roles}


def read_blind(report: InspectionReport, form: str = "bare", reference: str = "answer") -> dict[int, dict[str, str]]:
    """Every sample's blind labels for the report's read roles."""
    return {sample.id: judge(sample, report.read_roles, form, reference) for sample in report.samples}


def pass_review(
    report: InspectionReport, reviewer: str = "tester", form: str = "bare", reference: str = "answer"
) -> InspectionReport:
    """Record this reader's blind labels (reviewer kind ``program``); the verdict must be passed."""
    request = ReviewRequest(
        report_id=report.id, reviewer=reviewer, reviewer_kind="program", labels=read_blind(report, form, reference)
    )
    result = record_review(request)
    assert result.verdict == "passed", result.verdict_reasons
    return result


_FRESH = itertools.count(1)


def addition_samples(count: int = 60, seed: int | None = None) -> list[dict[str, Any]]:
    """Addition questions answered with the bare sum, a bare wrong sum or no answer, in turn. Without a seed, each
    call gives samples no earlier call gave: a sample revealed once on a state root never counts blind again."""
    rng = random.Random(seed if seed is not None else f"fresh-{os.getpid()}-{next(_FRESH)}")
    samples = []
    for index in range(count):
        a, b = rng.randint(10, 999), rng.randint(10, 999)
        completion = [str(a + b), str(a + b + 1 + index % 7), "no idea"][index % 3]
        samples.append(
            {
                "prompt": [{"role": "user", "content": ADDITION_QUESTION.format(a=a, b=b)}],
                "completion": completion,
                "columns": {"answer": str(a + b)},
                "group": index // 6,
            }
        )
    return samples
