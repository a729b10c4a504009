"""Attention checks: real samples shown with a wrong score, so a review that only agrees cannot pass.

Which samples, and so how many (at least ``MIN_CHECKS`` among samples not shown before), is decided here,
never by the request. A check is a real sample shown in place: the samples shown are exactly the samples
scored (no duplicate, no added item), so neither the sample source nor a search for repeats points at it.
Its correctness (or judge) score is replaced by one that is wrong whatever the real reward says, decided
from the gold answer: a well-formed sample whose committed answer equals the gold is shown at the reward's
floor; a well-formed numeric answer that differs from the gold (and never states it) is shown at its top.
Where the reward itself is wrong about such a sample, the score shown is its own. Only when too few samples
can be decided from the gold are others shown inverted (top and floor swapped) to reach the minimum.

A sample never shown before is a check when a keyed hash of its content (the state root's secret; reward,
gold, committed answer) falls under ``BASE_RATE``: it depends on the sample alone, not on the request, the
order or the other samples. Where that leaves fewer than ``MIN_CHECKS``, never-shown samples with the
lowest keys are added. Whatever a sample was shown as is remembered (``statuses``, kept by the caller per
state root), and a sample shown again keeps it: inspecting the same samples again through the API
(re-scoring them), a subset, a superset or reworded prompts shows the same checks with the same wrong
scores, so comparing reports points at none. The price: a report made only of samples shown before has
the checks they carry, possibly fewer than ``MIN_CHECKS`` and possibly none (the key says
``only_shown_before``; the gate then asks for the earlier report or new samples). A review that fails
says nothing about which samples were checks; each failed review adds one new check (a new review draws
new checks) and is counted; after ``MAX_FAILED_REVIEWS`` the report takes no more reviews.

What this cannot do: tell a person's read from a program that judges every sample itself, e.g. by
calling the reward function in Python on the samples shown (where the reward is right about a check,
its own score differs from the one shown). Such a program is a reader whose judgment is the reward's;
the checks then catch it only where the reward is wrong about a checked sample.

Owns: ``plant_checks``, ``add_check``, ``reading_matches``. May import: ``inspection.schema``,
``rewards`` (spec, text).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
from dataclasses import dataclass
from typing import Any

from skill.inspection.schema import InspectionReport, SampleResult
from skill.rewards.spec import RewardSpec
from skill.rewards.text import answers_equal, extract_answer

MIN_CHECKS = 3
BASE_RATE = 0.12  # the share of samples the gold decides whose key makes them checks (about 4 in 60 samples)
MAX_FAILED_REVIEWS = 5
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


@dataclass(frozen=True)
class Candidate:
    id: int
    shown: float
    decided: bool  # wrong by the gold, whatever the reward says (else: inverted)
    key: float
    tag: str = ""  # the key as hex: how the sample's status is remembered across reports


def _target(specs: list[RewardSpec]) -> int:
    """The reward whose score the checks change: the first correctness or judge reward (else the first)."""
    return next((i for i, spec in enumerate(specs) if spec.role in ("correctness", "judge")), 0)


def _bounds(name: str, results: list[SampleResult]) -> tuple[float, float]:
    """A reward's floor and top: at most 0 and at least 1, wider when its scores are (so one sample more or less
    rarely moves them)."""
    values = [r.scores[name] for r in results if r.scores.get(name) is not None]
    return min([0.0, *values]), max([1.0, *values])


def committed_answer(sample: SampleResult, name: str) -> str | None:
    """The answer a sample commits to: what the reward extracted, else its tagged answer, else its last number."""
    if name in sample.extracted:
        return sample.extracted[name]
    mode = "answer_tag" if "<answer>" in sample.completion else "last_number"
    return extract_answer(sample.completion, mode)


def _states(text: str, gold: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(gold)}(?![\w]|\.\d)", text) is not None


def decided(completion: str, gold: str, answer: str | None, own_reading: bool) -> str | None:
    """'correct' or 'wrong' when the gold decides the committed answer whatever a reward says, else None.

    ``own_reading``: the answer is the reward's own extraction, so it is what the reward compares; otherwise
    it is a guess at it, and a wrong answer counts only when the completion never states the gold.

    >>> decided("so <answer>7</answer>", "7", "7", True), decided("It is 8.", "7", "8", False)
    ('correct', 'wrong')
    >>> decided("8, not 7", "7", "8", False), decided("8, not 7", "7", "8", True), decided("Rome", "Oslo", "Rome", True)
    (None, 'wrong', None)
    """
    if answer is None:
        return None
    if answers_equal(answer, gold):
        return "correct"
    numeric = _NUMBER.fullmatch(answer.strip()) and _NUMBER.fullmatch(gold.strip())
    return "wrong" if numeric and (own_reading or not _states(completion, gold.strip())) else None


def _key(secret: bytes, name: str, gold: Any, answer: str | None, completion: str) -> tuple[float, str]:
    """The sample's key in [0, 1) and its hex tag."""
    material = json.dumps([name, None if gold is None else str(gold), answer or " ".join(completion.split())])
    digest = hmac.new(secret, material.encode(), hashlib.sha256).digest()[:8]
    return int.from_bytes(digest, "big") / 2**64, digest.hex()


def _candidates(specs: list[RewardSpec], names: list[str], results: list[SampleResult], secret: bytes):
    """Every sample that can carry a check, with the score it would show. Whether a sample qualifies depends on
    the sample alone (its scores, answer and gold), not on the other samples sent with it."""
    target = _target(specs)
    name, spec = names[target], specs[target]
    floor, top = _bounds(name, results)
    formats = [(n, _bounds(n, results)[1]) for s, n in zip(specs, names, strict=True) if s.role == "format"]
    column = spec.params.get("answer_column") or spec.params.get("reference_column") or "answer"
    found = []
    for sample in results:
        real = sample.scores.get(name)
        if real is None:
            continue
        gold, answer = sample.columns.get(column), committed_answer(sample, name)
        key, tag = _key(secret, name, gold, answer, sample.completion)
        well_formed = all((sample.scores.get(f) or 0.0) >= best - 1e-9 for f, best in formats)
        own = name in sample.extracted  # the reward's own reading of the answer, not a guess at it
        verdict = decided(sample.completion, str(gold), answer, own) if gold is not None else None
        if verdict is not None and (own or (well_formed and real == (top if verdict == "correct" else floor))):
            found.append(Candidate(sample.id, floor if verdict == "correct" else top, True, key, tag))
        elif real <= floor + 0.1 * (top - floor) or real >= top - 0.1 * (top - floor):
            found.append(Candidate(sample.id, top if real - floor < top - real else floor, False, key, tag))
    return name, found


def _total(specs: list[RewardSpec], scores: dict[str, float | None]) -> float | None:
    values = list(scores.values())
    return None if None in values else sum(s.weight * v for s, v in zip(specs, values, strict=True))


def _show(shown: list[SampleResult], specs: list[RewardSpec], name: str, candidate: Candidate) -> dict[str, Any]:
    sample = shown[candidate.id]
    real = sample.scores[name]
    sample.scores[name] = candidate.shown
    sample.total = _total(specs, sample.scores)
    return {"reward": name, "shown": candidate.shown, "real": real, "decided_by_gold": candidate.decided}


def _checked_tags(found: list[Candidate], statuses: dict[str, bool]) -> set[str]:
    """The tags shown as checks: remembered ones as they were, new ones by key, then topped up to ``MIN_CHECKS``
    with new tags (whole tags, lowest key first, decided by the gold before inverted); ``statuses`` is extended."""
    tags = {c.tag for c in found if statuses.get(c.tag, c.key < BASE_RATE and c.decided)}
    ranked = sorted((c for c in found if c.decided), key=lambda c: c.key)
    ranked += sorted((c for c in found if not c.decided), key=lambda c: c.key)
    for candidate in ranked:
        if sum(c.tag in tags for c in found) >= MIN_CHECKS:
            break
        if candidate.tag not in statuses:
            tags.add(candidate.tag)
    for candidate in found:
        statuses.setdefault(candidate.tag, candidate.tag in tags)
    return tags


def plant_checks(
    specs: list[RewardSpec], results: list[SampleResult], secret: bytes, statuses: dict[str, bool]
) -> tuple[list[SampleResult], dict[str, Any]]:
    """The samples as shown (checks in place) and the key: ``planted`` ids, ``checks``, and the ``pool`` that
    later checks are drawn from. ``statuses`` (tag -> shown as a check) is read and extended."""
    names = list(results[0].scores)
    name, found = _candidates(specs, names, results, secret)
    remembered = set(statuses)
    # Every sample with a checked tag is a check (the same answer to the same gold shows the same score
    # everywhere); no cap, so a sample's status never depends on the other samples sent.
    tags = _checked_tags(found, statuses)
    chosen = [c for c in found if c.tag in tags]
    shown = [sample.model_copy(deep=True) for sample in results]
    checks = {str(c.id): _show(shown, specs, name, c) for c in chosen}
    pool = {str(c.id): c.shown for c in found if c not in chosen}
    fresh = [c for c in found if c.tag not in remembered]
    key = {"planted": sorted(c.id for c in chosen), "checks": checks, "pool": pool, "reward": name}
    return shown, {**key, "only_shown_before": bool(found) and not fresh}


def add_check(report: InspectionReport, key: dict[str, Any]) -> None:
    """One more check, drawn at random from the samples left (after a review that did not match a read)."""
    pool = {int(i): value for i, value in key.get("pool", {}).items() if int(i) not in key["planted"]}
    if not pool:
        return
    chosen = secrets.choice(sorted(pool))
    candidate = Candidate(chosen, pool[chosen], False, 0.0)
    key["checks"][str(chosen)] = _show(report.samples, report.rewards, key["reward"], candidate)
    key["planted"] = sorted([*key["planted"], chosen])


def reading_matches(labels: dict[int, bool], planted: list[int]) -> bool:
    """The labels of a read: every check disagreed with (its score is wrong), no real sample disagreed with.

    >>> reading_matches({0: True, 1: False, 2: True}, [1]), reading_matches({0: True, 1: True, 2: True}, [1])
    (True, False)
    >>> reading_matches({0: False, 1: False, 2: True}, [1]), reading_matches({0: True}, [])
    (False, False)
    """
    checks = set(planted)
    return (
        bool(checks)
        and all(labels.get(i) is False for i in checks)
        and all(agree or i in checks for i, agree in labels.items())
    )
