"""The blind read's one rule: a reward is trained on when a reader's own judgment, given before any score was
seen, agrees with it beyond chance and differs from it rarely.

The reader labels each sample pass, fail or unsure for every role a person can judge (``READ_ROLES``); then
the scores of the labelled samples are revealed and every disagreement is named. A read opens the gate when, for
every reward of a read role, on the labels **as first given, blind** (a label given after the sample's content
had been revealed on this state root is recorded, never counted):

- at least ``MIN_LABELS`` samples carry a decided (pass/fail) label;
- the labels agree with the reward beyond chance: Fisher's exact test, p <= ``MAX_P_VALUE`` (not asked of a
  reward other than the primary one, the reward the draw balances on, when it gives an outcome fewer than
  ``MIN_EACH_OUTCOME`` times: ``short_of_an_outcome``);
- they differ from it on at most ``MAX_DISAGREEING_SHARE`` of those samples;
- and each difference is resolved: the reward fixed (a new inspection with ``samples_of`` re-scores the same
  labels) or the misread amended with its reason. Amendments resolve; they never change the statistic.

Why this test and not Cohen's kappa (the rule before): on a read with 6 passes in 60, two honest misreads of
passes give kappa 0.78, under any usable bar, while the chance that labels unrelated to the reward agree that
well is 3e-5. Fisher's test asks only "are these labels related to the reward?", which is what separates a
reader from a constant, random or copied labeller at every pass rate; the disagreement share asks "does the
reward judge as the reader does?". A read needs ``MIN_EACH_OUTCOME`` samples of each outcome of the primary
reward (the draw takes them; fewer in the pool is a blocking flag that asks for more samples) so an honest
reader's misreads cannot sink it: with 3% misreads and 6 of one outcome in 60, the rule fails a read 0.4% of
the time.
The simulated error rates, for readers and for non-reading strategies, are in ``bench/RESULTS.md``
(``bench/blind_read_rule.py``). Not resisted: a program that labels by running the reward itself is a reader
whose judgment is the reward's (its review is stamped with reviewer kind ``program``).
"""

from __future__ import annotations

from skill.inspection.schema import Agreement, Disagreement, InspectionReport, Review, SampleResult
from skill.intervals import MAX_DISAGREEING_SHARE, fisher_agreement_p
from skill.rewards.spec import RewardSpec, metric_names

READ_ROLES = ("correctness", "format", "judge")  # a person can say pass or fail; shaping rewards are shown after
PASS_SCORE = 0.5  # a score at or above it is the reward saying "pass" (rewards here score 0..1)
MIN_LABELS = 50  # the seed's floor for a reward read
MAX_P_VALUE = 0.001  # a non-reading labeller passes at most 1 time in 1,000 reads
MIN_EACH_OUTCOME = 6  # the fewest passes (and fails) per reward where 3% misreads fail a read of 60 under 1%
# The rule in one sentence: record_review's description, the README and SKILL.md quote it from here.
GATE_RULE = (
    f"The gate opens when at least {MIN_LABELS} samples carry your pass/fail label given blind and, per reward you "
    f"judge, those first labels agree with it beyond chance (Fisher's exact p <= {MAX_P_VALUE}; waived for a second "
    f"reward giving an outcome under {MIN_EACH_OUTCOME} times), differ on at most {MAX_DISAGREEING_SHARE:.0%}, and "
    "every difference is resolved: the reward fixed (then samples_of) or your misread amended with its reason."
)
# What keeps it shut whatever the labels, in one sentence: record_review's description quotes it.
GATE_FINAL = (
    "Blocking flags keep it shut whatever the labels, and a failed report is final: fix the reward and inspect "
    "again with samples_of (your labels are re-scored), or read fresh samples."
)


def read_roles(rewards: list[RewardSpec]) -> list[str]:
    """The roles the reader labels, in the order the rewards name them.

    >>> read_roles([RewardSpec(name="format", role="format"), RewardSpec(name="exact_match", role="correctness"),
    ...             RewardSpec(name="length_penalty", role="shaping")])
    ['format', 'correctness']
    """
    return list(dict.fromkeys(spec.role for spec in rewards if spec.role in READ_ROLES))


def said(score: float) -> str:
    """What a reward's score says: 'pass' at or above PASS_SCORE.

    >>> said(1.0), said(0.2)
    ('pass', 'fail')
    """
    return "pass" if score >= PASS_SCORE else "fail"


def _amended(review: Review, sample_id: int, role: str) -> str | None:
    labels = [a.label for a in review.amendments if a.sample_id == sample_id and a.role == role]
    return labels[-1] if labels else None


def compare(report: InspectionReport) -> tuple[list[Disagreement], list[Agreement]]:
    """Every disagreement between a reward of a read role and the reader's label (resolved when amended to agree
    or to 'unsure'), and each such reward's agreement with the first labels given blind."""
    review = report.review
    assert review is not None
    disagreements, agreement = [], []
    for spec, name in metric_names(report.rewards):  # scores are kept under the name TRL logs
        if spec.role not in READ_ROLES:
            continue
        reader, reward = [], []
        for sample in report.samples:
            first = review.labels.get(sample.id, {}).get(spec.role)
            score = sample.scores.get(name)
            if first not in ("pass", "fail") or score is None:
                continue
            if said(score) != first:
                amended = _amended(review, sample.id, spec.role)
                disagreements.append(_disagreement(sample, spec.role, name, score, first, amended))
            if spec.role not in review.seen_before.get(sample.id, []):
                reader.append(first == "pass")
                reward.append(said(score) == "pass")
        agreement.append(
            Agreement(
                reward=name,
                role=spec.role,
                samples=len(reader),
                reader_passes=sum(reader),
                reward_passes=sum(reward),
                disagreeing=sum(a != b for a, b in zip(reader, reward, strict=True)),
                p_value=float(f"{fisher_agreement_p(reader, reward):.3g}") if reader else 1.0,
            )
        )
    return disagreements, agreement


def _disagreement(
    sample: SampleResult, role: str, name: str, score: float, first: str, amended: str | None
) -> Disagreement:
    return Disagreement(
        sample_id=sample.id,
        reward=name,
        role=role,
        reward_said=said(score),  # type: ignore[arg-type]  # 'pass' or 'fail'
        score=score,
        reader_said=first,  # type: ignore[arg-type]  # a decided label
        extracted=sample.extracted.get(name),
        resolved=amended is not None and amended != first and amended in (said(score), "unsure"),
    )


def describe(disagreement: Disagreement) -> str:
    """One disagreement as the reveal names it.

    >>> describe(Disagreement(sample_id=12, reward="exact_match", role="correctness", reward_said="fail",
    ...                       score=0.0, reader_said="pass", extracted="3"))
    "sample 12: exact_match said fail (0, read '3'), you said pass"
    """
    read = f", read {disagreement.extracted!r}" if disagreement.extracted is not None else ""
    return (
        f"sample {disagreement.sample_id}: {disagreement.reward} said {disagreement.reward_said} "
        f"({disagreement.score:g}{read}), you said {disagreement.reader_said}"
    )


def read_names(rewards: list[RewardSpec]) -> list[str]:
    """The names (as scores are kept) of the rewards a reader judges, by role: the first one is the reward the draw
    balances on and the read's statistic rests on.

    >>> read_names([RewardSpec(name="format", role="format"), RewardSpec(name="exact_match", role="correctness")])
    ['exact_match', 'format']
    """
    return [name for role in READ_ROLES for spec, name in metric_names(rewards) if spec.role == role]


def short_of_an_outcome(report: InspectionReport) -> set[str]:
    """The read rewards, other than the one the draw balances on, with fewer than ``MIN_EACH_OUTCOME`` of an
    outcome among the samples read (a format every sample already follows, say): chance agreement with them cannot
    be told from a read, so Fisher's test is not asked of them (the primary reward carries it); the share of
    differences and each difference's resolution still are."""
    short = set()
    for name in read_names(report.rewards)[1:]:
        outcomes = [said(s.scores[name]) for s in report.samples if s.scores.get(name) is not None]
        if min(outcomes.count("pass"), outcomes.count("fail")) < MIN_EACH_OUTCOME:
            short.add(name)
    return short


def summarize(agree: Agreement) -> str:
    """One reward's agreement with the first labels given blind, as every face shows it.

    >>> print(summarize(Agreement(reward="exact_match", role="correctness", samples=60, reader_passes=4,
    ...                           reward_passes=6, disagreeing=2, p_value=3.1e-05)))
    exact_match (correctness): differs from 2 of 60 first labels given blind, Fisher p 3.1e-05 (it said pass 6 \
times, you 4)
    """
    return (
        f"{agree.reward} ({agree.role}): differs from {agree.disagreeing} of {agree.samples} first labels given "
        f"blind, Fisher p {agree.p_value:.2g} (it said pass {agree.reward_passes} times, you {agree.reader_passes})"
    )


def read_reasons(report: InspectionReport) -> tuple[list[str], list[str]]:
    """Why this read does not open the gate yet, in the order a reader acts on them: what is still to do (labels,
    unresolved disagreements), and what is final (the first labels' statistic). Both empty: it opens."""
    review = report.review
    assert review is not None
    roles = report.read_roles
    missing = [s.id for s in report.samples if any(role not in review.labels.get(s.id, {}) for role in roles)]
    if missing:
        return [
            f"{len(report.samples) - len(missing)} of {len(report.samples)} samples carry a blind label for "
            f"{', '.join(roles)}; label the rest (pass, fail or unsure), e.g. samples {missing[:10]}."
        ], []
    final = []
    short = short_of_an_outcome(report)
    for agree in review.agreement:
        seen = sum(agree.role in roles for roles in review.seen_before.values())
        final += _agreement_reasons(agree, seen, agree.reward in short)
    unresolved = [d for d in review.disagreements if not d.resolved]
    if not unresolved:
        return [], final
    names = "; ".join(describe(d) for d in unresolved[:12])
    more = f" and {len(unresolved) - 12} more" if len(unresolved) > 12 else ""
    named = f"{len(unresolved)} disagreement(s) between the rewards and your blind labels: {names}{more}."
    if final:  # amendments cannot help: the reward is to be fixed
        return [], [*final, named]
    return [
        f"{named} For each, fix the reward (then inspect_rewards with samples_of set to this inspection: your "
        "labels are re-scored, nothing is read again) or, if your label was wrong (you misread the sample, or "
        "judged it by a rule other than the task's), amend it with the reason."
    ], []


def _agreement_reasons(agree: Agreement, seen_before: int, short: bool) -> list[str]:
    """What the first labels given blind say against one reward (final: labels are never replaced); a reward
    ``short`` of an outcome is held to the count and the share of differences, not to Fisher's test."""
    if agree.samples < MIN_LABELS:
        seen = f" ({seen_before} were revealed before this read and do not count)" if seen_before else ""
        return [
            f"{agree.samples} samples carry a decided (pass/fail) label given blind for {agree.reward}{seen}: a read "
            f"needs {MIN_LABELS}. Inspect fresh samples and read them."
        ]
    if not short and agree.reader_passes in (0, agree.samples):
        said_all = "pass" if agree.reader_passes else "fail"
        return [
            f"Your labels for {agree.role} are all '{said_all}' on {agree.samples} samples while {agree.reward} said "
            f"pass {agree.reward_passes} times: labels with one outcome cannot show a reading. Read a fresh "
            "inspection and judge each sample."
        ]
    if not short and agree.p_value > MAX_P_VALUE:
        return [
            f"Your first labels agree with {agree.reward} no better than chance would (Fisher's exact test p = "
            f"{agree.p_value:.2g}, over {MAX_P_VALUE}; it said pass {agree.reward_passes} times and you "
            f"{agree.reader_passes} of {agree.samples}): either the samples were not read, or the reward judges "
            "something else. Fix it where it disagrees and inspect again with samples_of."
        ]
    if agree.disagreeing > MAX_DISAGREEING_SHARE * agree.samples:
        return [
            f"{agree.reward} differs from your first labels on {agree.disagreeing} of {agree.samples} samples, more "
            f"than {MAX_DISAGREEING_SHARE:.0%}: it does not judge as you do. Fix it where it disagrees and inspect "
            "again with samples_of: your labels are re-scored."
        ]
    return []
