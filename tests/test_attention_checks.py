"""Attention checks stay put: a sample keeps the status it was first shown with, whatever it is sent with.

Planting runs directly on scored samples under many secrets (the choice is keyed, so one secret proves little);
the last test goes through inspect_rewards and record_review as a user would.
"""

from __future__ import annotations

import random

from test_inspection import SOUND, tagged_samples

from skill.inspection.attention import MIN_CHECKS, plant_checks
from skill.inspection.gate import record_review
from skill.inspection.reports import load_key
from skill.inspection.run import inspect_rewards
from skill.inspection.schema import InspectionRequest, ReviewRequest, SampleResult

SPECS = SOUND
NAMES = [spec.name for spec in SPECS]


def scored(count: int, seed: int) -> list[SampleResult]:
    """Addition answers in answer tags, right or off by a little, as exact_match and format score them."""
    rng = random.Random(seed)
    results = []
    for index in range(count):
        gold = rng.randint(10, 99)
        answer = rng.choice([gold, gold, gold + 1, gold - 3])
        results.append(
            SampleResult(
                id=index,
                prompt=[{"role": "user", "content": f"q{index}"}],
                completion=f"<think>sum</think>\n<answer>{answer}</answer>",
                columns={"answer": str(gold)},
                scores={NAMES[0]: 1.0, NAMES[1]: float(answer == gold)},
                total=None,
                extracted={NAMES[1]: str(answer)},
            )
        )
    return results


def shown_scores(results: list[SampleResult], secret: bytes, statuses: dict[str, bool]) -> dict[str, float]:
    """Each sample's shown correctness score, by its content (ids change between requests)."""
    shown, _ = plant_checks(SPECS, [r.model_copy(update={"id": i}) for i, r in enumerate(results)], secret, statuses)
    return {f"{s.columns['answer']}|{s.completion}": s.scores[NAMES[1]] for s in shown}


def test_a_sample_shows_the_same_score_in_every_report_that_holds_it():
    base, more = scored(60, seed=1), scored(40, seed=2)
    for trial in range(50):
        secret, statuses = bytes([trial]) * 32, {}
        first = shown_scores(base, secret, statuses)
        assert (
            sum(
                first[k] != float(r.scores[NAMES[1]])
                for k, r in ((f"{r.columns['answer']}|{r.completion}", r) for r in base)
            )
            >= MIN_CHECKS
        )
        for variant in (base, base[:55], base[5:], base + more, list(reversed(base)), base[::2] + more):
            again = shown_scores(variant, secret, statuses)
            assert {k: v for k, v in again.items() if k in first} == {k: v for k, v in first.items() if k in again}


def test_new_samples_sent_with_old_ones_still_get_checks():
    secret, statuses = b"k" * 32, {}
    shown_scores(scored(60, seed=1), secret, statuses)
    mixed = scored(60, seed=1)[:10] + scored(50, seed=3)
    shown, key = plant_checks(SPECS, [r.model_copy(update={"id": i}) for i, r in enumerate(mixed)], secret, statuses)
    assert len(key["planted"]) >= MIN_CHECKS and not key["only_shown_before"]


def test_a_report_of_old_samples_without_a_check_asks_for_the_earlier_report_or_new_samples():
    samples = tagged_samples(96, seed=7)
    first = inspect_rewards(InspectionRequest(rewards=SOUND, samples=samples))
    planted = set(load_key(first.id)["planted"])
    rest = [
        s
        for i, s in enumerate(samples)
        if i not in planted and samples[i].completion not in {samples[p].completion for p in planted}
    ]
    assert len(rest) >= 50
    second = inspect_rewards(InspectionRequest(rewards=SOUND, samples=rest[:100]))
    key = load_key(second.id)
    assert key["planted"] == [] and key["only_shown_before"]
    agreed = record_review(
        ReviewRequest(report_id=second.id, reviewer="bot", labels={s.id: True for s in second.samples})
    )
    assert agreed.verdict == "failed"
    assert any("shown in an earlier one" in reason for reason in agreed.verdict_reasons)
