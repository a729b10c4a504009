"""Inspection report storage under the state root: each report sealed whole (``inspection.seal``), and what a
reader may see now (``inspection.render.visible``) as JSON, Markdown and the HTML reading page.

Owns: the reports directory, ``save_report``, ``load_report``, ``stored_reports``. May import:
``inspection.schema``, ``inspection.render``, ``inspection.reading_page``, ``inspection.seal``, ``state``,
``errors``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from skill.errors import SkillError
from skill.inspection.reading_page import render_html
from skill.inspection.render import render_markdown, visible
from skill.inspection.schema import InspectionReport
from skill.inspection.seal import seal, unseal
from skill.state import state_dir, validate_identifier, write_atomically


def reports_dir() -> Path:
    """Where inspection reports live (created on first use)."""
    return state_dir("inspections")


def save_report(report: InspectionReport) -> InspectionReport:
    """Store the report under inspections/: sealed whole, then what a reader may see now as JSON, Markdown and
    HTML (each atomically; the sealed copy first, so a crash never leaves a view without its report). Returns
    the whole report, its paths set."""
    directory = reports_dir()
    paths = {
        "json": directory / f"{report.id}.json",
        "markdown": directory / f"{report.id}.md",
        "html": directory / f"{report.id}.html",
    }
    report.paths = {kind: str(path) for kind, path in paths.items()}
    seal(directory / f"{report.id}.sealed", report.model_dump_json())
    for kind, text in (
        ("markdown", render_markdown(report)),
        ("html", render_html(report)),
        ("json", visible(report).model_dump_json(indent=1)),
    ):
        write_atomically(paths[kind], text)
    return report


def _read(path: Path) -> InspectionReport:
    """The whole report stored at ``path`` (its sealed copy; a report stored before sealing is its JSON)."""
    sealed = path.with_suffix(".sealed")
    return InspectionReport.model_validate_json(unseal(sealed) if sealed.is_file() else path.read_text())


def load_report(report_id: str) -> InspectionReport:
    """A stored report by id, whole: the library's own reading. A reader is shown ``render.visible`` of it."""
    path = reports_dir() / f"{validate_identifier(report_id, 'inspection')}.json"
    if not path.is_file():
        raise SkillError(f"No inspection {report_id!r} under {path.parent}.", "Send an id inspect_rewards returned.")
    return _read(path)


def stored_reports() -> Iterator[InspectionReport]:
    """Every stored report, whole, newest first (ids sort by time), read one at a time as the caller asks."""
    for path in sorted(reports_dir().glob("insp-*.json"), reverse=True):
        try:
            yield _read(path)
        except ValueError:  # a file edited or torn by hand is no report (load_report names it when asked)
            continue
