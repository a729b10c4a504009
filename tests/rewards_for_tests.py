"""Two small real reward functions for the addition task, used by training-step tests.

They follow TRL's contract and score real completions; the project's reward library replaces
them in product code.
"""

from __future__ import annotations

import re


def _text(completion) -> str:
    return completion[-1]["content"] if isinstance(completion, list) else completion


def just_a_number(prompts, completions, **kwargs) -> list[float]:
    """1.0 when the completion is a bare integer."""
    return [1.0 if re.fullmatch(r"\s*-?\d+\s*", _text(c)) else 0.0 for c in completions]


def says_the_answer(prompts, completions, answer, **kwargs) -> list[float]:
    """1.0 when the last integer in the completion equals the answer column."""
    scores = []
    for completion, expected in zip(completions, answer, strict=True):
        numbers = re.findall(r"-?\d+", _text(completion))
        scores.append(1.0 if numbers and numbers[-1] == str(expected) else 0.0)
    return scores


def without_kwargs(prompts, completions):
    """Breaks TRL's contract on purpose: no **kwargs."""
    return [0.0 for _ in completions]


def by_mode(prompts, completions, mode, **kwargs) -> list[float]:
    """A verifier with a known success pattern: the 'mode' column says pass, fail, or a coin flip on the
    completion's length parity (random completions make that a mixed group)."""
    outcomes = {"pass": lambda text: 1.0, "fail": lambda text: 0.0, "coin": lambda text: float(len(text) % 2 == 0)}
    return [outcomes[m](_text(c)) for c, m in zip(completions, mode, strict=True)]


def always_raises(prompts, completions, **kwargs):
    """A broken user reward: training must survive it."""
    raise RuntimeError("this reward is broken")


SENTINEL_PASS, SENTINEL_FAIL = 0.7316, 0.2184  # figures no other part of a report would hold


def sentinel(prompts, completions, **kwargs) -> list[float]:
    """A sentinel for the seal: 0.7316 for a completion 'SENT-<n>-A', 0.2184 for 'SENT-<n>-B', 0 for anything
    else (so the hack probes, made-up completions, score 0 and beat nothing)."""
    scores = []
    for completion in completions:
        found = re.fullmatch(r"SENT-\d+-([AB])", _text(completion))
        scores.append(0.0 if found is None else SENTINEL_PASS if found.group(1) == "A" else SENTINEL_FAIL)
    return scores


def _sentinel_answer(completion: str) -> str | None:
    """What the sentinel 'extracts': a token found nowhere else."""
    found = re.fullmatch(r"SENT-(\d+)-[AB]", completion)
    return None if found is None else f"xtrct{int(found.group(1)) * 7919}q"


sentinel.extract = _sentinel_answer  # type: ignore[attr-defined]
