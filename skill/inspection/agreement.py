"""The blind read's one rule: a reward is trained on when a reader's own judgment, given before any score was
seen, agrees with it.

The reader labels each sample pass, fail or unsure for every role a person can judge (``READ_ROLES``); then
the scores are revealed and every disagreement is named. A read opens the gate when, for every reward of a read
role:

- at least ``MIN_LABELS`` samples carry a decided (pass/fail) blind label;
- no disagreement is left unresolved (fix the reward: a new inspection re-scores the same labels; or amend a
  misread label with its reason, at most ``MAX_AMENDED_SHARE`` of the read);
- Cohen's kappa between the labels **as first submitted** and the reward is at least ``MIN_KAPPA``, with
  both outcomes present on both sides.

Why kappa >= 0.8: on the balanced draw (``inspection.draw``) raw agreement would reward a reader who says
"pass" to everything with about 0.5; kappa gives a constant labeller 0, and a random one a kappa near 0 with a
standard error of about 1/sqrt(n) (0.14 at 50 samples), so 0.8 is over five standard errors away. 0.8 is where
Landis and Koch's scale starts "almost perfect" agreement. Amendments resolve disagreements but never raise the
kappa: it is computed on the first labels. Not resisted: a program that labels by running the reward itself is a
reader whose judgment is the reward's (its review is stamped with reviewer kind ``program``).
"""

from __future__ import annotations

from skill.inspection.schema import Agreement, Disagreement, InspectionReport, Review, SampleResult
from skill.intervals import cohen_kappa
from skill.rewards.spec import RewardSpec, metric_names

READ_ROLES = ("correctness", "format", "judge")  # a person can say pass or fail; shaping rewards are shown after
PASS_SCORE = 0.5  # a score at or above it is the reward saying "pass" (rewards here score 0..1)
MIN_LABELS = 50  # the seed's floor for a reward read
MIN_KAPPA = 0.8
MAX_AMENDED_SHARE = 0.1
# The rule in one sentence: record_review's description, the README and SKILL.md quote it from here.
GATE_RULE = (
    f"The gate opens when at least {MIN_LABELS} samples carry your decided (pass/fail) label, no disagreement with "
    f"a reward is left unresolved (fix the reward, or amend a misread with its reason: at most "
    f"{MAX_AMENDED_SHARE:.0%} of the read), and every reward agrees with your labels as first given at Cohen's "
    f"kappa >= {MIN_KAPPA}."
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
    or to 'unsure'), and each such reward's kappa against the first labels."""
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
            reader.append(first == "pass")
            reward.append(said(score) == "pass")
            if said(score) != first:
                amended = _amended(review, sample.id, spec.role)
                disagreements.append(_disagreement(sample, spec.role, name, score, first, amended))
        kappa = cohen_kappa(reader, reward) if reader else None
        agreement.append(
            Agreement(
                reward=name,
                role=spec.role,
                kappa=None if kappa is None else round(kappa, 4),
                samples=len(reader),
                reader_passes=sum(reader),
                reward_passes=sum(reward),
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


def read_reasons(report: InspectionReport) -> list[str]:
    """Why this read does not open the gate yet (empty: it does), in the order a reader acts on them."""
    review = report.review
    assert review is not None
    roles = report.read_roles
    missing = [s.id for s in report.samples if any(role not in review.labels.get(s.id, {}) for role in roles)]
    if missing:
        return [
            f"{len(report.samples) - len(missing)} of {len(report.samples)} samples carry a blind label for "
            f"{', '.join(roles)}; label the rest (pass, fail or unsure), e.g. samples {missing[:10]}."
        ]
    reasons = []
    unresolved = [d for d in review.disagreements if not d.resolved]
    if unresolved:
        names = "; ".join(describe(d) for d in unresolved[:12])
        more = f" and {len(unresolved) - 12} more" if len(unresolved) > 12 else ""
        reasons.append(
            f"{len(unresolved)} disagreement(s) between the rewards and your blind labels: {names}{more}. For each, "
            "fix the reward (then inspect_rewards with samples_of set to this inspection: your labels are "
            "re-scored, nothing is read again) or, if you misread the sample, amend your label with the reason."
        )
    labelled = max(1, len(review.labels))
    amended = len({amendment.sample_id for amendment in review.amendments})
    if amended > MAX_AMENDED_SHARE * labelled:
        reasons.append(
            f"{amended} samples' labels amended, more than {MAX_AMENDED_SHARE:.0%} of the {labelled} read: "
            "that many misreads means the read is not one. Fix the rewards where they disagree, and read again."
        )
    for agree in review.agreement:
        reasons += _agreement_reasons(agree)
    return reasons


def _agreement_reasons(agree: Agreement) -> list[str]:
    if agree.samples < MIN_LABELS:
        return [
            f"{agree.samples} samples carry a decided (pass/fail) label for {agree.reward}: a read needs "
            f"{MIN_LABELS}. Inspect more samples (or label fewer as unsure)."
        ]
    both = 0 < agree.reader_passes < agree.samples and 0 < agree.reward_passes < agree.samples
    if not both:
        return [
            f"On these samples {agree.reward} said pass {agree.reward_passes} times and you {agree.reader_passes} "
            f"times of {agree.samples}: agreement cannot be told from chance without both outcomes on both sides. "
            "Inspect samples where the model both passes and fails (more prompts, or the route probe's samples)."
        ]
    if agree.kappa is None or agree.kappa < MIN_KAPPA:
        return [
            f"{agree.reward} agrees with your first labels at Cohen's kappa {agree.kappa:.2f}, under {MIN_KAPPA}: "
            "the reward does not judge as you do. Fix it where it disagrees and inspect again with samples_of."
        ]
    return []
