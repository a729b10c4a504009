"""The ``slurm`` engine: a run as a Slurm batch job of the run directory's own ``slurm.sbatch``.

- ``submit`` is ``sbatch``: the job's output is appended to train.log, the worker is every rank's trainer, and
  ``--resume`` marks a resubmission. A refusal removes a new run's directory (a resumed one records why).
- ``state`` combines run.json (written by rank 0, the truth about training) with what the scheduler says of the
  job, from ``scontrol show job`` (no accounting database needed; ``sacct`` once the controller has forgotten it).
  A job the scheduler ends (time limit, node failure, out of memory) ends the run as failed with the scheduler's
  JobState and Reason. A controller that does not answer changes nothing: the run keeps its state, and says so.
- ``cancel`` is ``scancel``, waiting until the job has left every node.

May import: ``recipe``, ``runs.engines``, ``runs.store``, ``errors``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

from pydantic import BaseModel

from skill.errors import SkillError
from skill.recipe.launching.launch import launch_files
from skill.recipe.launching.launch_commands import CONFIG_FILE, NODE_SCRIPT, SLURM_SCRIPT
from skill.recipe.launching.slurm_script import FILES_NOT_SHARED_EXIT, SlurmSettings, slurm_script
from skill.recipe.schema import GRPORecipe
from skill.runs.engines import AccelerateEngine, EngineName, launch_environment
from skill.runs.rehearsal import cpu_slurm_script
from skill.runs.store import FINAL_STATES, RunRecord, read_record, tail, write_record

SCHEDULER_TIMEOUT_S = 30.0
CANCEL_WAIT_S = 120.0  # scancel's SIGTERM, Slurm's KillWait, then SIGKILL and the nodes' clean-up
WAITING = ("PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "SUSPENDED")
ACTIVE = ("RUNNING", "COMPLETING", "STAGE_OUT", "SIGNALING", "RESIZING", "STOPPED")


class SchedulerError(Exception):
    """The Slurm controller did not answer (or the command is missing)."""


class SlurmJob(BaseModel):
    """What the scheduler says of one job."""

    job_id: int
    state: str
    reason: str = "None"
    exit_code: str = "0:0"


def _slurm(args: list[str], stdin: str | None = None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(args, input=stdin, capture_output=True, text=True, timeout=SCHEDULER_TIMEOUT_S)
    except FileNotFoundError:
        raise SchedulerError(f"{args[0]} is not on PATH") from None
    except subprocess.TimeoutExpired:
        raise SchedulerError(f"{args[0]} did not answer in {SCHEDULER_TIMEOUT_S:.0f} s") from None


def job_info(job_id: int) -> SlurmJob | None:
    """The job as the controller knows it, else as accounting does; None when neither knows it."""
    done = _slurm(["scontrol", "show", "job", "-o", str(job_id)])
    if done.returncode == 0 and "JobState=" in done.stdout:
        fields = dict(re.findall(r"(\w+)=(\S*)", done.stdout))
        state = fields["JobState"]
        return SlurmJob(
            job_id=job_id, state=state, reason=fields.get("Reason", "None"), exit_code=fields.get("ExitCode", "0:0")
        )
    if "Invalid job id" not in done.stderr:
        raise SchedulerError((done.stderr or done.stdout).strip() or f"scontrol exited {done.returncode}")
    if shutil.which("sacct") is None:
        return None
    accounted = _slurm(["sacct", "-n", "-X", "-P", "-j", str(job_id), "-o", "State,Reason,ExitCode"])
    line = accounted.stdout.strip().splitlines()[:1] if accounted.returncode == 0 else []
    if not line:
        return None
    state, reason, exit_code = (line[0].split("|") + ["", ""])[:3]
    return SlurmJob(job_id=job_id, state=state.split()[0], reason=reason or "None", exit_code=exit_code or "0:0")


def job_on_nodes(job_id: int) -> bool:
    """True while the job is queued, running or still cleaning up on a node (squeue lists it)."""
    done = _slurm(["squeue", "-h", "-j", str(job_id), "-o", "%T"])
    return done.returncode == 0 and bool(done.stdout.strip())


def ended_reason(job: SlurmJob) -> str:
    """Why the scheduler ended a job, in its words, and what that means for the run.

    >>> ended_reason(SlurmJob(job_id=7, state="TIMEOUT", reason="TimeLimit", exit_code="0:15"))  # doctest: +ELLIPSIS
    'Slurm job 7 ended TIMEOUT (Reason=TimeLimit, ExitCode=0:15): it reached its time limit; ...'
    """
    said = f"Slurm job {job.job_id} ended {job.state} (Reason={job.reason}, ExitCode={job.exit_code})"
    meaning = {
        "TIMEOUT": "it reached its time limit; resume_run_id resubmits it from its last checkpoint (set a longer "
        "time_limit, or keep checkpoint_before_limit_s so the last one is recent)",
        "NODE_FAIL": "a node failed; resume_run_id resubmits it from its last checkpoint",
        "OUT_OF_MEMORY": "a node ran out of memory; lower the batch or use a sharded plan",
        "PREEMPTED": "a higher-priority job took its nodes; resume_run_id resubmits it",
        "BOOT_FAIL": "a node did not boot; resume_run_id resubmits it",
        "DEADLINE": "it passed its deadline",
    }.get(job.state)
    if job.exit_code.split(":")[0] == str(FILES_NOT_SHARED_EXIT):
        meaning = "a node could not see the run directory: put the state root (GRPO_RLVR_HOME) on a shared filesystem"
    return f"{said}: {meaning}" if meaning else said


class SlurmEngine(AccelerateEngine):
    """The run directory's slurm.sbatch under sbatch: launch_node.sh on every node, the worker on every rank."""

    name: EngineName = "slurm"
    runs_here = False  # the trainers run on the cluster's nodes, not on the machine that submits

    def __init__(self, settings: SlurmSettings | None = None, cpu_nodes: bool = False) -> None:
        self.settings = settings
        self.cpu_nodes = cpu_nodes  # a rehearsal of a GPU plan asks the cluster for CPU nodes

    def files(self, recipe: GRPORecipe) -> dict[str, str]:
        plan = launch_files(recipe)
        files = {name: plan.files[name] for name in (CONFIG_FILE, NODE_SCRIPT)}
        rehearsed = cpu_slurm_script(recipe, self.settings)[0] if self.cpu_nodes else None
        files[SLURM_SCRIPT] = rehearsed or slurm_script(recipe, self.settings)
        return files

    def ports(self, recipe: GRPORecipe) -> dict[str, int]:
        return {}  # the batch shell picks them on node 0 (slurm.sbatch)

    def preflight(self, recipe: GRPORecipe) -> list[str]:
        """A machine without sbatch is refused before the run directory is written."""
        if shutil.which("sbatch") is None:
            raise SkillError(
                "sbatch is not on PATH: this machine is not a Slurm submit host.",
                "Call run_grpo on a machine that submits to the cluster (a login node), or send no slurm engine to "
                "run on this machine.",
            )
        return []

    def command(self, directory: Path, resume: bool) -> list[str]:
        return [
            "sbatch",
            "--parsable",
            "--hold",  # released once run.json holds the job id: rank 0 never writes a record without it
            f"--chdir={directory}",
            f"--output={directory / 'train.log'}",
            "--open-mode=append",
            str(directory / SLURM_SCRIPT),
            *super().command(directory, resume)[2:],  # the worker, as every rank's trainer
        ]

    def submit(self, directory: Path, resume: bool) -> RunRecord:
        record = read_record(directory)
        record.engine, record.ports, record.command = self.name, {}, self.command(directory, resume)
        env = launch_environment(directory)  # the job gets the submitting environment: sbatch exports it
        try:
            done = subprocess.run(record.command, capture_output=True, text=True, env=env, timeout=SCHEDULER_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            done = subprocess.CompletedProcess(record.command, 1, "", str(exc))
        if done.returncode != 0:  # the caller removes a new run's directory, or records why a resume failed
            raise SkillError(
                "Slurm refused the job: " + " ".join(done.stderr.split()).removeprefix("sbatch: error: "),
                "Fix the slurm settings (partition, account, time_limit, sbatch_options) or the recipe's nodes and "
                "GPUs per node to what the cluster allows (sinfo; sacctmgr show assoc for limits).",
            )
        job_id = int(done.stdout.strip().split(";")[0])
        record.engine_handle = {"job_id": job_id}
        write_record(directory, record)
        try:
            released = _slurm(["scontrol", "release", str(job_id)])
        except SchedulerError as exc:
            released = subprocess.CompletedProcess([], 1, "", str(exc))
        if released.returncode != 0:
            subprocess.run(["scancel", str(job_id)], capture_output=True, timeout=SCHEDULER_TIMEOUT_S)
            raise SkillError(
                f"Slurm held job {job_id} and did not release it: {released.stderr.strip()}",
                "Check the cluster (scontrol show job), then send again.",
            )
        return record

    def state(self, directory: Path) -> RunRecord:
        """run.json, with the scheduler's view of a job still waiting or running (not written: rank 0 writes the
        training state); a job that ended without rank 0 recording an end ends the run with the scheduler's word."""
        record = read_record(directory)
        job_id = record.engine_handle.get("job_id")
        if record.state in FINAL_STATES or job_id is None:
            return record
        try:
            job = job_info(job_id)
        except SchedulerError as exc:
            record.reason = f"the Slurm controller did not answer ({exc}); run.json says {record.state}"
            return record
        if job is not None and job.state in WAITING:
            record.engine_handle["scheduler_state"] = job.state
            record.reason = f"Slurm job {job.job_id} is {job.state} (Reason={job.reason})"
            return record
        if job is not None and job.state in ACTIVE:
            record.engine_handle["scheduler_state"] = job.state
            record.state = "running" if record.state == "starting" else record.state
            return record
        record = read_record(directory)  # rank 0 may have recorded the end since the first read
        if record.state in FINAL_STATES:
            return record
        if job is None:
            record.state, record.reason = (
                "failed",
                (
                    f"Slurm no longer knows job {job_id} and its rank 0 recorded no end (no accounting to ask); "
                    "last log lines: " + " | ".join(tail(directory / "train.log", 3))
                ),
            )
        else:
            record.engine_handle["scheduler_state"] = job.state
            record.state = "cancelled" if job.state == "CANCELLED" else "failed"
            record.reason = ended_reason(job)
            code = job.exit_code.split(":")
            record.exit_code = int(code[0]) if code[0].isdigit() else None
            record.signal = int(code[1]) if len(code) > 1 and code[1].isdigit() and code[1] != "0" else None
        record.ended_at = time.time()
        write_record(directory, record)
        return record

    def cancel(self, directory: Path, record: RunRecord) -> None:
        """scancel, then wait until the job has left every node (its processes are gone)."""
        job_id = record.engine_handle.get("job_id")
        if job_id is None:
            return
        try:
            _slurm(["scancel", str(job_id)])
            deadline = time.time() + CANCEL_WAIT_S
            while time.time() < deadline and job_on_nodes(job_id):
                time.sleep(0.5)
        except SchedulerError as exc:
            raise SkillError(
                f"Run {record.run_id} is marked cancelled, but Slurm did not answer: {exc}.",
                f"Cancel job {job_id} with scancel once the controller answers.",
            ) from None
