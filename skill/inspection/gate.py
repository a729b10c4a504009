"""The one gate policy: training starts only on rewards whose current code has an opening inspection.

``open_gate`` is called wherever training can start: a new run and a resumed run (``runs.jobs``), and
the training process itself before it builds the trainer (``runs.worker``, in a fresh interpreter).
``emit_grpo_config`` asks the same question to record the answer in the recipe's provenance. It keys on
the fingerprint (``inspection.fingerprint``) of the rewards with the weights TRL will use: spec, weight,
params, every local source file the reward code imports, library versions. A reward edited since, a
weight changed by an override, a helper module changed, all close the gate.

A report opens the gate two ways, never by agreeing with everything:

- **passed**: every shown sample labelled, the labels match a read (every attention check disagreed
  with, no real sample disagreed with), no blocking flag, and the reward code unchanged since;
- **accepted_unread**: an explicit, separately named acknowledgement (``accept_unread`` with a reason)
  that the rewards are trained on without a read. It never clears a blocking flag, and it is stamped
  "reward not reviewed" on the recipe, the run's status, its metrics header and the model card.

An accept-all (``non_interactive``, ``--yes``) is recorded and never passes. A review that does not
match a read is answered without saying which samples were checks and changes nothing shown; it is counted,
per report (``MAX_FAILED_REVIEWS``) and per reward per day (``max_failed_reads``), and reviews are
recorded one at a time, so a blind guess gets a bounded number of tries. An answer is read once: a report whose
answers a later inspection showed again takes no read (the later one may say what they really scored).

Owns: ``record_review``, ``open_gate``, the passed index, the stamps. May import: ``inspection``
(attention, fingerprint, reports, schema), ``rewards``, ``state``, ``errors``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from skill.errors import SkillError
from skill.inspection.attention import reading_matches, review_blocker
from skill.inspection.reports import (
    FAILED_READS_WINDOW_S,
    load_key,
    load_report,
    recent_failed_reads,
    reports_dir,
    save_report,
    shown_again,
    stored_reports,
)
from skill.inspection.schema import GateDecision, InspectionReport, Review, ReviewRequest
from skill.rewards.fingerprint import effective_rewards, reward_fingerprint
from skill.rewards.spec import RewardSpec
from skill.state import exclusive_lock, write_atomically

NOT_REVIEWED = "reward not reviewed"
OPENING = ("passed", "accepted_unread")
MAX_FAILED_REVIEWS = 5  # reads of one report that did not match; then it takes no more
MAX_FAILED_PER_REWARD = 10  # per reward per day, across reports and reward sets (max_failed_reads)
MAX_FAILED_READS_ENV = "GRPO_RLVR_MAX_FAILED_READS"


class GateClosed(SkillError):
    """No inspection opens the gate for these rewards (as opposed to a request that is itself wrong)."""


def _check_request(request: ReviewRequest, report: InspectionReport) -> None:
    if not request.reviewer.strip():
        raise SkillError("The review has no reviewer.", "Send the reviewer's name (a person or an agent).")
    known = {sample.id for sample in report.samples}
    unknown = sorted(set(request.labels) - known)
    if unknown:
        raise SkillError(f"Labels for unknown sample ids {unknown[:10]}.", f"Send ids between 0 and {max(known)}.")
    if request.accept_unread and (request.labels or request.non_interactive):
        raise SkillError(
            "accept_unread is the acknowledgement that nothing was read; it cannot come with labels or an accept-all.",
            "Send either labels from a read, or accept_unread=true with accept_unread_reason alone.",
        )
    if request.accept_unread and not request.accept_unread_reason.strip():
        raise SkillError(
            "accept_unread needs a reason: it is stamped on the recipe, the run and the model card.",
            "Send accept_unread_reason saying why these rewards are trained on without a read.",
        )


def _reasons(report: InspectionReport, request: ReviewRequest, key: dict[str, Any]) -> tuple[list[str], bool]:
    """Why the gate does not open (empty: it opens), and whether the labels failed to match a read."""
    reasons = [f"Fix the reward: {f.message} {f.fix}".strip() for f in report.flags if f.severity == "blocking"]
    if reward_fingerprint(report.rewards)[0] != report.reward_fingerprint:
        reasons.append(
            "The reward code, a file it imports or a library version changed since this inspection. "
            "Inspect again (inspect_rewards) and review the new report."
        )
    if request.accept_unread:
        return reasons, False
    if request.non_interactive:
        return reasons + [
            "An accept-all review (non_interactive / --yes) never opens the gate: it reads nothing. Label every "
            "sample after reading it, or, to train on these rewards unread, send accept_unread=true with "
            "accept_unread_reason (stamped 'reward not reviewed' on the recipe, the run and the model card)."
        ], False
    labelled = [sample.id for sample in report.samples if sample.id in request.labels]
    if len(labelled) < len(report.samples):
        reasons.append(
            f"{len(labelled)} of {len(report.samples)} samples labelled: label every sample (agree or "
            "disagree with the rewards' judgment of it)."
        )
        return reasons, False
    blocker = review_blocker(key)
    if blocker is not None:
        return reasons + [blocker], False
    again = shown_again(key.get("sightings", []), report.id)
    if again:  # a later report of the same answers may say what this one's checks really scored
        return reasons + [
            "Answers of this inspection were shown again in a later inspection (under any reward set), so a read "
            "of this one no longer counts. Read the later one if it can be read, or inspect samples with new answers."
        ], False
    planted = key.get("planted", [])
    if reading_matches(request.labels, planted):
        return reasons, False
    disagreed = sorted(i for i, agree in request.labels.items() if not agree)
    return reasons + [
        f"The labels do not match a read of the samples. You disagreed with samples {disagreed}. Either one of "
        "them is a real sample the reward judges wrongly (fix the reward there, then inspect again), or a score "
        "you agreed with is deliberately wrong (an attention check: read every sample again). Which of the two, "
        "and which samples are checks, is not said."
    ], True


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
    return (
        f"reviewed: {review.reviewer_kind} {review.reviewer} read and labelled {len(review.labels)} samples; "
        f"inspection {report.id}"
    )


def record_review(request: ReviewRequest) -> InspectionReport:
    """Store a reader's verdicts and decide the gate: 'passed', 'accepted_unread' or 'failed' with what to fix.

    ``labels`` maps every shown sample id to True when the reader agrees with the rewards' judgment of it.
    """
    with exclusive_lock(reports_dir() / ".review.lock"):  # one review at a time: failed reads are counted exactly
        return _record(request)


def max_failed_reads() -> int:
    """Failed reads taken per reward per day (``GRPO_RLVR_MAX_FAILED_READS``, default 10): how many blind
    guesses the gate allows. Raising it weakens the gate; test harnesses that fail reviews on purpose raise it.

    >>> max_failed_reads() > 0
    True
    """
    text = os.environ.get(MAX_FAILED_READS_ENV, str(MAX_FAILED_PER_REWARD))
    if not text.isdigit() or int(text) < 1:
        raise SkillError(f"{MAX_FAILED_READS_ENV}={text!r} is not a whole number >= 1.", "Unset it (default 10).")
    return int(text)


def _failed_reads(report: InspectionReport) -> str | None:
    """Why this report takes no more reads: too many that did not match, on it, or today on any reward it holds.
    A failed read counts against every reward of the set, so another set, order or weight gives no new tries."""
    if report.review_attempts >= MAX_FAILED_REVIEWS:
        return f"Inspection {report.id} has had {report.review_attempts} reviews that did not match a read."
    for spec in report.rewards:
        recent = recent_failed_reads(spec.name)
        if len(recent) >= max_failed_reads():
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(min(recent) + FAILED_READS_WINDOW_S))
            return (
                f"Reviews of samples scored by {spec.name} did not match a read {len(recent)} times in the last "
                f"24 hours; the next read is taken after {when}."
            )
    return None


def _record(request: ReviewRequest) -> InspectionReport:
    report = load_report(request.report_id)
    _check_request(request, report)
    key = load_key(report.id)
    reading = not (request.accept_unread or request.non_interactive)
    refused = _failed_reads(report) if reading else None
    if refused is not None:
        raise SkillError(
            f"{refused} No more reads are taken.",
            "Fix the rewards where they judge samples wrongly, then inspect again and read the new report; or train "
            "on them unread: accept_unread=true with a reason.",
        )
    reasons, mismatch = _reasons(report, request, key)
    report.review = Review(
        reviewer=request.reviewer,
        reviewer_kind=request.reviewer_kind,
        labels={} if request.non_interactive or request.accept_unread else request.labels,
        non_interactive=request.non_interactive,
        accept_unread=request.accept_unread,
        accept_unread_reason=request.accept_unread_reason.strip(),
        notes=request.notes,
        recorded_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        disagreements=sorted(i for i, agree in request.labels.items() if not agree),
    )
    if mismatch:
        report.review_attempts += 1
        for spec in report.rewards:
            recent_failed_reads(spec.name, add=True)
    report.verdict = "failed" if reasons else ("accepted_unread" if request.accept_unread else "passed")
    report.verdict_reasons = reasons
    saved = save_report(report)
    _index_verdict(report)
    return saved


def _index_path() -> Path:
    return reports_dir() / "passed-index.json"


def _read_index() -> dict[str, dict[str, str]]:
    index = json.loads(_index_path().read_text()) if _index_path().is_file() else {}
    return {fp: (entry if isinstance(entry, dict) else {"passed": entry}) for fp, entry in index.items()}


def _index_verdict(report: InspectionReport) -> None:
    """fingerprint -> the newest report per opening verdict, so the gate answers without reading every report."""
    index = _read_index()
    entry = {kind: rid for kind, rid in index.get(report.reward_fingerprint, {}).items() if rid != report.id}
    if report.verdict in OPENING:
        entry[report.verdict] = report.id
    if entry:
        index[report.reward_fingerprint] = entry
    else:
        index.pop(report.reward_fingerprint, None)
    write_atomically(_index_path(), json.dumps(index, indent=1))


def _opening_report(fingerprint: str, preferred: str | None) -> InspectionReport | None:
    entry = _read_index().get(fingerprint, {})
    if preferred is not None:
        try:
            report = load_report(preferred)
        except SkillError:  # gone or not an id: the newest opening report answers
            report = None
        opens = report is not None and report.verdict in OPENING and report.reward_fingerprint == fingerprint
        if opens and (report.verdict == "passed" or "passed" not in entry):  # a read beats an unread one
            return report
    for kind in OPENING:  # a read beats an unread acknowledgement
        if kind in entry:
            report = load_report(entry[kind])
            if report.verdict == kind and report.reward_fingerprint == fingerprint:
                return report
    return None


def open_gate(
    rewards: list[RewardSpec], trl: Mapping[str, Any] | None = None, preferred: str | None = None
) -> GateDecision:
    """The inspection that lets training start on these rewards, and how it was reviewed; or GateClosed saying
    what to do. ``trl``: the GRPOConfig kwargs training will use; the gate keys on their ``reward_weights``
    (unset: 1.0 each, as TRL does). Without ``trl``, on the specs' own weights. ``preferred``: the inspection a
    run started on, answered while it still opens the gate for these rewards (unless it was accepted unread and
    a read has passed since: a read wins), so the run's record, metrics header and model card name one
    inspection even when another one passed meanwhile."""
    weights = [spec.weight for spec in rewards] if trl is None else trl.get("reward_weights")
    specs = effective_rewards(rewards, weights)
    fingerprint, parts = reward_fingerprint(specs)
    report = _opening_report(fingerprint, preferred)
    if report is not None:
        return GateDecision(
            inspection_id=report.id,
            reviewed=report.verdict == "passed",
            stamp=review_stamp(report),
            reward_fingerprint=fingerprint,
        )
    for stored in stored_reports():
        if stored.verdict in OPENING and [s.name for s in stored.rewards] == [s.name for s in specs]:
            old = load_key(stored.id).get("fingerprint_parts", {})
            changed = [name.split(":", 1)[1] for name, value in parts.items() if old.get(name) != value]
            weights = [s.weight for s in specs]
            inspected = [s.weight for s in stored.rewards]
            moved = (
                f" The weights TRL will use, {weights}, are not the inspected {inspected}."
                if weights != inspected
                else ""
            )
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
