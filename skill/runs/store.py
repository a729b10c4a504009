"""The truth on disk: one directory per run under the state root, and what its run.json says.

runs/<run_id>/: recipe.json, run.json (state, pid and process start time, times, exit code, reason),
train.jsonl / heldout.jsonl (the data as split), metrics.jsonl, completions.jsonl, train.log,
checkpoints/, reward_curve.png, final/. A server restart finds its runs again from these files;
liveness is the pid *and* the process start time, since pids are reused.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from skill.errors import SkillError
from skill.grpo_fields import GRPOFields
from skill.recipe.schema import GRPORecipe, load_recipe
from skill.state import exclusive_lock, state_dir, validate_identifier, write_atomically

RunState = Literal["starting", "running", "succeeded", "failed", "cancelled"]
FINAL_STATES = ("succeeded", "failed", "cancelled")


class RunRecord(BaseModel):
    """run.json: what the runner knows about one run."""

    run_id: str
    state: RunState = "starting"
    pid: int | None = None
    process_start_ticks: int | None = Field(default=None, description="Field 22 of /proc/<pid>/stat.")
    created_at: float = Field(default_factory=time.time)
    started_at: float | None = None
    ended_at: float | None = None
    exit_code: int | None = None
    signal: int | None = None
    reason: str | None = None
    max_steps: int | None = None
    resumed_from_step: int | None = None
    force_reason: str | None = None
    inspection_id: str | None = None
    review: str | None = Field(default=None, description="Who reviewed the inspection, and how.")
    checks: list[str] = Field(default_factory=list, description="What the preflight checked and decided.")
    engine: str = Field(
        default="local", description="What runs the trainers: local | accelerate | slurm (skill.runs.engine_choice)."
    )
    ports: dict[str, int] = Field(default_factory=dict, description="Ports picked for this attempt, by role.")
    engine_handle: dict[str, Any] = Field(
        default_factory=dict,
        description="How the engine finds this attempt again, read by that engine only (the slurm engine: job_id, "
        "and the scheduler_state it last read).",
    )
    command: list[str] = Field(default_factory=list, description="The launcher's command line.")
    resume_note: str | None = Field(default=None, description="How the last resume went (the worker says).")

    @model_validator(mode="before")
    @classmethod
    def _slurm_fields_into_the_handle(cls, data: Any) -> Any:
        """A run.json written before the engine handle kept the Slurm job in fields of its own: they move into it,
        so those runs still report their status, resume and cancel.

        >>> old = {"run_id": "r", "engine": "slurm", "job_id": 41, "scheduler_state": None}
        >>> RunRecord.model_validate(old).engine_handle
        {'job_id': 41}
        """
        if not isinstance(data, dict) or not {"job_id", "scheduler_state"} & set(data):
            return data
        data = dict(data)
        moved = {key: data.pop(key, None) for key in ("job_id", "scheduler_state")}
        data["engine_handle"] = {**{k: v for k, v in moved.items() if v is not None}, **data.get("engine_handle", {})}
        return data


def validate_run_id(run_id: str) -> str:
    """Refuse run ids that could escape the runs directory.

    >>> validate_run_id("demo-1")
    'demo-1'
    """
    return validate_identifier(run_id, "run")


def runs_root() -> Path:
    return state_dir("runs")


def run_dir(run_id: str) -> Path:
    """The directory of an existing run."""
    path = runs_root() / validate_run_id(run_id)
    if not (path / "run.json").is_file():
        raise SkillError(f"No run {run_id!r} under {runs_root()}.", "Send an id from list_runs.")
    return path


START_LOCK = ".start.lock"


@contextlib.contextmanager
def start_lock() -> Iterator[None]:
    """Hold the runs directory's start lock: one run start at a time, across the threads of one server and across
    server processes sharing a state root (an exclusive ``flock`` on a file there), so the run cap is checked and
    taken as one step.

    >>> with start_lock():
    ...     (runs_root() / START_LOCK).is_file()
    True
    """
    with exclusive_lock(runs_root() / START_LOCK):
        yield


def read_recipe(directory: Path) -> GRPORecipe:
    """The recipe a run directory trains (its ``recipe.json``)."""
    return load_recipe(directory / "recipe.json")


def read_record(directory: Path) -> RunRecord:
    return RunRecord.model_validate_json((directory / "run.json").read_text())


def write_record(directory: Path, record: RunRecord) -> None:
    """Replace run.json atomically: readers never see half a file."""
    write_atomically(directory / "run.json", record.model_dump_json(indent=1))


def process_start_ticks(pid: int) -> int | None:
    """The kernel's start time of a process (clock ticks since boot), or None if it does not exist."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: split after its closing one.
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[19])


def is_alive(record: RunRecord) -> bool:
    """The recorded process still exists and is the same process (same start time), not a zombie."""
    if record.pid is None:
        return False
    ticks = process_start_ticks(record.pid)
    if ticks is None or ticks != record.process_start_ticks:
        return False
    try:
        state = Path(f"/proc/{record.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


METRICS_HEADER = "metrics.header.json"  # beside metrics.jsonl: the run's reward review and its planned length


def planned_steps(directory: Path, record: RunRecord) -> int | None:
    """The run's length in optimizer steps: the recipe's max_steps, else what the trainer planned from the
    epochs (written to the metrics header when training begins); None before that is known."""
    if record.max_steps:
        return record.max_steps
    header = directory / METRICS_HEADER
    try:
        planned = json.loads(header.read_text()).get("max_steps") if header.is_file() else None
    except (OSError, json.JSONDecodeError):
        return None
    return planned if isinstance(planned, int) and planned > 0 else None


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Lines of a JSONL file; a torn last line (a writer killed mid-write) is skipped."""
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def append_jsonl(path: Path, *rows: dict[str, Any]) -> None:
    """Append rows in one write and one fsync (a step's lines land together, or not at all but the last)."""
    with path.open("a") as handle:
        handle.write("".join(json.dumps(row, default=str) + "\n" for row in rows))
        handle.flush()
        os.fsync(handle.fileno())


def checkpoint_step(checkpoint: Path | None) -> int:
    """The step a checkpoint-N directory was saved at; 0 for none (training starts over).

    >>> checkpoint_step(Path("checkpoints/checkpoint-15")), checkpoint_step(None)
    (15, 0)
    """
    return int(checkpoint.name.split("-")[1]) if checkpoint is not None else 0


def latest_checkpoint(directory: Path) -> Path | None:
    """The newest checkpoint-N directory (under a run's ``checkpoints``) holding a trainer state, or None."""
    found = [p for p in directory.glob("checkpoint-*") if (p / "trainer_state.json").is_file()]
    return max(found, key=checkpoint_step, default=None)


KEEP_CHECKPOINTS = 2
# Checkpoints: four a run, at most one every MIN_STEPS_PER_CHECKPOINT steps. A checkpoint writes the weights and the
# optimizer state (three times the weights in float32 with AdamW: 1.6 GB for the embedded 135M model, about 5 s on
# 2 CPU cores, 2026-12-03); on a run of a few steps, one every step cost more than the steps it protects.
CHECKPOINTS_PER_RUN = 4
MIN_STEPS_PER_CHECKPOINT = 5


def checkpoint_every(grpo: GRPOFields) -> int:
    """Steps between checkpoints: the recipe's save_steps where it sets one, else four a run and at most one every
    five steps.

    >>> [checkpoint_every(GRPOFields(kwargs)) for kwargs in ({"max_steps": 8}, {"max_steps": 200},
    ...     {"max_steps": 8, "save_steps": 1})]
    [5, 50, 1]
    """
    if grpo.is_set("save_steps"):
        return int(grpo.save_steps)
    return max(MIN_STEPS_PER_CHECKPOINT, (grpo.max_steps if grpo.max_steps > 0 else 100) // CHECKPOINTS_PER_RUN)


def resume_outlook(directory: Path, record: RunRecord) -> str | None:
    """What a resume would do now, for a run never resumed that has not finished: continue from its latest
    checkpoint, or start over while none is saved (and when the first comes)."""
    if record.state == "succeeded":
        return None
    checkpoint = latest_checkpoint(directory / "checkpoints")
    if checkpoint is not None:
        return f"a resume now would continue from {checkpoint.name}"
    every = checkpoint_every(read_recipe(directory).grpo)
    return f"no checkpoint yet (the first comes at step {every}): a resume now would start over from step 0"


RESUMING = "resuming"  # resume_preview's first word: until the worker replaces it, old steps are still logged


def last_step(directory: Path, record: RunRecord, training: list[dict[str, Any]]) -> int:
    """The last step trained: the last training row's, except while a resume's worker has not yet dropped the steps
    it trains again (its run.json still holds resume_preview's words): then the checkpoint's step, 0 when none.

    >>> import tempfile
    >>> record = RunRecord(run_id="r", resume_note=resume_preview(Path(tempfile.mkdtemp())))
    >>> last_step(Path(tempfile.mkdtemp()), record, [{"step": 1}, {"step": 2}])
    0
    """
    if record.resume_note and record.resume_note.startswith(RESUMING):
        return checkpoint_step(latest_checkpoint(directory / "checkpoints"))
    return training[-1]["step"] if training else 0


def resume_preview(directory: Path) -> str:
    """What a resume of the run will do, said before its worker starts: from which checkpoint, or over from step 0.

    >>> import tempfile
    >>> resume_preview(Path(tempfile.mkdtemp()))
    'resuming: no checkpoint was saved, so it starts over from step 0 (the steps logged so far are dropped)'
    """
    checkpoint = latest_checkpoint(directory / "checkpoints")
    if checkpoint is None:
        return (
            f"{RESUMING}: no checkpoint was saved, so it starts over from step 0 (the steps logged so far are dropped)"
        )
    return f"{RESUMING} from {checkpoint.name} (step {checkpoint_step(checkpoint)})"


def cancelled_reason(directory: Path) -> str:
    """Why a run stopped, and what a resume of it will do: a cancel before the first checkpoint loses every step."""
    checkpoint = latest_checkpoint(directory / "checkpoints")
    if checkpoint is None:
        return "cancelled on request before its first checkpoint: a resume starts over from step 0"
    return f"cancelled on request; a resume continues from {checkpoint.name}"


def keep_steps_up_to(path: Path, step: int) -> int:
    """Rewrite a JSONL file of step rows keeping those at or before ``step`` (0 keeps none), atomically; returns how
    many rows were dropped. A resumed run retrains the steps after its checkpoint: their old rows must go.

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "metrics.jsonl"
    >>> append_jsonl(path, {"step": 1}, {"step": 2}, {"step": 3})
    >>> keep_steps_up_to(path, 2), [row["step"] for row in read_jsonl(path)]
    (1, [1, 2])
    """
    if not path.is_file():
        return 0
    rows = read_jsonl(path)
    kept = [row for row in rows if isinstance(row.get("step"), int) and row["step"] <= step]
    write_atomically(path, "".join(json.dumps(row, default=str) + "\n" for row in kept))
    return len(rows) - len(kept)


def tail(path: Path, lines: int) -> list[str]:
    if not path.is_file():
        return []
    return path.read_text(errors="replace").splitlines()[-lines:]
