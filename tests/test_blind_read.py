"""The blind read: a reader labels each sample before any score is shown (the scores are sealed until then), then
every disagreement is named, and the gate opens on agreement a constant, random or copying labeller cannot reach
(``inspection.agreement``), at every pass rate.

Honest readers (``blind_reader``: a program that labels by its own check against the reference column and imports
nothing from ``skill.rewards``) pass on every task; readers that do not read fail. Each test prints and checks the
messages a user sees: the draw, the verdict's reasons, the stamp. The module keeps its own state root (what a read
reveals there is never blind again); a test that records labels no honest reader gives records them on a copy of
the report in a state root of its own.
"""

from __future__ import annotations

import importlib.util
import json
import random
from pathlib import Path

import pytest
from blind_reader import read_blind
from rewards_for_tests import SENTINEL_FAIL, SENTINEL_PASS

from skill.data import ADDITION_QUESTION
from skill.errors import SkillError
from skill.inspection.agreement import MAX_P_VALUE, compare, read_reasons
from skill.inspection.digest import inspection_digest, sample_page
from skill.inspection.gate import NOT_REVIEWED, GateClosed, open_gate, record_review, review_stamp
from skill.inspection.render import render_markdown
from skill.inspection.reports import load_report, save_report
from skill.inspection.run import inspect_rewards
from skill.inspection.schema import InspectionReport, InspectionRequest, Review, ReviewRequest, SuppliedSample
from skill.rewards.spec import RewardSpec
from skill.state import STATE_ROOT_ENV

FORMAT = RewardSpec(name="format", role="format", weight=0.2, params={"pattern": "number"})
ADDITION = [FORMAT, RewardSpec(name="exact_match", role="correctness", params={"extract": "last_number"})]
RANDOM_SEEDS = 200


@pytest.fixture(scope="module", autouse=True)
def own_state_root(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(STATE_ROOT_ENV, str(tmp_path_factory.mktemp("blind-read-state")))
        yield


def addition(count: int = 80, seed: int = 1, columns: dict | None = None, per_prompt: int = 1) -> list:
    """Addition answers in four kinds, in turn: the bare sum, a bare wrong sum, the sum in words, no answer
    (so format and correctness differ on half of them). ``per_prompt`` completions share each prompt."""
    rng = random.Random(seed)
    samples = []
    for prompt in range(count // per_prompt):
        a, b = rng.randint(10, 999), rng.randint(10, 999)
        for index in range(prompt * per_prompt, (prompt + 1) * per_prompt):
            completion = [str(a + b), str(a + b + 1 + index % 7), f"The sum is {a + b}.", "no idea"][index % 4]
            samples.append(
                SuppliedSample(
                    prompt=[{"role": "user", "content": ADDITION_QUESTION.format(a=a, b=b)}],
                    completion=completion,
                    columns={"answer": str(a + b), **(columns or {})},
                    group=prompt,
                )
            )
    return samples


def inspect(rewards: list[RewardSpec], samples: list[SuppliedSample]) -> InspectionReport:
    report = inspect_rewards(InspectionRequest(rewards=rewards, samples=samples))
    print(f"\n{report.id}: {report.draw} Read: {', '.join(report.read_roles)}.")
    return report


def review(report: InspectionReport, labels: dict, **extra) -> InspectionReport:
    result = record_review(
        ReviewRequest(report_id=report.id, reviewer="tester", reviewer_kind="program", labels=labels, **extra)
    )
    print(f"verdict {result.verdict}")
    for reason in result.verdict_reasons:
        print(f"  - {reason}")
    if result.verdict == "passed":
        print(f"  {review_stamp(result)}")
    return result


def honest_pass(report: InspectionReport, form: str = "bare") -> InspectionReport:
    result = review(report, read_blind(report, form))
    assert result.verdict == "passed" and result.verdict_reasons == []
    stamp = review_stamp(result)
    assert stamp.startswith(f"reviewed: program tester labelled {len(report.samples)} samples blind (")
    assert all(f"{agree.reward} differs from 0, Fisher p " in stamp for agree in result.review.agreement), stamp
    assert stamp.endswith(f") on supplied samples, not sampled from the policy; inspection {report.id}")
    assert open_gate(report.rewards).inspection_id == result.id
    return result


def on_a_copy(report: InspectionReport, monkeypatch, tmp_path) -> InspectionReport:
    """The whole report (its sealed scores too), unread, stored in a state root of its own: what labels recorded
    on it reveal stays there."""
    whole = load_report(report.id)
    monkeypatch.setenv(STATE_ROOT_ENV, str(tmp_path))
    update = {"review": None, "verdict": "pending", "verdict_reasons": []}
    return save_report(whole.model_copy(update=update, deep=True))


@pytest.fixture(scope="module")
def addition_report() -> InspectionReport:
    return inspect(ADDITION, addition())


def reasons_of(result: InspectionReport) -> str:
    return " ".join(result.verdict_reasons)


# ---- honest readers pass ----------------------------------------------------------------------------


def test_an_honest_reader_passes_on_the_addition_task(addition_report):
    assert addition_report.draw == (
        "60 of 80 samples collected, balanced on exact_match's outcome: 30 of 40 passes and 30 of 40 fails, in "
        "shuffled order."
    )
    assert addition_report.read_roles == ["format", "correctness"] and addition_report.verdict == "pending"
    honest_pass(addition_report)


def yes_no_samples() -> list[SuppliedSample]:
    rng = random.Random(2)
    samples = []
    for index in range(80):
        number = rng.randint(2, 999)
        gold, other = ("yes", "no") if number % 2 == 0 else ("no", "yes")
        completion = [gold, other, f"I think the answer is {gold}", f"Hmm, {other}.", "maybe", gold.title()]
        samples.append(
            SuppliedSample(
                prompt=f"Is {number} even? Reply in one word.",
                completion=completion[index % 6],
                columns={"answer": gold},
                group=index // 4,
            )
        )
    return samples


def test_an_honest_reader_passes_on_a_yes_no_task():
    rewards = [
        RewardSpec(name="format", role="format", weight=0.2, params={"regex": r"(?i)\s*(yes|no)\s*"}),
        RewardSpec(name="exact_match", role="correctness", params={"extract": "regex", "regex": r"(?i)\b(yes|no)\b"}),
    ]
    report = inspect(rewards, yes_no_samples())
    assert "30 of 40 passes and 30 of 40 fails" in report.draw  # two answers only: they repeat, and that is fine
    honest_pass(report)


def multiple_choice_samples() -> list[SuppliedSample]:
    rng = random.Random(3)
    samples = []
    for index in range(80):
        values = rng.sample(range(1, 100), 4)
        gold = "ABCD"[values.index(max(values))]
        other = "ABCD"[(values.index(max(values)) + 1 + index % 3) % 4]
        completion = [
            f"<answer>{gold}</answer>",
            f"<answer>{other}</answer>",
            f"The largest is {max(values)}, so <answer>{gold}</answer>",
            f"It is <answer>{other}</answer>",
            "I am not sure",
        ][index % 5]
        question = "Which is largest? " + " ".join(f"{letter}) {v}" for letter, v in zip("ABCD", values, strict=True))
        samples.append(
            SuppliedSample(prompt=question, completion=completion, columns={"answer": gold}, group=index // 4)
        )
    return samples


def test_an_honest_reader_passes_on_an_a_to_d_multiple_choice_task():
    rewards = [
        RewardSpec(name="format", role="format", weight=0.2, params={"pattern": "answer_tag"}),
        RewardSpec(name="exact_match", role="correctness", params={"extract": "answer_tag"}),
    ]
    report = inspect(rewards, multiple_choice_samples())
    assert "balanced on exact_match's outcome: 30 of 32 passes and 30 of 48 fails" in report.draw
    honest_pass(report, form="answer_tag")


def test_an_honest_reader_passes_on_a_40_row_dataset():
    report = inspect(ADDITION, addition(80, seed=4, per_prompt=2))
    assert len({sample.group for sample in report.samples}) <= 40 and len(report.samples) == 60
    assert report.draw.startswith("60 of 80 samples collected")
    honest_pass(report)


def test_an_honest_reader_passes_on_a_dataset_with_a_constant_column_and_may_say_unsure():
    report = inspect(ADDITION, addition(seed=5, columns={"source": "gsm8k"}))
    assert {sample.columns["source"] for sample in report.samples} == {"gsm8k"}
    labels = read_blind(report)
    unsure = sorted(labels)[:5]  # five samples the reader will not decide: counted, not compared
    for sample_id in unsure:
        labels[sample_id] = {role: "unsure" for role in labels[sample_id]}
    result = review(report, labels)
    assert result.verdict == "passed", result.verdict_reasons
    assert {agree.samples for agree in result.review.agreement} == {55}
    assert "labelled 60 samples blind" in review_stamp(result)


def test_an_honest_reader_passes_on_user_rewards():
    """Rewards named module:function (tests/rewards_for_tests.py), as a user writes them."""
    rewards = [
        RewardSpec(name="rewards_for_tests:just_a_number", role="format", weight=0.2),
        RewardSpec(name="rewards_for_tests:says_the_answer", role="correctness"),
    ]
    report = inspect(rewards, addition(seed=9))
    assert "balanced on says_the_answer's outcome: 30 of 40 passes and 30 of 40 fails" in report.draw
    honest_pass(report)


def test_format_labels_given_after_a_correctness_read_was_revealed_do_not_count():
    """The same samples inspected again with a format reward beside the read one: the correctness labels carry
    over (same ids, same reader) and still count; format labels given now, on samples whose scores were shown,
    are recorded but not counted, so the format reward needs a fresh read."""
    alone = inspect([ADDITION[1]], addition(seed=10))
    honest_pass(alone)
    both = inspect_rewards(
        InspectionRequest(rewards=[FORMAT.model_copy(update={"weight": 0.3}), ADDITION[1]], samples_of=alone.id)
    )
    assert [(s.id, s.completion) for s in both.samples] == [(s.id, s.completion) for s in alone.samples]
    assert both.verdict == "pending" and all(both.review.labels[s.id].keys() == {"correctness"} for s in both.samples)
    result = review(both, read_blind(both))
    assert result.verdict == "failed"
    assert {a.reward: a.samples for a in result.review.agreement} == {"format": 0, "exact_match": 60}
    assert (
        "0 samples carry a decided (pass/fail) label given blind for format (60 were revealed before this read "
        "and do not count): a read needs 50. Inspect fresh samples and read them." in reasons_of(result)
    )


# ---- a read that finds a real reward bug --------------------------------------------------------------


def checked_answers() -> list[SuppliedSample]:
    """Answers followed by the model's own check, '{sum}. Check: {sum} - {b} = {a}': the answer is the sum, and
    a reward reading the last number reads a."""
    rng = random.Random(6)
    samples = []
    for index in range(80):
        a, b = rng.randint(10, 999), rng.randint(10, 999)
        total = a + b
        completion = [
            str(total),
            f"{total}. Check: {total} - {b} = {a}",
            str(total + 1 + index % 5),
            f"{total + 10}. Check: {total + 10} - {b} = {a + 10}",
        ][index % 4]
        samples.append(
            SuppliedSample(
                prompt=[{"role": "user", "content": ADDITION_QUESTION.format(a=a, b=b)}],
                completion=completion,
                columns={"answer": str(total)},
                group=index // 4,
            )
        )
    return samples


CHECKED_FORMAT = FORMAT.model_copy(update={"weight": 0.1})  # a reward set of its own: no other test opens its gate
BUGGY = [CHECKED_FORMAT, ADDITION[1]]
FIXED = [
    CHECKED_FORMAT,
    RewardSpec(name="exact_match", role="correctness", params={"extract": "regex", "regex": r"^\s*(\d+)"}),
]


@pytest.fixture(scope="module")
def bug_found() -> tuple[InspectionReport, InspectionReport]:
    """A read of last_number on checked answers (it disagrees), then the fixed reward on the same samples."""
    first = inspect(BUGGY, checked_answers())
    read = review(first, read_blind(first))
    fixed = inspect_rewards(InspectionRequest(rewards=FIXED, samples_of=first.id))
    print(f"{fixed.id} ({fixed.source}): verdict {fixed.verdict} {fixed.verdict_reasons}")
    return read, fixed


def test_a_read_names_each_disagreement_with_a_real_reward_bug_by_sample(bug_found):
    read, _ = bug_found
    disagreements = read.review.disagreements
    assert read.verdict == "failed" and disagreements  # final: too many to be misreads
    by_id = {sample.id: sample for sample in read.samples}
    for found in disagreements:  # each one a right answer followed by its check, which last_number reads
        sample = by_id[found.sample_id]
        assert "Check:" in sample.completion and sample.completion.startswith(sample.columns["answer"] + ".")
        a = sample.completion.rsplit("= ", 1)[1]
        assert (found.reward, found.reward_said, found.reader_said, found.extracted) == (
            "exact_match",
            "fail",
            "pass",
            a,
        )
    reasons = read.verdict_reasons
    assert reasons[0].startswith(f"exact_match differs from your first labels on {len(disagreements)} of 60 samples")
    assert "Fix it where it disagrees and inspect again with samples_of: your labels are re-scored." in reasons[0]
    assert reasons[1].startswith(f"{len(disagreements)} disagreement(s) between the rewards and your blind labels: ")
    first = disagreements[0]
    assert f"sample {first.sample_id}: exact_match said fail (0, read '{first.extracted}'), you said pass" in reasons[1]
    with pytest.raises(GateClosed):
        open_gate(BUGGY)


def test_the_fixed_reward_passes_on_the_same_labels_without_a_re_read(bug_found):
    read, fixed = bug_found
    assert fixed.source == f"the samples of inspection {read.id} (supplied)"
    assert fixed.verdict == "passed" and fixed.verdict_reasons == []  # no labels sent to this report
    assert fixed.review.carried == {sample.id: read.id for sample in fixed.samples}
    assert [(s.id, s.completion) for s in fixed.samples] == [(s.id, s.completion) for s in read.samples]  # ids kept
    assert [(a.reward, a.disagreeing, a.samples) for a in fixed.review.agreement] == [
        ("format", 0, 60),
        ("exact_match", 0, 60),
    ]
    assert all(a.p_value < 1e-9 for a in fixed.review.agreement)
    assert "reviewed: program tester labelled 60 samples blind" in review_stamp(fixed)


def test_the_fixed_reward_opens_the_gate_after_the_carried_read(bug_found):
    _, fixed = bug_found
    assert open_gate(FIXED).inspection_id == fixed.id


# ---- readers that do not read fail ------------------------------------------------------------------


def test_labelling_every_sample_pass_or_fail_never_passes(addition_report, monkeypatch, tmp_path):
    for said in ("pass", "fail"):
        copy = on_a_copy(addition_report, monkeypatch, tmp_path / said)
        result = review(copy, {sample.id: {"format": said, "correctness": said} for sample in copy.samples})
        assert result.verdict == "failed"  # on first labels: final
        for reward, role in (("format", "format"), ("exact_match", "correctness")):
            reward_passes = sum(sample.scores[reward] >= 0.5 for sample in copy.samples)
            assert (
                f"Your labels for {role} are all '{said}' on 60 samples while {reward} said pass {reward_passes} "
                "times: labels with one outcome cannot show a reading." in reasons_of(result)
            )
        with pytest.raises(GateClosed):
            open_gate(ADDITION)


def random_labels(report: InspectionReport, seed: int) -> dict[int, dict[str, str]]:
    rng = random.Random(seed)
    return {sample.id: {role: rng.choice(("pass", "fail")) for role in report.read_roles} for sample in report.samples}


def test_random_labels_pass_at_a_rate_reported_over_200_seeds(addition_report, monkeypatch, tmp_path):
    passed, p_values = 0, []
    whole = load_report(addition_report.id)
    for seed in range(RANDOM_SEEDS):  # the rule itself, on the report in memory: nothing is written
        report = whole.model_copy(deep=True)
        report.review = Review(reviewer="coin", reviewer_kind="program", labels=random_labels(report, seed))
        report.review.disagreements, report.review.agreement = compare(report)
        passed += read_reasons(report) == ([], [])
        p_values += [agree.p_value for agree in report.review.agreement]
    print(
        f"\nrandom labels: {passed} of {RANDOM_SEEDS} seeds pass (rate {passed / RANDOM_SEEDS:.3f}); Fisher p from "
        f"{min(p_values):.2g} to {max(p_values):.2g}, median {sorted(p_values)[len(p_values) // 2]:.2g} (the gate "
        f"needs <= {MAX_P_VALUE})"
    )
    assert passed == 0 and sum(p <= MAX_P_VALUE for p in p_values) <= 1
    result = review(on_a_copy(addition_report, monkeypatch, tmp_path), random_labels(addition_report, 0))
    assert result.verdict == "failed" and "disagreement(s) between the rewards and your blind labels" in reasons_of(
        result
    )
    assert "agree with exact_match no better than chance would (Fisher's exact test p = " in reasons_of(result)


def test_labels_copied_from_another_rewards_scores_fail(addition_report, monkeypatch, tmp_path):
    """The format reward's outcomes given as correctness labels (by a reader who got the scores, which the seal now
    keeps from anyone before the labels): where format and correctness differ (a wrong bare number, a right answer
    in words) the copy disagrees, and the labels are no read of correctness."""
    copy = on_a_copy(addition_report, monkeypatch, tmp_path)
    said = {sample.id: "pass" if sample.scores["format"] >= 0.5 else "fail" for sample in copy.samples}
    result = review(copy, {i: {"format": label, "correctness": label} for i, label in said.items()})
    agreement = {agree.reward: agree for agree in result.review.agreement}
    assert agreement["format"].disagreeing == 0 and agreement["exact_match"].p_value > MAX_P_VALUE
    assert result.verdict == "failed"
    assert "Your first labels agree with exact_match no better than chance would" in reasons_of(result)
    assert all(d.reward == "exact_match" for d in result.review.disagreements)


def test_amending_every_disagreement_leaves_the_first_labels_verdict(addition_report, monkeypatch, tmp_path):
    copy = on_a_copy(addition_report, monkeypatch, tmp_path)
    labelled = review(copy, random_labels(copy, 0))
    amendments = [
        {"sample_id": d.sample_id, "role": d.role, "label": d.reward_said, "reason": "misread"}
        for d in labelled.review.disagreements
    ]
    result = review(copy, {}, amendments=amendments)
    assert not [d for d in result.review.disagreements if not d.resolved]  # every one resolved...
    assert result.verdict == "failed"  # ...and still no read
    assert "no better than chance would" in reasons_of(result)
    assert [a.p_value for a in result.review.agreement] == [a.p_value for a in labelled.review.agreement]
    # A read report cannot be turned into an unread one to get past its own labels.
    with pytest.raises(SkillError, match="carries 60 samples' blind labels: it was read"):
        review(copy, {}, accept_unread=True, accept_unread_reason="try anyway")


# ---- what stays ----------------------------------------------------------------------------------------


def test_labels_are_never_replaced_and_a_few_misreads_are_amended_with_a_reason(addition_report, monkeypatch, tmp_path):
    copy = on_a_copy(addition_report, monkeypatch, tmp_path)
    honest = read_blind(copy)
    misread = sorted(honest)[:3]
    labels = {
        i: ({**roles, "correctness": "fail" if roles["correctness"] == "pass" else "pass"} if i in misread else roles)
        for i, roles in honest.items()
    }
    with pytest.raises(SkillError, match=r"Labels for unknown sample ids \[60\]"):
        review(copy, {**labels, 60: labels[0]})
    first = review(copy, labels)
    assert first.verdict == "pending" and {d.sample_id for d in first.review.disagreements} == set(misread)
    with pytest.raises(SkillError) as refused:
        review(copy, {misread[0]: honest[misread[0]]})
    assert "already carry blind labels, given before the scores were shown" in str(refused.value)
    assert "send amendments: [{sample_id, role, label, reason}]" in refused.value.fix
    amendments = [
        {"sample_id": i, "role": "correctness", "label": honest[i]["correctness"], "reason": "misread"} for i in misread
    ]
    result = review(copy, {}, amendments=amendments)
    assert result.verdict == "passed", result.verdict_reasons
    assert "3 amended" in review_stamp(result) and result.review.labels[misread[0]] == labels[misread[0]]
    assert [a.reviewer_kind for a in result.review.amendments] == ["program"] * 3


def test_accept_unread_opens_the_gate_stamped_not_reviewed(addition_report, monkeypatch, tmp_path):
    copy = on_a_copy(addition_report, monkeypatch, tmp_path)
    with pytest.raises(SkillError, match="accept_unread needs a reason"):
        record_review(ReviewRequest(report_id=copy.id, reviewer="ana", accept_unread=True))
    with pytest.raises(SkillError, match="cannot come with labels"):
        record_review(
            ReviewRequest(
                report_id=copy.id,
                reviewer="ana",
                accept_unread=True,
                accept_unread_reason="smoke test",
                labels=read_blind(copy),
            )
        )
    unread = record_review(
        ReviewRequest(report_id=copy.id, reviewer="ana", accept_unread=True, accept_unread_reason="smoke test")
    )
    assert unread.verdict == "accepted_unread"
    gate = open_gate(ADDITION)
    assert not gate.reviewed
    assert gate.stamp == f"{NOT_REVIEWED}: accepted unread by human ana (smoke test); inspection {copy.id}"


def test_a_blocking_flag_blocks_an_honest_read_and_an_unread_acceptance():
    rewards = [RewardSpec(name="flawed_rewards:substring_match", role="correctness")]
    report = inspect(rewards, addition(seed=7))
    unread = record_review(
        ReviewRequest(report_id=report.id, reviewer="ana", accept_unread=True, accept_unread_reason="in a hurry")
    )
    result = review(report, read_blind(report))
    assert result.verdict == "failed"
    assert any(r.startswith("Fix the reward: ") and "candidate_list" in r for r in result.verdict_reasons)
    assert unread.verdict == "failed" and unread.verdict_reasons[0].startswith("Fix the reward: ")
    with pytest.raises(GateClosed):
        open_gate(rewards)


# ---- closed to file reads and replays, fair at few passes --------------------------------------------------


def test_no_score_or_extraction_is_on_disk_or_in_a_reply_before_the_labels(tmp_path, monkeypatch):
    """A sentinel reward scoring 0.7316 / 0.2184 and extracting a token found nowhere else: neither appears in any
    file under the state root, nor in any reply, until the labels; then the reveal shows them."""
    monkeypatch.setenv(STATE_ROOT_ENV, str(tmp_path / "state"))
    samples = [
        SuppliedSample(prompt=f"Say token {i}.", completion=f"SENT-{i}-{'AB'[i % 2]}", columns={"answer": "AB"[i % 2]})
        for i in range(70)
    ]
    rewards = [RewardSpec(name="rewards_for_tests:sentinel", role="correctness")]
    report = inspect_rewards(InspectionRequest(rewards=rewards, samples=samples))
    secrets = [f"{SENTINEL_PASS}", f"{SENTINEL_FAIL}", "xtrct", "0.732", "0.218"]

    def leaks(text: str) -> list[str]:
        return [secret for secret in secrets if secret in text]

    replies = {
        "inspect_rewards": report.model_dump_json(),
        "digest": inspection_digest(load_report(report.id)).model_dump_json(),
        "page": sample_page(load_report(report.id), 30).model_dump_json(),
        "resource": render_markdown(load_report(report.id)),
    }
    files = {
        str(path): path.read_bytes().decode(errors="replace")
        for path in (tmp_path / "state").rglob("*")
        if path.is_file()
    }
    assert any(path.endswith(".sealed") for path in files) and any(path.endswith(".html") for path in files)
    assert not {name: leaks(text) for name, text in {**replies, **files}.items() if leaks(text)}
    labels = {s.id: {"correctness": "pass" if s.columns["answer"] == "A" else "fail"} for s in report.samples}
    revealed = record_review(ReviewRequest(report_id=report.id, reviewer="ana", labels=labels))
    assert revealed.verdict == "passed", revealed.verdict_reasons
    assert {SENTINEL_PASS, SENTINEL_FAIL} == {score for s in revealed.samples for score in s.scores.values()}
    assert "xtrct" in Path(revealed.paths["html"]).read_text() and "0.732" in Path(revealed.paths["html"]).read_text()


def resent(revealed: InspectionReport) -> list[SuppliedSample]:
    """The revealed samples made to look new: a trailing space on every prompt, an extra column no reward reads,
    the order shuffled, no groups."""
    shuffled = list(revealed.samples)
    random.Random(11).shuffle(shuffled)
    return [
        SuppliedSample(
            prompt=[{"role": "user", "content": s.prompt[0]["content"] + " "}],
            completion=s.completion,
            columns={**s.columns, "note": "again"},
        )
        for s in shuffled
    ]


def content(sample) -> tuple[str, str]:
    return " ".join(sample.prompt[0]["content"].split()), sample.completion


def test_a_replay_of_revealed_samples_stays_shut(tmp_path, monkeypatch):
    monkeypatch.setenv(STATE_ROOT_ENV, str(tmp_path / "state"))
    samples = addition(seed=21)
    first = inspect(ADDITION, samples)
    labels = {s.id: {"format": "fail", "correctness": "fail"} for s in first.samples}
    shown = review(first, labels)  # every score revealed, and a failed read
    assert shown.verdict == "failed" and all(s.scores for s in shown.samples)
    replay = inspect(ADDITION, resent(shown))
    assert replay.draw.endswith("60 of them revealed before on this state root: their labels will not count.")
    by_content = {content(s): s for s in shown.samples}
    copied = {}
    for sample in replay.samples:  # each label copied from the reveal: what every reward said
        scores = by_content[content(sample)].scores
        copied[sample.id] = {
            "format": "pass" if scores["format"] >= 0.5 else "fail",
            "correctness": "pass" if scores["exact_match"] >= 0.5 else "fail",
        }
    result = record_review(ReviewRequest(report_id=replay.id, reviewer="someone else", labels=copied))
    assert result.verdict == "failed"
    assert len(result.review.seen_before) == 60 and {a.samples for a in result.review.agreement} == {0}
    assert "(60 were revealed before this read and do not count)" in reasons_of(result)
    with pytest.raises(GateClosed):
        open_gate(ADDITION)


def test_a_reader_meets_no_other_readers_labels(tmp_path, monkeypatch):
    """Ana reads 60 samples; Ben inspects 51 fresh ones and 9 of Ana's: nothing of Ana's is carried to him, her
    9 revealed samples do not count, his 51 do, and he cannot write into her read."""
    monkeypatch.setenv(STATE_ROOT_ENV, str(tmp_path / "state"))
    pool = addition(count=160, seed=22)
    anas = inspect(ADDITION, pool[:80])
    assert record_review(ReviewRequest(report_id=anas.id, reviewer="ana", labels=read_blind(anas))).verdict == "passed"
    read_by_ana = {content(s) for s in anas.samples}
    seen = [s for s in pool[:80] if content(s) in read_by_ana][:9]
    fresh = pool[80:131]
    bens = inspect(ADDITION, seen + fresh)
    assert bens.review is None  # no label imposed
    result = record_review(ReviewRequest(report_id=bens.id, reviewer="ben", labels=read_blind(bens)))
    assert sorted(result.review.seen_before) == sorted(s.id for s in bens.samples if content(s) in read_by_ana)
    assert len(result.review.seen_before) == 9
    assert {a.samples for a in result.review.agreement} == {51} and result.verdict == "passed"
    with pytest.raises(SkillError, match="carries the labels of human ana"):
        record_review(
            ReviewRequest(
                report_id=anas.id,
                reviewer="ben",
                labels={},
                amendments=[{"sample_id": 0, "role": "correctness", "label": "pass", "reason": "x"}],
            )
        )


def test_two_honest_misreads_at_six_passes_in_a_hundred_open_after_amending(tmp_path, monkeypatch):
    monkeypatch.setenv(STATE_ROOT_ENV, str(tmp_path / "state"))
    rng, samples = random.Random(23), []
    for index in range(100):
        a, b = rng.randint(10, 999), rng.randint(10, 999)
        samples.append(
            SuppliedSample(
                prompt=[{"role": "user", "content": ADDITION_QUESTION.format(a=a, b=b)}],
                completion=str(a + b if index % 16 == 0 else a + b + 1 + index % 5),
                columns={"answer": str(a + b)},
            )
        )
    report = inspect([ADDITION[1]], samples)
    assert "balanced on exact_match's outcome: 7 of 7 passes and 53 of 93 fails" in report.draw
    labels = read_blind(report)
    misread = [i for i, roles in sorted(labels.items()) if roles["correctness"] == "pass"][:2]
    for i in misread:
        labels[i] = {"correctness": "fail"}
    first = review(report, labels)
    assert first.verdict == "pending"  # not blocked: two misreads of seven passes
    (agree,) = first.review.agreement
    assert (agree.disagreeing, agree.reader_passes, agree.reward_passes) == (2, 5, 7) and agree.p_value < 1e-5
    amended = review(
        report,
        {},
        amendments=[
            {"sample_id": i, "role": "correctness", "label": "pass", "reason": "misread: the sum is right"}
            for i in misread
        ],
    )
    assert amended.verdict == "passed", amended.verdict_reasons


def test_too_few_passes_ask_for_more_samples_before_anyone_reads(tmp_path, monkeypatch):
    monkeypatch.setenv(STATE_ROOT_ENV, str(tmp_path / "state"))
    samples = addition(seed=24)
    rare = [  # 4 right answers in 80
        s if i % 20 == 0 or s.columns["answer"] not in s.completion else s.model_copy(update={"completion": "no idea"})
        for i, s in enumerate(samples)
    ]
    report = inspect([ADDITION[1]], rare)
    flag = next(f for f in report.flags if f.code == "too_few_passes")
    assert flag.severity == "blocking"
    assert flag.message.startswith("exact_match says pass on 4 of the 60 samples drawn (5% of 80 collected): a read")
    assert flag.fix.startswith("Collect about 240 samples of the policy")


def test_the_rule_is_fair_at_every_pass_rate_and_shut_to_non_readers():
    """The simulation of bench/RESULTS.md at a smaller size, with the shipped constants."""
    spec = importlib.util.spec_from_file_location(
        "blind_read_rule", Path(__file__).parent.parent / "bench" / "blind_read_rule.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = module.measure(trials=60)
    print("\n" + "\n".join(module.markdown(result)))
    for misread in ("0%", "1%", "3%"):
        for rate, counts in result["readers"][misread].items():
            assert module.false_block(counts) <= 0.05, (misread, rate, counts)
    for name, by_rate in result["strategies"].items():
        assert module.false_pass(by_rate) <= 0.01, (name, by_rate)
    assert json.dumps(result)  # what bench/run_all.py stores


def test_the_draw_takes_every_unseen_sample_before_a_seen_one():
    from skill.inspection.draw import balanced_draw
    from skill.inspection.schema import SampleResult

    samples = [
        SampleResult(id=i, prompt="p", completion=str(i), scores={"m": float(i % 2)}, total=None) for i in range(100)
    ]
    drawn, how = balanced_draw(samples, [RewardSpec(name="m", role="correctness")], unseen=set(range(40)))
    assert len(drawn) == 60 and set(range(40)) <= set(drawn)
    assert how.endswith("20 of them revealed before on this state root: their labels will not count.")
