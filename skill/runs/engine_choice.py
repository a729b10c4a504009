"""Which engine runs a run: one source, the launch plan, with the request's engine settings choosing among the valid
ones; and the engines by name, for the runs already written.

- ``ThisMachine`` (the default): one process (a CPU, or one GPU) runs ``local``; several on one node run
  ``accelerate``. A plan over several nodes is refused, with what to send.
- ``SlurmSettings``: ``slurm``, whatever the plan (one node or several).

May import: ``recipe``, ``runs.engines``, ``runs.slurm``, ``runs.store``, ``errors``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from skill.errors import SkillError
from skill.recipe.launching.launch import write_files
from skill.recipe.launching.launch_commands import CONFIG_FILE, NODE_SCRIPT
from skill.recipe.launching.slurm_script import SlurmSettings
from skill.recipe.schema import GRPORecipe
from skill.runs.engines import AccelerateEngine, Engine, ProcessEngine
from skill.runs.slurm import SlurmEngine
from skill.runs.store import read_recipe


class ThisMachine(BaseModel):
    # This machine: one process, or the plan's several under accelerate launch (no docstring: it would be published
    # in tools/list, where the engine field says it).

    model_config = ConfigDict(extra="forbid")

    kind: Literal["this_machine"] = "this_machine"


EngineSettings = Annotated[ThisMachine | SlurmSettings, Field(discriminator="kind")]

# By name, for the runs already written (run.json's engine): what they need is in their run directory.
ENGINES: dict[str, Engine] = {"local": ProcessEngine(), "accelerate": AccelerateEngine(), "slurm": SlurmEngine()}


def engine_named(name: str) -> Engine:
    """The engine a run was recorded with (run.json's ``engine``).

    >>> engine_named("slurm").name
    'slurm'
    """
    if name not in ENGINES:
        raise SkillError(
            f"This run was started by engine {name!r}, which this version does not have ({', '.join(ENGINES)}).",
            "Watch it with the version of grpo-rlvr that started it.",
        )
    return ENGINES[name]


def engine_resuming(name: str, directory: Path) -> Engine:
    """The engine a run was recorded with, its launch files renewed for a resume: launch_node.sh and the accelerate
    config are the recipe's alone, so they are written again as this version writes them (an older run's would
    start its vLLM server on a port under a name the worker no longer reads). slurm.sbatch, which also holds the
    cluster's settings, stays; it calls launch_node.sh."""
    engine = engine_named(name)
    files = engine.files(read_recipe(directory))
    write_files({file: files[file] for file in (CONFIG_FILE, NODE_SCRIPT) if file in files}, directory)
    return engine


def engine_for(
    recipe: GRPORecipe, settings: ThisMachine | SlurmSettings | None = None, rehearsal: bool = False
) -> Engine:
    """The engine for the recipe's launch plan under the request's settings (a rehearsal under Slurm asks for CPU
    nodes)."""
    if isinstance(settings, SlurmSettings):
        return SlurmEngine(settings, cpu_nodes=rehearsal)
    if recipe.hardware.nodes > 1:
        raise SkillError(
            f"The recipe's plan spans {recipe.hardware.nodes} nodes, which only a cluster can run.",
            'Send engine {"kind": "slurm"} (CLI: --slurm \'{}\'; partition, account, time_limit, setup as the cluster '
            "needs) from a machine that submits to the cluster, or emit the recipe for one node.",
        )
    return ENGINES["local" if recipe.launch.launcher == "python" else "accelerate"]
