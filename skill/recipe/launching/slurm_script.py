"""``slurm.sbatch``: the batch script that runs a launch plan on a Slurm cluster, one ``launch_node.sh`` per node.

Everything in it comes from the launch plan (nodes, GPUs and trainers per node, the vLLM server on node 0) except
what only the cluster's user knows, which ``SlurmSettings`` carries: partition, account, time limit, the lines that
make the environment (``module load``, ``source .venv/bin/activate``, a container), and any other sbatch option.
Nothing is guessed: an unset partition or account is the cluster's default.

How it runs a job: every node first checks that it sees the submit directory (the run directory must be on a shared
filesystem; exit ``FILES_NOT_SHARED_EXIT`` otherwise), the batch shell (on node 0) picks free ports there unless
given, and one ``srun`` task per node runs ``launch_node.sh`` with the trainer given as the script's arguments (the
rendered script by default; ``run_grpo`` passes the worker). ``--kill-on-bad-exit`` ends every node when one fails,
so a dead rank never leaves the others waiting on a collective. With a time limit, ``--signal=USR1@S`` asks the
trainers for a checkpoint S seconds before it (the worker saves one at its next step), so a resubmitted run loses
little.

May import: ``recipe.launching.launch_commands``, ``hardware``, ``errors`` (``recipe.schema`` for types only).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from skill.hardware.layout import node_layouts
from skill.recipe.launching.launch_commands import NODE_SCRIPT, VLLM_GROUP_PORT_ENV, VLLM_PORT_ENV

if TYPE_CHECKING:
    from skill.recipe.schema import GRPORecipe

FILES_NOT_SHARED_EXIT = 4  # the batch script's exit status when a node cannot see the submit directory
# Slurm's own time formats (sbatch --time): minutes, minutes:seconds, hours:minutes:seconds, days-hours,
# days-hours:minutes, days-hours:minutes:seconds.
_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")


def time_limit_seconds(text: str) -> int:
    """A Slurm time limit in seconds.

    >>> time_limit_seconds("90"), time_limit_seconds("1:30:00"), time_limit_seconds("2-12"), time_limit_seconds("5:30")
    (5400, 5400, 216000, 330)
    """
    match = _TIME.match(text.strip())
    if match is None:
        raise ValueError(
            f"time_limit {text!r} is not a Slurm time: send minutes ('90'), 'HH:MM:SS', or 'D-HH[:MM[:SS]]'."
        )
    days, first, second, third = (int(part) if part else None for part in match.groups())
    if days is not None:  # days-hours[:minutes[:seconds]]
        return days * 86400 + first * 3600 + (second or 0) * 60 + (third or 0)
    if third is not None:  # hours:minutes:seconds
        return first * 3600 + second * 60 + third
    return first * 60 + (second or 0)  # minutes[:seconds]


class SlurmSettings(BaseModel):
    """A Slurm cluster's settings.

    What the cluster needs that the recipe cannot know (nodes, GPUs and trainers per node are its plan's)."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["slurm"] = "slurm"
    partition: str | None = Field(default=None, description="sbatch --partition; None: the cluster's default.")
    account: str | None = Field(default=None, description="sbatch --account; None: your default.")
    time_limit: str | None = Field(
        default=None,
        description="sbatch --time: minutes ('90'), 'HH:MM:SS' or 'D-HH:MM:SS'; None: the partition's.",
    )
    checkpoint_before_limit_s: int = Field(
        default=300,
        ge=0,
        le=65535,
        description="With a time_limit: a checkpoint this many seconds before it (Slurm signals the trainers), so "
        "resume_run_id loses little. 0: none.",
    )
    cpus_per_task: int | None = Field(
        default=None,
        ge=1,
        description="CPUs of each node's task (trainers, vLLM server). None: a core per trainer on CPU, the whole "
        "node on GPUs.",
    )
    setup: list[str] = Field(
        default_factory=list,
        description="Shell lines run first: module load, source .venv/bin/activate.",
    )
    sbatch_options: list[str] = Field(default_factory=list, description="More sbatch options, e.g. '--qos=high'.")

    @field_validator("time_limit")
    @classmethod
    def _slurm_time(cls, value: str | None) -> str | None:
        if value is not None and time_limit_seconds(value) < 60:
            raise ValueError(f"time_limit {value!r} is under a minute, Slurm's smallest limit.")
        return value

    @field_validator("setup", "sbatch_options")
    @classmethod
    def _one_line_each(cls, lines: list[str]) -> list[str]:
        if any("\n" in line or "\r" in line for line in lines):
            raise ValueError("each setup line and sbatch option is one line: send a list, one entry per line.")
        return lines

    @field_validator("sbatch_options")
    @classmethod
    def _options(cls, options: list[str]) -> list[str]:
        bad = [option for option in options if not option.startswith("--") or " " in option.split("=", 1)[0]]
        if bad:
            raise ValueError(f"sbatch options are long options, '--name=value': {bad} are not.")
        return options


def _directives(recipe: GRPORecipe, settings: SlurmSettings) -> list[str]:
    hardware = recipe.hardware
    on_gpu = hardware.accelerator == "gpu"
    per_node = node_layouts(hardware, recipe.launch)[0].trainer_processes
    cpus = settings.cpus_per_task or (None if on_gpu else per_node)
    lines = [
        "#SBATCH --job-name=grpo-rlvr",
        f"#SBATCH --nodes={hardware.nodes}",
        "#SBATCH --ntasks-per-node=1",
        *([f"#SBATCH --gpus-per-node={hardware.gpus_per_node}", "#SBATCH --exclusive"] if on_gpu else []),
        *([f"#SBATCH --cpus-per-task={cpus}"] if cpus else []),
        *([f"#SBATCH --partition={settings.partition}"] if settings.partition else []),
        *([f"#SBATCH --account={settings.account}"] if settings.account else []),
        *([f"#SBATCH --time={settings.time_limit}"] if settings.time_limit else []),
    ]
    if settings.time_limit and settings.checkpoint_before_limit_s:
        lines.append(f"#SBATCH --signal=USR1@{settings.checkpoint_before_limit_s}")
    lines += [f"#SBATCH {option}" for option in settings.sbatch_options]
    lines.append("#SBATCH --output=%x-%j.out")
    return lines


FREE_PORT = "python -c 'import socket; s = socket.socket(); s.bind((\"\", 0)); print(s.getsockname()[1])'"


def slurm_script(recipe: GRPORecipe, settings: SlurmSettings | None = None) -> str:
    """The batch script for the recipe's plan with the cluster's settings (none: the cluster's defaults).

    >>> from skill.hardware.layout import LaunchPlan
    >>> from skill.hardware.specs import HardwareSpec
    >>> from skill.recipe.schema import GRPORecipe
    >>> recipe = GRPORecipe.model_construct(hardware=HardwareSpec(gpu_model="H100", gpus_per_node=8, nodes=2),
    ...     launch=LaunchPlan(training_processes=16, launcher="accelerate"), trl={})
    >>> text = slurm_script(recipe, SlurmSettings(partition="gpu", time_limit="04:00:00"))
    >>> [line for line in text.splitlines() if line.startswith(("#SBATCH --p", "#SBATCH --s", "#SBATCH --g"))]
    ['#SBATCH --gpus-per-node=8', '#SBATCH --partition=gpu', '#SBATCH --signal=USR1@300']
    """
    settings = settings or SlurmSettings()
    on_gpu = recipe.hardware.accelerator == "gpu"
    per_node = node_layouts(recipe.hardware, recipe.launch)[0].trainer_processes
    threads = [
        "# Each CPU rank computes with its share of the task's CPUs (torchrun sets 1 only for several per node).",
        f"export OMP_NUM_THREADS=${{OMP_NUM_THREADS:-$(( CPUS / {per_node} > 0 ? CPUS / {per_node} : 1 ))}}",
    ]
    nccl = [
        "# A collective that hangs (a dead peer) fails the job instead of holding its GPUs until the time limit.",
        "export TORCH_NCCL_ASYNC_ERROR_HANDLING=1",
        "export NCCL_DEBUG=${NCCL_DEBUG:-WARN}",
    ]
    return "\n".join(
        [
            "#!/bin/bash",
            *_directives(recipe, settings),
            "# Submit from the directory holding these files: sbatch slurm.sbatch [TRAINER ...]",
            "# (TRAINER: what launch_node.sh runs on every rank; the rendered script by default.)",
            "set -euo pipefail",
            "# Slurm starts this in the directory sbatch was called from (or --chdir): the one holding these files.",
            *(
                settings.setup
                or ["# The environment: the submitting shell's (sbatch exports it); put setup lines here."]
            ),
            "# The Hugging Face cache the nodes load the model from: put it on a filesystem they share.",
            'export HF_HOME="${HF_HOME:-$HOME/.cache/huggingface}"',
            *(nccl if on_gpu else []),
            "# Every node must see this directory (a shared filesystem) before anything starts.",
            f'if ! srun --nodes="$SLURM_JOB_NUM_NODES" --ntasks-per-node=1 test -f "$PWD/{NODE_SCRIPT}"; then',
            '  echo "a node cannot see $PWD: put it on a filesystem every node mounts" >&2',
            f"  exit {FILES_NOT_SHARED_EXIT}",
            "fi",
            "# Machine rank 0 (the main process, the vLLM server) is the allocation's first node, where this runs.",
            'FIRST_NODE=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed -n 1p)',
            'MAIN_PROCESS_IP=$(scontrol show node "$FIRST_NODE" | sed -n "s/.*NodeAddr=\\([^ ]*\\).*/\\1/p")',
            f"MAIN_PROCESS_PORT=${{MAIN_PROCESS_PORT:-$({FREE_PORT})}}",
            f"{VLLM_PORT_ENV}=${{{VLLM_PORT_ENV}:-$({FREE_PORT})}}",
            f"{VLLM_GROUP_PORT_ENV}=${{{VLLM_GROUP_PORT_ENV}:-$({FREE_PORT})}}",
            f"export MAIN_PROCESS_IP MAIN_PROCESS_PORT {VLLM_PORT_ENV} {VLLM_GROUP_PORT_ENV}",
            'echo "slurm job ${SLURM_JOB_ID:-}: node 0 is $FIRST_NODE ($MAIN_PROCESS_IP:$MAIN_PROCESS_PORT)"',
            "# One task per node (its machine rank is SLURM_NODEID); one failing ends them all.",
            "CPUS=${SLURM_CPUS_PER_TASK:-${SLURM_CPUS_ON_NODE:-1}}",
            *(threads if not on_gpu else []),
            'srun --nodes="$SLURM_JOB_NUM_NODES" --ntasks-per-node=1 --cpus-per-task="$CPUS" --kill-on-bad-exit=1 \\',
            f'  bash {NODE_SCRIPT} "$@"',
            "",
        ]
    )
