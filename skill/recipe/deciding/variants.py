"""GRPO variants: from an observed symptom to a config delta, with the reason.

The table below is the single source: ``references/grpo-variants.md`` is generated from it and the
recipe emitter applies it. Deltas that are not GRPOConfig fields (a reward to add, data to filter)
are returned as such, never smuggled into the config.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from skill.errors import SkillError
from skill.rewards.spec import CORRECTNESS_ROLES, RewardSpec


class ConfigDelta(BaseModel):
    """A change to one GRPOConfig field: an absolute value, or a factor on the current value."""

    field: str
    value: Any = Field(default=None, description="New value (when not scaling).")
    scale: float | None = Field(default=None, description="Multiply the current value by this factor.")
    minimum: float | None = Field(default=None, description="Lower bound after scaling.")

    def apply(self, current: Any) -> Any:
        """The field's new value given its current one.

        >>> ConfigDelta(field="beta", scale=4, minimum=0.04).apply(0.01)
        0.04
        >>> ConfigDelta(field="loss_type", value="dr_grpo").apply("dapo")
        'dr_grpo'
        """
        if self.scale is None:
            return self.value
        scaled = (current or 0) * self.scale
        if self.minimum is not None:
            scaled = max(scaled, self.minimum)
        return type(current)(scaled) if isinstance(current, int) and not isinstance(current, bool) else scaled

    def describe(self) -> str:
        if self.scale is None:
            return f"{self.field}={self.value!r}"
        bound = f" (at least {self.minimum:g})" if self.minimum is not None else ""
        return f"{self.field} x{self.scale:g}{bound}"


class OtherDelta(BaseModel):
    """A change that is not a config field: a reward to add, data to filter, something to watch."""

    kind: Literal["reward", "data", "monitoring"]
    description: str
    reward: RewardSpec | None = Field(default=None, description="The reward to add, for kind='reward'.")


class Variant(BaseModel):
    """A named GRPO variant and the symptoms that call for it."""

    name: str
    title: str
    symptoms: list[str]
    why: str
    source: str
    precedence: int = Field(description="When two variants set the same field, the higher precedence wins.")
    config: list[ConfigDelta]
    other: list[OtherDelta] = Field(default_factory=list)


# DAPO's soft overlong punishment, as a reward spec for the project's length-penalty reward.
SOFT_OVERLONG_REWARD = RewardSpec(name="length_penalty", role="shaping", weight=1.0, params={"mode": "soft_overlong"})

VARIANTS: list[Variant] = [
    Variant(
        name="gspo",
        title="GSPO: sequence-level importance ratios",
        symptoms=["instability", "multi_step_instability", "moe_model"],
        why="Token-level ratios are noisy; with several optimizer steps per generation (num_iterations > 1) or "
        "Mixture-of-Experts routing they blow up. One length-normalised ratio per sequence, clipped in a much "
        "tighter range, keeps updates stable.",
        source="Zheng et al. 2025, Group Sequence Policy Optimization (arXiv:2507.18071)",
        precedence=60,
        config=[
            ConfigDelta(field="importance_sampling_level", value="sequence"),
            ConfigDelta(field="loss_type", value="grpo"),
            ConfigDelta(field="epsilon", value=3e-4),
            ConfigDelta(field="epsilon_high", value=4e-4),
        ],
    ),
    Variant(
        name="kl_control",
        title="Tighter KL control",
        symptoms=["kl_blowup", "policy_drift"],
        why="A KL that keeps growing means the policy leaves the region where the reward can be trusted; a "
        "stronger KL penalty and a smaller step keep it near the reference.",
        source="Schulman et al. 2017 (PPO) and DeepSeekMath (GRPO) KL regularisation",
        precedence=50,
        config=[
            ConfigDelta(field="beta", scale=4, minimum=0.04),
            ConfigDelta(field="learning_rate", scale=0.5),
        ],
        other=[OtherDelta(kind="monitoring", description="Watch `kl`: it should flatten within a few hundred steps.")],
    ),
    Variant(
        name="dr_grpo",
        title="Dr. GRPO: no length or difficulty normalisation",
        symptoms=["length_growth_without_accuracy"],
        why="Dividing each sequence's loss by its length rewards long wrong answers less harshly, and dividing "
        "advantages by the group's std over-weights easy and hard prompts; both push length up without "
        "accuracy. Dr. GRPO normalises by a constant and leaves rewards unscaled.",
        source="Liu et al. 2025, Understanding R1-Zero-Like Training (arXiv:2503.20783)",
        precedence=40,
        config=[
            ConfigDelta(field="loss_type", value="dr_grpo"),
            ConfigDelta(field="scale_rewards", value="none"),
        ],
    ),
    Variant(
        name="dapo",
        title="DAPO: clip-higher and overlong handling",
        symptoms=["entropy_collapse", "early_plateau"],
        why="A symmetric clip caps how fast unlikely tokens can gain probability, so entropy collapses and "
        "learning plateaus; a higher upper clip keeps exploring. Truncated completions carry no valid "
        "signal: mask them and punish overlong answers softly instead.",
        source="Yu et al. 2025, DAPO (arXiv:2503.14476)",
        precedence=30,
        config=[
            ConfigDelta(field="epsilon_high", value=0.28),
            ConfigDelta(field="loss_type", value="dapo"),
            ConfigDelta(field="mask_truncated_completions", value=True),
        ],
        other=[
            OtherDelta(
                kind="reward",
                description="Add a soft overlong punishment: 0 up to max_completion_length minus a buffer, then "
                "linearly down to -1 at max_completion_length.",
                reward=SOFT_OVERLONG_REWARD,
            )
        ],
    ),
    Variant(
        name="overlong",
        title="Room for complete answers",
        symptoms=["many_truncated_completions"],
        why="When many completions hit max_completion_length, the reward judges cut-off text; give the "
        "model room and stop truncated completions from contributing to the loss.",
        source="DAPO overlong filtering (arXiv:2503.14476)",
        precedence=20,
        config=[
            ConfigDelta(field="max_completion_length", scale=2),
            ConfigDelta(field="mask_truncated_completions", value=True),
        ],
        other=[
            OtherDelta(
                kind="reward",
                description="If answers should stay short, add a soft overlong punishment instead of more room.",
                reward=SOFT_OVERLONG_REWARD,
            )
        ],
    ),
    Variant(
        name="more_exploration",
        title="More signal per prompt",
        symptoms=["no_learning_signal"],
        why="When frac_reward_zero_std is near 1, every completion in a group scores the same and the "
        "group-relative advantage is zero: nothing is learned. More and more varied samples per prompt "
        "raise the chance that a group has mixed outcomes.",
        source="GRPO advantage definition (DeepSeekMath, arXiv:2402.03300); DAPO dynamic sampling",
        precedence=10,
        config=[
            ConfigDelta(field="num_generations", scale=2, minimum=16),
            ConfigDelta(field="temperature", value=1.1),
        ],
        other=[
            OtherDelta(
                kind="data",
                description="Keep prompts whose measured success is mixed (route_check's per-prompt histogram); "
                "drop the always-solved and never-solved ones.",
            )
        ],
    ),
    Variant(
        name="normalize_then_sum",
        title="Normalise each reward before summing",
        symptoms=["reward_scale_mismatch"],
        why="When rewards live on different scales, the largest dominates the sum and the others stop "
        "mattering; normalising each reward within its group first gives every reward its say.",
        source="TRL GRPOConfig.multi_objective_aggregation (GDPO-style per-reward normalisation)",
        precedence=10,
        config=[ConfigDelta(field="multi_objective_aggregation", value="normalize_then_sum")],
    ),
]

# The losses TRL 1.16 ships beyond the ones above (GRPOConfig.loss_type, trl/trainer/grpo_config.py): each picked by
# its own symptom; GRPOTrainer's loss is trl/trainer/grpo_trainer.py _compute_loss.
LOSS_VARIANTS: list[Variant] = [
    Variant(
        name="luspo",
        title="LUSPO: GSPO without its length bias",
        symptoms=["length_collapse_with_sequence_ratios"],
        why="Under GSPO every completion gets one ratio and the 'grpo' loss averages per sequence, so each answer "
        "weighs the same whatever its length: a short answer's tokens get more gradient each and completions "
        "shrink. LUSPO scales each sequence's loss by its length, keeping GSPO's sequence ratio and clip range.",
        source="LUSPO (arXiv:2602.05261), TRL 1.16 GRPOConfig.loss_type; clip range from GSPO (arXiv:2507.18071)",
        precedence=65,
        config=[
            ConfigDelta(field="loss_type", value="luspo"),
            ConfigDelta(field="importance_sampling_level", value="sequence"),
            ConfigDelta(field="epsilon", value=3e-4),
            ConfigDelta(field="epsilon_high", value=4e-4),
        ],
    ),
    Variant(
        name="vespo",
        title="VESPO: smooth sequence weights against training-inference mismatch",
        symptoms=["training_inference_mismatch"],
        why="When vLLM's sampling log-probs and the trainer's drift apart (TRL logs "
        "sampling/sampling_logp_difference and sampling/importance_sampling_ratio), hard clips either cut whole "
        "answers or let off-policy ones through. VESPO weights each sequence by a smooth, asymmetric Gamma "
        "function of its importance weight, so off-policy answers fade instead; it needs token-level vLLM ratios.",
        source="VESPO (arXiv:2602.10693), TRL 1.16 GRPOConfig.loss_type; GRPOTrainer refuses sequence_* vLLM "
        "correction modes with it",
        precedence=58,
        config=[
            ConfigDelta(field="loss_type", value="vespo"),
            ConfigDelta(field="importance_sampling_level", value="token"),
        ],
    ),
    Variant(
        name="sapo",
        title="SAPO: a soft gate instead of the hard clip",
        symptoms=["instability_despite_gspo"],
        why="A hard clip gives a token full gradient just inside the band and none just outside, so updates jump; "
        "sequence-level clipping (GSPO) then throws away whole answers. SAPO replaces the clip with a smooth, "
        "temperature-controlled sigmoid gate that attenuates off-policy tokens gradually, faster for negative "
        "advantages (temperature 1.05 against 1.0).",
        source="Soft Adaptive Policy Optimization (arXiv:2511.20347), TRL 1.16 GRPOConfig.loss_type",
        precedence=57,
        config=[
            ConfigDelta(field="loss_type", value="sapo"),
            ConfigDelta(field="importance_sampling_level", value="token"),
        ],
    ),
    Variant(
        name="cispo",
        title="CISPO: clip the importance weight, keep every token's gradient",
        symptoms=["rare_tokens_clipped"],
        why="PPO-style clipping zeroes the gradient of every token whose ratio leaves the band; in MiniMax-M1's "
        "runs those were rare, high-ratio tokens that open reasoning branches, so they never learned "
        "(clip_ratio/high_mean stays high). CISPO clips the importance weight itself (stop-gradient, at "
        "epsilon_high = 5.0, ScaleRL's value) and keeps every token's policy-gradient term.",
        source="MiniMax-M1 (arXiv:2506.13585); epsilon_high 5.0 from ScaleRL (arXiv:2510.13786) via TRL 1.16 docs",
        precedence=35,
        config=[
            ConfigDelta(field="loss_type", value="cispo"),
            ConfigDelta(field="epsilon_high", value=5.0),
        ],
    ),
    Variant(
        name="bnpo",
        title="BNPO: token mean per local batch",
        symptoms=["baseline_trained_with_bnpo"],
        why="DAPO (the seed) divides by the active tokens of the whole accumulated batch; BNPO divides by each "
        "micro-batch's own tokens, so results shift with the micro-batch size (at batch 1 it is GRPO's "
        "per-sequence mean). Pick it only to compare with a baseline trained with loss_type='bnpo'.",
        source="TRL 1.16 GRPOConfig.loss_type docs (trl/trainer/grpo_config.py)",
        precedence=5,
        config=[ConfigDelta(field="loss_type", value="bnpo")],
    ),
]
VARIANTS.extend(LOSS_VARIANTS)

VARIANTS_BY_NAME = {variant.name: variant for variant in VARIANTS}
SYMPTOMS = {symptom: variant.name for variant in VARIANTS for symptom in variant.symptoms}
VariantName = Literal[tuple(VARIANTS_BY_NAME)]  # type: ignore[valid-type]  # a request's choices, from the table
Symptom = Literal[tuple(SYMPTOMS)]  # type: ignore[valid-type]


class AppliedVariants(BaseModel):
    """What a set of variants did to a config."""

    variants: list[str] = Field(description="Variants applied, highest precedence first.")
    symptoms: list[str] = Field(default_factory=list, description="Symptoms that selected them.")
    changes: dict[str, str] = Field(default_factory=dict, description="field -> the variant that set it.")
    dropped: list[str] = Field(default_factory=list, description="Deltas overruled by a higher-precedence variant.")
    other: list[OtherDelta] = Field(default_factory=list, description="Deltas that are not config fields.")

    @property
    def other_rewards(self) -> list[OtherDelta]:
        """The rewards the variants suggest adding: the recipe does not add them (the caller's rewards stay theirs)."""
        return [other for other in self.other if other.reward is not None]

    def overruled_by(self, overrides: dict[str, Any]) -> None:
        """Move each change the caller overrode from ``changes`` to ``dropped``: provenance names only what a
        variant really set.

        >>> applied = AppliedVariants(variants=["cispo"], changes={"loss_type": "cispo", "epsilon_high": "cispo"})
        >>> applied.overruled_by({"epsilon_high": 4.0})
        >>> applied.changes, applied.dropped
        ({'loss_type': 'cispo'}, ["cispo: epsilon_high (overruled by the caller's override epsilon_high=4.0)"])
        """
        for field in [field for field in self.changes if field in overrides]:
            owner = self.changes.pop(field)
            self.dropped.append(f"{owner}: {field} (overruled by the caller's override {field}={overrides[field]!r})")


def select_variants(names: list[str], symptoms: list[str]) -> tuple[list[Variant], list[str]]:
    """Resolve variant names and symptoms to variants, highest precedence first.

    >>> [v.name for v in select_variants([], ["length_growth_without_accuracy", "instability"])[0]]
    ['gspo', 'dr_grpo']
    """
    chosen: dict[str, Variant] = {}
    for name in names:
        if name not in VARIANTS_BY_NAME:
            raise SkillError(f"Unknown variant {name!r}.", f"Send one of: {', '.join(VARIANTS_BY_NAME)}.")
        chosen[name] = VARIANTS_BY_NAME[name]
    for symptom in symptoms:
        if symptom not in SYMPTOMS:
            raise SkillError(f"Unknown symptom {symptom!r}.", f"Send one of: {', '.join(SYMPTOMS)}.")
        chosen[SYMPTOMS[symptom]] = VARIANTS_BY_NAME[SYMPTOMS[symptom]]
    ordered = sorted(chosen.values(), key=lambda variant: (-variant.precedence, variant.name))
    return ordered, list(symptoms)


def apply_variants(
    config: dict[str, Any], names: list[str], symptoms: list[str], rewards: list[RewardSpec] | None = None
) -> AppliedVariants:
    """Apply variants to ``config`` in place; on a shared field the higher precedence wins. A reward a variant
    suggests is weighed against ``rewards`` so that adding it passes the reward-mix check (``fitted_reward``).

    >>> config = {"loss_type": "dapo", "scale_rewards": "group", "epsilon": 0.2}
    >>> applied = apply_variants(config, ["dr_grpo", "gspo"], [])
    >>> config["loss_type"], config["scale_rewards"], applied.dropped
    ('grpo', 'none', ["dr_grpo: loss_type='dr_grpo' (overruled by gspo)"])
    """
    variants, symptoms = select_variants(names, symptoms)
    applied = AppliedVariants(variants=[variant.name for variant in variants], symptoms=symptoms)
    for variant in variants:
        for delta in variant.config:
            owner = applied.changes.get(delta.field)
            if owner is not None:
                applied.dropped.append(f"{variant.name}: {delta.describe()} (overruled by {owner})")
                continue
            config[delta.field] = delta.apply(config.get(delta.field))
            applied.changes[delta.field] = variant.name
        for other in variant.other:
            if other.reward is not None and rewards is not None:
                other = other.model_copy(update={"reward": fitted_reward(other.reward, rewards)})
            applied.other.append(other)
    return applied


def fitted_reward(suggested: RewardSpec, rewards: list[RewardSpec]) -> RewardSpec:
    """A suggested shaping reward weighed so that the rewards with it still pass the reward-mix check: half the
    room the correctness weight leaves above the shaping already there (the check warns once shaping reaches
    correctness), never more than it suggests.

    >>> rewards = [RewardSpec(name="format", role="format", weight=0.2),
    ...     RewardSpec(name="exact_match", role="correctness", weight=1.0)]
    >>> fitted_reward(SOFT_OVERLONG_REWARD, rewards).weight
    0.5
    >>> from skill.rewards.composite import check_composite
    >>> check_composite([*rewards, fitted_reward(SOFT_OVERLONG_REWARD, rewards)]).ok
    True
    """
    correctness = sum(spec.weight for spec in rewards if spec.role in CORRECTNESS_ROLES)
    shaping = sum(abs(spec.weight) for spec in rewards if spec.role == "shaping")
    room = max(0.0, correctness - shaping)
    return suggested.model_copy(update={"weight": round(min(suggested.weight, room / 2), 3)})
