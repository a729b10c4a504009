"""Held-out evaluation: pass@1 of a model on prompts it was not trained on, with its uncertainty."""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel

from skill.rewards.base import call_reward
from skill.rewards.registry import build_reward_function
from skill.rewards.spec import RewardSpec
from skill.sampling import Progress, SamplingSettings, sample_completions


class Evaluation(BaseModel):
    """pass@1 over prompts x samples; the interval treats prompts as the unit (their samples correlate)."""

    model: str
    prompts: int
    samples_per_prompt: int
    pass_at_1: float
    standard_error: float
    interval_95: tuple[float, float]


def summarise(per_prompt: list[float], model: str, samples_per_prompt: int) -> Evaluation:
    """Mean of per-prompt pass rates, with the standard error across prompts.

    >>> e = summarise([0.0, 0.5, 1.0, 0.5], "m", 2)
    >>> e.pass_at_1, round(e.standard_error, 3)
    (0.5, 0.204)
    """
    count = len(per_prompt)
    mean = sum(per_prompt) / count
    variance = sum((p - mean) ** 2 for p in per_prompt) / (count - 1) if count > 1 else 0.0
    error = math.sqrt(variance / count)
    return Evaluation(
        model=model,
        prompts=count,
        samples_per_prompt=samples_per_prompt,
        pass_at_1=mean,
        standard_error=error,
        interval_95=(max(0.0, mean - 1.96 * error), min(1.0, mean + 1.96 * error)),
    )


def evaluate_pass_at_1(
    model: str,
    rows: list[dict[str, Any]],
    verifier: RewardSpec,
    samples_per_prompt: int = 4,
    max_new_tokens: int = 16,
    temperature: float = 1.0,
    seed: int = 3407,
    progress: Progress | None = None,
) -> Evaluation:
    """Sample every prompt, score with the verifier (a pass is its full score), and average per prompt."""

    settings = SamplingSettings(n=samples_per_prompt, temperature=temperature, max_new_tokens=max_new_tokens, seed=seed)
    groups = sample_completions(model, [row["prompt"] for row in rows], settings, progress)
    function = build_reward_function(verifier)
    per_prompt = []
    for group in groups:
        row = rows[group.prompt_index]
        columns = {key: [value] * len(group.completions) for key, value in row.items() if key != "prompt"}
        scores = call_reward(function, [group.prompt] * len(group.completions), group.completions, **columns)
        per_prompt.append(sum(1.0 for score in scores if score is not None and score >= 1.0) / len(scores))
    return summarise(per_prompt, model, samples_per_prompt)
