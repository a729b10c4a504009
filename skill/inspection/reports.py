"""Inspection report storage under the state root: each report as JSON, Markdown and the HTML reading page.

Nothing here is secret: every figure in a report is a real one. Owns: the reports directory, ``save_report``,
``load_report``, ``stored_reports``. May import: ``inspection.schema``, ``inspection.render``, ``state``,
``errors``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from skill.errors import SkillError
from skill.inspection.reading_page import render_html
from skill.inspection.render import render_markdown
from skill.inspection.schema import InspectionReport
from skill.state import state_dir, validate_identifier, write_atomically


def reports_dir() -> Path:
    """Where inspection reports live (created on first use)."""
    return state_dir("inspections")


def save_report(report: InspectionReport) -> InspectionReport:
    """Store the report (JSON, Markdown, HTML) atomically under inspections/."""
    directory = reports_dir()
    paths = {
        "json": directory / f"{report.id}.json",
        "markdown": directory / f"{report.id}.md",
        "html": directory / f"{report.id}.html",
    }
    report.paths = {kind: str(path) for kind, path in paths.items()}
    for kind, text in (
        ("markdown", render_markdown(report)),
        ("html", render_html(report)),
        ("json", report.model_dump_json(indent=1)),
    ):
        write_atomically(paths[kind], text)
    return report


def load_report(report_id: str) -> InspectionReport:
    """A stored report by id."""
    path = reports_dir() / f"{validate_identifier(report_id, 'inspection')}.json"
    if not path.is_file():
        raise SkillError(f"No inspection {report_id!r} under {path.parent}.", "Send an id inspect_rewards returned.")
    return InspectionReport.model_validate_json(path.read_text())


def stored_reports() -> Iterator[InspectionReport]:
    """Every stored report, newest first (ids sort by time), read one at a time as the caller asks."""
    for path in sorted(reports_dir().glob("insp-*.json"), reverse=True):
        try:
            yield InspectionReport.model_validate_json(path.read_text())
        except ValueError:  # a file edited or torn by hand is no report (load_report names it when asked)
            continue
