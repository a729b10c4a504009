"""The reward's regression set: every blind label a read gave, kept by the sample's content under the state root.

A label judges a sample (prompt, completion, reference columns) for a role (correctness, format, judge), not a
particular reward function: when the reward is fixed, a new inspection of the same samples (``samples_of``)
finds their labels here and re-scores them against the new reward, with no new sampling and no re-read. Each
line of ``inspections/labels.jsonl`` is one label with its provenance (who, what kind of reader, when, in which
inspection) and, once amended, the amendment; the first label is never changed. Owns: ``sample_key``,
``store_labels``, ``carried_labels``. May import: ``inspection.schema``, ``inspection.reports``, ``state``.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from skill.inspection.reports import reports_dir
from skill.inspection.schema import Amendment, InspectionReport, Label, SampleResult
from skill.state import exclusive_lock

STORE = "labels.jsonl"


def sample_key(sample: SampleResult) -> str:
    """What identifies a sample across inspections: its prompt, completion and reference columns.

    >>> a = SampleResult(id=0, prompt="p", completion="c", columns={"answer": "1"}, scores={}, total=None)
    >>> sample_key(a) == sample_key(a.model_copy(update={"id": 7, "scores": {"r": 1.0}})), len(sample_key(a))
    (True, 24)
    """
    content = json.dumps([sample.prompt, sample.completion, sample.columns], sort_keys=True, default=str)
    return hashlib.sha256(content.encode()).hexdigest()[:24]


def store_labels(report: InspectionReport, sample_ids: list[int], amendments: list[Amendment]) -> None:
    """Append the new blind labels of ``sample_ids`` and the new amendments to the regression set."""
    review = report.review
    if review is None:
        return
    by_id = {sample.id: sample for sample in report.samples}
    lines = []
    for sample_id in sample_ids:
        for role, label in review.labels[sample_id].items():
            lines.append(_line(by_id[sample_id], role, label, report, None))
    for amendment in amendments:
        first = review.labels[amendment.sample_id][amendment.role]
        lines.append(_line(by_id[amendment.sample_id], amendment.role, first, report, amendment))
    if not lines:
        return
    path = reports_dir() / STORE
    with exclusive_lock(reports_dir() / ".labels.lock"), path.open("a") as out:
        out.write("".join(json.dumps(line) + "\n" for line in lines))


def _line(sample: SampleResult, role: str, label: Label, report: InspectionReport, amended: Amendment | None) -> dict:
    review = report.review
    assert review is not None
    return {
        "key": sample_key(sample),
        "role": role,
        "label": label,
        "reviewer": review.reviewer,
        "reviewer_kind": review.reviewer_kind,
        "at": review.labelled_at,
        "inspection": review.carried.get(sample.id, report.id),
        "amendment": amended.model_dump() if amended else None,
    }


def carried_labels(samples: list[SampleResult]) -> dict[int, dict[str, Any]]:
    """sample id -> {"labels": {role: first label}, "inspection": where it was read, "amendments": [...]} for
    the samples an earlier read labelled (the newest line per sample and role wins)."""
    path = reports_dir() / STORE
    if not path.is_file():
        return {}
    known: dict[str, dict[str, dict[str, Any]]] = {}
    for text in path.read_text().splitlines():
        try:
            line = json.loads(text)
        except ValueError:  # a line torn by a crash mid-write: the others stand
            continue
        known.setdefault(line["key"], {})[line["role"]] = line
    carried: dict[int, dict[str, Any]] = {}
    for sample in samples:
        lines = known.get(sample_key(sample))
        if not lines:
            continue
        first = next(iter(lines.values()))
        carried[sample.id] = {
            "labels": {role: line["label"] for role, line in lines.items()},
            "inspection": first["inspection"],
            "reviewer": first["reviewer"],
            "reviewer_kind": first["reviewer_kind"],
            "amendments": [
                Amendment(**{**line["amendment"], "sample_id": sample.id})
                for line in lines.values()
                if line["amendment"]
            ],
        }
    return carried
