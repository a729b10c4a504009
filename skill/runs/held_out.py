"""A run's held-out score: the correctness rewards' mean on its fixed held-out sample, with a 95% interval.

TRL's evaluation (planned by skill.recipe.deciding.evaluation_plan) logs ``eval_rewards/<name>/mean``: the mean
over prompts x generations completions of a fixed sample of held-out prompts, which for a pass/fail
reward is pass@1 at the training temperature. The worker adds a ``held_out`` entry to each evaluation
row of metrics.jsonl (what the metrics resource shows); run_status, the final log line and the model card
read those entries and nothing else.

The interval is Wilson's over the completions scored (skill.intervals). As an estimate for the whole task,
prompt-to-prompt variation widens it; the interval does not include that.

Whether the model changed between two evaluations is a paired question: the sample is fixed, so each prompt is
scored at both steps, and a hard prompt is hard at both. The worker records each correctness reward's score of
each held-out prompt (``HeldOutRecorder``, one file per rank, gathered into the evaluation's row as
``held_out_prompts``), and ``held_out_changes`` compares the first and the last evaluation prompt by prompt: the
mean change with its 95% t interval, whether it is more than noise, and how many prompts would tell.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from skill.intervals import paired_change, wilson_interval
from skill.rewards.spec import CORRECTNESS_ROLES, RewardSpec, metric_names
from skill.runs.checks import prompt_key

PROMPT_SCORES = "heldout_scores.rank{rank}.jsonl"
"""Where each rank writes its held-out prompt scores (run directory), read back at each evaluation."""


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


class HeldOutChange(BaseModel):
    """A correctness reward's change between two evaluations, prompt by prompt over the same held-out prompts.

    >>> print(HeldOutChange(reward="r", from_step=0, to_step=10, before=0.156, after=0.094, change=-0.062,
    ...     interval_95=(-0.19, 0.06), prompts=16, beyond_noise=False, prompts_to_tell=95).describe())
    ... # doctest: +NORMALIZE_WHITESPACE
    r 0.156 -> 0.094 (step 0 -> 10): change -0.062, 95% interval -0.19 to +0.06 over 16 prompts, within noise;
    about 95 prompts would tell a change this size
    """

    reward: str
    from_step: int
    to_step: int
    before: float = Field(description="Mean of the per-prompt scores at from_step.")
    after: float = Field(description="Mean of the per-prompt scores at to_step.")
    change: float = Field(description="after - before: the mean of the per-prompt changes.")
    interval_95: tuple[float, float] = Field(description="Student's t 95% interval of the mean per-prompt change.")
    prompts: int = Field(description="Held-out prompts scored at both steps.")
    beyond_noise: bool = Field(description="The interval excludes 0: the model changed, not just the draw.")
    prompts_to_tell: int | None = Field(
        default=None,
        description="Prompts a paired test at 95% needs to find a change of this size 4 times in 5 (None: no change).",
    )

    def describe(self) -> str:
        low, high = self.interval_95
        verdict = "beyond noise" if self.beyond_noise else "within noise"
        line = (
            f"{self.reward} {self.before:.3f} -> {self.after:.3f} (step {self.from_step} -> {self.to_step}): change "
            f"{self.change:+.3f}, 95% interval {low:+.2f} to {high:+.2f} over {self.prompts} prompts, {verdict}"
        )
        if not self.beyond_noise and self.prompts_to_tell and self.prompts_to_tell > self.prompts:
            line += f"; about {self.prompts_to_tell} prompts would tell a change this size"
        return line


class HeldOutRecorder:
    """Each correctness reward's score of each held-out prompt, as the reward gives it during TRL's evaluation:
    its functions are wrapped, scores pass through unchanged, and a held-out prompt's scores go to this rank's file
    with the step (TRL passes its ``trainer_state``). Training prompts are never held out, so they are not kept.

    >>> import tempfile
    >>> directory = Path(tempfile.mkdtemp())
    >>> recorder = HeldOutRecorder([{"prompt": "a"}, {"prompt": "b"}], directory, rank=0)
    >>> def exact(prompts, completions, **kwargs):
    ...     return [1.0 if c == "2" else 0.0 for c in completions]
    >>> recording = recorder.recording(exact, "exact")
    >>> recording(prompts=["a", "a", "c"], completions=["2", "3", "2"]), recording.__name__
    ([1.0, 0.0, 1.0], 'exact')
    >>> prompt_scores(directory, step=0, prompts=2)
    {'exact': [0.5, None]}
    """

    def __init__(self, rows: list[dict[str, Any]], directory: Path, rank: int) -> None:
        self.index = {prompt_key(row["prompt"]): number for number, row in enumerate(rows)}
        self.path = directory / PROMPT_SCORES.format(rank=rank)
        self.path.write_text("")  # this attempt's scores only: a resumed run's earlier evaluations are in its rows

    def recording(self, reward: Callable[..., Any], name: str) -> Callable[..., Any]:
        @functools.wraps(reward)
        def recorded(*args: Any, **kwargs: Any) -> Any:
            scores = reward(*args, **kwargs)
            state = kwargs.get("trainer_state")
            step = int(getattr(state, "global_step", 0) or 0)
            lines = [
                json.dumps({"step": step, "reward": name, "prompt": number, "score": float(score)}) + "\n"
                for prompt, score in zip(kwargs.get("prompts") or [], scores or [], strict=False)
                if isinstance(score, int | float) and math.isfinite(score)
                for number in [self.index.get(prompt_key(prompt))]
                if number is not None
            ]
            if lines:
                with self.path.open("a") as out:
                    out.writelines(lines)
            return scores

        return recorded


def record_held_out_prompts(
    functions: list[Any], rewards: list[RewardSpec], rows: list[dict[str, Any]], directory: Path, rank: int
) -> None:
    """Wrap the correctness rewards among ``functions`` (built from ``rewards``, in order) to record their scores
    of the held-out ``rows``; nothing without held-out rows."""
    if not rows:
        return
    recorder = HeldOutRecorder(rows, directory, rank)
    for number, (spec, name) in enumerate(metric_names(rewards)):
        if spec.role in CORRECTNESS_ROLES:
            functions[number] = recorder.recording(functions[number], name)


def prompt_scores(directory: Path, step: int, prompts: int) -> dict[str, list[float | None]]:
    """Each reward's mean score per held-out prompt at ``step``, over every rank's file (None: not scored)."""
    sums: dict[str, list[float]] = {}
    counts: dict[str, list[int]] = {}
    for path in sorted(directory.glob(PROMPT_SCORES.format(rank="*"))):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if record["step"] != step or not 0 <= record["prompt"] < prompts:
                continue
            total = sums.setdefault(record["reward"], [0.0] * prompts)
            count = counts.setdefault(record["reward"], [0] * prompts)
            total[record["prompt"]] += record["score"]
            count[record["prompt"]] += 1
    return {
        reward: [total / count if count else None for total, count in zip(sums[reward], counts[reward], strict=True)]
        for reward in sums
    }


def held_out_changes(metrics: list[dict[str, Any]]) -> list[HeldOutChange]:
    """Each reward's change from its first to its last evaluation that recorded per-prompt scores, over the prompts
    scored at both.

    >>> rows = [{"step": 0, "eval_loss": 0, "held_out_prompts": {"r": [0, 0, 1, 0] * 4}},
    ...     {"step": 5, "eval_loss": 0, "held_out_prompts": {"r": [1, 0, 1, 0] * 4}}]
    >>> [(c.change, c.beyond_noise, c.prompts) for c in held_out_changes(rows)]
    [(0.25, True, 16)]
    """
    by_reward: dict[str, list[tuple[int, list[float | None]]]] = {}
    for row in metrics:
        for reward, scores in (row.get("held_out_prompts") or {}).items():
            by_reward.setdefault(reward, []).append((row["step"], scores))
    changes = []
    for reward, evaluations in by_reward.items():
        (first_step, first), (last_step, last) = evaluations[0], evaluations[-1]
        pairs = [(a, b) for a, b in zip(first, last, strict=False) if a is not None and b is not None]
        if last_step <= first_step or len(pairs) < 2:
            continue
        before, after = [a for a, _ in pairs], [b for _, b in pairs]
        change, low, high, needed = paired_change(before, after)
        changes.append(
            HeldOutChange(
                reward=reward,
                from_step=first_step,
                to_step=last_step,
                before=round(sum(before) / len(pairs), 4),
                after=round(sum(after) / len(pairs), 4),
                change=round(change, 4),
                interval_95=(round(low, 4), round(high, 4)),
                prompts=len(pairs),
                beyond_noise=low > 0 or high < 0,
                prompts_to_tell=needed,
            )
        )
    return changes


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


def summary_line(scores: list[HeldOutScore], changes: list[HeldOutChange] | None = None) -> str:
    """The run's held-out result in one line (the last line of train.log before 'run succeeded'), with each
    reward's paired change where per-prompt scores were recorded.

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
    line = f"held-out: {'; '.join(parts)}; {last.completions} completions of {last.prompts} prompts"
    return line + "".join(f"; paired: {change.describe()}" for change in changes or [])
