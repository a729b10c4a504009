"""Cross-field refusals: combinations TRL 1.16 rejects or warns about when GRPOTrainer is built, refused at emit
with what to change, so a recipe never fails (or silently trains something else) minutes later on the target.

Each rule cites the check it stands in front of in trl/trainer/grpo_trainer.py (``GRPOTrainer.__init__``) or
trl/trainer/grpo_config.py. Values a recipe leaves out take TRL's defaults (``GRPOFields``).
Imports: ``errors``, ``recipe.grpo_fields``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from skill.errors import SkillError
from skill.grpo_fields import GRPOFields, grpo_config_defaults

TOKEN_SUMMED_LOSSES = ("bnpo", "dr_grpo", "dapo", "cispo")  # grpo_trainer.py: sequence-level IS warning


def _vespo_vllm_mode(v: GRPOFields, method: str) -> SkillError | None:
    # grpo_trainer.py __init__: raises ValueError for vespo + vLLM + correction with a sequence_* mode
    if v.loss_type != "vespo" or not v.use_vllm or not v.vllm_importance_sampling_correction:
        return None
    if v.vllm_importance_sampling_mode in ("token_truncate", "token_mask"):
        return None
    return SkillError(
        f"loss_type='vespo' with vLLM generation and vllm_importance_sampling_mode="
        f"{v.vllm_importance_sampling_mode!r}: GRPOTrainer refuses it (VESPO weights sequences itself and needs "
        "token-level vLLM ratios).",
        "Send vllm_importance_sampling_mode 'token_truncate', or leave it out (emit's choice). ('token_mask' starts, "
        "but a masked token's ratio of 0 enters VESPO's sequence weight as log(1e-8), so one masked token zeroes its "
        "whole answer.)",
    )


def _loss_level(v: GRPOFields, method: str) -> SkillError | None:
    # grpo_trainer.py __init__: logger.warning for each of these three pairings
    loss, level = v.loss_type, v.importance_sampling_level
    if loss == "luspo" and level != "sequence":
        why, fix = "LUSPO is a sequence-level loss (GSPO's ratio)", "importance_sampling_level 'sequence'"
    elif loss == "vespo" and level != "token":
        why, fix = "VESPO builds its sequence weights from token ratios itself", "importance_sampling_level 'token'"
    elif level == "sequence" and loss in TOKEN_SUMMED_LOSSES:
        why = f"'{loss}' sums per-token terms, so each sequence weighs by its length instead of once (not GSPO)"
        fix = "loss_type 'grpo' (GSPO's setup, the gspo variant) or importance_sampling_level 'token'"
    else:
        return None
    return SkillError(
        f"loss_type={loss!r} with importance_sampling_level={level!r}: {why}; TRL warns and trains it anyway.",
        f"Send {fix}.",
    )


def _reference_sync(v: GRPOFields, method: str) -> SkillError | None:
    # grpo_trainer.py __init__: ValueError at beta 0, NotImplementedError with a PEFT model
    if not v.sync_ref_model:
        return None
    if not v.beta:
        return SkillError(
            "sync_ref_model=True with beta=0: there is no reference model to synchronise; GRPOTrainer refuses it.",
            "Send sync_ref_model False, or beta > 0 (e.g. 0.01).",
        )
    if method != "full":
        return SkillError(
            f"sync_ref_model=True with method {method!r}: TRL has no separate reference under PEFT to move "
            "(NotImplementedError in GRPOTrainer).",
            "Send sync_ref_model False, or method 'full'.",
        )
    return None


def _cispo_cap(v: GRPOFields, method: str) -> SkillError | None:
    # grpo_trainer.py _compute_loss: cispo clamps each ratio at epsilon_high, which falls back to epsilon when unset
    if v.loss_type != "cispo":
        return None
    cap = v.epsilon_high if v.epsilon_high is not None else v.epsilon
    if cap > 1.0:
        return None
    named = "epsilon_high" if v.epsilon_high is not None else "epsilon (epsilon_high is unset)"
    return SkillError(
        f"loss_type='cispo' caps each token's importance weight at {named} = {cap:g}: below 1, every on-policy token "
        "is capped, so the loss shrinks by that factor instead of bounding rare high-ratio tokens.",
        "Send epsilon_high 5.0 (ScaleRL's cap, the cispo variant's), or send variant 'cispo' instead of loss_type.",
    )


def _normalised_rewards_scale(v: GRPOFields, method: str) -> SkillError | None:
    # grpo_trainer.py _generate_and_score_completions: the normalize_then_sum branch never reads scale_rewards
    if v.multi_objective_aggregation != "normalize_then_sum" or v.scale_rewards == "group":
        return None
    return SkillError(
        f"multi_objective_aggregation='normalize_then_sum' with scale_rewards={v.scale_rewards!r}: that "
        "aggregation divides each reward by its group's std and the sum by the batch's, and TRL ignores "
        "scale_rewards there, so the run would not scale as asked.",
        "Send scale_rewards 'group' (what it does anyway), or multi_objective_aggregation 'sum_then_normalize' to "
        "keep the scaling (e.g. Dr. GRPO's 'none').",
    )


def _liger_fused_head(v: GRPOFields, method: str) -> SkillError | None:
    # grpo_trainer.py __init__: ValueError when Liger's fused linear cross-entropy is asked for
    if v.use_liger_kernel and (v.liger_kernel_config or {}).get("fused_linear_cross_entropy"):
        return SkillError(
            "liger_kernel_config fused_linear_cross_entropy=True: it replaces the model's forward, which "
            "GRPOTrainer patches with its own chunked LM head; GRPOTrainer refuses it.",
            "Send liger_kernel_config without fused_linear_cross_entropy (TRL still applies Liger's other kernels).",
        )
    return None


def _deprecated_aliases(v: GRPOFields, method: str) -> SkillError | None:
    # grpo_config.py __post_init__: each alias overwrites its replacement (with a FutureWarning), so the
    # replacement the recipe states would not be the value trained with
    aliases = {
        "vllm_importance_sampling_cap": "vllm_importance_sampling_clip_max",
        "use_transformers_paged": "use_transformers_continuous_batching",
    }
    for alias, replacement in aliases.items():
        if getattr(v, alias) != grpo_config_defaults()[alias]:
            return SkillError(
                f"{alias} is deprecated in TRL 1.16 and overwrites {replacement} when set.",
                f"Send {replacement}={getattr(v, alias)!r} instead.",
            )
    return None


def _importance_bounds(v: GRPOFields, method: str) -> SkillError | None:
    # grpo_config.py __post_init__: min >= max, and a truncate mode with neither bound, raise ValueError
    low, high = v.vllm_importance_sampling_clip_min, v.vllm_importance_sampling_clip_max
    if low is not None and high is not None and low >= high:
        return SkillError(
            f"vllm_importance_sampling_clip_min={low} is not below vllm_importance_sampling_clip_max={high}.",
            "Send a clip_min below clip_max, or leave clip_min out (no lower bound).",
        )
    truncating = v.vllm_importance_sampling_mode in ("token_truncate", "sequence_truncate")
    if v.vllm_importance_sampling_correction and truncating and low is None and high is None:
        return SkillError(
            f"vllm_importance_sampling_mode={v.vllm_importance_sampling_mode!r} with no clip bound truncates "
            "nothing; GRPOConfig refuses it.",
            "Send vllm_importance_sampling_clip_max (e.g. 2.0), or leave it out (emit's choice).",
        )
    return None


def _gather_for_vllm(v: GRPOFields, method: str) -> SkillError | None:
    # grpo_config.py docs: ds3_gather_for_generation=False "is not compatible with vLLM generation"
    if v.use_vllm and not v.ds3_gather_for_generation:
        return SkillError(
            "ds3_gather_for_generation=False with use_vllm=True: vLLM's weight sync needs the gathered weights.",
            "Send use_vllm False (layer-by-layer transformers generation), or leave ds3_gather_for_generation out.",
        )
    return None


RULES: tuple[Callable[[GRPOFields, str], SkillError | None], ...] = (
    _vespo_vllm_mode,
    _loss_level,
    _reference_sync,
    _importance_bounds,
    _gather_for_vllm,
    _cispo_cap,
    _normalised_rewards_scale,
    _liger_fused_head,
    _deprecated_aliases,
)


def refuse_incompatible(trl: dict[str, Any], method: str) -> None:
    """Refuse the first combination GRPOTrainer rejects or warns about, with what to change.

    >>> refuse_incompatible({"loss_type": "dapo", "importance_sampling_level": "token"}, "full")
    >>> refuse_incompatible({"loss_type": "vespo", "use_vllm": True}, "lora")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    skill.errors.SkillError: loss_type='vespo' with vLLM generation and vllm_importance_sampling_mode='sequence_mask'...
    """
    values = GRPOFields(trl)
    for rule in RULES:
        refused = rule(values, method)
        if refused is not None:
            raise refused
