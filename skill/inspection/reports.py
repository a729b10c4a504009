"""Inspection report storage under the state root: each report as JSON, Markdown and HTML, and its key.

The key file (``<id>.key.json``) holds what the reader must not see: which samples are attention
checks and what they really scored, and the per-reward fingerprint parts at inspection time (to name
the reward that changed since). The state root's secret (``.attention-secret``, mode 0600) keys the
choice of checks, and ``.attention-shown.json`` remembers, per keyed sample, whether it was shown as a
check, so a sample shown again keeps its status; ``.attention-last.json`` the last inspection that showed each
answer; ``.failed-reads.json`` when reviews failed, per reward.
No tool or resource serves any of them. Owns: the reports directory, ``save_report``, ``load_report``, the key
file, the secret, the shown statuses, the failed reads. May
import: ``inspection.schema``, ``inspection.render``, ``state``, ``errors``.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from skill.errors import SkillError
from skill.inspection.render import render_html, render_markdown
from skill.inspection.schema import InspectionReport
from skill.state import exclusive_lock, state_dir, validate_identifier, write_atomically


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
        if not path.name.endswith(".key.json"):
            try:
                yield InspectionReport.model_validate_json(path.read_text())
            except ValueError:  # a file edited or torn by hand is no report (load_report names it when asked)
                continue


def save_key(report_id: str, key: dict[str, Any]) -> None:
    """Store a report's key: ``planted`` (the attention checks' ids), ``checks`` (what each shows and really
    scored) and ``fingerprint_parts``."""
    write_atomically(reports_dir() / f"{report_id}.key.json", json.dumps(key))


def load_key(report_id: str) -> dict[str, Any]:
    """A report's key (empty when it is missing)."""
    path = reports_dir() / f"{validate_identifier(report_id, 'inspection')}.key.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def planted_ids(report_id: str) -> list[int]:
    """The ids of a report's attention checks (none when its key is missing)."""
    return load_key(report_id).get("planted", [])


def inspected_fingerprint_parts(report_id: str) -> dict[str, str]:
    """The per-reward fingerprint parts a report was made with (empty when its key is missing)."""
    return load_key(report_id).get("fingerprint_parts", {})


def attention_secret() -> bytes:
    """This state root's secret for choosing attention checks, created once (mode 0600, atomically)."""
    path = reports_dir() / ".attention-secret"
    if not path.is_file():
        staged = path.with_name(f".attention-secret-{secrets.token_hex(8)}")
        descriptor = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(secrets.token_hex(32))
        try:
            os.link(staged, path)  # the first writer wins; a concurrent one reads the winner's
        except FileExistsError:
            pass
        finally:
            staged.unlink()
    return bytes.fromhex(path.read_text().strip())


@contextlib.contextmanager
def shown_statuses() -> Iterator[dict[str, bool]]:
    """Whether each keyed sample shown so far was shown as an attention check, to read and extend in one step:
    held under a lock (two inspections at once never decide the same sample twice) and written back atomically.

    >>> import os, tempfile
    >>> os.environ["GRPO_RLVR_HOME"] = tempfile.mkdtemp()
    >>> with shown_statuses() as statuses:
    ...     statuses["3fa2"] = True
    >>> with shown_statuses() as statuses:
    ...     statuses
    {'3fa2': True}
    """
    path = reports_dir() / ".attention-shown.json"
    with exclusive_lock(path.with_name(".attention-shown.lock")):
        try:
            statuses = json.loads(path.read_text()) if path.is_file() else {}
        except (json.JSONDecodeError, UnicodeDecodeError):  # written atomically, so only a hand edit breaks it
            raise SkillError(
                f"{path} (which answers were shown as attention checks) is unreadable.",
                "Restore it from a backup; or delete it, and every answer counts as never shown again.",
            ) from None
        before = dict(statuses)
        yield statuses
        if statuses != before:
            write_atomically(path, json.dumps(statuses, separators=(",", ":")))


FAILED_READS_WINDOW_S = 24 * 3600


def recent_failed_reads(reward: str, add: bool = False) -> list[float]:
    """When reads of samples checked on ``reward`` failed within the last day (``add``: count one more now).
    Called under the gate's review lock; kept in ``.failed-reads.json`` beside the reports."""
    path = reports_dir() / ".failed-reads.json"
    try:
        kept = json.loads(path.read_text()) if path.is_file() else {}
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise SkillError(
            f"{path} (when reviews failed) is unreadable.", "Restore it from a backup, or delete it."
        ) from None
    now = time.time()
    recent = [moment for moment in kept.get(reward, []) if now - moment < FAILED_READS_WINDOW_S]
    if add:
        kept[reward] = [*recent, now]
        write_atomically(path, json.dumps(kept))
    return recent + ([now] if add else [])


def _last_shown_path() -> Path:
    return reports_dir() / ".attention-last.json"


def shown_keys() -> frozenset[str]:
    """The keys of every answer an inspection has shown (see ``attention.sample_keys``)."""
    path = _last_shown_path()
    return frozenset(json.loads(path.read_text())) if path.is_file() else frozenset()


def record_last_shown(tags: list[str], report_id: str) -> None:
    """Remember ``report_id`` as the last inspection that showed these answers; call under ``shown_statuses``."""
    path = _last_shown_path()
    last = json.loads(path.read_text()) if path.is_file() else {}
    last.update(dict.fromkeys(tags, report_id))
    write_atomically(path, json.dumps(last, separators=(",", ":")))


def shown_again(tags: list[str], report_id: str) -> int:
    """How many of these answers a later inspection than ``report_id`` showed."""
    path = _last_shown_path()
    last = json.loads(path.read_text()) if path.is_file() else {}
    return sum(last.get(tag, report_id) != report_id for tag in tags)
