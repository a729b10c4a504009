"""Run health: read the metrics TRL has logged so far (training rows and held-out evaluation rows) and say
what is going wrong, with the numbers, most likely cause first.

A logging step averages one batch (16 completions on the CPU demo), so one step's reward moves by
about 0.1 on noise alone. Every check therefore compares windows, never single points (a trend is
the difference between the means of the first and last k points, k = max(3, n // 4)), and counts
only when it beats both an absolute floor and the noise: the windows' standard error, from the
spread of step-to-step differences and, where the batch shape is known, never below the binomial
noise of that many completions, groups or held-out prompts (skill.runs.series). None and NaN (a
reward that failed on a whole batch) are skipped, not read as zero. run_status reads a run again and
again while it trains: the verdicts on progress (flat, plateaued, diverging) scale their floors to the
share of max_steps logged so far and raise their z on early reads (series.look_z), so a read at step 20
of 200 is not judged as if the run had ended there. The checks and their thresholds:
skill.runs.reward_checks, skill.runs.dynamics_checks and skill.runs.loss_checks, each registered under the
contract of skill.runs.health_check; their detection rates on labelled series: skill.runs.labelled_series and
bench/health_validation.py.

The absolute floors on reward means assume rewards in [0, 1], as the registry's format and
correctness rewards are; the noise term scales with any reward.
"""

from __future__ import annotations

from typing import Any

from skill.rewards.spec import RewardSpec
from skill.runs import dynamics_checks, loss_checks, reward_checks  # noqa: F401  # their checks register on import
from skill.runs.health_check import registry
from skill.runs.health_warning import HealthWarning, RunView
from skill.runs.series import BatchShape

# The order of causes, most likely first: each check's ``rank`` (skill.runs.health_check says why this order).
CAUSE_ORDER = tuple(code for check in registry() for code in check.codes)


def diagnose(
    metrics: list[dict[str, Any]],
    rewards: list[RewardSpec],
    max_completion_length: int | None = None,
    shape: BatchShape | None = None,
    max_steps: int | None = None,
    trl: dict[str, Any] | None = None,
) -> list[HealthWarning]:
    """What is going wrong in a run, from the metric points logged so far (one dict per logged step, in order;
    held-out ``eval_*`` rows among them), the single most likely cause first (CAUSE_ORDER): every registered check
    that can run on these metrics, less those a likelier finding makes moot (a plateau under no learning signal,
    a divergence, length growth, a reward carrying the variance). ``trl``, the recipe's GRPOConfig kwargs, says
    which loss the run already trains with, so no warning suggests the loss it is on.

    >>> flat = [{"frac_reward_zero_std": 1.0, "reward": 0.0} for _ in range(8)]
    >>> [w.code for w in diagnose(flat, [RewardSpec(name="exact_match", role="correctness")])]
    ['no_learning_signal_all_fail']
    >>> diagnose(flat[:2], [])
    []
    """
    view = RunView(metrics, rewards, shape, max_completion_length, max_steps, trl)
    checks = registry()
    found: list[HealthWarning] = []
    for check in checks:
        if check.can_run(metrics) and not {w.code for w in found} & set(check.unless):
            found += check.run(view)
    order = {code: place for place, code in enumerate(code for check in checks for code in check.codes)}
    return sorted(found, key=lambda warning: (order[warning.code], warning.severity != "critical"))


def shape_of(trl: dict[str, Any], world_size: int = 1, evaluation: Any = None) -> BatchShape:
    """The batch shape of a recipe's GRPOConfig kwargs (and its evaluation plan, when it has one)."""
    prompts = getattr(evaluation, "prompts", 0) if evaluation and getattr(evaluation, "every_steps", 0) else 0
    generations = getattr(evaluation, "generations", 0) if prompts else 0
    return BatchShape.from_trl(trl, world_size, prompts, generations)


def headline(warnings: list[HealthWarning]) -> str | None:
    """One line for a status: the most likely cause and what to change; None when the run looks healthy.

    >>> headline([HealthWarning(code="kl_blowup", severity="warning", message="KL climbing.", symptom="kl_blowup",
    ...                         suggested_variant="kl_control")])
    'Most likely cause: KL climbing. Change: apply variant kl_control (emit_grpo_config(symptoms=["kl_blowup"])).'
    """
    if not warnings:
        return None
    first = warnings[0]
    more = f" ({len(warnings) - 1} more below)" if len(warnings) > 1 else ""
    return f"Most likely cause: {first.message} Change: {what_to_change(first)}.{more}".replace("..", ".")


def what_to_change(warning: HealthWarning) -> str:
    """What a warning says to change: its variant (as emit_grpo_config takes it), or its change, or the evidence.

    >>> what_to_change(HealthWarning(code="a", severity="warning", message="", suggested_change="fix the reward"))
    'fix the reward'
    """
    advice = []
    if warning.suggested_variant:
        advice.append(f'apply variant {warning.suggested_variant} (emit_grpo_config(symptoms=["{warning.symptom}"]))')
    if warning.suggested_change:
        advice.append(warning.suggested_change)
    return " Or: ".join(advice) or "see the evidence"


def symptoms(warnings: list[HealthWarning]) -> list[str]:
    """The symptoms the warnings name, once each, in order: what ``emit_grpo_config(symptoms=...)`` takes.

    >>> symptoms([HealthWarning(code="a", severity="warning", message="", symptom="entropy_collapse"),
    ...           HealthWarning(code="b", severity="critical", message="")])
    ['entropy_collapse']
    """
    return list(dict.fromkeys(w.symptom for w in warnings if w.symptom))
