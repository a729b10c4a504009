"""The step-time estimate against published GRPO step times and this machine's CPU runs
(``published_step_times.json``): each row's settings as a StepTimeRequest, our steady seconds per step (no
run-level fixed costs), and the ratio. ``validation_summary()`` gives the figures bench/RESULTS.md reports; the
reference page's table is ``validation_table()``. No constant of ``timing.constants`` was set from these rows.
A row with ``collected`` is held-out evidence gathered on that date, before any estimator change that followed
(bench/results/2026-12-06-held-out-rows). A row whose run the request cannot describe (``cannot_express``: a
mixture of experts, a model whose shape no source gave) stays in the table, unestimated, and counts as a miss.

May import: ``timing.schema``, ``timing.estimate``, ``models.shapes``.
"""

from __future__ import annotations

import json
import statistics
from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from skill.markdown import table_cell
from skill.models.shapes import ModelShape, known_model
from skill.timing.estimate import estimate_step_time
from skill.timing.schema import StepTimeRequest

ROWS_FILE = Path(__file__).with_name("published_step_times.json")
CPU_TOLERANCE = 0.3  # the CPU rows must be within 30% on this machine


class PublishedStepTime(BaseModel):
    """One row: where it was published, what it says, and its settings."""

    model_config = ConfigDict(extra="forbid")

    id: str
    framework: str
    kind: Literal["published", "cpu"]
    source: str
    where: str
    quote: str
    mapping: str
    model: str
    request: StepTimeRequest | None = None
    settings: dict[str, Any] | None = Field(default=None, description="The settings as read, for an unexpressed row.")
    reported_seconds_per_step: float
    reason: str = ""
    collected: str = Field(default="", description="When a held-out row was collected (ISO date).")
    cannot_express: str = Field(default="", description="Why the request cannot describe this run.")


class StepTimeRow(BaseModel):
    row: PublishedStepTime
    estimated_seconds_per_step: float | None
    ratio: float | None
    parts: str


def _shape(name: str, shapes: dict[str, Any]) -> ModelShape:
    if name in shapes:
        return ModelShape(**{k: v for k, v in shapes[name].items() if k != "source"})
    entry = known_model(name)
    if entry is None:
        raise KeyError(f"no shape for {name!r} in the table or skill.models.shapes")
    return entry.shape


@cache
def load_rows() -> tuple[PublishedStepTime, ...]:
    """The rows, each request with its model's shape."""
    data = json.loads(ROWS_FILE.read_text(encoding="utf-8"))
    rows = []
    for raw in data["rows"]:
        if raw.get("cannot_express"):
            rows.append(PublishedStepTime.model_validate({**raw, "settings": raw.get("settings"), "request": None}))
            continue
        request = {**raw["request"], "shape": _shape(raw["model"], data["shapes"])}
        rows.append(PublishedStepTime.model_validate({**raw, "request": request}))
    return tuple(rows)


def validate(row: PublishedStepTime) -> StepTimeRow:
    """Our steady step time for one row and its ratio to the reported one (none for a row it cannot express)."""
    if row.request is None:
        return StepTimeRow(row=row, estimated_seconds_per_step=None, ratio=None, parts="not estimated")
    estimate = estimate_step_time(row.request)
    steady = estimate.seconds_per_step - estimate.fixed_per_step_s
    fixed = estimate.fixed_per_step_s
    spread = f"{estimate.low_seconds_per_step - fixed:.1f}-{estimate.high_seconds_per_step - fixed:.1f}; "
    parts = f"gen {estimate.generation_s:.1f} + train {estimate.training_s:.1f} + sync {estimate.weight_sync_s:.1f}" + (
        f" + TRL {estimate.overhead_s:.1f}" if estimate.overhead_s else ""
    )
    parts = (spread if estimate.largest_uncertainty else "") + parts
    return StepTimeRow(
        row=row,
        estimated_seconds_per_step=round(steady, 2),
        ratio=round(steady / row.reported_seconds_per_step, 3),
        parts=parts,
    )


def validation_rows() -> list[StepTimeRow]:
    return [validate(row) for row in load_rows()]


def _figures(rows: list[StepTimeRow]) -> dict[str, Any]:
    """Errors over some published rows: a row the estimate cannot express counts as outside 2x and has no error."""
    estimated = [row.ratio for row in rows if row.ratio is not None]
    within_2x = sum(0.5 <= ratio <= 2 for ratio in estimated)
    return {
        "rows": len(rows),
        "estimated": len(estimated),
        "median_absolute_error": round(statistics.median(abs(r - 1) for r in estimated), 3) if estimated else None,
        "within_2x": f"{within_2x}/{len(rows)}",
        "within_2x_share": round(within_2x / len(rows), 3) if rows else 0.0,
        "high": sum(ratio > 1 for ratio in estimated),
        "low": sum(ratio < 1 for ratio in estimated),
    }


def validation_summary() -> dict[str, Any]:
    """Median absolute relative error (|estimate / reported - 1|) and the share within 2x over the published rows
    (and over the held-out ones alone), and the CPU rows' errors.

    >>> summary = validation_summary()
    >>> summary["published_rows"] >= 40 and summary["held_out"]["rows"] >= 30 and summary["cpu_rows"] >= 2
    True
    """
    rows = validation_rows()
    published = [row for row in rows if row.row.kind == "published"]
    cpu = [row for row in rows if row.row.kind == "cpu"]
    figures = _figures(published)
    return {
        "published_rows": len(published),
        "estimated_rows": figures["estimated"],
        "median_absolute_error": figures["median_absolute_error"],
        "within_2x": figures["within_2x"],
        "within_2x_share": figures["within_2x_share"],
        "high": figures["high"],
        "low": figures["low"],
        "held_out": _figures([row for row in published if row.row.collected]),
        "cpu_rows": len(cpu),
        "cpu_errors": {row.row.id: round((row.ratio or 0) - 1, 3) for row in cpu},
        "cpu_within_30_percent": all(row.ratio is not None and abs(row.ratio - 1) <= CPU_TOLERANCE for row in cpu),
    }


def validation_table() -> str:
    """The markdown table references/grpo-step-time.md shows (generated by scripts/generate.py)."""
    lines = [
        "| row | framework | reported (as published) | settings as mapped | reported s/step | estimate s/step "
        "(parts) | estimate / reported |",
        "|---|---|---|---|---|---|---|",
    ]
    for result in validation_rows():
        row = result.row
        source = f"[{row.id}]({row.source})" if row.source.startswith("http") else f"{row.id} ({row.source})"
        reason = f" {row.reason}" if row.reason else ""
        held_out = f" (held out, collected {row.collected})" if row.collected else ""
        if result.ratio is None:
            estimate, ratio = "not estimated", f"cannot express: {row.cannot_express}"
        else:
            estimate = f"{result.estimated_seconds_per_step:.1f} ({result.parts})"
            ratio = f"{result.ratio:.2f}x"
        lines.append(
            f"| {source}{held_out} | {row.framework} | {table_cell(row.quote)} ({table_cell(row.where)}) | "
            f"{table_cell(row.mapping)} | {row.reported_seconds_per_step:g} | {estimate} | {ratio}{reason} |"
        )
    summary = validation_summary()
    held = summary["held_out"]
    error = summary["median_absolute_error"]
    lines += [
        "",
        f"Published rows: {summary['published_rows']} ({summary['estimated_rows']} estimated), median absolute error "
        f"{'-' if error is None else f'{error:.0%}'} (|estimate / reported - 1|, estimated rows), "
        f"{summary['within_2x']} within 2x (a row not estimated is a miss), {summary['high']} high and "
        f"{summary['low']} low. Held out (collected before any estimator change): {held['rows']} rows "
        f"({held['estimated']} estimated), {held['within_2x']} within 2x. CPU rows (this machine): errors "
        + ", ".join(f"{key} {value:+.0%}" for key, value in summary["cpu_errors"].items())
        + f" ({'all' if summary['cpu_within_30_percent'] else 'NOT all'} within 30%).",
    ]
    return "\n".join(lines) + "\n"
