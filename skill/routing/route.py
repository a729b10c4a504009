"""route_check: is GRPO the right tool? Decided from the feedback signal and a measured base success rate.

GRPO sharpens a capability the model already has; it cannot install one from zero. So with a
verifier, the base model is sampled (n completions per prompt, at the training temperature, and
again at a low temperature if nothing succeeds) and the decision rests on what it did: never
succeeds -> SFT first; succeeds sometimes, inconsistently -> GRPO; succeeds almost always with
almost no mixed groups -> not worth RL as posed. A pass rate the caller already measured (declared
evidence) decides with the same thresholds, read through its interval, and is marked as declared.
A route away from GRPO hands over a starting point in the next skill (skill.routing.handover).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from skill.data import DatasetSpec, load_rows
from skill.errors import SkillError
from skill.models.sources import EMBEDDED_MODEL_ID
from skill.rewards.base import call_reward
from skill.rewards.registry import build_reward_function
from skill.rewards.spec import RewardSpec
from skill.routing.declared import DeclaredEvidence, DeclaredSummary, compare_with_measured, decide_declared, summarise
from skill.routing.evidence import RouteEvidence, probe_evidence
from skill.routing.handover import Handover, handover_for
from skill.routing.probe_time import DEFAULT_PROBE, LARGER_PROBES, ProbeEstimate, estimate_from, probe_advice
from skill.sampling import Progress, Prompt, SamplingSettings, ShouldStop, sample_completions, stop_if_asked
from skill.state import new_id, state_dir, validate_identifier, write_atomically

SignalKind = Literal[
    "unit_tests",
    "parser_schema",
    "tool_call_schema",
    "math_answer",
    "exact_answer",
    "preference_pairs",
    "demonstrations",
    "human_judgment",
]
VERIFIABLE: tuple[str, ...] = ("unit_tests", "parser_schema", "tool_call_schema", "math_answer", "exact_answer")
Route = Literal["grpo", "lora-qlora-recipes", "preference-optimization", "eval-harness-first", "not-worth-rl"]
ALMOST_ALWAYS = 0.9  # pass@1 at or above this, with ...
FEW_MIXED = 0.1  # ... a learnable fraction below this: not worth RL as posed
LOW_TEMPERATURE = 0.2


class ProbeSpec(BaseModel):
    """Sample the base model on the task's prompts and score the samples with the verifier."""

    model_config = ConfigDict(extra="forbid")  # a misspelled field is an error, not silently dropped

    model: str = Field(
        default=EMBEDDED_MODEL_ID,
        description="A local model directory, a hub id already in the local cache (nothing is downloaded), or the "
        "embedded id.",
    )
    prompts: list[Prompt] | None = Field(default=None, description="Prompts (text or chat messages), no columns.")
    rows: list[dict[str, Any]] | None = Field(default=None, description="Rows with the prompt and verifier columns.")
    dataset: str | None = Field(default=None, description="A .jsonl/.json/.csv/.parquet file or 'embedded:addition'.")
    prompt_column: str = "prompt"
    num_prompts: int = Field(
        default=DEFAULT_PROBE[0],
        gt=0,
        description="Prompts to probe (the first ones). The defaults (8 x 8 x 32 tokens) take about 30 s per round "
        "for the embedded model on 2 CPU cores; time grows with prompts x n x tokens x (1 + tokens/40) and the "
        "model's size (32 x 8 x 256 takes about an hour there): the decision estimates larger probes.",
    )
    n: int = Field(default=8, description="Completions per prompt; 8 is GRPO's group size, fewer warns.")
    k: int | None = Field(default=None, description="Largest k for pass@k (default n).")
    temperature: float = Field(default=1.0, gt=0, description="The training temperature.")
    low_temperature: float = Field(default=LOW_TEMPERATURE, ge=0, description="Re-probe here if nothing succeeds.")
    max_new_tokens: int = Field(default=DEFAULT_PROBE[2], gt=0, description="Completion budget per sample.")
    seed: int = 3407
    success_threshold: float = Field(default=1.0, description="A sample passes when the verifier gives at least this.")

    @model_validator(mode="after")
    def _one_source(self) -> ProbeSpec:
        sources = [self.prompts is not None, self.rows is not None, self.dataset is not None]
        if sum(sources) != 1:
            raise ValueError("send exactly one of prompts, rows or dataset")
        if self.n < 2:
            raise ValueError(f"n={self.n}: pass rates and mixed groups need at least 2 samples per prompt")
        if self.k is not None and not 1 <= self.k <= self.n:
            raise ValueError(f"k={self.k} must be between 1 and n={self.n}")
        return self


class RouteRequest(BaseModel):
    """The kind of feedback the task has, an optional verifier, and an optional probe of the base model."""

    model_config = ConfigDict(extra="forbid")  # a misspelled field is an error, not silently dropped

    signal: SignalKind
    verifier: RewardSpec | None = Field(default=None, description="The reward that decides pass/fail.")
    probe: ProbeSpec | None = Field(default=None, description="Measure the base success rate (needs a verifier).")
    declared: DeclaredEvidence | None = Field(
        default=None, description="A base pass rate from your own evaluation, with its n: decides until measured."
    )
    model: str | None = Field(
        default=None, description="The model to fine-tune (default: the probe's): sizes a route-away starting point."
    )
    parameters_billions: float | None = Field(default=None, gt=0, description="Its size, when the name is unknown.")


class RouteDecision(BaseModel):
    """Where the task should go next, and why."""

    id: str
    route: Route
    provisional: bool = Field(
        description="True when the evidence cannot decide yet: nothing measured or declared, or a declared rate "
        "whose interval straddles a threshold."
    )
    basis: Literal["signal", "unmeasured", "declared", "measured"] = Field(
        description="What decided: the feedback kind alone, nothing yet, a pass rate you declared (not checked "
        "here), or sampling the model here."
    )
    reasons: list[str]
    evidence: RouteEvidence | None = None
    declared: DeclaredSummary | None = None
    handover: Handover | None = Field(default=None, description="A starting point in the skill routed to.")
    probe_estimates: list[ProbeEstimate] = Field(
        default_factory=list, description="How long probes take on this machine (measured, or estimated ahead)."
    )
    next_skill: str | None = Field(description="The sibling skill to hand over to, or None to continue here.")
    next_step: str
    warnings: list[str] = Field(default_factory=list)
    learnable_dataset: str | None = Field(
        default=None,
        description="JSONL of the probed rows with mixed outcomes: a pre-filtered training set (DAPO's dynamic "
        "sampling done ahead, since TRL has none).",
    )


def probe_rows(probe: ProbeSpec) -> list[dict[str, Any]]:
    """The rows a probe samples: its first ``num_prompts``, each holding the prompt column.

    A dataset's rows keep their own column names (the learnable rows are written back as they came).

    >>> [row["q"] for row in probe_rows(ProbeSpec(prompts=["a", "b", "c"], prompt_column="q", num_prompts=2))]
    ['a', 'b']
    """
    if probe.prompts is not None:
        rows = [{probe.prompt_column: prompt} for prompt in probe.prompts]
    elif probe.rows is not None:
        rows = probe.rows
    else:
        rows = load_rows(DatasetSpec(name=probe.dataset or ""), limit=probe.num_prompts)
    rows = rows[: probe.num_prompts]
    if not rows:
        raise SkillError("The probe has no prompts.", "Send prompts, rows or a non-empty dataset.")
    missing = [index for index, row in enumerate(rows) if probe.prompt_column not in row]
    if missing:
        raise SkillError(
            f"Rows {missing[:5]} lack the prompt column {probe.prompt_column!r}.", "Send prompt_column or fix rows."
        )
    return rows


def _score(verifier: RewardSpec, rows: list[dict[str, Any]], groups: list[Any], probe: ProbeSpec) -> list[list[float]]:
    function = build_reward_function(verifier)
    prompts, completions, columns = [], [], {}
    for group in groups:
        row = rows[group.prompt_index]
        for completion in group.completions:
            prompts.append(group.prompt)
            completions.append(completion)
            for key, value in row.items():
                if key != probe.prompt_column:
                    columns.setdefault(key, []).append(value)
    try:
        scores = call_reward(function, prompts, completions, **columns)
    except TypeError as exc:  # a verifier needing a column the rows lack
        raise SkillError(f"The verifier cannot score these rows: {exc}.", "Send rows with its columns.") from None
    failures = getattr(function, "failures", 0)
    if failures and failures == len(completions):
        errors = "; ".join(getattr(function, "last_errors", [])[:2])
        raise SkillError(f"The verifier failed on every sample ({errors}).", "Send rows with the columns it reads.")
    flat = [0.0 if score is None else float(score) for score in scores]
    return [flat[i * probe.n : (i + 1) * probe.n] for i in range(len(groups))]


def _probe(
    request: RouteRequest, progress: Progress | None, should_stop: ShouldStop | None
) -> tuple[RouteEvidence, list[dict[str, Any]], list[dict[str, Any]]]:
    probe, verifier = request.probe, request.verifier
    assert probe is not None and verifier is not None
    rows = probe_rows(probe)
    prompts = [row[probe.prompt_column] for row in rows]
    started = time.perf_counter()
    temperatures, samples = [], []
    for temperature in (probe.temperature, probe.low_temperature):
        settings = SamplingSettings(
            n=probe.n, temperature=temperature, max_new_tokens=probe.max_new_tokens, seed=probe.seed
        )
        groups = sample_completions(probe.model, prompts, settings, progress, should_stop=should_stop)
        scores = _score(verifier, rows, groups, probe)
        successes = [sum(score >= probe.success_threshold for score in group) for group in scores]
        temperatures.append(temperature)
        samples.extend(
            {
                "prompt_index": g.prompt_index,
                "prompt": g.prompt,
                "completion": c,
                "score": s,
                "temperature": temperature,
                "columns": {k: v for k, v in rows[g.prompt_index].items() if k != probe.prompt_column},
            }
            for g, group_scores in zip(groups, scores, strict=True)
            for c, s in zip(g.completions, group_scores, strict=True)
        )
        if sum(successes) > 0:
            break
        stop_if_asked(should_stop, f"the probe stopped before re-sampling at temperature {probe.low_temperature}")
    seconds = time.perf_counter() - started
    return probe_evidence(successes, probe.n, probe.k, temperatures, seconds), samples, rows


def _decide(evidence: RouteEvidence) -> tuple[Route, list[str], str | None, str]:
    e = evidence
    measured = (
        f"pass@1 {e.pass_at_1:.2f} over {e.prompts} prompts x {e.n} samples at temperature(s) {e.temperatures}; "
        f"learnable fraction {e.learnable_fraction:.2f}"
    )
    if e.pass_at_1 == 0:
        return (
            "lora-qlora-recipes",
            [f"The base model never succeeded ({measured}): RL sharpens a capability, it cannot install one."],
            "lora-qlora-recipes",
            "Fine-tune on demonstrations first (SFT), then probe again: come back when the model succeeds sometimes.",
        )
    if e.pass_at_1 >= ALMOST_ALWAYS and e.learnable_fraction < FEW_MIXED:
        return (
            "not-worth-rl",
            [f"The base model almost always succeeds with almost no mixed groups ({measured}): GRPO has no signal."],
            None,
            "Use harder prompts or a stricter verifier, then probe again.",
        )
    reasons = [f"The base model succeeds sometimes, inconsistently ({measured}): the case GRPO is for."]
    if e.learnable_fraction < FEW_MIXED:
        reasons.append("Few prompts have mixed outcomes: train on the learnable ones or raise num_generations.")
    return "grpo", reasons, None, "Inspect the rewards on these samples (inspect_rewards), then emit the config."


def save_route(
    decision: RouteDecision, samples: list[dict[str, Any]], rows: list[dict[str, Any]] | None = None
) -> Path:
    """Write routes/<id>.json atomically: the decision and every scored sample (inspection reuses them); with
    rows, also routes/<id>.learnable.jsonl holding the rows whose group had mixed outcomes."""
    directory = state_dir("routes")
    if rows is not None and decision.evidence is not None:
        learnable = directory / f"{decision.id}.learnable.jsonl"
        indices = decision.evidence.learnable_prompt_indices
        write_atomically(learnable, "".join(json.dumps(rows[i], default=str) + "\n" for i in indices))
        decision.learnable_dataset = str(learnable)
    path = directory / f"{decision.id}.json"
    write_atomically(path, json.dumps({"decision": decision.model_dump(mode="json"), "samples": samples}, default=str))
    return path


def load_route(route_id: str) -> tuple[RouteDecision, list[dict[str, Any]]]:
    """A saved decision and its samples."""
    path = state_dir("routes") / f"{validate_identifier(route_id, 'route decision')}.json"
    if not path.is_file():
        raise SkillError(
            f"No route decision {route_id!r} under {path.parent}.", "Send an id that route_check returned."
        )
    data = json.loads(path.read_text())
    return RouteDecision.model_validate(data["decision"]), data["samples"]


def _signal_decision(request: RouteRequest, route_id: str) -> RouteDecision | None:
    """Where a signal GRPO cannot use goes (decided without sampling); None when the signal is checkable."""
    if request.signal == "preference_pairs":
        return RouteDecision(
            id=route_id,
            route="preference-optimization",
            provisional=False,
            basis="signal",
            reasons=[
                "Preference pairs say which answer is better, not whether one is right: "
                "DPO for taste, GRPO for reasoning."
            ],
            next_skill="preference-optimization",
            next_step="Train with DPO on the pairs: handover has the DPOConfig values, data shape and command.",
        )
    if request.signal == "human_judgment":
        return RouteDecision(
            id=route_id,
            route="eval-harness-first",
            provisional=False,
            basis="signal",
            reasons=[
                "Subjective grading is not a verifiable reward; RL on an uncalibrated judge learns the judge's "
                "blind spots."
            ],
            next_skill="eval-harness-first",
            next_step="Calibrate a judge against human labels before any RL (handover: the steps and data).",
        )
    if request.signal == "demonstrations" and request.verifier is None:
        return RouteDecision(
            id=route_id,
            route="lora-qlora-recipes",
            provisional=False,
            basis="signal",
            reasons=["Demonstrations without a checker are supervised data: imitate them (SFT)."],
            next_skill="lora-qlora-recipes",
            next_step="Fine-tune on the demonstrations: handover has the SFTConfig values, data shape and command.",
        )
    return None


def _provisional_decision(request: RouteRequest, route_id: str) -> RouteDecision:
    """A checkable signal without a probe: GRPO, until the base model is measured."""
    next_step, estimates = probe_advice(request.model or EMBEDDED_MODEL_ID)
    return RouteDecision(
        id=route_id,
        route="grpo",
        provisional=True,
        basis="unmeasured",
        reasons=[
            f"The signal ({request.signal}) is checkable by a program, but the base model has not been "
            "measured: GRPO needs it to succeed sometimes."
        ],
        next_skill=None,
        next_step=next_step,
        probe_estimates=estimates,
    )


def _declared_decision(request: RouteRequest, route_id: str) -> RouteDecision:
    """A checkable signal with a pass rate the caller declared: decided by it, marked declared, measure advised."""
    assert request.declared is not None
    summary = summarise(request.declared)
    verdict = decide_declared(summary, ALMOST_ALWAYS, FEW_MIXED)
    measure, estimates = probe_advice(request.model or EMBEDDED_MODEL_ID)
    return RouteDecision(
        id=route_id,
        route=verdict.route,  # type: ignore[arg-type]  # one of Route's values
        provisional=verdict.provisional,
        basis="declared",
        reasons=verdict.reasons,
        declared=summary,
        next_skill=verdict.next_skill,
        next_step=f"Declared evidence is not checked here; measure it when you can. {measure} {verdict.meanwhile}",
        warnings=verdict.warnings,
        probe_estimates=estimates,
    )


def _probed_decision(
    request: RouteRequest, route_id: str, progress: Progress | None, should_stop: ShouldStop | None
) -> tuple[RouteDecision, list[dict[str, Any]], list[dict[str, Any]]]:
    """The decision from a measured probe, with its scored samples and the probed rows."""
    probe = request.probe
    assert probe is not None
    evidence, samples, rows = _probe(request, progress, should_stop)
    route, reasons, next_skill, next_step = _decide(evidence)
    warnings = []
    if probe.n < 8:
        warnings.append(f"n={probe.n} is below GRPO's group of 8: mixed groups are undercounted.")
    declared = summarise(request.declared) if request.declared is not None else None
    if declared is not None:
        disagreement = compare_with_measured(declared, evidence.pass_at_1, evidence.prompts * evidence.n)
        warnings += [disagreement] if disagreement else []
    per_round = evidence.seconds / len(evidence.temperatures)
    measured = (per_round, evidence.prompts, probe.n, probe.max_new_tokens)
    decision = RouteDecision(
        id=route_id,
        route=route,
        provisional=False,
        basis="measured",
        reasons=reasons,
        evidence=evidence,
        declared=declared,
        next_skill=next_skill,
        next_step=next_step,
        warnings=warnings,
        probe_estimates=[estimate_from(*measured, size) for size in LARGER_PROBES],
    )
    return decision, samples, rows


def route_check(
    request: RouteRequest, progress: Progress | None = None, should_stop: ShouldStop | None = None
) -> RouteDecision:
    """Decide whether GRPO applies, from the signal and, with a probe, the measured base success rate (or a pass
    rate the caller declared). Every decision is saved (routes/<id>.json) so emit_grpo_config can record it;
    a route away from GRPO carries a starting point (``handover``). ``should_stop`` is asked between sampling
    batches: when it answers True the probe stops with ``Cancelled`` and nothing is saved.

    >>> route_check(RouteRequest(signal="preference_pairs")).route
    'preference-optimization'
    >>> decision = route_check(RouteRequest(signal="math_answer"))
    >>> decision.route, decision.provisional, decision.basis, decision.next_step.split(':')[0]
    ('grpo', True, 'unmeasured', 'Probe the base model')
    """
    if request.probe is not None and request.verifier is None:
        raise SkillError("A probe needs a verifier to score the samples.", "Send verifier (a RewardSpec).")
    route_id = new_id("route")
    samples: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] | None = None
    decision = _signal_decision(request, route_id)
    if decision is not None and request.declared is not None:
        decision.warnings.append(f"The declared pass rate was not used: a {request.signal} signal routes without one.")
    elif decision is None and request.probe is not None:
        decision, samples, rows = _probed_decision(request, route_id, progress, should_stop)
    elif decision is None:
        decision = (_declared_decision if request.declared else _provisional_decision)(request, route_id)
    model = request.model or (request.probe.model if request.probe else None)
    never = decision.basis in ("measured", "declared")  # SFT because it never succeeded, not for demonstrations
    decision.handover = handover_for(decision.route, model, request.parameters_billions, never)
    save_route(decision, samples, rows)
    return decision
