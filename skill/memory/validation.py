"""The estimator against published GRPO memory reports (``published_reports.json``): each report's settings as a
MemoryRequest, our estimate, and whether the two agree.

A row agrees when the fits / does-not-fit verdict matches the report and, where the report gives a number, our
peak is within ``TOLERANCE`` of it. Every report records the agreement it had when it was added (``expected``)
and, when that is a disagreement, the reason; ``tests/test_memory.py`` fails when a row's agreement changes.
``validation_summary()`` gives the figures bench/RESULTS.md reports. A report with ``collected`` is held-out evidence
gathered on that date, before any estimator change that followed (bench/results/2026-12-06-held-out-rows); one whose
run the request cannot describe (``cannot_express``: a mixture of experts, a model no source gave a shape for) stays
in the table unestimated and counts as a disagreement.

May import: ``memory.schema``, ``memory.components``, ``models.shapes``.
"""

from __future__ import annotations

import json
import statistics
from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from skill.markdown import table_cell
from skill.memory.components import estimate_components
from skill.memory.schema import MemoryEstimate, MemoryRequest
from skill.models.shapes import ModelShape

REPORTS_FILE = Path(__file__).with_name("published_reports.json")
TOLERANCE = 0.25  # reported totals within +-25%


class PublishedReport(BaseModel):
    """One published report: where, what it says, and its settings as a MemoryRequest."""

    model_config = ConfigDict(extra="forbid")

    id: str
    source: str
    framework: str
    evidence: Literal["observed", "computed"] = Field(
        default="observed",
        description="observed: a run's measured memory or out-of-memory; computed: the source's own calculation.",
    )
    quote: str
    mapping: str
    request: MemoryRequest | None = None
    settings: dict[str, Any] | None = Field(default=None, description="The settings as read, for an unexpressed row.")
    measured_as: str = Field(default="", description="What the figure counts (nvidia-smi, torch reserved, ...).")
    reported_fits: bool
    reported_gib: float | None = None
    expected: Literal["agrees", "disagrees"]
    reason: str = ""
    collected: str = Field(default="", description="When a held-out report was collected (ISO date).")
    cannot_express: str = Field(default="", description="Why the request cannot describe this run.")


class ValidationRow(BaseModel):
    """A report next to our estimate."""

    report: PublishedReport
    estimated_gib: float | None
    estimated_share: float | None = Field(description="The estimated peak over the device's capacity.")
    estimated_fits: bool | None
    verdict_agrees: bool
    relative_error: float | None
    agreement: Literal["agrees", "disagrees"]


@cache
def load_reports() -> tuple[PublishedReport, ...]:
    """The reports, with named shapes resolved from the file's ``shapes`` table."""
    data = json.loads(REPORTS_FILE.read_text(encoding="utf-8"))
    shapes = {name: {k: v for k, v in shape.items() if k != "source"} for name, shape in data["shapes"].items()}
    reports = []
    for raw in data["reports"]:
        if raw.get("cannot_express"):
            reports.append(PublishedReport.model_validate({**raw, "request": None}))
            continue
        request = dict(raw["request"])
        if isinstance(request.get("shape"), str):
            request["shape"] = ModelShape(**shapes[request["shape"]])
        reports.append(PublishedReport.model_validate({**raw, "request": request}))
    return tuple(reports)


def figure_as_measured(estimate: MemoryEstimate, measured_as: str) -> float:
    """The estimate in the units the report measured: torch's allocated peak (the tensors alone), torch's reserved
    peak (the tensors and the allocator's reserve, no CUDA context), or what the card shows (all of it).

    >>> from skill.hardware.specs import HardwareSpec
    >>> from skill.memory.schema import MemoryRequest
    >>> from skill.models.shapes import SHAPES
    >>> estimate = estimate_components(MemoryRequest(shape=SHAPES["qwen2.5-0.5b"].shape,
    ...     hardware=HardwareSpec(gpu_model="H100"), use_vllm=False))[1]
    >>> allocated, reserved, shown = (figure_as_measured(estimate, kind) for kind in
    ...     ("torch allocated", "torch reserved", "nvidia-smi"))
    >>> allocated < reserved < shown == estimate.peak_gib
    True
    """
    if measured_as.startswith("torch allocated"):
        return estimate.peak_allocated_gib
    if measured_as.startswith("torch reserved"):
        return estimate.peak_gib - estimate.components.overhead
    return estimate.peak_gib


def validate(report: PublishedReport) -> ValidationRow:
    """Our estimate for one report and whether it agrees (a report it cannot express disagrees)."""
    if report.request is None:
        return ValidationRow(
            report=report,
            estimated_gib=None,
            estimated_share=None,
            estimated_fits=None,
            verdict_agrees=False,
            relative_error=None,
            agreement="disagrees",
        )
    estimate = estimate_components(report.request)[1]
    verdict = estimate.fits == report.reported_fits
    estimated = figure_as_measured(estimate, report.measured_as)
    error = None
    if report.reported_gib:
        error = (estimated - report.reported_gib) / report.reported_gib
    agrees = verdict and (error is None or abs(error) <= TOLERANCE)
    return ValidationRow(
        report=report,
        estimated_gib=round(estimated, 3),
        estimated_share=estimate.peak_gib / estimate.capacity_gib,
        estimated_fits=estimate.fits,
        verdict_agrees=verdict,
        relative_error=error,
        agreement="agrees" if agrees else "disagrees",
    )


def validation_rows() -> list[ValidationRow]:
    """Every report, validated."""
    return [validate(report) for report in load_reports()]


def validation_summary() -> dict[str, object]:
    """Verdict agreement and the median absolute error over rows with a reported number, for bench/RESULTS.md.

    >>> summary = validation_summary()
    >>> summary["rows"] >= 10 and summary["rows_with_numbers"] >= 3
    True
    """
    rows = validation_rows()
    errors = [abs(row.relative_error) for row in rows if row.relative_error is not None]
    agreeing = sum(row.verdict_agrees for row in rows)
    close = [row for row in rows if row.estimated_share is not None and abs(row.estimated_share - 1) <= TOLERANCE]
    held_out = [row for row in rows if row.report.collected]
    held_out_errors = [abs(row.relative_error) for row in held_out if row.relative_error is not None]
    return {
        "rows": len(rows),
        "verdict_agreement": f"{agreeing}/{len(rows)}",
        "verdict_agreement_rate": round(agreeing / len(rows), 3),
        "verdict_agreement_observed": "{}/{}".format(
            sum(row.verdict_agrees for row in rows if row.report.evidence == "observed"),
            sum(row.report.evidence == "observed" for row in rows),
        ),
        "rows_with_numbers": len(errors),
        "median_absolute_error": round(statistics.median(errors), 3) if errors else None,
        "within_tolerance": f"{sum(error <= TOLERANCE for error in errors)}/{len(errors)}",
        "disagreeing": [row.report.id for row in rows if row.agreement == "disagrees"],
        # A verdict far from the capacity is easy; rows estimated within 25% of it are where the model is tested.
        "close_calls": f"{sum(row.verdict_agrees for row in close)}/{len(close)}",
        "held_out": {
            "rows": len(held_out),
            "expressed": sum(row.report.request is not None for row in held_out),
            "verdict_agreement": f"{sum(row.verdict_agrees for row in held_out)}/{len(held_out)}",
            "rows_with_numbers": len(held_out_errors),
            "within_tolerance": f"{sum(error <= TOLERANCE for error in held_out_errors)}/{len(held_out_errors)}",
            "median_absolute_error": round(statistics.median(held_out_errors), 3) if held_out_errors else None,
            "fits_verdicts_on_out_of_memory": sum(
                bool(row.estimated_fits) and not row.report.reported_fits for row in held_out
            ),
        },
    }


def validation_table() -> str:
    """The markdown table references/grpo-memory.md shows (generated by scripts/generate.py)."""
    lines = [
        "| report | framework | evidence | settings (as mapped) | reported | this estimator | agreement |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in validation_rows():
        report = row.report
        reported = ("fits" if report.reported_fits else "out of memory") + (
            f", {report.reported_gib:.1f} GiB" if report.reported_gib else ""
        )
        if row.estimated_gib is None:
            estimated = f"not estimated: cannot express {report.cannot_express}"
        else:
            estimated = f"{'fits' if row.estimated_fits else 'does not fit'}, {row.estimated_gib:.1f} GiB" + (
                f" ({row.relative_error:+.0%})" if row.relative_error is not None else ""
            )
        agreement = row.agreement + (f": {report.reason}" if report.reason else "")
        if report.collected:
            agreement += f" (held out, collected {report.collected})"
        if report.measured_as:
            reported += f" ({report.measured_as})"
        lines.append(
            f"| [{report.id}]({report.source}) | {report.framework} | {report.evidence} | {table_cell(report.quote)} — "
            f"{table_cell(report.mapping)} | "
            f"{reported} | {estimated} | {agreement} |"
        )
    summary = validation_summary()
    lines.append("")
    lines.append(
        f"Verdict agreement {summary['verdict_agreement']}; median absolute error "
        f"{summary['median_absolute_error']:.1%} over the {summary['rows_with_numbers']} rows with a reported number "
        f"({summary['within_tolerance']} within ±{TOLERANCE:.0%})."
    )
    held = summary["held_out"]
    error = held["median_absolute_error"]
    lines.append(
        f"Held out (collected before any estimator change): {held['rows']} reports, {held['expressed']} expressed; "
        f"verdict agreement {held['verdict_agreement']}; {held['within_tolerance']} within ±{TOLERANCE:.0%} of the "
        f"reported figure (median absolute error {'-' if error is None else f'{error:.0%}'}); "
        f"{held['fits_verdicts_on_out_of_memory']} 'fits' verdicts for runs that went out of memory."
    )
    return "\n".join(lines) + "\n"
