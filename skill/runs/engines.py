"""Engines: how a run's training processes are started, watched and stopped.

An engine keeps the ``Engine`` contract: ``submit`` (start the run directory's trainer, new or resumed),
``state`` (reconcile run.json with what is running: a dead launcher is never left 'running', and says why in
``reason``), ``cancel`` (stop everything the run started) and ``log_paths``; before the run directory is written,
``preflight`` and ``files``. run.json records the engine's name (``engine``), and what it needs to find its
processes again: a launcher's ``pid`` and ``ports``, or its own opaque ``engine_handle`` (the slurm engine's job
id). Every rank is the project's worker (``python -m skill.runs.worker RUN_DIR``): the gate check in process,
metrics, held-out results, checkpoints, and one writer of run.json (rank 0).

- ``local``: one worker process (a CPU, or one GPU).
- ``accelerate``: the run directory's ``launch_node.sh`` (``skill.recipe.launching.launch``, the same files a hand
  launch uses) with the worker as its trainer: ``accelerate launch --config_file`` with the plan's config, and the
  vLLM server the plan puts on GPUs of its own, health-checked before the trainers start. Ports are free ones picked
  per run.

Both start one launcher in a process group of its own: cancelling signals the whole group (server included).
torchrun starts each rank in a session of its own, out of that group's reach; each rank dies with its launcher
(PR_SET_PDEATHSIG, ``skill.runs.worker``) and torchrun stops them on SIGTERM.

Which engine runs a recipe follows from its launch plan and the request's engine settings, and the engines are
registered by name (``runs.engine_choice``); the ``slurm`` engine (``runs.slurm``) is this one under sbatch.
May import: ``recipe``, ``runs.store``, ``errors``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Literal, Protocol

from skill.absolute_paths import child_environment
from skill.recipe.launching.launch import launch_files
from skill.recipe.launching.launch_commands import CONFIG_FILE, NODE_SCRIPT, PORT_ENVIRONMENT, starts_vllm_server
from skill.recipe.launching.node_script import SERVER_DIED_EXIT, VLLM_LOG
from skill.recipe.schema import GRPORecipe
from skill.runs.rehearsal import rehearsal_environment
from skill.runs.store import (
    FINAL_STATES,
    RunRecord,
    is_alive,
    process_start_ticks,
    read_recipe,
    read_record,
    tail,
    write_record,
)

EngineName = Literal["local", "accelerate", "slurm"]
CANCEL_GRACE_S = 10.0
GONE = "the training process is gone (killed, or the machine restarted)"  # all a watcher that is not its parent knows
_CHILDREN: dict[str, subprocess.Popen] = {}  # the launchers this process started, reaped for their exit status


class Engine(Protocol):
    """What runs a run's trainers. Every method but ``preflight`` and ``files`` takes the run directory: all an
    engine knows of a run is there (run.json and the files it wrote), so a run started by one process is watched,
    resumed and cancelled by another."""

    name: EngineName
    runs_here: bool  # the trainers run on this machine: its devices and packages are checked before the start

    def preflight(self, recipe: GRPORecipe) -> list[str]:
        """Refuse (SkillError) what this engine cannot run, before the run directory is written; notes otherwise."""
        ...

    def files(self, recipe: GRPORecipe) -> dict[str, str]:
        """The launch files it runs, written into the run directory before the first start."""
        ...

    def submit(self, directory: Path, resume: bool) -> RunRecord:
        """Start the run (or resume it from its last checkpoint), recording how to find it again; refuse with a
        SkillError when it cannot start."""
        ...

    def state(self, directory: Path) -> RunRecord:
        """run.json reconciled with what is running: a run whose processes ended without a final state fails, with
        the reason."""
        ...

    def cancel(self, directory: Path, record: RunRecord) -> None:
        """Stop everything the run started and return once it is gone."""
        ...

    def log_paths(self, directory: Path) -> list[Path]:
        """The logs it writes, train.log first."""
        ...


def free_port() -> int:
    """A TCP port nobody listens on now (the kernel's pick), for one run's rendezvous or vLLM server.

    >>> 1024 <= free_port() < 65536
    True
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def launch_environment(directory: Path) -> dict[str, str]:
    """What a run's launcher (and so every rank) gets: this environment with its import path and state root
    absolute (the worker runs in the run directory: ``absolute_paths``), this interpreter's accelerate, trl and
    python first on PATH (active or not), unbuffered output, and a rehearsal's settings (``runs.rehearsal``)."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return {**child_environment(), "PYTHONUNBUFFERED": "1", "PATH": path, **rehearsal_environment(directory)}


class ProcessEngine:
    """A launcher process in its own process group on this machine; subclasses say what it runs."""

    name: EngineName = "local"
    runs_here = True  # the trainers run on this machine: its devices are checked before the start

    def preflight(self, recipe: GRPORecipe) -> list[str]:
        """What the engine checks before the run directory is written (notes for run.json)."""
        return []

    def files(self, recipe: GRPORecipe) -> dict[str, str]:
        """Files written into the run directory before the first start."""
        return {}

    def command(self, directory: Path, resume: bool) -> list[str]:
        return [sys.executable, "-m", "skill.runs.worker", str(directory)] + (["--resume"] if resume else [])

    def ports(self, recipe: GRPORecipe) -> dict[str, int]:
        """MASTER_PORT, picked per run: colocated vLLM opens a torch.distributed rendezvous even in one process, and
        TRL's own pick (trl/trainer/utils.py _find_free_port) tries 29500 first, so two runs starting together on
        one machine both took it and the second failed with EADDRINUSE."""
        return {"master": free_port()}

    def log_paths(self, directory: Path) -> list[Path]:
        return [directory / "train.log"]

    def submit(self, directory: Path, resume: bool) -> RunRecord:
        """Start the launcher (free ports picked now and recorded), detached from the caller."""
        record = read_record(directory)
        recipe = read_recipe(directory)
        record.engine, record.ports = self.name, self.ports(recipe)
        record.command = self.command(directory, resume)
        ports = {PORT_ENVIRONMENT[role]: str(port) for role, port in record.ports.items()}
        log = (directory / "train.log").open("a")
        child = subprocess.Popen(
            record.command,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=directory,
            env={**launch_environment(directory), **ports},
        )
        log.close()
        _CHILDREN[record.run_id] = child
        record.pid, record.process_start_ticks = child.pid, process_start_ticks(child.pid)
        record.state = "running" if record.state == "starting" else record.state
        write_record(directory, record)
        return record

    def state(self, directory: Path) -> RunRecord:
        """run.json reconciled with the launcher: one that ended without a final state failed, with why."""
        record = read_record(directory)
        child = _CHILDREN.get(record.run_id)
        if child is not None and child.pid == record.pid:
            return self._reconciled_with_child(directory, record, child)
        if child is not None and child.poll() is not None:
            _CHILDREN.pop(record.run_id, None)  # an earlier attempt's launcher, reaped
        if record.state in ("starting", "running") and record.pid is not None and not is_alive(record):
            record = read_record(directory)
            if record.state not in FINAL_STATES:
                return self._fail(directory, record, GONE)
        return record

    def _reconciled_with_child(self, directory: Path, record: RunRecord, child: subprocess.Popen) -> RunRecord:
        """The launcher this process started: only its exit status says it ended, never /proc as well, since a
        launcher dying between the two looks (poll() saw it running, /proc then a zombie) would fail the run
        without its signal."""
        if child.poll() is None and not is_alive(record):
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=5)  # a zombie: reaped at once
        if child.returncode is None:
            return record  # running, or dying: the next look reaps it
        _CHILDREN.pop(record.run_id, None)
        record = read_record(directory)
        # Another watcher of this state root (a second server) may have seen the zombie first and said only GONE:
        # the parent knows the exit status, so it says more. A reason the worker wrote itself stays.
        said_only_gone = record.state == "failed" and (record.reason or "").startswith(GONE)
        if record.pid != child.pid or (record.state in FINAL_STATES and not said_only_gone):
            return record
        code = child.returncode
        record.exit_code, record.signal = (None, -code) if code < 0 else (code, None)
        ended = f"killed by signal {-code} ({signal.Signals(-code).name})" if code < 0 else f"exited with code {code}"
        return self._fail(directory, record, ended)

    def _fail(self, directory: Path, record: RunRecord, ended: str) -> RunRecord:
        record.state, record.ended_at = "failed", time.time()
        record.reason = f"{ended}; last log lines: " + " | ".join(tail(directory / "train.log", 3))
        write_record(directory, record)
        return record

    def cancel(self, directory: Path, record: RunRecord) -> None:
        """SIGTERM to the launcher's process group, SIGKILL after a grace period."""
        if record.pid is not None and is_alive(record):
            for sig, wait in ((signal.SIGTERM, CANCEL_GRACE_S), (signal.SIGKILL, 5.0)):
                try:
                    os.killpg(record.pid, sig)
                except ProcessLookupError:
                    break
                deadline = time.time() + wait
                while time.time() < deadline and is_alive(record):
                    child = _CHILDREN.get(record.run_id)
                    if child is not None:
                        child.poll()
                    time.sleep(0.1)
                if not is_alive(record):
                    break
        child = _CHILDREN.pop(record.run_id, None)
        if child is not None:
            child.wait(timeout=5)


class AccelerateEngine(ProcessEngine):
    """The run directory's launch_node.sh with the worker as the trainer of every rank."""

    name: EngineName = "accelerate"

    def files(self, recipe: GRPORecipe) -> dict[str, str]:
        plan = launch_files(recipe)
        return {name: plan.files[name] for name in (CONFIG_FILE, NODE_SCRIPT)}

    def command(self, directory: Path, resume: bool) -> list[str]:
        worker = ["-m", "skill.runs.worker", str(directory)] + (["--resume"] if resume else [])
        return ["bash", str(directory / NODE_SCRIPT), *worker]

    def ports(self, recipe: GRPORecipe) -> dict[str, int]:
        ports = {"main_process": free_port()}
        if starts_vllm_server(recipe):  # the server's, and its weight-sync group's: TRL's 51216 would be every run's
            ports["vllm"], ports["vllm_group"] = free_port(), free_port()
        return ports

    def log_paths(self, directory: Path) -> list[Path]:
        return [directory / "train.log", directory / VLLM_LOG]

    def _fail(self, directory: Path, record: RunRecord, ended: str) -> RunRecord:
        if record.exit_code != SERVER_DIED_EXIT:
            return super()._fail(directory, record, ended)
        record.state, record.ended_at = "failed", time.time()
        record.reason = f"the vLLM server exited ({ended}, the trainers stopped); last lines of {VLLM_LOG}: " + (
            " | ".join(tail(directory / VLLM_LOG, 5))
        )
        write_record(directory, record)
        return record
