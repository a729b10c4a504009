"""What TRL passes a reward besides its completions: its keywords, the dataset columns it passes and those it
withholds or cannot pass, and stand-in token ids where there is no tokenizer.

TRL 1.16's ``_calculate_rewards`` (``trl/trainer/grpo_trainer.py``) passes every dataset column except
``prompt``, ``completion`` and ``completion_ids`` under its own name, then sets ``trainer_state``,
``log_extra``, ``log_metric`` (and ``environments``) itself, and calls ``f(prompts=..., completions=...,
completion_ids=..., **those)``.

May import: ``skill.errors``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from skill.errors import SkillError

# Keywords TRL passes that are not dataset columns.
TRL_KEYWORDS = frozenset({"trainer_state", "log_extra", "log_metric", "environments", "completion_ids"})
# Keywords TRL passes to every reward function on every batch (``environments`` only with environment factories,
# which this project does not configure).
TRL_ALWAYS_PASSES = frozenset({"prompts", "completions", "completion_ids", "trainer_state", "log_extra", "log_metric"})
# Dataset columns TRL keeps back: the prompt travels as ``prompts=``, the completion is the generated one.
TRL_WITHHELD_COLUMNS = frozenset({"prompt", "completion", "completion_ids"})
# Dataset columns TRL cannot hand a reward under their own name: ``prompts`` and ``completions`` collide with its
# own keywords (TypeError: got multiple values for keyword argument), and it overwrites the others with its own.
TRL_RESERVED_COLUMNS = frozenset({"prompts", "completions", "trainer_state", "log_extra", "log_metric", "environments"})

# Characters per pseudo token id where no tokenizer is at hand (about what a BPE tokenizer gives English text).
PSEUDO_CHARS_PER_TOKEN = 4


def pseudo_token_ids(text: str) -> list[int]:
    """Stand-in token ids for a reward that reads ``completion_ids`` where no tokenizer is at hand: one per
    :data:`PSEUDO_CHARS_PER_TOKEN` characters (rounded up), each the code point of its chunk's first character.
    Lengths read from them are approximate; the ids match no vocabulary.

    >>> pseudo_token_ids("The answer is 12.")
    [84, 97, 101, 115, 46]
    """
    return [ord(text[start]) for start in range(0, len(text), PSEUDO_CHARS_PER_TOKEN)]


def check_column_names(names: Iterable[str]) -> None:
    """Refuse dataset columns TRL cannot pass to a reward (:data:`TRL_RESERVED_COLUMNS`), saying what to rename.

    >>> check_column_names(["prompt", "solution"])
    >>> try:
    ...     check_column_names(["solution", "completions"])
    ... except SkillError as error:
    ...     print(error.fix)
    Rename the column completions (e.g. to reference_completions): TRL passes its own prompts, completions, \
trainer_state, log_extra, log_metric and environments to every reward.
    """
    reserved = sorted(set(names) & TRL_RESERVED_COLUMNS)
    if reserved:
        renames = ", ".join(f"{name} (e.g. to reference_{name})" for name in reserved)
        raise SkillError(
            f"The dataset column{'s' if len(reserved) > 1 else ''} {', '.join(reserved)} cannot reach a reward: "
            "TRL's GRPOTrainer fails on a column named prompts or completions (they collide with its own "
            "keywords) and replaces trainer_state, log_extra, log_metric and environments with its own.",
            f"Rename the column {renames}: TRL passes its own prompts, completions, trainer_state, log_extra, "
            "log_metric and environments to every reward.",
        )


def reward_columns(columns: Mapping[str, Any]) -> dict[str, Any]:
    """The dataset columns as TRL passes them to rewards: every one but ``prompt``, ``completion`` and
    ``completion_ids`` (TRL passes its own), after :func:`check_column_names`.

    >>> reward_columns({"prompt": ["q"], "completion": ["4"], "completion_ids": [[1]], "solution": ["4"]})
    {'solution': ['4']}
    """
    check_column_names(columns)
    return {name: values for name, values in columns.items() if name not in TRL_WITHHELD_COLUMNS}
