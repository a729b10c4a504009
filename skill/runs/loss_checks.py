"""Health checks whose remedy is a loss: the sampler and the trainer disagreeing, the upper clip cutting the tokens
the policy is learning to raise, and completions shrinking under sequence-level ratios.

Each reads what TRL 1.16's GRPOTrainer logs (``sampling/sampling_logp_difference/mean`` and
``sampling/importance_sampling_ratio/*`` on the vLLM path with importance-sampling correction,
``clip_ratio/low_mean`` / ``high_mean``, ``completions/mean_length``) and the recipe's own loss (RunView.trl), so
that a run already on the loss a symptom calls for is not told to switch to it. Their detection on labelled series:
skill.runs.labelled_series and bench/health_validation.py.
"""

from __future__ import annotations

from skill.runs.dynamics_checks import CLIP_LIMIT, still_learning
from skill.runs.health_check import health_check
from skill.runs.health_warning import HealthWarning, RunView, make_warning
from skill.runs.series import NOISE_Z, falls, recent_mean, rises, trend_of

# Training-inference mismatch: TRL's per-token mean |log p_trainer - log p_vLLM| over completion tokens. A healthy
# vLLM/trainer pair holds it flat near 0.011 nats (Qwen3-4B, vllm-project/vime#64; 0.012 in huggingface/trl#4772);
# the drift that issue flags went 0.011 -> 0.036. So: past 0.03 and at least doubled since the start, or past
# 0.1 (nine times the healthy gap, three times the flagged drift) whatever the start.
LOGP_GAP = "sampling/sampling_logp_difference/mean"
MISMATCH_LIMIT = 0.03
MISMATCH_GROWTH = 2.0
MISMATCH_CRITICAL = 0.1
# Rare tokens clipped: the upper clip (ratio above 1 + epsilon_high, positive advantages) cuts at least half a
# percent of tokens and three times what the lower clip cuts. Those are tokens whose probability the update is
# raising fast, the low-probability ones that open a line of reasoning (MiniMax-M1, arXiv:2506.13585 §3.1).
RARE_CLIP_FLOOR = 0.005
RARE_CLIP_SKEW = 3.0
# Length collapse: under sequence-level ratios the mean completion length falls to 60% of its start or below
# while correctness no longer rises beyond its noise (LUSPO, arXiv:2602.05261: GSPO's per-sequence average
# favours short answers).
LENGTH_COLLAPSE_RATIO = 0.6


@health_check("training_inference_mismatch", rank=90, needs=(LOGP_GAP,))
def training_inference_mismatch(view: RunView) -> HealthWarning | None:
    gap = trend_of(view.metrics, LOGP_GAP)
    if gap is None or gap.last < MISMATCH_LIMIT:
        return None
    grown = gap.last >= MISMATCH_GROWTH * max(gap.first, 1e-9) and rises(gap, floor=0.0)
    if not grown and gap.last < MISMATCH_CRITICAL:
        return None
    on_vespo = view.loss_type() == "vespo"
    evidence = {
        "logp_difference_first": gap.first,
        "logp_difference_last": gap.last,
        "importance_ratio_min_recent": recent_mean(view.metrics, "sampling/importance_sampling_ratio/min"),
        "importance_ratio_max_recent": recent_mean(view.metrics, "sampling/importance_sampling_ratio/max"),
    }
    return make_warning(
        "training_inference_mismatch",
        "critical" if gap.last >= MISMATCH_CRITICAL else "warning",
        f"vLLM's sampling log-probs and the trainer's differ by {gap.last:.3g} nats per token (from {gap.first:.3g}; "
        f"a healthy pair holds about 0.011): the samples are no longer the policy's own.",
        None if on_vespo else "training_inference_mismatch",
        evidence=evidence,
        change="Run vLLM and the trainer at the same dtype (model_init_kwargs.dtype and vLLM's), and check the "
        "weight sync reaches vLLM every step."
        if on_vespo
        else None,
    )


@health_check("rare_tokens_clipped", rank=140, needs=("clip_ratio/low_mean", "clip_ratio/high_mean"))
def rare_tokens_clipped(view: RunView) -> HealthWarning | None:
    low = recent_mean(view.metrics, "clip_ratio/low_mean")
    high = recent_mean(view.metrics, "clip_ratio/high_mean")
    if low is None or high is None or view.loss_type() == "cispo":
        return None
    if high < RARE_CLIP_FLOOR or high < RARE_CLIP_SKEW * low or low + high >= CLIP_LIMIT:
        return None  # a saturated clip on both sides is clip_saturation's
    return make_warning(
        "rare_tokens_clipped",
        "warning",
        f"The upper clip cuts {high:.2%} of tokens against {low:.2%} at the lower: tokens whose probability the "
        "update raises fastest, often the rare ones that start a new line of reasoning, get no gradient.",
        "rare_tokens_clipped",
        evidence={"clip_high_recent": high, "clip_low_recent": low},
    )


@health_check("length_collapse", rank=100, needs=("completions/mean_length",))
def length_collapse(view: RunView) -> HealthWarning | None:
    if not view.sequence_ratios() or view.loss_type() == "luspo":
        return None
    length = trend_of(view.metrics, "completions/mean_length")
    if length is None or length.first <= 0 or length.last > LENGTH_COLLAPSE_RATIO * length.first:
        return None
    if not falls(length, floor=0.0) or still_learning(view, z=NOISE_Z):
        return None
    return make_warning(
        "length_collapse",
        "warning",
        f"Completions shrank from {length.first:.0f} to {length.last:.0f} tokens under sequence-level ratios while "
        "correctness stopped rising: each answer weighs the same whatever its length, so short ones win.",
        "length_collapse_with_sequence_ratios",
        evidence={"mean_length_first": length.first, "mean_length_last": length.last},
    )
