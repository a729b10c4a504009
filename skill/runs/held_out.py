"""A run's held-out score: the correctness rewards' mean on its fixed held-out sample, with a 95% interval.

TRL's evaluation (planned by skill.recipe.deciding.evaluation_plan) logs ``eval_rewards/<name>/mean``: the mean
over prompts x generations completions of a fixed sample of held-out prompts, which for a pass/fail
reward is pass@1 at the training temperature. The worker adds a ``held_out`` entry to each evaluation
row of metrics.jsonl (what the metrics resource shows); run_status, the final log line and the model card
read those entries and nothing else.

The interval is Wilson's over the completions scored (skill.intervals). The sample is fixed, so two
evaluations of one run differ only by the completions drawn, and that is what the interval measures: two
non-overlapping intervals are a change of the model, not of the prompts. As an estimate for the whole task,
prompt-to-prompt variation widens it; the interval does not include that.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from skill.intervals import wilson_interval
from skill.rewards.spec import CORRECTNESS_ROLES, RewardSpec, metric_names


class HeldOutScore(BaseModel):
    """One correctness reward on the held-out sample at one step.

    >>> score = HeldOutScore(step=5, reward="exact_match", mean=0.25, interval_95=(0.14, 0.41), completions=32,
    ...     prompts=16)
    >>> score.describe()
    'exact_match 0.250 (95% interval 0.14-0.41) at step 5'
    """

    step: int = Field(description="The optimizer step the model had taken (0: before training).")
    reward: str = Field(description="The correctness reward, as TRL logs it.")
    mean: float = Field(description="Its mean over the sample: pass@1 for a pass/fail (0/1) reward.")
    interval_95: tuple[float, float] = Field(description="Wilson 95% interval over the completions scored.")
    completions: int = Field(description="Completions scored: prompts x completions per prompt.")
    prompts: int = Field(description="Held-out prompts in the fixed sample (never trained on).")

    def describe(self) -> str:
        low, high = self.interval_95
        return f"{self.reward} {self.mean:.3f} (95% interval {low:.2f}-{high:.2f}) at step {self.step}"


def score_evaluation(
    step: int, logs: dict[str, Any], rewards: list[RewardSpec], prompts: int, generations: int
) -> list[HeldOutScore]:
    """The held-out scores of one TRL evaluation log (``eval_*`` keys) of ``prompts`` x ``generations``.

    >>> spec = RewardSpec(name="exact_match", role="correctness")
    >>> [s.describe() for s in score_evaluation(0, {"eval_rewards/exact_match/mean": 0.1}, [spec], 20, 8)]
    ['exact_match 0.100 (95% interval 0.06-0.16) at step 0']
    """
    completions = prompts * generations
    scores = []
    for spec, name in metric_names(rewards):
        value = logs.get(f"eval_rewards/{name}/mean")
        if spec.role not in CORRECTNESS_ROLES or not isinstance(value, int | float) or not completions:
            continue
        low, high = wilson_interval(value * completions, completions)
        scores.append(
            HeldOutScore(
                step=step,
                reward=name,
                mean=float(value),
                interval_95=(round(low, 4), round(high, 4)),
                completions=completions,
                prompts=prompts,
            )
        )
    return scores


def is_evaluation(row: dict[str, Any]) -> bool:
    """Whether a metrics.jsonl row is a held-out evaluation (TRL's eval_* log) rather than a training step.

    >>> is_evaluation({"step": 0, "eval_loss": 0.0}), is_evaluation({"step": 1, "loss": 0.1})
    (True, False)
    """
    return "eval_loss" in row


def training_rows(metrics: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The training steps of a run's metrics, its held-out evaluations left out."""
    return [row for row in metrics if not is_evaluation(row)]


def held_out_scores(metrics: list[dict[str, Any]]) -> list[HeldOutScore]:
    """Every held-out score a run logged, oldest first (the ``held_out`` entries of its evaluation rows)."""
    return [HeldOutScore.model_validate(entry) for row in metrics for entry in row.get("held_out", [])]


def before_and_after(scores: list[HeldOutScore]) -> list[tuple[HeldOutScore, HeldOutScore]]:
    """(first, last) score of each reward evaluated at two steps or more.

    >>> a = HeldOutScore(step=0, reward="r", mean=0.1, interval_95=(0, 0.2), completions=8, prompts=4)
    >>> [(x.step, y.step) for x, y in before_and_after([a, a.model_copy(update={"step": 5})])]
    [(0, 5)]
    """
    by_reward: dict[str, list[HeldOutScore]] = {}
    for score in scores:
        by_reward.setdefault(score.reward, []).append(score)
    return [(found[0], found[-1]) for found in by_reward.values() if found[-1].step > found[0].step]


def summary_line(scores: list[HeldOutScore]) -> str:
    """The run's held-out result in one line (the last line of train.log before 'run succeeded').

    >>> a = HeldOutScore(step=0, reward="r", mean=0.1, interval_95=(0.03, 0.25), completions=32, prompts=16)
    >>> summary_line([a, a.model_copy(update={"step": 5, "mean": 0.5, "interval_95": (0.34, 0.66)})])
    'held-out: r 0.100 (95% interval 0.03-0.25) at step 0 -> 0.500 (0.34-0.66) at step 5; 32 completions of 16 prompts'
    >>> summary_line([a])
    'held-out: r 0.100 (95% interval 0.03-0.25) at step 0; 32 completions of 16 prompts'
    >>> summary_line([])
    'held-out: not evaluated (the recipe plans no evaluation, or no prompts were held out)'
    """
    if not scores:
        return "held-out: not evaluated (the recipe plans no evaluation, or no prompts were held out)"
    pairs = before_and_after(scores)
    if not pairs:  # one evaluation so far
        last = scores[-1]
        return f"held-out: {last.describe()}; {last.completions} completions of {last.prompts} prompts"
    parts = [
        f"{first.describe()} -> {last.mean:.3f} ({last.interval_95[0]:.2f}-{last.interval_95[1]:.2f}) "
        f"at step {last.step}"
        for first, last in pairs
    ]
    last = pairs[-1][1]
    return f"held-out: {'; '.join(parts)}; {last.completions} completions of {last.prompts} prompts"
