"""What has been revealed on this state root: every sample whose scores a reader was shown.

A label counts toward a read's statistic only when given blind. Once a sample's scores were shown (its labels
recorded, or the rewards accepted unread), its content is not blind any more: in this inspection or another,
under any reviewer name, whatever its id, order, prompt group, extra columns or whitespace. So a revealed sample
is kept by ``content_key``: the prompt and the completion with runs of whitespace made one space. Columns are
left out of the key (a column no reward reads must not make a sample new); the cost is that the same completion
of the same prompt against another reference answer also counts as seen, which only ever makes a read count
fewer labels. Each line of ``inspections/revealed.jsonl`` is one key with where and to whom it was revealed, and
the key of its prompt alone (``prompt_digest``): an inspection that must collect fresh samples starts from prompts no
read has revealed (``inspection.fresh_samples``). Owns: ``content_key``, ``prompt_digest``, ``record_revealed``,
``revealed_keys``, ``revealed_prompts``. May import: ``inspection.schema``, ``inspection.reports``, ``state``.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from skill.inspection.reports import reports_dir
from skill.inspection.schema import InspectionReport, SampleResult
from skill.state import exclusive_lock

STORE = "revealed.jsonl"


def _collapsed(value: Any) -> Any:
    if isinstance(value, str):
        return " ".join(value.split())
    if isinstance(value, list):
        return [_collapsed(item) for item in value]
    if isinstance(value, dict):
        return {key: _collapsed(item) for key, item in value.items()}
    return value


def _digest(value: Any) -> str:
    content = json.dumps(_collapsed(value), sort_keys=True, default=str)
    return hashlib.sha256(content.encode()).hexdigest()[:24]


def content_key(sample: SampleResult) -> str:
    """What makes a sample the same sample to a reader: its prompt and completion, whitespace collapsed.

    >>> a = SampleResult(id=0, prompt="What is 2 + 2?", completion="4", columns={"answer": "4"}, scores={},
    ...                  total=None)
    >>> b = a.model_copy(update={"id": 9, "prompt": "What is 2 +  2? ", "columns": {"answer": "4", "x": 1}})
    >>> content_key(a) == content_key(b), content_key(a) == content_key(a.model_copy(update={"completion": "5"}))
    (True, False)
    """
    return _digest([sample.prompt, sample.completion])


def prompt_digest(prompt: Any) -> str:
    """What makes a prompt the same prompt to a reader: text or chat messages, whitespace collapsed.

    >>> chat = prompt_digest([{"role": "user", "content": "2 + 2?"}])
    >>> chat == prompt_digest([{"content": "2 +  2? ", "role": "user"}]), chat == prompt_digest("2 + 3?")
    (True, False)
    """
    return _digest(prompt)


def _recorded(field: str) -> set[str]:
    path = reports_dir() / STORE
    if not path.is_file():
        return set()
    values = set()
    for text in path.read_text().splitlines():
        try:
            values.add(json.loads(text)[field])
        except (ValueError, KeyError, TypeError):  # a line torn by a crash mid-write (or older, without the field)
            continue
    return values


def revealed_keys() -> set[str]:
    """Every content key revealed on this state root."""
    return _recorded("key")


def revealed_prompts() -> set[str]:
    """The ``prompt_digest`` of every prompt with a sample revealed on this state root."""
    return _recorded("prompt")


def record_revealed(report: InspectionReport, sample_ids: list[int], reviewer: str) -> None:
    """Note that these samples' scores are shown from now on, to ``reviewer`` in ``report``."""
    if not sample_ids:
        return
    by_id = {sample.id: sample for sample in report.samples}
    at = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    lines = [
        json.dumps(
            {
                "key": content_key(by_id[i]),
                "prompt": prompt_digest(by_id[i].prompt),
                "inspection": report.id,
                "sample": i,
                "reviewer": reviewer,
                "at": at,
            }
        )
        for i in sample_ids
    ]
    with exclusive_lock(reports_dir() / ".revealed.lock"), (reports_dir() / STORE).open("a") as out:
        out.write("".join(line + "\n" for line in lines))
