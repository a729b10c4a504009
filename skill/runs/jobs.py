"""The job API: run_grpo returns at once with a run id; run_status, run_logs, cancel_run, list_runs read the
truth on disk (and reap the processes this server started, to know their exit code or signal)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from skill.errors import SkillError
from skill.hardware.layout import Sharding
from skill.inspection.gate import open_gate
from skill.recipe.checking.validation import validate_recipe
from skill.recipe.launching.launch import on_cpu_processes, with_sharding, write_files
from skill.recipe.launching.slurm_script import SlurmSettings
from skill.recipe.schema import GRPORecipe
from skill.runs import checks
from skill.runs.engine_choice import EngineSettings, ThisMachine, engine_for, engine_named, engine_resuming
from skill.runs.engines import Engine
from skill.runs.health import diagnose, headline, shape_of
from skill.runs.health_check import unchecked
from skill.runs.held_out import HeldOutChange, HeldOutScore, held_out_changes, held_out_scores, training_rows
from skill.runs.rehearsal import RehearsalReport, held_out_line, plan_rehearsal, read_report, write_report
from skill.runs.store import (
    FINAL_STATES,
    RunRecord,
    RunState,
    cancelled_reason,
    last_step,
    planned_steps,
    read_jsonl,
    read_recipe,
    read_record,
    resume_outlook,
    resume_preview,
    run_dir,
    runs_root,
    start_lock,
    tail,
    validate_run_id,
    write_record,
)
from skill.runs.time_estimate import time_fields, write_estimate
from skill.runs.tracking import Tracking, read_tracking
from skill.sampling.progress import Progress
from skill.state import new_id

MAX_RUNS_ENV = "GRPO_RLVR_MAX_RUNS"


class RunRequest(BaseModel):
    """Start (or resume) a GRPO run of a recipe on this machine."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # a misspelled field is an error; NaN/inf refused

    recipe: GRPORecipe | None = Field(default=None, description="The recipe (emit_grpo_config's output).")
    run_id: str | None = Field(default=None, description="A name for the run (default: generated).")
    resume_run_id: str | None = Field(default=None, description="Continue this run from its last checkpoint.")
    force: bool = Field(
        default=False, description="Override the memory, route and device checks (never the reward review)."
    )
    force_reason: str = ""
    held_out_fraction: float = Field(default=0.1, ge=0, lt=1)
    processes: int = Field(
        default=1,
        ge=1,
        description="CPU recipes only: N > 1 trains with N processes (accelerate launch, gloo), each holding a model "
        "copy. A GPU recipe's processes are its plan's; a resumed run keeps its count.",
    )
    nodes: int = Field(
        default=1,
        ge=1,
        description="CPU recipes on Slurm: spread the processes over this many nodes (a GPU recipe's: its own).",
    )
    sharding: Sharding | None = Field(
        default=None,
        description="Re-plan the sharding (the memory check and launch files follow); default: the recipe's.",
    )
    rehearse: bool = Field(
        default=False,
        description="Run a GPU recipe's own plan (engine, processes, launch files, checks, data, rewards, "
        "evaluation, checkpoints) on this machine's CPUs, substituting only what a CPU cannot do (CUDA, NCCL, bf16, "
        "vLLM, the weights: a miniature), each listed in run_status's rehearsal report. Minutes, before GPU-hours.",
    )
    engine: EngineSettings = Field(
        default_factory=ThisMachine,
        description='{"kind": "slurm", ...}: a Slurm job from here (needed for several nodes). Default: this machine.',
    )

    @model_validator(mode="before")
    @classmethod
    def _slurm_is_an_engine(cls, data: Any) -> Any:
        if isinstance(data, dict) and "slurm" in data:
            raise ValueError(
                'slurm settings are sent as the engine: {"engine": {"kind": "slurm", "partition": ...}} instead of '
                '{"slurm": {...}}'
            )
        return data


class RunStatus(BaseModel):
    """Where a run stands."""

    run_id: str
    state: RunState
    engine: str = Field(default="local", description="What runs the trainers: local | accelerate | slurm.")
    engine_handle: dict[str, Any] = Field(
        default_factory=dict,
        description="How the engine finds the run: the launcher's pid and the ports it was given, or the Slurm "
        "job_id and its scheduler_state (PENDING, RUNNING, TIMEOUT, ...; reason says why it waits).",
    )
    step: int = 0
    max_steps: int | None = None
    eta_seconds: float | None = None
    seconds_per_step: float | None = None
    estimated_seconds_per_step: float | None = Field(
        default=None, description="Estimated at the start (estimate.json)."
    )
    time_comparison: str | None = Field(default=None, description="Measured vs estimated s/step; the ETA blends them.")
    last_metrics: list[dict[str, Any]] = Field(default_factory=list)
    held_out: list[HeldOutScore] = Field(
        default_factory=list,
        description="Each held-out evaluation so far (before the first step, every N steps, after the last): the "
        "correctness rewards' mean on held-out prompts never trained on (pass@1 for a 0/1 reward), with a Wilson "
        "95% interval over the completions scored.",
    )
    held_out_change: list[HeldOutChange] = Field(
        default_factory=list,
        description="Each correctness reward's change from the first to the last evaluation, prompt by prompt: "
        "whether it is beyond noise, and how many prompts would tell.",
    )
    health: list[dict[str, Any]] = Field(
        default_factory=list, description="Warnings with suggested variants, the most likely cause first."
    )
    health_summary: str | None = Field(
        default=None, description="The single most likely cause and what to change; None while the run looks healthy."
    )
    health_unchecked: list[str] = Field(
        default_factory=list, description="Health checks not run: the run logged none of the metrics they read."
    )
    reason: str | None = None
    exit_code: int | None = None
    signal: int | None = None
    resume: str | None = Field(
        default=None,
        description="How the last resume went: from which checkpoint, or that there was none and the run started "
        "over from step 0 (the killed attempt's metrics and completions dropped); before any, what one would do now.",
    )
    reward_review: str | None = Field(
        default=None,
        description="How the rewards were reviewed: 'reviewed: ...', or 'reward not reviewed: ...' when they were "
        "accepted unread (accept_unread).",
    )
    paths: dict[str, str] = Field(default_factory=dict)
    tracking: list[Tracking] = Field(default_factory=list, description="Where the tracker shows the run; how to open.")
    rehearsal: RehearsalReport | None = Field(
        default=None, description="For a rehearsal (rehearse=true): what ran, what was substituted, each rank."
    )


class RunLogs(BaseModel):
    run_id: str
    lines: list[str]


class RunList(BaseModel):
    runs: list[RunStatus]


def _refresh(directory: Path) -> RunRecord:
    """Reconcile run.json with the run's engine: a dead launcher is never left 'running'."""
    return engine_named(read_record(directory).engine).state(directory)


def _status(directory: Path, points: int = 5) -> RunStatus:
    record = _refresh(directory)
    metrics = read_jsonl(directory / "metrics.jsonl")
    step = last_step(directory, record, training_rows(metrics))  # the held-out evaluations are not steps
    planned = planned_steps(directory, record)
    timing = time_fields(directory, metrics, planned - step if planned else None, record.state)
    warnings = []
    if metrics:
        recipe = read_recipe(directory)
        shape = shape_of(recipe.trl, recipe.launch.training_processes, recipe.evaluation)
        # A run that ended (cancelled or failed too) is judged at its own end, not at a share of a plan it left.
        end = step if record.state in FINAL_STATES else planned
        warnings = diagnose(metrics, recipe.rewards, recipe.grpo.max_completion_length, shape, end, recipe.trl)
    health = [w.model_dump() for w in warnings]
    not_run = unchecked(metrics) if metrics else []
    paths = {
        name: str(directory / name)
        for name in (
            "train.log",
            "metrics.jsonl",
            "metrics.header.json",
            "completions.jsonl",
            "reward_curve.png",
            "final",
        )
        if (directory / name).exists()
    }
    engine = engine_named(record.engine)
    paths.update((path.name, str(path)) for path in engine.log_paths(directory) if path.exists())
    return RunStatus(
        run_id=record.run_id,
        state=record.state,
        engine=record.engine,
        engine_handle={
            **({"pid": record.pid} if record.pid else {}),
            **{f"{k}_port": v for k, v in record.ports.items()},
            **record.engine_handle,
        },
        step=step,
        max_steps=planned,
        **timing,
        last_metrics=metrics[-points:],
        held_out=held_out_scores(metrics),
        held_out_change=held_out_changes(metrics),
        health=health,
        health_summary=headline(warnings),
        health_unchecked=not_run,
        reason=record.reason,
        exit_code=record.exit_code,
        signal=record.signal,
        reward_review=record.review,
        resume=record.resume_note or resume_outlook(directory, record),
        paths=paths,
        tracking=read_tracking(directory),
        rehearsal=read_report(directory),
    )


def _live_runs() -> list[str]:
    """The runs holding a slot of the cap; called under the start lock only."""
    live = []
    for directory in runs_root().iterdir():
        if not (directory / "run.json").is_file():
            continue
        record = _refresh(directory)
        if record.state == "starting" and record.pid is None and not record.engine_handle:
            # Under the start lock nobody is between preparing and spawning: a server died there.
            record.state, record.ended_at = "failed", time.time()
            record.reason = "the server stopped before it started the training process; start the run again"
            write_record(directory, record)
        elif record.state in ("starting", "running"):
            live.append(directory.name)
    return live


def _prepare(request: RunRequest, recipe: GRPORecipe, run_id: str) -> Path:
    """Every check, then the run directory, built aside and renamed into place: never half-written."""

    validate_recipe(recipe)  # as strictly as emit_grpo_config: a hand-edited recipe is refused here, not in training
    gate = open_gate(recipe.rewards, recipe.trl, policy_model=recipe.provenance.policy_samples_of)  # never overridable
    if request.force and not request.force_reason.strip():
        raise SkillError(
            "force needs a recorded reason.", "Send force_reason explaining why the checks are overridden."
        )
    recipe, engine, notes, rehearsal = _checked_plan(request, recipe)
    notes.insert(0, f"Gate: {gate.stamp}.")
    rows = checks.load_rows(recipe)
    checks.check_columns(recipe, rows)
    rows, dropped = checks.filter_long_prompts(recipe, rows)
    if dropped:
        notes.append(f"Dropped {dropped} prompt(s) over {recipe.dataset.max_prompt_tokens} tokens.")
    probed = checks.probed_prompts(recipe.provenance.route_decision, gate.inspection_id)
    train, held_out = checks.split_held_out(rows, recipe.grpo.seed, request.held_out_fraction, probed)
    repeats = len(rows) - len(train) - len(held_out)
    notes.append(
        f"{len(train)} training prompts, {len(held_out)} held out for evaluation (none of the route's or the "
        "inspection's prompts" + (f"; {repeats} repeat(s) of held-out prompts not trained on" if repeats else "") + ")."
    )
    staging = Path(tempfile.mkdtemp(prefix=f".{run_id}-", dir=runs_root()))
    try:
        (staging / "recipe.json").write_text(recipe.model_dump_json(indent=1))
        if rehearsal is None:  # a rehearsal's miniature on CPUs has no estimate: its ETA is the measured one
            write_estimate(staging, recipe)
        write_files(engine.files(recipe), staging)
        if rehearsal is not None:
            write_report(staging, rehearsal.model_copy(update={"held_out": held_out_line(recipe, len(held_out))}))
        (staging / "train.jsonl").write_text("".join(json.dumps(r, default=str) + "\n" for r in train))
        (staging / "heldout.jsonl").write_text("".join(json.dumps(r, default=str) + "\n" for r in held_out))
        write_record(
            staging,
            RunRecord(
                run_id=run_id,
                max_steps=recipe.grpo.max_steps if recipe.grpo.max_steps > 0 else None,
                checks=notes,
                force_reason=request.force_reason or None,
                inspection_id=gate.inspection_id,
                review=gate.stamp,
                engine=engine.name,
            ),
        )
        target = runs_root() / run_id
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def _checked_plan(request: RunRequest, recipe: GRPORecipe) -> tuple[GRPORecipe, Engine, list[str], Any]:
    """The plan the run will launch, its engine and the checks' notes (the rehearsal's report for a rehearsal)."""
    if request.rehearse:
        return _rehearsal_plan(request, recipe)
    recipe = on_cpu_processes(recipe, request.processes, request.nodes)  # the request's choice among valid plans
    engine = engine_for(recipe, request.engine)
    notes = checks.check_target(recipe, request.force, on_this_machine=engine.runs_here)
    notes += checks.check_route(recipe, request.force) + checks.check_tracker(recipe)
    notes += checks.check_cpu_processes(recipe, request.force, on_this_machine=engine.runs_here)
    recipe = with_sharding(recipe, request.sharding)  # the plan's, or the caller's: what the memory check weighs
    notes.append(f"Sharding: {recipe.launch.sharding_reason}")
    notes += checks.check_memory(recipe, request.force)
    if engine.runs_here:  # a cluster's nodes are the scheduler's to grant, and launch_node.sh checks their packages
        notes += checks.check_devices(recipe, request.force) + checks.check_packages(recipe)
    notes += engine.preflight(recipe)
    notes.append(
        f"Engine: {engine.name} ({recipe.launch.training_processes} training process(es) on "
        f"{recipe.hardware.nodes} node(s))."
    )
    return recipe, engine, notes, None


def _rehearsal_plan(request: RunRequest, recipe: GRPORecipe) -> tuple[GRPORecipe, Engine, list[str], Any]:
    """A GPU recipe's own plan on this machine's CPUs (skill.runs.rehearsal): the plan's engine and world size, the
    substitutions checked against its launch files, the real target's memory verdict reported, not enforced."""
    if request.processes != 1 or request.nodes != 1:
        raise SkillError(
            "A rehearsal runs the plan's own layout; processes and nodes are for CPU recipes.",
            "Send processes=1 and nodes=1 (the defaults) with rehearse=true.",
        )
    real = with_sharding(recipe, request.sharding)
    engine = engine_for(real, request.engine, rehearsal=True)
    slurm = request.engine if isinstance(request.engine, SlurmSettings) else None
    rehearsed, report = plan_rehearsal(real, slurm, engine.name)
    notes = [
        f"Rehearsal of {report.plan}.",
        *(f"Substituted {item.what}: {item.why}." for item in report.substitutions),
    ]
    notes += checks.check_route(rehearsed, request.force) + checks.check_tracker(rehearsed)
    if engine.runs_here:
        notes += checks.check_packages(rehearsed)
    return rehearsed, engine, notes + engine.preflight(rehearsed), report


def _gate_resume(directory: Path, record: RunRecord) -> None:
    """A resumed run trains on the reward code as it is now: the same gate as a new run, recorded again."""
    recipe = read_recipe(directory)
    try:
        gate = open_gate(recipe.rewards, recipe.trl, policy_model=recipe.provenance.policy_samples_of)
    except SkillError as exc:
        raise SkillError(f"Run {record.run_id} cannot resume: {exc.problem}", exc.fix) from None
    record.inspection_id, record.review = gate.inspection_id, gate.stamp
    record.checks += [f"Resumed; gate: {gate.stamp}.", *checks.check_tracker(recipe)]


def run_grpo(request: RunRequest) -> RunStatus:
    """Start a GRPO run in its own process and return at once with its id (or resume one).

    Checks first, refusing with the reason: an inspection that opens the gate for the recipe's rewards at
    the weights TRL will use (never overridable; a resumed run is checked again, on the code as it is now),
    the route decision, the memory estimate, the target machine, the data's columns and
    prompt lengths. A cap on concurrent runs (GRPO_RLVR_MAX_RUNS, default 1) refuses with the running ones.
    The engine follows from the launch plan (skill.runs.engine_choice): one process locally, several under
    ``accelerate launch`` (with the plan's vLLM server), or a Slurm batch job for ``engine`` kind slurm (needed for
    several nodes); ``processes`` > 1 (and ``nodes``) lays a CPU recipe out for that many.
    """
    limit = max_runs()
    with start_lock():  # the cap is checked and taken in one step, across threads and server processes
        live = _live_runs()
        if len(live) >= limit:
            raise SkillError(
                f"{len(live)} run(s) already running ({', '.join(live)}); the limit is {limit}.",
                f"Wait for or cancel one (cancel_run), or raise {MAX_RUNS_ENV}.",
            )
        return _start(request)


def max_runs() -> int:
    """The cap on concurrent runs from GRPO_RLVR_MAX_RUNS (default 1; 0 refuses every run).

    >>> max_runs() >= 0
    True
    """
    text = os.environ.get(MAX_RUNS_ENV, "1")
    try:
        limit = int(text)
    except ValueError:
        limit = -1
    if limit < 0:
        raise SkillError(
            f"{MAX_RUNS_ENV}={text!r} is not a whole number >= 0.", f"Set {MAX_RUNS_ENV} to 1 or more (0: no runs)."
        )
    return limit


def _start(request: RunRequest) -> RunStatus:
    """A resumed or new run, spawned; under the start lock."""
    if request.resume_run_id:
        directory = run_dir(request.resume_run_id)
        record = _refresh(directory)
        if record.state in ("starting", "running"):
            raise SkillError(f"Run {record.run_id} is still running.", "Cancel it first, or wait.")
        recorded = read_recipe(directory)
        processes, nodes = recorded.launch.training_processes, recorded.hardware.nodes
        changed = request.sharding not in (None, recorded.launch.sharding)
        if request.processes not in (1, processes) or request.nodes not in (1, nodes) or changed:
            raise SkillError(
                f"Run {record.run_id} trained with {processes} process(es) on {nodes} node(s), sharding "
                f"{recorded.launch.sharding or 'as its launch files say'}; a resumed run keeps its layout (and its "
                "engine): its checkpoints are in that plan's format.",
                "Send processes=1, nodes=1 and no sharding (the defaults) to resume as recorded.",
            )
        _gate_resume(directory, record)
        # "starting" with no pid until the spawn: a concurrent status call must not see the old, dead pid as "running"
        # and mark the run failed between this write and the spawn's.
        record.state, record.pid, record.process_start_ticks, record.engine_handle = "starting", None, None, {}
        record.reason = record.exit_code = record.signal = record.ended_at = None
        record.resume_note = resume_preview(directory)  # the worker writes what it did once it starts
        write_record(directory, record)
        try:  # the same plan, at the same world size, its launch files as this version writes them
            engine_resuming(record.engine, directory).submit(directory, resume=True)
        except SkillError as exc:
            record.state, record.reason, record.ended_at = "failed", str(exc), time.time()
            write_record(directory, record)
            raise
        return _status(directory)
    if request.recipe is None:
        raise SkillError("No recipe to run.", "Send recipe (from emit_grpo_config) or resume_run_id.")
    generated = new_id("run")
    run_id = validate_run_id(generated if request.run_id is None else request.run_id)
    if (runs_root() / run_id).exists():
        raise SkillError(f"Run {run_id!r} exists.", "Send another run_id, or resume_run_id to continue it.")
    directory = _prepare(request, request.recipe, run_id)
    try:
        engine_named(read_record(directory).engine).submit(directory, resume=False)
    except SkillError:  # refused (sbatch): the new run leaves nothing behind
        shutil.rmtree(directory, ignore_errors=True)
        raise
    return _status(directory)


PROGRESS_EVERY_S = 5.0
"""A waiting run_status reports progress at least this often (a client that resets its timeout on progress
follows a run for as long as it asks), and at once when the step moves."""


def run_status(
    run_id: str, wait_seconds: float = 0.0, progress: Progress | None = None, until_step: int | None = None
) -> RunStatus:
    """State, step, ETA, the last metric points and health warnings. With wait_seconds, waits that long for the
    run to end or, given until_step, to reach that step, reporting progress while it waits."""
    directory = run_dir(run_id)
    status, deadline, reported_at, reported_step = _status(directory), time.time() + max(0.0, wait_seconds), 0.0, -1

    def waiting(status: RunStatus) -> bool:
        reached = until_step is not None and status.step >= until_step
        return status.state in ("starting", "running") and not reached and time.time() < deadline

    while waiting(status):
        time.sleep(min(1.0, max(0.1, deadline - time.time())))
        status = _status(directory)
        now = time.time()
        if progress is not None and (status.step != reported_step or now - reported_at >= PROGRESS_EVERY_S):
            total = status.max_steps or max(status.step, until_step or 0) + 1
            eta = f", ETA {status.eta_seconds:.0f} s" if status.eta_seconds is not None else ""
            progress(status.step, total, f"step {status.step}/{status.max_steps or '?'} ({status.state}{eta})")
            reported_at, reported_step = now, status.step
    return status


def run_logs(run_id: str, lines: int = 100) -> RunLogs:
    """The last lines of the run's train.log (every rank's output, and the launcher's)."""
    return RunLogs(run_id=run_id, lines=tail(run_dir(run_id) / "train.log", max(1, min(lines, 5000))))


def cancel_run(run_id: str) -> RunStatus:
    """Stop a run: everything its engine started (the vLLM server too); nothing is left behind."""
    directory = run_dir(run_id)
    record = _refresh(directory)
    if record.state in FINAL_STATES:
        return _status(directory)
    record.state, record.reason, record.ended_at = "cancelled", cancelled_reason(directory), time.time()
    write_record(directory, record)
    engine_named(record.engine).cancel(directory, record)
    stopped = read_record(directory)
    if stopped.state in ("starting", "running"):  # a worker starting up wrote 'running' over it before it stopped
        write_record(directory, record)
    return _status(directory)


def list_runs() -> RunList:
    """Every run under the state root, newest first."""
    directories = sorted(
        (p for p in runs_root().iterdir() if (p / "run.json").is_file()),
        key=lambda p: read_record(p).created_at,
        reverse=True,
    )
    return RunList(runs=[_status(directory, points=1) for directory in directories])
