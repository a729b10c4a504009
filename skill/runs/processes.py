"""Local processes: the worker's command line on this machine (one process, or torchrun with N CPU
processes and gloo), and the checks that refuse a local multi-process run that cannot work.

GPU targets are launched with ``skill.recipe.launch`` instead. May import: ``memory``, ``recipe``
(the schema, the group arithmetic), ``runs.checks``, ``errors``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from skill.errors import SkillError
from skill.memory.estimate import estimate_memory
from skill.recipe.emit import check_group_arithmetic
from skill.recipe.schema import GRPORecipe
from skill.runs.checks import available_ram_gib


def local_command(run_dir: Path, processes: int, resume: bool) -> list[str]:
    """The worker's command line: one process, or torchrun with N processes on this machine (gloo on CPU).

    >>> local_command(Path("/r"), 2, False)[2:6]
    ['torch.distributed.run', '--standalone', '--nproc_per_node', '2']
    """
    worker = ["-m", "skill.runs.worker", str(run_dir)] + (["--resume"] if resume else [])
    if processes == 1:
        return [sys.executable, *worker]
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(processes), *worker]


def processes_of(command: list[str]) -> int:
    """How many processes a recorded worker command line started (to resume with as many).

    >>> processes_of(local_command(Path("/r"), 3, False)), processes_of(local_command(Path("/r"), 1, True))
    (3, 1)
    """
    return int(command[command.index("--nproc_per_node") + 1]) if "--nproc_per_node" in command else 1


def check_local_processes(recipe: GRPORecipe, processes: int, force: bool) -> list[str]:
    """Refuse a local multi-process run that cannot work: CPU recipes only, a core per process, whole
    GRPO groups in each generation batch, and RAM for one model copy per process."""
    if processes == 1:
        return []
    if recipe.hardware.accelerator != "cpu":
        raise SkillError(
            f"processes={processes} is for CPU recipes; a GPU recipe's processes are laid out by its launch plan.",
            "Send processes=1, or launch the GPU recipe on its target with skill.recipe.launch.launch_files.",
        )
    cores = os.cpu_count() or 1
    if processes > cores:
        raise SkillError(
            f"processes={processes} exceeds this machine's {cores} CPU cores; each process needs one.",
            f"Send processes <= {cores}.",
        )
    check_group_arithmetic(recipe.trl, processes)
    available = available_ram_gib()
    request = recipe.memory_request()
    request = request.model_copy(
        update={"hardware": recipe.hardware.model_copy(update={"memory_gib_per_gpu": available})}
    )
    needed = processes * estimate_memory(request).peak_gib
    line = f"{processes} local processes (torchrun, gloo): {needed:.2f} GiB of {available:.1f} GiB RAM."
    if needed > available:
        if not force:
            raise SkillError(f"{line} Each process holds a whole model copy: it does not fit.", "Send fewer processes.")
        return [line + " Does not fit; forced."]
    return [line]
