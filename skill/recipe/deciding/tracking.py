"""Which experiment tracker a recipe reports to (GRPOConfig's ``report_to``) and the fields that keep it local.

A request names one tracker (``trackio``, ``wandb``, ``tensorboard`` or ``none``); without one, trackio, the
local-first tracker TRL's documentation recommends, where it is installed, else ``none``. Where a run writes
its tracker's files, and the alerts it sends, are the runner's (skill.runs.tracking). Imports nothing from the
project but the error type.
"""

from __future__ import annotations

import importlib.util
from typing import Any, Literal

from skill.errors import SkillError

Tracker = Literal["trackio", "wandb", "tensorboard", "none"]

# The module each tracker's transformers callback imports (transformers/integrations/integration_utils.py:
# TrackioCallback imports trackio, WandbCallback wandb, TensorBoardCallback torch.utils.tensorboard, which needs
# the tensorboard package, or tensorboardX), and the command that installs it.
TRACKER_MODULES: dict[str, tuple[tuple[str, ...], str]] = {
    "trackio": (("trackio",), "pip install 'grpo-rlvr[tracking]'"),
    "wandb": (("wandb",), "pip install wandb"),
    "tensorboard": (("tensorboard", "tensorboardX"), "pip install tensorboard"),
}

NO_SPACE = (
    "None, stated: metrics stay on this machine; a Space id makes trackio deploy a dashboard Space to the Hub "
    "(public unless hub_private_repo), so one is set only when the caller asks (override)"
)


def is_installed(tracker: str) -> bool:
    """Whether the tracker's module can be imported here ('none' always can).

    >>> is_installed("none")
    True
    """
    if tracker == "none":
        return True
    modules, _install = TRACKER_MODULES[tracker]
    return any(importlib.util.find_spec(module) is not None for module in modules)


def trackers_of(report_to: Any) -> list[str]:
    """The trackers a ``report_to`` value names (a string or a list, as TrainingArguments takes it); [] for none.

    >>> trackers_of("trackio"), trackers_of(["wandb", "tensorboard"]), trackers_of("none"), trackers_of(None)
    (['trackio'], ['wandb', 'tensorboard'], [], [])
    """
    names = [report_to] if isinstance(report_to, str) else list(report_to or [])
    return [name for name in names if name not in ("none", None)]


def tracking_fields(requested: Tracker | None, seeded: str) -> list[tuple[str, Any, str, str]]:
    """The recipe's tracking fields as (field, value, source, reason): ``report_to``, and with trackio its Space
    stated as None. ``seeded`` is the seed recipe's tracker, used when the request names none and it is installed.

    >>> tracking_fields("none", "trackio")[0][:3]
    ('report_to', 'none', 'override')
    >>> [row[:2] for row in tracking_fields("trackio", "trackio")]
    [('report_to', 'trackio'), ('trackio_space_id', None)]
    """
    if requested is not None:
        tracker, source = requested, "override"
        reason = f"the request's tracker ({requested})"
        if not is_installed(requested):
            reason += f"; not installed where this recipe was emitted: run_grpo refuses until {install(requested)}"
    elif is_installed(seeded):
        tracker, source = seeded, "seed"
        reason = f"{seeded}, the local-first tracker TRL recommends, is installed here; send report_to to choose"
    else:
        tracker, source = "none", "seed"
        reason = f"{seeded} is not installed here ({install(seeded)} to track in it); metrics.jsonl only"
    rows = [("report_to", tracker, source, reason)]
    if tracker == "trackio":
        rows.append(("trackio_space_id", None, "seed", NO_SPACE))
    return rows


def install(tracker: str) -> str:
    """The command that installs a tracker.

    >>> install("trackio")
    "pip install 'grpo-rlvr[tracking]'"
    """
    return TRACKER_MODULES[tracker][1]


def tracker_needs(report_to: Any) -> dict[str, str]:
    """The packages the trackers a ``report_to`` names need: module -> the pip requirement that installs it (what a
    hand-launched script checks before the model loads; transformers imports the tracker only at the trainer's start).

    >>> tracker_needs("trackio"), tracker_needs(["tensorboard"]), tracker_needs("none")
    ({'trackio': 'grpo-rlvr[tracking]'}, {'tensorboard': 'tensorboard'}, {})
    """
    needs = {}
    for name in trackers_of(report_to):
        if name in TRACKER_MODULES:
            modules, command = TRACKER_MODULES[name]
            needs[modules[0]] = command.removeprefix("pip install ").strip("'")
    return needs


def check_trackers_installed(report_to: Any) -> str | None:
    """Refuse a tracker that is not installed where the run starts; a note naming the trackers, or None.

    >>> check_trackers_installed("none") is None
    True
    """
    trackers = trackers_of(report_to)
    unknown = [name for name in trackers if name not in TRACKER_MODULES]
    if unknown:
        raise SkillError(
            f"report_to names {unknown}, which this runner does not set up.",
            "Send report_to as one of 'trackio', 'wandb', 'tensorboard' or 'none'.",
        )
    missing = [name for name in trackers if not is_installed(name)]
    if missing:
        raise SkillError(
            f"The recipe reports to {', '.join(missing)}, which is not installed in this environment.",
            " and ".join(install(name) for name in missing) + ", or emit the recipe with report_to='none'.",
        )
    return f"Tracking: {', '.join(trackers)} (installed)." if trackers else None
