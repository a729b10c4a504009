"""A run's step-time estimate, stored at its start (``estimate.json``) and compared with the measured seconds per
step while it runs: the ETA blends the two, the measurement weighing n / (n + BLEND_STEPS) after n measured
steps, so the first steps' noise does not swing it and the estimate fades as measurements accumulate.

May import: ``recipe.deciding.step_time``, ``timing``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from skill.recipe.deciding.step_time import recipe_step_time

ESTIMATE_FILE = "estimate.json"
BLEND_STEPS = 3  # after 3 measured steps the measurement and the estimate weigh the same


def write_estimate(directory: Path, recipe: Any) -> None:
    """The recipe's estimate into the (staging) run directory; nothing when it cannot be estimated."""
    estimate = recipe_step_time(recipe)
    if estimate is not None:
        (directory / ESTIMATE_FILE).write_text(estimate.model_dump_json(indent=1))


def estimated_seconds_per_step(directory: Path) -> float | None:
    """The steady seconds per step estimated at the start (without the run's fixed costs), or None."""
    try:
        data = json.loads((directory / ESTIMATE_FILE).read_text())
    except (OSError, ValueError):
        return None
    return data["seconds_per_step"] - data.get("fixed_per_step_s", 0.0)


def blended(estimated: float | None, measured: float | None, measured_steps: int) -> float | None:
    """Seconds per step for the ETA: the estimate alone before any measurement, then weighted toward it.

    >>> blended(10.0, None, 0), blended(10.0, 20.0, 3), blended(None, 20.0, 1)
    (10.0, 15.0, 20.0)
    """
    if measured is None or estimated is None:
        return measured if measured is not None else estimated
    weight = measured_steps / (measured_steps + BLEND_STEPS)
    return weight * measured + (1 - weight) * estimated


def comparison(estimated: float | None, measured: float | None) -> str | None:
    """One line: measured against estimated seconds per step.

    >>> comparison(10.0, 12.5)
    'measured 12.5 s/step vs estimated 10.0 s/step (1.25x)'
    """
    if not estimated:  # none stored, or a zero that no ratio can be taken to
        return None
    if measured is None:
        return f"estimated {estimated:.1f} s/step (no step measured yet)"
    return f"measured {measured:.1f} s/step vs estimated {estimated:.1f} s/step ({measured / estimated:.2f}x)"


def time_fields(
    directory: Path, measured: float | None, logged_steps: int, remaining_steps: int | None, state: str
) -> dict[str, Any]:
    """run_status's timing fields: the stored estimate, the comparison line and the blended ETA in seconds (None
    unless running with a known plan); ``logged_steps`` logged steps give ``logged_steps - 1`` measured intervals."""
    estimated = estimated_seconds_per_step(directory)
    rate = blended(estimated, measured, max(0, logged_steps - 1))
    running = state == "running" and remaining_steps is not None
    return {
        "estimated_seconds_per_step": estimated,
        "time_comparison": comparison(estimated, measured),
        "eta_seconds": rate * remaining_steps if rate and running else None,
    }
