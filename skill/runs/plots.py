"""reward_curve.png: the total reward and each reward's mean per logged step."""

from __future__ import annotations

from pathlib import Path

from skill.runs.store import read_jsonl


def plot_reward_curve(run_dir: Path) -> Path | None:
    """Draw metrics.jsonl as a PNG (matplotlib, no display); None when there is nothing to draw yet."""
    metrics = read_jsonl(run_dir / "metrics.jsonl")
    if not metrics:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(8, 4.5))
    keys = ["reward"] + sorted({k for row in metrics for k in row if k.startswith("rewards/") and k.endswith("/mean")})
    for key in keys:
        points = [(row["step"], row[key]) for row in metrics if isinstance(row.get(key), int | float)]
        if points:
            steps, values = zip(*points, strict=True)
            axis.plot(
                steps,
                values,
                label=key.removeprefix("rewards/").removesuffix("/mean"),
                linewidth=2.5 if key == "reward" else 1.5,
            )
    axis.set_xlabel("step")
    axis.set_ylabel("mean reward")
    axis.set_title(f"GRPO run {run_dir.name}")
    axis.grid(alpha=0.3)
    axis.legend()
    figure.tight_layout()
    path = run_dir / "reward_curve.png"
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
