"""run.json as versions before the engine handle wrote it: the Slurm job in fields of its own (``job_id``,
``scheduler_state``), for every engine. ``data/run_json/slurm-before-engine-handle.json`` is one such file, as that
version wrote it; ``write_as_before`` turns a run's current run.json back into that form, so a test can show the run
still reports its status, resumes and cancels."""

from __future__ import annotations

import json
from pathlib import Path

SLURM_RUN_BEFORE_ENGINE_HANDLE = Path(__file__).parent / "data" / "run_json" / "slurm-before-engine-handle.json"
FIELDS_BEFORE = list(json.loads(SLURM_RUN_BEFORE_ENGINE_HANDLE.read_text()))


def write_as_before(directory: Path) -> dict:
    """Rewrite directory/run.json with the fields, and in the order, of the version before the engine handle."""
    now = json.loads((directory / "run.json").read_text())
    handle = now.pop("engine_handle", {})
    old = {"job_id": handle.get("job_id"), "scheduler_state": handle.get("scheduler_state"), **now}
    assert set(old) == set(FIELDS_BEFORE), set(old) ^ set(FIELDS_BEFORE)  # the old form exactly: nothing new kept
    written = {field: old[field] for field in FIELDS_BEFORE}
    (directory / "run.json").write_text(json.dumps(written, indent=1))
    return written
