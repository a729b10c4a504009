"""Which engine runs a run: one source, the launch plan, with the request choosing among the valid ones.

- One process (a CPU, or one GPU): ``local``.
- Several processes on one node: ``accelerate``.
- Slurm settings in the request: ``slurm``, whatever the plan (one node or several).
- A plan over several nodes without them is refused, with what to send.

May import: ``recipe``, ``runs.engines``, ``runs.slurm``, ``errors``.
"""

from __future__ import annotations

from skill.errors import SkillError
from skill.recipe.schema import GRPORecipe
from skill.recipe.slurm_script import SlurmSettings
from skill.runs.engines import AccelerateEngine, ProcessEngine
from skill.runs.slurm import SlurmEngine

# By name, for the runs already written (run.json's engine): what they need is in their run directory.
ENGINES: dict[str, ProcessEngine] = {"local": ProcessEngine(), "accelerate": AccelerateEngine(), "slurm": SlurmEngine()}


def engine_for(recipe: GRPORecipe, slurm: SlurmSettings | None = None, rehearsal: bool = False) -> ProcessEngine:
    """The engine for the recipe's launch plan, under Slurm when the request carries its settings (asking for CPU
    nodes in a rehearsal)."""
    if slurm is not None:
        return SlurmEngine(slurm, cpu_nodes=rehearsal)
    if recipe.hardware.nodes > 1:
        raise SkillError(
            f"The recipe's plan spans {recipe.hardware.nodes} nodes, which only a cluster can run.",
            "Send slurm settings (at least {} for the cluster's defaults; partition, account, time_limit, setup) "
            "and call run_grpo on a machine that submits to the cluster, or emit the recipe for one node.",
        )
    return ENGINES["local" if recipe.launch.launcher == "python" else "accelerate"]
