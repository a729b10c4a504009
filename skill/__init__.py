"""grpo-rlvr: the domain core. Plain functions, Pydantic in and out; no MCP here.

This module is the package's face: the ten tools and the contracts they take and return. Each name
is imported on first use (PEP 562), so ``import skill`` stays cheap and the MCP server starts
without torch, transformers or TRL.

>>> import skill
>>> skill.estimate_memory.__module__
'skill.memory.estimate'
>>> sorted(set(TOOLS) - set(__all__))
[]

Packages, from the faces down (each one's docstring says what it owns and what it may import; the layers:
docs/architecture.md §2): ``demo`` (the embedded walkthrough; nothing in the core imports it) → ``runs``
(jobs, worker, health) → ``routing``, ``inspection``, ``recipe`` (the capabilities) → ``memory``, ``timing``
(the estimates) → ``rewards``, ``hardware``, ``sampling``, ``data``, ``models`` → ``absolute_paths`` (paths a
caller names relative to its folder, made absolute for the processes that read them) → ``state``, ``errors``,
``intervals`` (the statistics the tools decide on), ``hub_errors`` (a failed Hub access in words a user can act
on), ``python_source`` (Python source parsed one thread at a time), ``grpo_fields`` (GRPOConfig keywords read
with the target GRPOConfig's own defaults), ``markdown`` (text in generated tables).
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from skill.errors import SkillError

try:
    __version__ = version("grpo-rlvr")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+source"

# The ten tools, the same names in Python, on the command line and over MCP.
TOOLS = (
    "route_check",
    "inspect_rewards",
    "record_review",
    "emit_grpo_config",
    "estimate_memory",
    "run_grpo",
    "run_status",
    "run_logs",
    "cancel_run",
    "list_runs",
)

# Where each public name lives: a tool or a contract, and the module that owns it.
_HOMES = {
    "route_check": "skill.routing.route",
    "RouteRequest": "skill.routing.route",
    "RouteDecision": "skill.routing.route",
    "ProbeSpec": "skill.routing.route",
    "inspect_rewards": "skill.inspection.run",
    "InspectionRequest": "skill.inspection.schema",
    "InspectionReport": "skill.inspection.schema",
    "ReviewRequest": "skill.inspection.schema",
    "record_review": "skill.inspection.gate",
    "emit_grpo_config": "skill.recipe.emit",
    "RecipeRequest": "skill.recipe.emit",
    "GRPORecipe": "skill.recipe.schema",
    "ModelSpec": "skill.recipe.schema",
    "DatasetSpec": "skill.data",
    "PeftSpec": "skill.recipe.schema",
    "RewardSpec": "skill.rewards.spec",
    "HardwareSpec": "skill.hardware.specs",
    "estimate_memory": "skill.memory.estimate",
    "MemoryRequest": "skill.memory.estimate",
    "MemoryEstimate": "skill.memory.estimate",
    "run_grpo": "skill.runs.jobs",
    "run_status": "skill.runs.jobs",
    "run_logs": "skill.runs.jobs",
    "cancel_run": "skill.runs.jobs",
    "list_runs": "skill.runs.jobs",
    "RunRequest": "skill.runs.jobs",
    "RunStatus": "skill.runs.jobs",
    "RunLogs": "skill.runs.jobs",
    "RunList": "skill.runs.jobs",
}

__all__ = ["SkillError", "TOOLS", "__version__", *_HOMES]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'skill' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES[name]), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
