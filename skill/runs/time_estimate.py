"""A run's step-time estimate, stored at its start (``estimate.json``) and compared with the measured seconds per
step while it runs: the ETA blends the two, the measurement weighing n / (n + BLEND_STEPS) after n measured
steps, so the first steps' noise does not swing it and the estimate fades as measurements accumulate. The held-out
evaluations still to run are added at their own measured (or estimated) duration, and left out of the measured
seconds per step.

May import: ``recipe.deciding.step_time``, ``runs.held_out``, ``timing``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from skill.recipe.deciding.step_time import recipe_step_time
from skill.runs.held_out import is_evaluation, training_rows

ESTIMATE_FILE = "estimate.json"
BLEND_STEPS = 3  # after 3 measured steps the measurement and the estimate weigh the same


def write_estimate(directory: Path, recipe: Any) -> None:
    """The recipe's estimate into the (staging) run directory; nothing when it cannot be estimated."""
    estimate = recipe_step_time(recipe)
    if estimate is not None:
        (directory / ESTIMATE_FILE).write_text(estimate.model_dump_json(indent=1))


def stored_estimate(directory: Path) -> dict[str, Any]:
    """The estimate stored at the run's start ({} when none was made or it cannot be read)."""
    try:
        return json.loads((directory / ESTIMATE_FILE).read_text())
    except (OSError, ValueError):
        return {}


def estimated_seconds_per_step(stored: dict[str, Any]) -> float | None:
    """The steady seconds per step estimated at the start (without the run's fixed costs), or None.

    >>> estimated_seconds_per_step({"seconds_per_step": 12.0, "fixed_per_step_s": 2.0}), estimated_seconds_per_step({})
    (10.0, None)
    """
    return stored["seconds_per_step"] - stored.get("fixed_per_step_s", 0.0) if stored else None


def measured_seconds_per_step(metrics: list[dict[str, Any]]) -> float | None:
    """Seconds per training step between the first and the last logged step, the held-out evaluations logged in
    between (their ``eval_runtime``) left out: they are counted on their own in the ETA.

    >>> rows = [{"step": 1, "time": 10.0}, {"step": 2, "time": 30.0, "eval_loss": 0, "eval_runtime": 15.0},
    ...     {"step": 3, "time": 40.0}]
    >>> measured_seconds_per_step(rows), measured_seconds_per_step(rows[:1])
    (7.5, None)
    """
    training = training_rows(metrics)
    if len(training) < 2:
        return None
    first, last = training[0], training[-1]
    evaluating = sum(
        row.get("eval_runtime", 0.0)
        for row in metrics
        if is_evaluation(row) and first["step"] <= row["step"] < last["step"]
    )
    return max(0.0, last["time"] - first["time"] - evaluating) / max(1, last["step"] - first["step"])


def remaining_evaluation_seconds(data: dict[str, Any], metrics: list[dict[str, Any]], step: int) -> float:
    """The held-out evaluations still to run, at the mean measured ``eval_runtime`` (the stored estimate's before
    the first). None are left when the estimate planned none, or when a run past step 0 logged none (its world
    size left no held-out sample to score)."""
    logged = [row for row in metrics if is_evaluation(row)]
    if not data.get("evaluations") or (step > 0 and not logged):
        return 0.0
    runtimes = [row["eval_runtime"] for row in logged if isinstance(row.get("eval_runtime"), int | float)]
    one = sum(runtimes) / len(runtimes) if runtimes else data.get("evaluation_s", 0.0)
    return max(0, data["evaluations"] - len(logged)) * one


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
    directory: Path, metrics: list[dict[str, Any]], remaining_steps: int | None, state: str
) -> dict[str, Any]:
    """run_status's timing fields: the measured and the stored estimate of seconds per step, the comparison line,
    and the ETA in seconds (None unless running with a known plan): the remaining steps at the blended rate plus
    the held-out evaluations still to run. ``n`` logged steps give ``n - 1`` measured intervals."""
    stored = stored_estimate(directory)  # read once a status
    estimated, measured = estimated_seconds_per_step(stored), measured_seconds_per_step(metrics)
    training = training_rows(metrics)
    rate = blended(estimated, measured, max(0, len(training) - 1))
    running = state == "running" and remaining_steps is not None
    step = training[-1]["step"] if training else 0
    evaluating = remaining_evaluation_seconds(stored, metrics, step) if running else 0.0
    return {
        "seconds_per_step": measured,
        "estimated_seconds_per_step": estimated,
        "time_comparison": comparison(estimated, measured),
        "eta_seconds": (rate or 0.0) * remaining_steps + evaluating if running and (rate or evaluating) else None,
    }
