"""The one gate policy: a passed inspection whose fingerprint matches the rewards, or no training.

A review passes when at least 50 real samples are labelled, the reader disagrees with none, no flag
blocks, and every planted attention check is caught. A non-interactive review (``--yes``: accept all
without a per-sample read) passes when nothing else blocks (no blocking flag); it is recorded as
exactly that, never counted as a read, and the run's record and model card say the rewards were
accepted unread.

A reward's fingerprint covers everything that decides what it scores (its spec, the source of the
modules defining it, the library versions), so the gate knows when a reward changed since it was
inspected. Owns: ``reward_fingerprint``, ``evaluate_review``, ``record_review``, the passed index,
``require_passed_inspection``. May import: ``inspection.reports``, ``inspection.schema``, ``rewards``,
``state``, ``errors``.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import inspect
import json
import time
from pathlib import Path

from skill.errors import SkillError
from skill.inspection.reports import (
    inspected_fingerprint_parts,
    load_report,
    planted_ids,
    reports_dir,
    save_report,
    stored_reports,
)
from skill.inspection.schema import MIN_SAMPLES, InspectionReport, Review, ReviewRequest
from skill.rewards import base, registry
from skill.rewards.spec import RewardSpec
from skill.state import write_atomically

FINGERPRINTED_PACKAGES = ("grpo-rlvr", "math-verify", "jsonschema")


def _sibling_sources(module: object) -> dict[str, str]:
    """Hashes of the modules beside a library reward's own (its parser, sandbox or judge backends live there)."""
    folder = Path(inspect.getfile(module)).parent  # type: ignore[arg-type]
    return {
        f"{folder.name}/{path.name}": hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.glob("*.py"))
    }


def _fingerprint_parts(specs: list[RewardSpec]) -> dict[str, str]:
    """One hash per reward: its spec, the source of every module defining it, and the library versions."""
    versions = {}
    for package in FINGERPRINTED_PACKAGES:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = "absent"
    parts = {}
    for position, spec in enumerate(specs):
        if ":" in spec.name:
            modules = [importlib.import_module(spec.name.split(":", 1)[0])]
        else:
            modules = [inspect.getmodule(registry.registered_reward(spec).build), base]
        sources = {
            module.__name__: hashlib.sha256(inspect.getsource(module).encode()).hexdigest() for module in modules
        }
        if ":" not in spec.name:
            sources.update(_sibling_sources(modules[0]))
        if spec.name == "length_penalty" and "wrap" in spec.params:
            wrapped = RewardSpec.model_validate({"role": "correctness", **spec.params["wrap"]})
            sources["wrapped"] = _fingerprint_parts([wrapped])[f"0:{wrapped.name}"]
        payload = {"spec": spec.model_dump(mode="json"), "sources": sources, "versions": versions}
        parts[f"{position}:{spec.name}"] = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
    return parts


def reward_fingerprint(specs: list[RewardSpec]) -> tuple[str, dict[str, str]]:
    """The fingerprint of a reward set, and its per-reward parts (to say which reward changed).

    >>> fingerprint, parts = reward_fingerprint([RewardSpec(name="format", role="format")])
    >>> len(fingerprint), list(parts)
    (64, ['0:format'])
    """
    parts = _fingerprint_parts(specs)
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest(), parts


def evaluate_review(report: InspectionReport, review: Review, planted: list[int]) -> list[str]:
    """Why the gate does not pass (empty: it passes)."""
    reasons = []
    for flag in report.flags:
        if flag.severity == "blocking":
            reasons.append(f"Fix the reward: {flag.message}")
    real = [sample.id for sample in report.samples if sample.id not in planted]
    labelled = [sample_id for sample_id in real if sample_id in review.labels]
    if len(labelled) < min(MIN_SAMPLES, len(real)):
        reasons.append(f"Only {len(labelled)} samples labelled; label at least {min(MIN_SAMPLES, len(real))}.")
    if review.disagreements:
        reasons.append(
            f"The reader disagrees with the rewards on samples {review.disagreements}: fix the reward "
            "function first, then inspect again."
        )
    if review.failed_attention_checks:
        reasons.append(
            f"The review missed {review.failed_attention_checks} planted attention check(s) (samples "
            "shown with a deliberately wrong score were accepted): it is rejected as not read."
        )
    return reasons


def record_review(request: ReviewRequest) -> InspectionReport:
    """Store a reader's verdicts and decide the gate: 'passed' or 'failed' with what to fix.

    ``labels`` maps sample id to True when the reader agrees with the rewards' judgment of it.
    """
    report_id, reviewer, labels = request.report_id, request.reviewer, request.labels
    reviewer_kind, non_interactive, notes = request.reviewer_kind, request.non_interactive, request.notes
    report = load_report(report_id)
    if not reviewer.strip():
        raise SkillError("The review has no reviewer.", "Send the reviewer's name (a person or an agent).")
    known = {sample.id for sample in report.samples}
    unknown = sorted(set(labels) - known)
    if unknown:
        raise SkillError(f"Labels for unknown sample ids {unknown[:10]}.", f"Send ids between 0 and {max(known)}.")
    planted = planted_ids(report_id)
    if non_interactive:
        labels = {sample_id: True for sample_id in known}
    review = Review(
        reviewer=reviewer,
        reviewer_kind=reviewer_kind,
        labels=labels,
        non_interactive=non_interactive,
        notes=notes,
        recorded_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        disagreements=sorted(i for i, agree in labels.items() if not agree and i not in planted),
        failed_attention_checks=0 if non_interactive else sum(1 for i in planted if labels.get(i, True)),
    )
    reasons = evaluate_review(report, review, planted)
    report.review = review
    report.verdict = "failed" if reasons else "passed"
    report.verdict_reasons = reasons
    saved = save_report(report)
    _index_verdict(report)
    return saved


def _index_path() -> Path:
    return reports_dir() / "passed-index.json"


def _index_verdict(report: InspectionReport) -> None:
    """fingerprint -> newest passed report id, so the gate answers without reading every report."""
    path = _index_path()
    index = json.loads(path.read_text()) if path.is_file() else {}
    if report.verdict == "passed":
        index[report.reward_fingerprint] = report.id
    elif index.get(report.reward_fingerprint) == report.id:
        del index[report.reward_fingerprint]
    write_atomically(path, json.dumps(index, indent=1))


def require_passed_inspection(rewards: list[RewardSpec]) -> InspectionReport:
    """The newest passed inspection of exactly these rewards, or a clear error saying what to do."""
    fingerprint, parts = reward_fingerprint(rewards)
    index = json.loads(_index_path().read_text()) if _index_path().is_file() else {}
    if fingerprint in index:
        report = load_report(index[fingerprint])
        if report.verdict == "passed" and report.reward_fingerprint == fingerprint:
            return report
    same_names = None
    for report in stored_reports():
        if report.verdict != "passed":
            continue
        if report.reward_fingerprint == fingerprint:
            return report
        if same_names is None and [s.name for s in report.rewards] == [s.name for s in rewards]:
            same_names = report
    if same_names is not None:
        old = inspected_fingerprint_parts(same_names.id)
        changed = [name.split(":", 1)[1] for name, value in parts.items() if old.get(name) != value]
        raise SkillError(
            f"Reward function {', '.join(changed) or 'set'} changed since inspection {same_names.id} (spec, source "
            "or library version).",
            "Inspect again: inspect_rewards, then record_review.",
        )
    raise SkillError(
        "No passed inspection for these reward functions: training on an uninspected reward is how runs reward-hack.",
        "Run inspect_rewards on 50-100 samples and record a review (record_review) that passes.",
    )
