"""Attention checks: real samples shown with a wrong score, so a review that only agrees cannot pass.

Which samples, and so how many, is decided here, never by the request. A check is a real sample shown in
place: the samples shown are exactly the samples scored (no duplicate, no added item), so neither the
sample source nor a search for repeats points at it. Its correctness (or judge) score is replaced by one
that is wrong whatever the real reward says, decided from the gold answer: a well-formed sample whose
committed answer equals the gold is shown at the reward's floor; a well-formed numeric answer that differs
from the gold (and never states it) is shown at its top. Where the reward itself is wrong about such a
sample, the score shown is its own. Only when too few samples can be decided from the gold are others
shown inverted (top and floor swapped) to reach the minimum.

Checks are kept per answer (a keyed hash of the gold and the answer a sample states, read the same way
under every reward set, under the state root's secret: its tag). A check shows the target reward wrong and
every other reward that varies mirrored, so no reward shown at its real score beside it points at it. What
a tag was shown as is remembered (``statuses``, kept by the caller per state root) and it keeps it: every
copy of an answer, and the same samples inspected again through the API (re-scored, a subset, a superset,
reworded prompts), show the same checks with the same wrong scores, so comparing reports points at none.
New tags are drawn from a pool: the new answers the gold decides when there are at least
``MIN_NEW_ANSWERS`` of them, else every new answer; those whose key falls under ``BASE_RATE`` are checks,
topped up by lowest key until ``MIN_CHECKS`` are.

A read opens the gate only on a report with at least ``MIN_NEW_ANSWERS`` distinct answers never shown
before, by any key any reward set knows them by (``sample_keys``; ``review_blocker``), so its checks
include ``MIN_CHECKS`` that no earlier report, review or refusal can have revealed, and how the report
was composed does not say which. The report says so before it is read, from those counts alone. An answer
is read once: the gate takes no read of a report whose answers a later inspection showed again. The
price: after a reward fix, a read needs samples with new answers (other rows). A review that fails says
nothing about which samples were checks and changes nothing in the report; the gate counts failed reads
per report and per reward per day, so a blind guess (about one in C(10, 3) = 120 at the minimum) gets a
bounded number of tries.

What this cannot do: tell a person's read from a program that judges every sample itself, e.g. by
calling the reward function in Python on the samples shown (where the reward is right about a check,
its own score differs from the one shown). Such a program is a reader whose judgment is the reward's;
the checks then catch it only where the reward is wrong about a checked sample.

Owns: ``plant_checks``, ``review_blocker``, ``reading_matches``. May import:
``inspection.schema``, ``rewards`` (spec, text).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from dataclasses import dataclass
from typing import Any

from skill.inspection.schema import SampleResult
from skill.rewards.answers import committed_answer as committed_answer_text
from skill.rewards.answers import read_number
from skill.rewards.spec import CORRECTNESS_ROLES, RewardSpec
from skill.rewards.text import answers_equal, extract_answer, normalise_answer

MIN_CHECKS = 3
BASE_RATE = 0.12  # the share of samples the gold decides whose key makes them checks (about 4 in 60 samples)
MIN_NEW_ANSWERS = 10  # distinct answers never shown before that a report needs before a read of it can pass
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


@dataclass(frozen=True)
class Candidate:
    id: int
    shown: float
    decided: bool  # wrong by the gold, whatever the reward says (else: inverted)
    key: float
    tag: str = ""  # the key as hex: how the sample's status is remembered across reports
    seen: bool = False  # its answer was shown before, under some key (sample_keys)


def _target(specs: list[RewardSpec]) -> int:
    """The reward whose score the checks change: the first correctness or judge reward (else the first)."""
    return next((i for i, spec in enumerate(specs) if spec.role in CORRECTNESS_ROLES), 0)


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


def _readings(text: Any) -> list[str]:
    """An answer or a gold as the values it may stand for, at least as loosely as the rewards compare them
    (``$1,250``, ``1250.0`` and ``2500/2`` read alike; 50% reads as 50 and as 0.5); else its normalised text.

    >>> _readings("$1,250"), _readings("2500/2"), _readings("50%"), _readings(" Paris ")
    (['1250'], ['1250'], ['50', '0.5'], ['paris'])
    """
    number = read_number(str(text))
    if number is not None:
        try:
            return [format(float(value), ".8g") for value in number.values()]
        except OverflowError:
            pass
    return [normalise_answer(str(text))]


def stated_answer(sample: SampleResult) -> str | None:
    """The answer a sample states, read the same way whatever rewards score it: its tagged answer, else its last
    number (so one answer has one identity under every reward set)."""
    return extract_answer(sample.completion, "answer_tag" if "<answer>" in sample.completion else "last_number")


def _answers_read(sample: SampleResult) -> set[str]:
    """Every answer a reward may read in a sample: each reward's own extraction, the committed answer (tag, box,
    ####, final statement) and each standard extraction, so text around a boxed answer makes no new one."""
    committed = committed_answer_text(sample.completion)
    found = {committed.text if committed else None, *sample.extracted.values()}
    found |= {extract_answer(sample.completion, mode) for mode in ("answer_tag", "boxed", "last_number")}
    return {answer for answer in found if answer}


def sample_keys(sample: SampleResult) -> list[str]:
    """Keys that recognise a sample's answer in any inspection whatever reward scores it: its text, and every answer
    a reward may read in it with each column value (the gold, whatever the column is called).

    >>> one = SampleResult(id=0, prompt="p", completion="<answer>7</answer>", columns={"gold": "7"}, scores={}, total=1)
    >>> moved = one.model_copy(update={"columns": {"answer": 7.0, "extra": "z"}})  # the gold renamed, as a float
    >>> boxed = one.model_copy(update={"completion": "\\\\boxed{7} Checked 3 times."})  # the same answer to a reward
    >>> keys = set(sample_keys(one))
    >>> len(keys), keys <= set(sample_keys(moved)), len(keys & set(sample_keys(boxed)))
    (2, True, 1)
    """
    values = [v for v in sample.columns.values() if isinstance(v, str | int | float)]
    material = [["text", " ".join(sample.completion.split())]]
    material += [
        ["answer", mine, theirs]
        for answer in _answers_read(sample)
        for value in values
        for mine in _readings(answer)
        for theirs in _readings(value)
    ]
    return sorted({hashlib.sha256(json.dumps(item).encode()).hexdigest()[:24] for item in material})


def _key(secret: bytes, gold: Any, sample: SampleResult) -> tuple[float, str]:
    """The sample's key in [0, 1) and its hex tag: its stated answer (or, without a gold or an answer, its text) to
    its gold, whatever the rewards; so an answer keeps its status under every reward set."""
    answer = stated_answer(sample) if gold is not None else None
    stated = _readings(answer)[0] if answer is not None else " ".join(sample.completion.split())
    material = json.dumps([None if gold is None else _readings(gold)[0], stated])
    digest = hmac.new(secret, material.encode(), hashlib.sha256).digest()[:8]
    return int.from_bytes(digest, "big") / 2**64, digest.hex()


def _candidates(
    specs: list[RewardSpec], names: list[str], results: list[SampleResult], secret: bytes, seen: frozenset[str]
):
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
        gold = sample.columns.get(column)
        # Without a gold (code, rubrics) a number in the text is no answer: the whole completion is.
        answer = committed_answer(sample, name) if gold is not None else None
        key, tag = _key(secret, gold, sample)
        well_formed = all((sample.scores.get(f) or 0.0) >= best - 1e-9 for f, best in formats)
        own = name in sample.extracted  # the reward's own reading of the answer, not a guess at it
        verdict = decided(sample.completion, str(gold), answer, own) if gold is not None else None
        old = not seen.isdisjoint(sample_keys(sample))
        if verdict is not None and (own or (well_formed and real == (top if verdict == "correct" else floor))):
            found.append(Candidate(sample.id, floor if verdict == "correct" else top, True, key, tag, old))
        elif real <= floor + 0.1 * (top - floor) or real >= top - 0.1 * (top - floor):
            found.append(Candidate(sample.id, top if real - floor < top - real else floor, False, key, tag, old))
    return name, found


def _total(specs: list[RewardSpec], scores: dict[str, float | None]) -> float | None:
    values = list(scores.values())
    return None if None in values else sum(s.weight * v for s, v in zip(specs, values, strict=True))


def _show(
    shown: list[SampleResult], specs: list[RewardSpec], name: str, candidate: Candidate, bounds: dict[str, tuple]
) -> dict[str, Any]:
    """Show a check: the target reward at the wrong score, and every other reward in ``bounds`` mirrored within its
    range (top and floor swapped), so no second reward shown at its real score says which samples are checks."""
    sample = shown[candidate.id]
    real = dict(sample.scores)
    for other, value in real.items():
        if other != name and other in bounds and value is not None:
            low, high = bounds[other]
            sample.scores[other] = low + high - value
    sample.scores[name] = candidate.shown
    sample.total = _total(specs, sample.scores)
    return {
        "reward": name,
        "shown": candidate.shown,
        "real": real[name],
        "decided_by_gold": candidate.decided,
        "others_real": {k: v for k, v in real.items() if k != name},
    }


def _new_tags(found: list[Candidate], statuses: dict[str, bool]) -> dict[str, Candidate]:
    """The tags never shown before, under any key, one candidate each (one decided by the gold when any is)."""
    new: dict[str, Candidate] = {}
    for candidate in found:
        if candidate.tag in statuses or candidate.seen:  # seen: shown before under another key (sample_keys)
            continue
        if candidate.tag not in new or candidate.decided > new[candidate.tag].decided:
            new[candidate.tag] = candidate
    return new


def _draw_pool(new: dict[str, Candidate]) -> dict[str, Candidate]:
    """The new tags the checks are drawn from: those the gold decides when there are ``MIN_NEW_ANSWERS`` of them
    (wrong whatever the reward says), else every new tag. Never fewer decided ones than that: a report of three
    decided answers among nonsense would otherwise have exactly those three as its checks."""
    decided = {tag: c for tag, c in new.items() if c.decided}
    return decided if len(decided) >= MIN_NEW_ANSWERS else new


def _checked_tags(new: dict[str, Candidate], statuses: dict[str, bool]) -> set[str]:
    """The tags shown as checks: remembered ones as they were; from the new ones' draw pool, those whose key falls
    under ``BASE_RATE``, topped up by lowest key until ``MIN_CHECKS`` are checks. Only new tags count towards the
    minimum: whatever a reader learnt about old ones says nothing about these. ``statuses`` is extended with
    every new tag."""
    pool = _draw_pool(new)
    checked = {tag for tag, c in pool.items() if c.key < BASE_RATE}
    for candidate in sorted(pool.values(), key=lambda c: c.key):
        if len(checked) >= MIN_CHECKS:
            break
        checked.add(candidate.tag)
    statuses.update({tag: tag in checked for tag in new})
    return {tag for tag, check in statuses.items() if check}


def plant_checks(
    specs: list[RewardSpec],
    results: list[SampleResult],
    secret: bytes,
    statuses: dict[str, bool],
    seen: frozenset[str] = frozenset(),
) -> tuple[list[SampleResult], dict[str, Any]]:
    """The samples as shown (checks in place) and the key: ``planted`` ids, ``checks``, ``answers`` (distinct
    answers that can carry a check), ``new_answers`` (those never shown before) and ``sightings`` (every key its
    answers are known by). ``statuses`` (tag -> shown as a check) is read and extended; ``seen``: the keys of
    answers earlier inspections showed."""
    names = list(results[0].scores)
    name, found = _candidates(specs, names, results, secret, seen)
    new = _new_tags(found, statuses)
    # Every sample with a checked tag is a check (the same answer to the same gold shows the same score
    # everywhere); no cap, so a sample's status never depends on the other samples sent.
    tags = _checked_tags(new, statuses)
    chosen = [c for c in found if c.tag in tags]
    shown = [sample.model_copy(deep=True) for sample in results]
    # Other rewards are mirrored on checks where they vary; one constant over the report says nothing about
    # correctness, and left as it is it keeps its constant_reward warning.
    varying = [other for other in names if len({r.scores.get(other) for r in results} - {None}) > 1]
    bounds = {other: _bounds(other, results) for other in varying}
    checks = {str(c.id): _show(shown, specs, name, c, bounds) for c in chosen}
    key = {"planted": sorted(c.id for c in chosen), "checks": checks, "reward": name}
    tags_shown = sorted({c.tag for c in found})
    sightings = sorted({k for sample in results for k in sample_keys(sample)})
    return shown, {**key, "answers": len(tags_shown), "new_answers": len(new), "sightings": tags_shown + sightings}


def review_blocker(key: dict[str, Any]) -> str | None:
    """Why no read of a report can open the gate, said before anyone reads it (None: a read can). It depends on
    how many distinct answers the report holds and how many are new, never on which of them are checks (with
    ``MIN_NEW_ANSWERS`` new ones, ``MIN_CHECKS`` of them are)."""
    new = key.get("new_answers")
    if new is None:  # a report stored before checks were drawn this way: its checks may be known
        return "This inspection was made by an earlier version of the gate. Inspect again and read the new report."
    if not key.get("answers", 1):
        return (
            "No attention check can be shown on these samples (no reward gives any sample an extreme score), so a "
            "read cannot be told from agreement. Send samples where the correctness reward both passes and fails."
        )
    if new < MIN_NEW_ANSWERS:
        return (
            f"Only {new} distinct answer{'s' if new != 1 else ''} in this inspection {'was' if new == 1 else 'were'} "
            f"never shown before; a read opens the gate only with at least {MIN_NEW_ANSWERS}, so that its attention "
            "checks are ones no reader has seen (an answer is the same answer to the same gold, whatever the prompt "
            "or wording, and keeps the score it was first shown with). Inspect samples with new answers: other "
            "dataset rows (a model that is mostly right repeats the gold answers it was shown with), or add such "
            "samples to these."
        )
    return None


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
