"""A quick check of the rewards on a handful of samples: every score and extracted answer shown at once, so a
caller sees what a reward reads (its columns, its extract mode) before the read.

It is not a read. Nothing is stored, so record_review has no report to take and the gate cannot open on it, and
the samples it showed are recorded as revealed (``inspection.revealed``): a later inspection that draws them
again does not count their labels as blind.

May import: ``inspection.schema``, ``inspection.revealed``, ``inspection.agreement``, ``state``.
"""

from __future__ import annotations

import time
from typing import Any

from skill.inspection.agreement import read_roles
from skill.inspection.revealed import record_revealed
from skill.inspection.schema import QUICK_SAMPLES, Flag, InspectionReport, InspectionRequest, RewardStats, SampleResult
from skill.state import new_id

QUICK_CHECKER = "quick check"  # who the samples were revealed to


def quick_report(
    request: InspectionRequest,
    source: str,
    scored: Any,
    results: list[SampleResult],
    stats: dict[str, RewardStats],
    flags: list[Flag],
) -> InspectionReport:
    """The scored samples, every figure shown, as a report that is never stored; the samples are revealed from now
    on. ``scored`` is the fresh-process scoring (its fingerprint and probes)."""
    report = InspectionReport(
        id=new_id("quick"),
        created_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        rewards=request.rewards,
        reward_fingerprint=scored.fingerprint,
        fingerprint_parts=scored.fingerprint_parts,
        source=source,
        samples=results,
        stats=stats,
        flags=flags,
        probe_results=scored.probes,
        verdict_reasons=[
            f"A quick check of {len(results)} samples (at most {QUICK_SAMPLES}), every score shown: not a read. "
            "Inspect 50-100 samples for the blind read that opens the gate; these samples count as seen."
        ],
        draw="quick check: the first samples, not drawn",
        quick=True,
        read_roles=read_roles(request.rewards),
    )
    record_revealed(report, [sample.id for sample in results], QUICK_CHECKER)
    return report
