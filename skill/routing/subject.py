"""What a measured route was measured on, and the refusal when a recipe or an inspection is about something else.

A probe's pass rate belongs to one model, one dataset and one verifier: the same task with another model
(an Instruct route reused for a base checkpoint), other prompts or a different reward can route the
other way. So a measured decision records its subject, and emit_grpo_config (``check_recipe_subject``)
and inspect_rewards (``check_inspection_subject``) refuse to use it for a different one. The verifier is
compared by what it judges (``verifier_fingerprint``: the reward's spec, code and versions, weight aside),
so the same reward given another weight in the recipe still matches.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from skill.errors import SkillError
from skill.rewards.fingerprint import verifier_fingerprint
from skill.rewards.spec import CORRECTNESS_ROLES, RewardSpec


class RouteSubject(BaseModel):
    """The model, dataset and verifier a probe measured."""

    model: str = Field(description="The model sampled, as it was named (hub id, local directory or embedded id).")
    dataset: str | None = Field(description="The dataset probed; None when the prompts or rows were sent inline.")
    verifier: str = Field(description="The verifier's reward name.")
    verifier_fingerprint: str = Field(description="What the verifier judges: spec, code and versions, weight aside.")


def measured_subject(model: str, dataset: str | None, verifier: RewardSpec) -> RouteSubject:
    """The subject of a probe of ``model`` on ``dataset`` scored by ``verifier``.

    >>> exact = RewardSpec(name="exact_match", role="correctness")
    >>> subject = measured_subject("m", None, exact.model_copy(update={"weight": 0.5}))
    >>> subject.verifier, subject.verifier_fingerprint == verifier_fingerprint(exact)
    ('exact_match', True)
    """
    return RouteSubject(
        model=model, dataset=dataset, verifier=verifier.name, verifier_fingerprint=verifier_fingerprint(verifier)
    )


def _refuse(route_id: str, what: str) -> SkillError:
    return SkillError(
        f"Route decision {route_id} was measured on something else: {what}.",
        "Run route_check again with a probe of this model, dataset and verifier, or send the matching values.",
    )


def check_recipe_subject(
    route_id: str,
    subject: RouteSubject,
    model: str,
    dataset: str,
    rewards: list[RewardSpec],
    learnable_dataset: str | None = None,
) -> None:
    """Refuse a recipe whose model, dataset or rewards differ from what the route measured. The route's own
    learnable subset (``learnable_dataset``) counts as its dataset.

    >>> exact = RewardSpec(name="exact_match", role="correctness")
    >>> subject = measured_subject("m", "d.jsonl", exact)
    >>> check_recipe_subject("route-1", subject, "m", "d.jsonl", [exact.model_copy(update={"weight": 0.3})])
    >>> check_recipe_subject("route-1", subject, "other", "d.jsonl", [exact])
    Traceback (most recent call last):
    ...
    skill.errors.SkillError: Route decision route-1 was measured on something else: model 'm', not 'other'. ...
    """
    if model != subject.model:
        raise _refuse(route_id, f"model {subject.model!r}, not {model!r}")
    if subject.dataset is not None and dataset not in (subject.dataset, learnable_dataset):
        raise _refuse(route_id, f"dataset {subject.dataset!r}, not {dataset!r}")
    if subject.verifier_fingerprint not in {verifier_fingerprint(spec) for spec in rewards}:
        raise _refuse(
            route_id,
            f"verifier {subject.verifier!r} as the probe scored with it, which is not among the recipe's rewards "
            f"({', '.join(spec.name for spec in rewards)}; other parameters or changed code make another reward)",
        )


def check_inspection_subject(route_id: str, subject: RouteSubject, rewards: list[RewardSpec]) -> None:
    """Refuse reading a route's samples with correctness rewards that leave out the verifier that routed them.

    >>> exact = RewardSpec(name="exact_match", role="correctness")
    >>> check_inspection_subject("route-1", measured_subject("m", None, exact), [exact])
    """
    judging = [spec for spec in rewards if spec.role in CORRECTNESS_ROLES]
    if subject.verifier_fingerprint not in {verifier_fingerprint(spec) for spec in judging}:
        raise _refuse(
            route_id,
            f"verifier {subject.verifier!r}, which is not among this inspection's correctness rewards "
            f"({', '.join(spec.name for spec in judging) or 'none'})",
        )
