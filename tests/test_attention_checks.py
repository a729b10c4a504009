"""Attention checks stay put: a sample keeps the status it was first shown with, whatever it is sent with.

Planting runs directly on scored samples under many secrets (the choice is keyed, so one secret proves little);
the last test goes through inspect_rewards and record_review as a user would.
"""

from __future__ import annotations

import random
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from new_answers import key_labels, pass_review, real_scores
from test_inspection import SOUND, tagged_samples

from skill.errors import SkillError
from skill.inspection.attention import MIN_CHECKS, MIN_NEW_ANSWERS, plant_checks, review_blocker
from skill.inspection.gate import MAX_FAILED_READS_ENV, MAX_FAILED_REVIEWS, open_gate, record_review
from skill.inspection.reports import load_key, load_report
from skill.inspection.run import inspect_rewards
from skill.inspection.schema import InspectionRequest, ReviewRequest, SampleResult
from skill.rewards.spec import RewardSpec
from skill.state import STATE_ROOT_ENV

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
    assert key["new_answers"] >= MIN_NEW_ANSWERS and review_blocker(key) is None
    assert len([i for i in key["planted"] if i >= 10]) >= MIN_CHECKS  # among the new samples


def blocked(report) -> list[str]:
    return [f.message for f in report.flags if f.code == "read_cannot_pass"]


def test_old_answers_take_no_read_and_the_refusal_never_says_which_were_checks():
    samples = tagged_samples(96)
    first = inspect_rewards(InspectionRequest(rewards=SOUND, samples=samples))
    assert not blocked(first)
    planted = set(load_key(first.id)["planted"])
    with_checks = {samples[i].completion for i in planted}
    plain = [s for i, s in enumerate(samples) if i not in planted and s.completion not in with_checks]
    checked = [samples[i] for i in sorted(planted)]
    assert len(plain) >= 50 and checked
    # Old answers alone: one without any check, one holding the checks; each is told the same before a read,
    # and no labelling of either passes (agree with all; disagree exactly where the checks are).
    without = inspect_rewards(InspectionRequest(rewards=SOUND, samples=plain[:60]))
    holding = inspect_rewards(InspectionRequest(rewards=SOUND, samples=plain[: 60 - len(checked)] + checked))
    assert load_key(without.id)["planted"] == [] and load_key(holding.id)["planted"]
    assert blocked(without) == blocked(holding) != []
    agreed = record_review(
        ReviewRequest(report_id=without.id, reviewer="bot", labels={s.id: True for s in without.samples})
    )
    spotted = {s.id: s.id not in load_key(holding.id)["planted"] for s in holding.samples}
    found = record_review(ReviewRequest(report_id=holding.id, reviewer="bot", labels=spotted))
    assert agreed.verdict == found.verdict == "failed" and agreed.verdict_reasons == found.verdict_reasons
    assert found.review_attempts == 0  # not counted as a wrong read: there was nothing a read could pass
    # With enough new answers the same old samples are readable again, and a read passes.
    again = inspect_rewards(InspectionRequest(rewards=SOUND, samples=plain[:20] + tagged_samples(60)))
    assert not blocked(again) and load_key(again.id)["new_answers"] >= MIN_NEW_ANSWERS
    pass_review(again)


def test_copies_of_one_answer_take_no_read():
    one = tagged_samples(6)[0]
    wrong = random.randint(10**5, 10**6)  # an answer never sent before, sixty times in sixty wordings
    copies = [
        one.model_copy(update={"completion": f"<think>Way {w}.</think><answer>{wrong}</answer>"})
        for w in "abcdefghijklmnopqrstuvwxyz" * 3
    ]
    report = inspect_rewards(InspectionRequest(rewards=SOUND, samples=copies[:60]))
    assert "Only 1 distinct answer" in blocked(report)[0]
    for labels in ({s.id: False for s in report.samples}, {s.id: True for s in report.samples}):
        assert record_review(ReviewRequest(report_id=report.id, reviewer="bot", labels=labels)).verdict == "failed"


def test_a_run_keeps_the_inspection_it_started_on_when_another_passes_meanwhile():
    rewards = [SOUND[0].model_copy(update={"weight": 0.23}), SOUND[1]]  # a reward set no other test passes
    first = pass_review(inspect_rewards(InspectionRequest(rewards=rewards, samples=tagged_samples())))
    later = pass_review(inspect_rewards(InspectionRequest(rewards=rewards, samples=tagged_samples())))
    assert open_gate(rewards).inspection_id == later.id  # a new run starts on the newest
    assert open_gate(rewards, preferred=first.id).inspection_id == first.id  # the training process of an older one
    assert open_gate(rewards, preferred="insp-gone").inspection_id == later.id
    unread = inspect_rewards(InspectionRequest(rewards=rewards, samples=tagged_samples()))
    record_review(ReviewRequest(report_id=unread.id, reviewer="bot", accept_unread=True, accept_unread_reason="t"))
    assert open_gate(rewards, preferred=unread.id).inspection_id == later.id  # a read beats an unread one


def test_the_skill_and_the_readme_state_the_minimum_of_new_answers():
    root = Path(__file__).resolve().parent.parent
    for name in ("SKILL.md", "README.md"):
        text = " ".join((root / name).read_text().split())
        assert f"at least {MIN_NEW_ANSWERS} distinct answers" in text, name


def test_how_a_report_is_composed_does_not_say_which_answers_are_checks():
    """Three new answers the gold decides among seven replies with no answer: with decided answers drawn first, those
    three would always be the checks. Drawn from all ten new answers, a guess at them is right about 1 in 120."""
    nonsense = [
        SampleResult(
            id=0,
            prompt=[{"role": "user", "content": "q"}],
            completion=f"no idea, {word}",
            columns={"answer": "42"},
            scores={NAMES[0]: 0.0, NAMES[1]: 0.0},
            total=None,
            extracted={NAMES[1]: None},
        )
        for word in "abcdefg"
    ]
    decided = [
        r.model_copy(update={"completion": f"<answer>{n}</answer>", "extracted": {NAMES[1]: str(n)}})
        for r, n in zip(scored(3, seed=4), (5001, 5002, 5003), strict=True)
    ]
    results = [r.model_copy(update={"id": i}) for i, r in enumerate(decided + nonsense)]
    guessed = 0
    for trial in range(240):
        _shown, key = plant_checks(SPECS, results, trial.to_bytes(4, "big") * 8, {})
        assert key["new_answers"] == 10 and len(key["planted"]) >= MIN_CHECKS
        guessed += key["planted"] == [0, 1, 2]
    assert guessed <= 8  # 2 expected at 1 in 120


def test_concurrent_reviews_are_counted_one_by_one():
    report = inspect_rewards(InspectionRequest(rewards=SOUND, samples=tagged_samples()))
    agree_all = ReviewRequest(report_id=report.id, reviewer="bot", labels={s.id: True for s in report.samples})

    def attempt(_):
        try:
            return record_review(agree_all).verdict
        except SkillError:
            return "refused"

    with ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(attempt, range(16)))
    assert sorted(set(outcomes)) == ["failed", "refused"] and outcomes.count("failed") == MAX_FAILED_REVIEWS
    assert load_report(report.id).review_attempts == MAX_FAILED_REVIEWS


def test_failed_reads_are_capped_per_checked_reward_whatever_the_weights(tmp_path, monkeypatch):
    monkeypatch.setenv(STATE_ROOT_ENV, str(tmp_path))
    monkeypatch.setenv(MAX_FAILED_READS_ENV, "4")

    def inspected(weight):  # another reward set each time: only the weights differ
        rewards = [SOUND[0].model_copy(update={"weight": weight}), SOUND[1]]
        return inspect_rewards(InspectionRequest(rewards=rewards, samples=tagged_samples()))

    for weight in (0.2, 0.0):  # the second set also carries a reward at weight 0: it counts for every reward
        report = inspected(weight)
        for _ in range(2):
            labels = {s.id: True for s in report.samples}
            assert record_review(ReviewRequest(report_id=report.id, reviewer="bot", labels=labels)).verdict == "failed"
    report = inspected(0.22)
    with pytest.raises(SkillError, match="did not match a read 4 times in the last 24 hours"):
        record_review(ReviewRequest(report_id=report.id, reviewer="bot", labels=key_labels(report)))
    unread = ReviewRequest(report_id=report.id, reviewer="bot", accept_unread=True, accept_unread_reason="t")
    assert record_review(unread).verdict == "accepted_unread"


def test_the_figures_a_reader_sees_are_of_the_scores_shown():
    """Statistics of the real scores beside the shown ones would say where the checks are (mean x n minus the sum
    shown is what the checks changed); the report's figures are of the scores as shown."""
    report = inspect_rewards(InspectionRequest(rewards=SOUND, samples=tagged_samples()))
    checked = load_key(report.id)["reward"]
    shown = [s.scores[checked] for s in report.samples]
    assert load_key(report.id)["planted"] and report.stats[checked].mean == pytest.approx(sum(shown) / len(shown))


def test_a_report_stored_without_checks_takes_no_read():
    assert review_blocker({"planted": [], "checks": {}, "reward": "exact_match"}) is not None  # older keys
    assert review_blocker({"planted": [3], "checks": {}, "reward": "exact_match"}) is not None
    assert review_blocker({"planted": [3], "answers": 12, "new_answers": 12}) is None


def test_an_unreadable_record_of_shown_answers_is_named_not_reset(tmp_path, monkeypatch):
    monkeypatch.setenv(STATE_ROOT_ENV, str(tmp_path))
    (tmp_path / "inspections").mkdir()
    (tmp_path / "inspections" / ".attention-shown.json").write_text("{torn")
    with pytest.raises(SkillError, match="attention-shown.json .* is unreadable"):
        inspect_rewards(InspectionRequest(rewards=SOUND, samples=tagged_samples()))
    assert not list((tmp_path / "inspections").glob("insp-*"))  # nothing stored


def test_an_answer_is_read_once_a_later_inspection_of_it_voids_the_earlier_read():
    samples = tagged_samples()
    first = inspect_rewards(InspectionRequest(rewards=SOUND, samples=samples))
    # Another reward set on the same samples, checked on another reward (so other tags): its flags and probes come
    # from the real scores of those answers. Reworded prompts and a renamed gold column change nothing.
    moved = [s.model_copy(update={"columns": {"gold": s.columns["answer"]}}) for s in reworded(samples[:55])]
    inspect_rewards(InspectionRequest(rewards=[SOUND[0]], samples=moved))
    late = record_review(ReviewRequest(report_id=first.id, reviewer="bot", labels=key_labels(first)))
    assert late.verdict == "failed" and late.review_attempts == 0
    assert "shown again in a later inspection" in " ".join(late.verdict_reasons)


def reworded(samples):
    """The same samples, their prompts worded a little differently."""
    return [
        sample.model_copy(update={"prompt": [{"role": "user", "content": sample.prompt[0]["content"] + "?"}]})
        for sample in samples
    ]


def test_probes_the_rewards_withstood_do_not_say_which_sample_they_were_built_on():
    report = inspect_rewards(InspectionRequest(rewards=SOUND, samples=tagged_samples()))
    held = [probe for probe in report.probe_results if not probe.hacked]
    assert held and all(p.completion == "" and p.reference_score is None and p.total_bar is None for p in held)


def test_a_second_correctness_reward_is_shown_as_the_first_on_every_check():
    """Two rewards that judge the same answers: where the checked one shows a wrong score, the other is mirrored
    too, so comparing them points at no check (they agree on a sample exactly where they really agree)."""
    twin = RewardSpec(name="exact_match", role="correctness", weight=0.0, params={"extract": "last_number"})
    rewards = [SOUND[0], RewardSpec(name="math", role="correctness"), twin]
    report = inspect_rewards(InspectionRequest(rewards=rewards, samples=tagged_samples()))
    math, exact = real_scores(report, "math"), real_scores(report, "exact_match")
    assert load_key(report.id)["planted"]
    for sample, real_math, real_exact in zip(report.samples, math, exact, strict=True):
        assert (sample.scores["math"] == sample.scores["exact_match"]) == (real_math == real_exact), sample.id


def test_answers_shown_under_another_reward_set_first_are_not_new():
    samples = tagged_samples()
    inspect_rewards(InspectionRequest(rewards=[RewardSpec(name="math", role="correctness")], samples=samples))
    later = inspect_rewards(InspectionRequest(rewards=SOUND, samples=samples))
    assert blocked(later) and load_key(later.id)["new_answers"] < MIN_NEW_ANSWERS


def test_a_gold_written_another_way_does_not_make_old_answers_new():
    """$1250, 1250.0 and 1250 dollars score alike: written another way (and the replies reworded around the same
    answers), a gold must not buy the same answers new checks (reports of them, compared, would say which were)."""
    samples = tagged_samples()
    inspect_rewards(InspectionRequest(rewards=SOUND, samples=samples))
    for written in ("${}", "{}.0", "{} dollars"):
        moved = [
            s.model_copy(
                update={"columns": {"answer": written.format(s.columns["answer"])}, "completion": f"So: {s.completion}"}
            )
            for s in samples
        ]
        again = inspect_rewards(InspectionRequest(rewards=SOUND, samples=reworded(moved)))
        assert blocked(again) and load_key(again.id)["new_answers"] == 0, written


def test_text_after_a_boxed_answer_does_not_make_it_new():
    """A reward reading \\boxed{} scores "\\boxed{X} Checked N times." as it scores "\\boxed{X}": the trailing number
    must not give the same answers new checks (reports of them, compared, would say what they really score)."""
    boxed = RewardSpec(name="exact_match", role="correctness", params={"extract": "boxed"})
    plain = [s.model_copy(update={"completion": f"\\boxed{{{stated}}}"}) for s, stated in answered(tagged_samples())]
    for times in (1, 2):
        varied = [s.model_copy(update={"completion": f"{s.completion} Checked {times} times."}) for s in plain]
        inspect_rewards(InspectionRequest(rewards=[boxed], samples=varied))
    again = inspect_rewards(InspectionRequest(rewards=[boxed], samples=plain))
    assert blocked(again) and load_key(again.id)["new_answers"] == 0


def answered(samples):
    """Each sample with the number it ends on (its answer, tagged or not)."""
    return [(s, re.findall(r"\d+", s.completion)[-1]) for s in samples]
