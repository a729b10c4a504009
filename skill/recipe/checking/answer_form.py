"""Whether the prompts ask for the answer form the rewards read: a reward that reads only ``<answer>`` tags scores
0 on every completion of a model never asked to write them, and the run learns nothing (or only the tags).

May import: ``data``, ``rewards.reading``, ``rewards.spec``, ``errors``.
"""

from __future__ import annotations

import json

from skill.data import DatasetSpec, load_rows
from skill.errors import SkillError
from skill.rewards.reading import tag_readers
from skill.rewards.spec import RewardSpec

TAG = "<answer>"


def unasked_answer_form(rewards: list[RewardSpec], dataset: DatasetSpec) -> str | None:
    """A warning when rewards read ``<answer>`` tags and the data's first prompt (as the run renders it) never
    mentions them; None when the prompt asks for them, no reward needs them, or the data cannot be read here.

    >>> unasked_answer_form([RewardSpec(name="exact_match", role="correctness")],
    ...     DatasetSpec(name="embedded:addition"))[:60]
    'exact_match read the answer only inside <answer> tags, and t'
    >>> unasked_answer_form([RewardSpec(name="exact_match", role="correctness", params={"extract": "last_number"})],
    ...     DatasetSpec(name="embedded:addition"))
    """
    readers = tag_readers(rewards)
    if not readers:
        return None
    try:
        rows = load_rows(dataset, limit=1)
    except SkillError:  # unreadable here (no network): the data is checked where it is read
        return None
    prompt = json.dumps(rows[0]["prompt"]) if rows else ""
    if not rows or TAG in prompt:
        return None
    return (
        f"{', '.join(readers)} read the answer only inside <answer> tags, and the prompts never ask for them "
        f"(the first: {prompt[:120]}): a model never asked scores 0. Ask in a prompt_template, e.g. "
        "'{question} Give the final answer in <answer></answer>.', or read another form (params.extract)."
    )
