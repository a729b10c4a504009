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
skill.runs.reward_checks and skill.runs.dynamics_checks; their detection rates on labelled series:
skill.runs.labelled_series and bench/health_validation.py.

The absolute floors on reward means assume rewards in [0, 1], as the registry's format and
correctness rewards are; the noise term scales with any reward.
"""

from __future__ import annotations

from typing import Any

from skill.rewards.spec import RewardSpec
from skill.runs import dynamics_checks, loss_checks, reward_checks
from skill.runs.health_warning import HealthWarning, RunView
from skill.runs.series import BatchShape, recent_mean

# Most likely cause first: a broken reward makes every curve a lie; no signal means nothing else can move; a
# reward the policy games (format over correctness, length, held-out falling) explains flat or falling
# correctness; a sampler that disagrees with the trainer makes the optimiser's curves (spikes, clipping) its
# consequence; then how the optimiser behaves; a plateau is what is left when nothing explains it.
CAUSE_ORDER = (
    "reward_failures",
    "no_learning_signal_all_fail",
    "no_learning_signal_all_pass",
    "reward_divergence",
    "length_growth",
    "heldout_divergence",
    "reward_composition",
    "clipped_completions",
    "training_inference_mismatch",
    "length_collapse",
    "kl_blowup",
    "gradient_spikes",
    "clip_saturation",
    "rare_tokens_clipped",
    "entropy_collapse",
    "vanishing_gradients",
    "reward_plateau",
)


def _rank(warning: HealthWarning) -> tuple[int, bool]:
    order = CAUSE_ORDER.index(warning.code) if warning.code in CAUSE_ORDER else len(CAUSE_ORDER)
    return order, warning.severity != "critical"


def diagnose(
    metrics: list[dict[str, Any]],
    rewards: list[RewardSpec],
    max_completion_length: int | None = None,
    shape: BatchShape | None = None,
    max_steps: int | None = None,
    trl: dict[str, Any] | None = None,
) -> list[HealthWarning]:
    """What is going wrong in a run, from the metric points logged so far (one dict per logged step, in order;
    held-out ``eval_*`` rows among them), the single most likely cause first (CAUSE_ORDER). ``trl``, the recipe's
    GRPOConfig kwargs, says which loss the run already trains with, so no warning suggests the loss it is on.

    A plateau is not reported on top of a likelier cause (no learning signal, a divergence from correctness or
    from the held-out score, length growth, a reward carrying the variance) nor for a reward that is failing
    (its mean is not the policy's).

    >>> flat = [{"frac_reward_zero_std": 1.0, "reward": 0.0} for _ in range(8)]
    >>> [w.code for w in diagnose(flat, [RewardSpec(name="exact_match", role="correctness")])]
    ['no_learning_signal_all_fail']
    >>> diagnose(flat[:2], [])
    []
    """
    view = RunView(metrics, rewards, shape, max_completion_length, max_steps, trl)
    failing = reward_checks.failing_rewards(metrics)
    correct = reward_checks.correctness_series(view)
    signal = reward_checks.no_learning_signal(view, correct)
    length = reward_checks.length_growth(view, correct)
    explained = reward_checks.reward_divergence(view) + reward_checks.reward_composition(view)
    explained += reward_checks.heldout_divergence(view, correct) + ([length] if length else [])
    found = [reward_checks.reward_failure(name, rate) for name, rate in failing.items()] + explained
    zero_std = recent_mean(metrics, "frac_reward_zero_std")
    optional = (
        signal,
        dynamics_checks.clipped_completions(view),
        dynamics_checks.entropy_collapse(view),
        dynamics_checks.kl_blowup(view),
        dynamics_checks.gradient_spikes(view),
        dynamics_checks.vanishing_gradients(view, zero_std),
        dynamics_checks.clip_saturation(view),
        loss_checks.training_inference_mismatch(view),
        loss_checks.rare_tokens_clipped(view),
        loss_checks.length_collapse(view),
    )
    found += [w for w in optional if w]
    if signal is None and not explained:
        found += reward_checks.plateau(view, [series for series in correct if series[0] not in failing])
    return sorted(found, key=_rank)


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
