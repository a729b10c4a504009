"""The one gate policy: training starts only on rewards whose current code has an opening inspection.

``open_gate`` is called wherever training can start: a new run and a resumed run (``runs.jobs``), and
the training process itself before it builds the trainer (``runs.worker``, in a fresh interpreter).
``emit_grpo_config`` asks the same question to record the answer in the recipe's provenance. It keys on
the fingerprint (``rewards.fingerprint``) of the rewards with the weights TRL will use: spec, weight,
params, every local source file the reward code imports, library versions. A reward edited since, a
weight changed by an override, a helper module changed, all close the gate.

A report opens the gate two ways:

- **passed**: a blind read (``inspection.agreement`` states the rule) with no blocking flag, on the reward code
  unchanged since;
- **accepted_unread**: an explicit, separately named acknowledgement (``accept_unread`` with a reason)
  that the rewards are trained on without a read. It never clears a blocking flag, and it is stamped
  "reward not reviewed" on the recipe, the run's status, its metrics header and the model card.

``record_review`` takes the blind labels (first call), then amendments after the reveal (later calls); what it
reveals is noted on the state root (``inspection.revealed``), so a revealed sample's later labels never count.
Owns: ``record_review``, ``carry_read``, ``open_gate``, the passed index, the stamps. May import:
``inspection`` (agreement, render, revealed, reports, schema), ``rewards``, ``state``, ``errors``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from skill.errors import SkillError
from skill.grpo_fields import GRPOFields
from skill.inspection.agreement import compare, read_reasons
from skill.inspection.render import is_revealed, samples_origin, visible
from skill.inspection.reports import load_report, reports_dir, save_report, stored_reports
from skill.inspection.revealed import content_key, record_revealed, revealed_keys
from skill.inspection.schema import Amendment, GateDecision, InspectionReport, Review, ReviewRequest
from skill.rewards.fingerprint import effective_rewards, reward_fingerprint
from skill.rewards.spec import RewardSpec
from skill.state import exclusive_lock, write_atomically

NOT_REVIEWED = "reward not reviewed"
OPENING = ("passed", "accepted_unread")


class GateClosed(SkillError):
    """No inspection opens the gate for these rewards (as opposed to a request that is itself wrong)."""


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def _check_request(request: ReviewRequest, report: InspectionReport) -> None:
    if not request.reviewer.strip():
        raise SkillError("The review has no reviewer.", "Send the reviewer's name (a person, an agent or a program).")
    known = {sample.id for sample in report.samples}
    unknown = sorted(set(request.labels) - known)
    if unknown:
        raise SkillError(f"Labels for unknown sample ids {unknown[:10]}.", f"Send ids between 0 and {max(known)}.")
    wrong_roles = sorted({role for labels in request.labels.values() for role in labels} - set(report.read_roles))
    if wrong_roles:
        raise SkillError(
            f"Labels for role(s) {wrong_roles}: this report reads {report.read_roles}.",
            "Label each sample for the report's read_roles only (shaping rewards are not labelled).",
        )
    if request.accept_unread and (request.labels or request.amendments):
        raise SkillError(
            "accept_unread is the acknowledgement that nothing was read; it cannot come with labels or amendments.",
            "Send either labels from a read, or accept_unread=true with accept_unread_reason alone.",
        )
    if request.accept_unread and not request.accept_unread_reason.strip():
        raise SkillError(
            "accept_unread needs a reason: it is stamped on the recipe, the run and the model card.",
            "Send accept_unread_reason saying why these rewards are trained on without a read.",
        )
    if not (request.accept_unread or request.labels or request.amendments):
        raise SkillError(
            "The review holds no labels, amendments or accept_unread.",
            "Send labels: {sample id: {role: 'pass' | 'fail' | 'unsure'}} for every sample, by your own judgment.",
        )


def review_stamp(report: InspectionReport) -> str:
    """What a run on these rewards shows: 'reviewed: ...', 'reward not reviewed: ...' or 'no review'."""
    review = report.review
    if review is None:
        return "no review"
    if report.verdict == "accepted_unread":
        return (
            f"{NOT_REVIEWED}: accepted unread by {review.reviewer_kind} {review.reviewer} "
            f"({review.accept_unread_reason.strip()}); inspection {report.id}"
        )
    agreement = ", ".join(
        f"{a.reward} differs from {a.disagreeing}, Fisher p {a.p_value:.2g}" for a in review.agreement
    )
    blind = sum(any(r not in review.seen_before.get(i, []) for r in labels) for i, labels in review.labels.items())
    return (
        f"reviewed: {review.reviewer_kind} {review.reviewer} labelled {blind} samples blind "
        f"({agreement}; {len(review.amendments)} amended) {samples_origin(report)}; inspection {report.id}"
    )


def record_review(request: ReviewRequest) -> InspectionReport:
    """Record a blind read and decide the gate (see ``inspection.agreement`` for the rule).

    The first call sends ``labels`` (your own pass/fail/unsure per read role, no score seen); the answer reveals
    the labelled samples' scores and every disagreement. Later calls label samples still unlabelled, or send
    ``amendments`` (a misread, with the reason). A label once given is never replaced: it is what the agreement
    is measured on. Returns the report as the reader may now see it.
    """
    with exclusive_lock(reports_dir() / ".review.lock"):  # one review at a time per state root
        report = load_report(request.report_id)
        _check_request(request, report)
        if request.accept_unread:
            if report.review is not None and report.review.labels:
                raise SkillError(
                    f"Inspection {report.id} carries {len(report.review.labels)} samples' blind labels: it was read.",
                    "Finish the read (fix the disagreeing rewards and inspect with samples_of, or amend misreads); "
                    "to train unread, accept_unread on a new inspection.",
                )
            return visible(_accept_unread(report, request))
        read = report.review is not None and not report.review.accept_unread  # a read replaces an unread acceptance
        if read and report.review.labels and report.review.reviewer != request.reviewer:
            raise SkillError(
                f"Inspection {report.id} carries the labels of {report.review.reviewer_kind} "
                f"{report.review.reviewer}; a read is one reader's, and nobody's labels are imposed on another.",
                f"Send reviewer {report.review.reviewer!r} to go on with that read, or inspect fresh samples "
                "(inspect_rewards) and read them yourself.",
            )
        review = report.review if read else Review(reviewer=request.reviewer, reviewer_kind=request.reviewer_kind)
        report.review = review
        hidden = [sample.id for sample in report.samples if not is_revealed(report, sample)]
        new = _add_labels(review, request)
        seen = revealed_keys()
        by_id = {sample.id: sample for sample in report.samples}
        for i, roles in new.items():
            if content_key(by_id[i]) in seen:
                review.seen_before[i] = sorted({*review.seen_before.get(i, []), *roles})
        review.disagreements, review.agreement = compare(report)  # the reveal of these labels, before amendments
        _add_amendments(review, request)
        review.reviewer, review.reviewer_kind = request.reviewer, request.reviewer_kind
        review.notes = request.notes or review.notes
        review.recorded_at = _now()
        judged = _judged(report)
        record_revealed(judged, [i for i in hidden if is_revealed(judged, by_id[i])], request.reviewer)
        return visible(judged)


def _add_labels(review: Review, request: ReviewRequest) -> dict[int, list[str]]:
    """Add the request's labels for the samples and roles not yet labelled; refuse a change to a label given.
    Returns the roles added, by sample id."""
    changed = sorted(
        sample_id
        for sample_id, labels in request.labels.items()
        if any(review.labels.get(sample_id, {}).get(role, label) != label for role, label in labels.items())
    )
    if changed:
        raise SkillError(
            f"Samples {changed[:10]} already carry blind labels, given before the scores were shown; they are what "
            "the agreement is measured on and are never replaced.",
            "To correct a misread, send amendments: [{sample_id, role, label, reason}].",
        )
    new = {
        sample_id: [role for role in labels if role not in review.labels.get(sample_id, {})]
        for sample_id, labels in sorted(request.labels.items())
    }
    new = {sample_id: roles for sample_id, roles in new.items() if roles}
    for sample_id in new:
        review.labels[sample_id] = {**request.labels[sample_id], **review.labels.get(sample_id, {})}
    if new:
        review.labelled_at = _now()
    return new


def _add_amendments(review: Review, request: ReviewRequest) -> None:
    """Add the request's amendments, each of a disagreement the reveal named."""
    named = {(d.sample_id, d.role) for d in review.disagreements}
    for change in request.amendments:
        if (change.sample_id, change.role) not in named:
            raise SkillError(
                f"Sample {change.sample_id} ({change.role}) is not a disagreement of this read: only a label the "
                "reveal showed to differ from a reward can be amended.",
                "Amend the samples record_review named as disagreements; label unlabelled samples with labels.",
            )
        review.amendments.append(
            Amendment(**change.model_dump(), reviewer=request.reviewer, reviewer_kind=request.reviewer_kind, at=_now())
        )


def _accept_unread(report: InspectionReport, request: ReviewRequest) -> InspectionReport:
    report.review = Review(
        reviewer=request.reviewer,
        reviewer_kind=request.reviewer_kind,
        accept_unread=True,
        accept_unread_reason=request.accept_unread_reason.strip(),
        notes=request.notes,
        recorded_at=_now(),
    )
    reasons = _standing_reasons(report)
    report.verdict, report.verdict_reasons = ("failed", reasons) if reasons else ("accepted_unread", [])
    saved = save_report(report)
    _index_verdict(saved)
    record_revealed(saved, [sample.id for sample in saved.samples], request.reviewer)
    return saved


def _standing_reasons(report: InspectionReport) -> list[str]:
    """What keeps any review from opening the gate: blocking flags and reward code changed since."""
    reasons = [f"Fix the reward: {f.message} {f.fix}".strip() for f in report.flags if f.severity == "blocking"]
    if reward_fingerprint(report.rewards)[0] != report.reward_fingerprint:
        reasons.append(
            "The reward code, a file it imports or a library version changed since this inspection. Inspect again "
            "with samples_of set to this inspection: your labels carry over and are re-scored."
        )
    return reasons


def _judged(report: InspectionReport) -> InspectionReport:
    """Compare the labels with the rewards, decide the verdict, store the report: passed when nothing stands in
    the way; pending while labels or resolutions are still to come; failed when what stands is final (the first
    labels' statistic, or a blocking flag once nothing else is to do)."""
    review = report.review
    assert review is not None
    review.disagreements, review.agreement = compare(report)
    standing = _standing_reasons(report)
    to_do, final = read_reasons(report)
    report.verdict_reasons = standing + to_do + final
    if not report.verdict_reasons:
        report.verdict = "passed"
    else:
        report.verdict = "failed" if final or not to_do else "pending"
    saved = save_report(report)
    _index_verdict(saved)
    return saved


def carry_read(report: InspectionReport, earlier: InspectionReport) -> InspectionReport:
    """Give a report of ``earlier``'s samples (``samples_of``: the same samples under the same ids) the read
    ``earlier`` carries, and judge it: a fixed reward is re-scored against the same labels, with no re-read.
    The labels stay their reader's, and those given after a reveal stay uncounted."""
    if earlier.review is None or not earlier.review.labels:
        return report
    read = earlier.review
    ids = {sample.id for sample in report.samples}
    report.review = Review(
        reviewer=read.reviewer,
        reviewer_kind=read.reviewer_kind,
        labels={i: labels for i, labels in read.labels.items() if i in ids},
        carried={i: read.carried.get(i, earlier.id) for i in read.labels if i in ids},
        seen_before={i: roles for i, roles in read.seen_before.items() if i in ids},
        amendments=[amendment for amendment in read.amendments if amendment.sample_id in ids],
        labelled_at=read.labelled_at,
    )
    return _judged(report)


def _index_path() -> Path:
    return reports_dir() / "passed-index.json"


def _read_index() -> dict[str, dict[str, str]]:
    index = json.loads(_index_path().read_text()) if _index_path().is_file() else {}
    return {fp: (entry if isinstance(entry, dict) else {"passed": entry}) for fp, entry in index.items()}


def _index_verdict(report: InspectionReport) -> None:
    """fingerprint -> the newest report per opening verdict, so the gate answers without reading every report.
    Locked: carried labels are judged outside the review lock, and two writers of a read-modify-write lose one."""
    with exclusive_lock(reports_dir() / ".index.lock"):
        index = _read_index()
        entry = {kind: rid for kind, rid in index.get(report.reward_fingerprint, {}).items() if rid != report.id}
        if report.verdict in OPENING:
            entry[report.verdict] = report.id
        if entry:
            index[report.reward_fingerprint] = entry
        else:
            index.pop(report.reward_fingerprint, None)
        write_atomically(_index_path(), json.dumps(index, indent=1))


def _opening_report(fingerprint: str, preferred: str | None, policy_model: str | None) -> InspectionReport | None:
    def opens(report: InspectionReport | None) -> bool:
        return (
            report is not None
            and report.verdict in OPENING
            and report.reward_fingerprint == fingerprint
            and (policy_model is None or report.policy_model == policy_model)
        )

    entry = _read_index().get(fingerprint, {})
    if preferred is not None:
        try:
            report = load_report(preferred)
        except SkillError:  # gone or not an id: the newest opening report answers
            report = None
        if opens(report) and (report.verdict == "passed" or "passed" not in entry):  # a read beats an unread one
            return report
    for kind in OPENING:  # a read beats an unread acknowledgement
        if kind in entry:
            report = load_report(entry[kind])
            if report.verdict == kind and opens(report):
                return report
    if policy_model is not None:  # the newest report per verdict is indexed; an older one may be on policy samples
        for report in stored_reports():
            if opens(report):
                return report
    return None


def open_gate(
    rewards: list[RewardSpec],
    trl: Mapping[str, Any] | None = None,
    preferred: str | None = None,
    policy_model: str | None = None,
) -> GateDecision:
    """The inspection that lets training start on these rewards, and how it was reviewed; or GateClosed saying
    what to do. ``trl``: the GRPOConfig kwargs training will use; the gate keys on their ``reward_weights``
    (unset: 1.0 each, as TRL does). Without ``trl``, on the specs' own weights. ``preferred``: the inspection a
    run started on, answered while it still opens the gate for these rewards (unless it was accepted unread and
    a read has passed since: a read wins), so the run's record, metrics header and model card name one
    inspection even when another one passed meanwhile. ``policy_model``: only a read of that model's own samples
    opens it (a recipe's ``require_policy_samples``)."""
    weights = [spec.weight for spec in rewards] if trl is None else GRPOFields(trl).reward_weights
    specs = effective_rewards(rewards, weights)
    fingerprint, parts = reward_fingerprint(specs)
    report = _opening_report(fingerprint, preferred, policy_model)
    if report is not None:
        return GateDecision(
            inspection_id=report.id,
            reviewed=report.verdict == "passed",
            stamp=review_stamp(report),
            reward_fingerprint=fingerprint,
        )
    if policy_model is not None and _opening_report(fingerprint, None, None) is not None:
        raise GateClosed(
            f"The inspections that pass for these rewards were not read on samples {policy_model} wrote, and this "
            "recipe requires that (require_policy_samples).",
            f"Inspect with generate (model {policy_model}) or with the route_check probe of it (route_decision_id), "
            "then record_review.",
        )
    names = [s.name for s in specs]
    candidates = [r for r in stored_reports() if r.verdict in OPENING and [s.name for s in r.rewards] == names]
    if candidates:  # the nearest one says what changed: fewest parts apart, the newest of those
        changes = [
            [name.split(":", 1)[1] for name, value in parts.items() if report.fingerprint_parts.get(name) != value]
            for report in candidates
        ]
        nearest = min(range(len(candidates)), key=lambda i: len(changes[i]))
        stored, changed = candidates[nearest], changes[nearest]
        weights, inspected = [s.weight for s in specs], [s.weight for s in stored.rewards]
        moved = ""
        if weights != inspected:
            moved = f" The weights TRL will use, {weights}, are not the inspected {inspected}."
        raise GateClosed(
            f"Reward function {', '.join(changed) or 'set'} changed since inspection {stored.id} (spec, weight, "
            f"source of the reward or a module it imports, or a library version).{moved}",
            "Inspect again: inspect_rewards, then record_review.",
        )
    raise GateClosed(
        "No passed inspection for these reward functions: training on an uninspected reward is how runs reward-hack.",
        "Run inspect_rewards on 50-100 samples and record a review (record_review) that passes.",
    )


def require_passed_inspection(rewards: list[RewardSpec]) -> InspectionReport:
    """The report that opens the gate for these rewards at their own weights (see open_gate)."""
    return load_report(open_gate(rewards).inspection_id)
