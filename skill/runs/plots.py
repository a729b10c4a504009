"""reward_curve.png: the total reward and each reward's mean per logged step, training (solid) beside the
held-out evaluations logged during the run (dashed, with markers, same colour per reward)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from skill.runs.store import read_jsonl


def curve_keys(metrics: list[dict[str, Any]]) -> list[str]:
    """The training keys to draw: the total ``reward`` and every ``rewards/<name>/mean``.

    >>> curve_keys([{"reward": 1, "rewards/b/mean": 1, "eval_rewards/b/mean": 1, "rewards/a/mean": 0}])
    ['reward', 'rewards/a/mean', 'rewards/b/mean']
    """
    found = {k for row in metrics for k in row if k.startswith("rewards/") and k.endswith("/mean")}
    return ["reward", *sorted(found)]


def _points(metrics: list[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    points = [(row["step"], row[key]) for row in metrics if isinstance(row.get(key), int | float)]
    return [step for step, _ in points], [value for _, value in points]


def plot_reward_curve(run_dir: Path) -> Path | None:
    """Draw metrics.jsonl as a PNG (matplotlib, no display); None when there is nothing to draw yet."""
    metrics = read_jsonl(run_dir / "metrics.jsonl")
    if not metrics:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(8, 4.5))
    for index, key in enumerate(curve_keys(metrics)):
        label = key.removeprefix("rewards/").removesuffix("/mean")
        colour = f"C{index}"
        steps, values = _points(metrics, key)
        if steps:
            axis.plot(steps, values, color=colour, label=f"{label} (train)", linewidth=2.5 if key == "reward" else 1.5)
        steps, values = _points(metrics, f"eval_{key}")
        if steps:
            axis.plot(steps, values, color=colour, linestyle="--", marker="o", label=f"{label} (held-out)")
    axis.set_xlabel("step")
    axis.set_ylabel("mean reward")
    axis.set_title(f"GRPO run {run_dir.name}: training and held-out")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
    figure.tight_layout()
    path = run_dir / "reward_curve.png"
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
