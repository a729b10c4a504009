"""Samples whose answers no earlier inspection in this state root has shown, and a review that reads them.

A read opens the gate only on a report with at least MIN_NEW_ANSWERS distinct answers never shown before
(skill/inspection/attention.py), and every test of a session shares one state root: a test that needs a
passed inspection sends replies worded as no earlier one was, as a user inspecting new samples would.
"""

from __future__ import annotations

import json
import random
import string
from pathlib import Path
from typing import Any

from skill.data import ADDITION_QUESTION
from skill.inspection.gate import record_review
from skill.inspection.schema import InspectionReport, ReviewRequest


def no_answer_reply() -> str:
    """A reply without a number, worded as no earlier reply was (with no number, its words are its answer)."""
    return "no idea, " + "".join(random.choices(string.ascii_lowercase, k=12))


def addition_samples(count: int = 60) -> list[dict[str, Any]]:
    """Addition questions on numbers no other call draws (tests run in parallel on one state root, and a report
    whose answers a later inspection shows again takes no read), answered with the bare sum two times in three,
    the rest a new reply with no answer."""
    samples = []
    for index in range(count):
        a, b = random.randint(1000, 999_999), random.randint(1000, 999_999)
        samples.append(
            {
                "prompt": [{"role": "user", "content": ADDITION_QUESTION.format(a=a, b=b)}],
                "completion": str(a + b) if index % 3 else no_answer_reply(),
                "columns": {"answer": str(a + b)},
                "group": index // 6,
            }
        )
    return samples


def key_labels(report: InspectionReport) -> dict[int, bool]:
    """The labels of a read that found every attention check, taken from the report's key."""
    planted = json.loads(Path(report.paths["json"].replace(".json", ".key.json")).read_text())["planted"]
    return {sample.id: sample.id not in planted for sample in report.samples}


def pass_review(report: InspectionReport, reviewer: str = "tester") -> InspectionReport:
    """Record a review that matches a read; it must pass."""
    result = record_review(ReviewRequest(report_id=report.id, reviewer=reviewer, labels=key_labels(report)))
    assert result.verdict == "passed", result.verdict_reasons
    return result


def real_scores(report: InspectionReport, reward: str) -> list[float | None]:
    """Each sample's real score from ``reward``: the shown one, or for an attention check what it really scored."""
    checks = json.loads(Path(report.paths["json"].replace(".json", ".key.json")).read_text())["checks"]
    real = {int(i): {**check.get("others_real", {}), check["reward"]: check["real"]} for i, check in checks.items()}
    return [real[s.id][reward] if s.id in real else s.scores[reward] for s in report.samples]
