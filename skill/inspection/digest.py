"""The compact view of an inspection for an agent's context: the verdict, what needs attention, and the
samples one page at a time.

A whole report (60-100 samples with every score, 20-40 hack probes) is 30-45k characters of JSON; an
agent that receives it on every call fills its context in a few calls. The digest keeps what must be
read now (flags, hacked probes, statistics, one page of samples) under ``RESULT_CHARACTERS``; the reader
pages through the rest of the samples, and the full report stays a resource and a file. The Python API
and the CLI keep returning the whole report. Owns: ``inspection_digest``, ``sample_page``,
``review_outcome``. May import: ``inspection.schema``, ``inspection.gate``.
"""

from __future__ import annotations

from skill.inspection.gate import review_stamp
from skill.inspection.render import samples_origin, shown, visible
from skill.inspection.schema import InspectionDigest, InspectionReport, ReviewOutcome, SamplePage

RESULT_CHARACTERS = 10_000
"""What one result may take, as compact JSON: below the 12,000 an agent's turn can afford, with room for the
envelope a transport adds."""

MOST_HACKED_PROBES = 8
"""Hacked probes shown in the digest; a reward that loses more than this needs fixing whichever they are."""


def _sample_characters(report: InspectionReport, index: int) -> int:
    return len(shown(report, report.samples[index]).model_dump_json())


def sample_page(report: InspectionReport, offset: int = 0, budget: int = RESULT_CHARACTERS) -> SamplePage:
    """The samples from ``offset`` on, as many as fit ``budget`` characters (always at least one).

    >>> from skill.inspection.schema import SampleResult
    >>> samples = [SampleResult(id=i, prompt="p", completion="c" * 100, scores={"r": 1.0}, total=1.0)
    ...            for i in range(5)]
    >>> report = InspectionReport(id="insp-x", created_at="", rewards=[], reward_fingerprint="", source="",
    ...                           samples=samples, stats={}, flags=[], probe_results=[])
    >>> page = sample_page(report, offset=1, budget=500)
    >>> [sample.id for sample in page.samples], page.next_offset
    ([1, 2], 3)
    """
    total = len(report.samples)
    if not 0 <= offset < max(total, 1):
        raise ValueError(
            f"offset {offset} is outside report {report.id}'s {total} samples. Send an offset from 0 to "
            f"{max(total - 1, 0)} (next_offset of the previous page)."
        )
    end, used = offset, 0
    while end < total:
        size = _sample_characters(report, end) + 1
        if end > offset and used + size > budget:
            break
        used += size
        end += 1
    samples = [shown(report, sample) for sample in report.samples[offset:end]]
    return SamplePage(
        report_id=report.id,
        blind=any(not sample.scores for sample in samples),
        samples=samples,
        offset=offset,
        samples_total=total,
        next_offset=end if end < total else None,
    )


def _summary(report: InspectionReport, hacked: int, probes: int) -> str:
    blocking = [flag.code for flag in report.flags if flag.severity == "blocking"]
    warnings = [flag.code for flag in report.flags if flag.severity == "warning"]
    parts = [f"{len(report.samples)} samples ({report.source}; {samples_origin(report)}), verdict {report.verdict}."]
    parts.append(f"Blocking flags: {', '.join(blocking)}." if blocking else "No blocking flag.")
    if warnings:
        parts.append(f"Warnings: {', '.join(warnings)}.")
    parts.append(f"{hacked} of {probes} hack probes beat a reward.")
    if blocking or hacked:
        parts.append("Fix what the flags and probes say, then inspect again.")
    elif report.verdict == "pending" and not report.review:
        parts.append(
            f"Read every sample (page by page with inspection_samples; no score is shown until you label it) and "
            f"label each by your own judgment for {', '.join(report.read_roles)}: pass, fail or unsure. Send the "
            "labels with record_review; its answer names every sample where a reward disagrees with you."
        )
    return " ".join(parts)


def inspection_digest(report: InspectionReport, budget: int = RESULT_CHARACTERS) -> InspectionDigest:
    """The report, as a reader may see it now (``render.visible``), cut to what an agent reads first: flags,
    hacked probes, statistics (after the reveal), one page of samples."""
    report = visible(report)  # every probe that ran; until the reveal, figures only for the hacked ones
    probes = len(report.probe_results)
    hacked = [probe for probe in report.probe_results if probe.hacked]
    digest = InspectionDigest(
        id=report.id,
        verdict=report.verdict,
        verdict_reasons=report.verdict_reasons,
        summary=_summary(report, len(hacked), probes),
        rewards=[f"{spec.name} ({spec.role}, weight {spec.weight:g})" for spec in report.rewards],
        stats=report.stats,
        flags=report.flags,
        hacked_probes=hacked[:MOST_HACKED_PROBES],
        probes_run=probes,
        read_roles=report.read_roles,
        draw=report.draw,
        page=SamplePage(report_id=report.id, blind=True, samples=[], offset=0, samples_total=0, next_offset=None),
        report_uri=f"grpo://inspections/{report.id}",
        paths=report.paths,
    )
    room = budget - len(digest.model_dump_json())
    if report.samples:
        digest.page = sample_page(report, 0, max(room, 0))
    return digest


def review_outcome(report: InspectionReport) -> ReviewOutcome:
    """What a review decided, without the report it was about."""
    review = report.review
    opened = report.verdict in ("passed", "accepted_unread")
    return ReviewOutcome(
        report_id=report.id,
        verdict=report.verdict,
        verdict_reasons=report.verdict_reasons,
        labelled=len(review.labels) if review else 0,
        samples_total=len(report.samples),
        disagreements=review.disagreements if review else [],
        agreement=review.agreement if review else [],
        stamp=review_stamp(report) if opened else "",
    )
