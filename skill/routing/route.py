"""route_check: is GRPO the right tool? Decided from the feedback signal and a measured base success rate.

GRPO sharpens a capability the model already has; it cannot install one from zero. So with a
verifier, the base model is sampled (n completions per prompt, at the training temperature, and
again at a low temperature if nothing succeeds; at least MIN_SAMPLES in all, the reward read's floor,
so inspect_rewards can read the probe's own samples) and the decision rests on what it did, read
through 95% intervals (skill.routing.interval_rule): never succeeds -> SFT first; succeeds sometimes,
inconsistently -> GRPO; succeeds almost always with almost no mixed groups -> not worth RL as posed;
an interval across a boundary -> sample more, with the probe size that would decide. A pass rate the
caller already measured (declared evidence) decides by the same rule and is marked as declared. A
measured decision is bound to its model, dataset and verifier (skill.routing.subject). A route away
from GRPO hands over a starting point in the next skill (skill.routing.handover).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from skill.absolute_paths import LocalModelOrNamed
from skill.data import ANSWER, prompt_columns, raw_sample
from skill.errors import SkillError
from skill.models.sources import EMBEDDED_MODEL_ID
from skill.rewards.spec import RewardSpec
from skill.routing.declared import (
    AFTER_DECLARED,
    DeclaredEvidence,
    DeclaredSummary,
    compare_with_measured,
    declared_verdict,
    summarise,
)
from skill.routing.evidence import CUT_AT_MOST, CompletionLengths, RouteEvidence, measure_lengths
from skill.routing.handover import Accelerator, DataReading, Handover, handover_for, read_demonstrations
from skill.routing.interval_rule import MIN_PASS, Rate, Verdict, decide
from skill.routing.probe import ProbeSpec, run_probe
from skill.routing.probe_time import (
    DEFAULT_PROBE,
    LARGER_PROBES,
    ProbeEstimate,
    describe,
    estimate_before,
    estimate_from,
    probe_advice,
)
from skill.routing.subject import RouteSubject, check_recipe_subject, measured_subject
from skill.sampling.progress import Progress, ShouldStop
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
Route = Literal[
    "grpo", "lora-qlora-recipes", "preference-optimization", "eval-harness-first", "not-worth-rl", "sample-more"
]
DATA_SAMPLE = 64  # rows an SFT handover reads for a column of worked solutions
MOST_CUT = 0.5  # a probe that cut more than this share of its completions decides no route for good
NEXT_STEP = {  # by route, for measured evidence
    "grpo": "Inspect the rewards on these samples (inspect_rewards with route_decision_id), then emit the config.",
    "lora-qlora-recipes": "Fine-tune on demonstrations first (SFT), then probe again: come back when the model "
    "succeeds sometimes.",
    "not-worth-rl": "Use harder prompts or a stricter verifier, then probe again.",
}


class RouteRequest(BaseModel):
    """The kind of feedback the task has, an optional verifier, and an optional probe of the base model."""

    model_config = ConfigDict(extra="forbid")  # a misspelled field is an error, not silently dropped

    signal: SignalKind
    verifier: RewardSpec | None = Field(default=None, description="The reward that decides pass/fail.")
    probe: ProbeSpec | None = Field(default=None, description="Measure the base success rate (needs a verifier).")
    declared: DeclaredEvidence | None = Field(
        default=None, description="A base pass rate from your own evaluation, with its n: decides until measured."
    )
    model: LocalModelOrNamed | None = Field(
        default=None, description="The model to fine-tune (default: the probe's): sizes a route-away starting point."
    )
    parameters_billions: float | None = Field(
        default=None, gt=0, description="Its size in billions; by default read from the model's config.json."
    )
    accelerator: Accelerator = Field(
        default="gpu", description="What a route-away starting point trains on: 'cpu' drops bf16 and the Hub."
    )


class RouteDecision(BaseModel):
    """Where the task should go next, and why."""

    id: str
    route: Route
    provisional: bool = Field(
        description="True when the evidence cannot decide yet: nothing measured or declared, 'sample-more' (an "
        "interval straddles a boundary), or most of the probe's completions cut at its budget."
    )
    basis: Literal["signal", "unmeasured", "declared", "measured"] = Field(
        description="What decided: the feedback kind alone, nothing yet, a pass rate you declared (not checked "
        "here), or sampling the model here."
    )
    reasons: list[str]
    evidence: RouteEvidence | None = None
    pass_at_1_interval: tuple[float, float] | None = Field(
        default=None, description="95% (Wilson) interval of the measured or declared pass@1."
    )
    learnable_fraction_interval: tuple[float, float] | None = Field(
        default=None, description="95% (Wilson) interval of the learnable fraction, over prompts, when known."
    )
    decisive_num_prompts: int | None = Field(
        default=None,
        description="For 'sample-more': the num_prompts (at the probe's n) that would decide at the rate seen; None "
        "when the rate sits on a boundary.",
    )
    completion_lengths: CompletionLengths | None = Field(
        default=None, description="The probe's completion lengths: they size the recipe's max_completion_length."
    )
    measured_on: RouteSubject | None = Field(
        default=None,
        description="What a measured route was measured on: a recipe or inspection for another model, dataset or "
        "verifier is refused.",
    )
    declared: DeclaredSummary | None = None
    handover: Handover | None = Field(
        default=None, description="A starting point in the skill routed to (or that a 'sample-more' leans to)."
    )
    probe_estimates: list[ProbeEstimate] = Field(
        default_factory=list, description="How long probes take on this machine (measured, or estimated ahead)."
    )
    next_skill: str | None = Field(
        description="The sibling skill to hand over to (not a tool of this server: the handover carries what it "
        "needs), or None to continue here."
    )
    next_step: str
    warnings: list[str] = Field(default_factory=list)
    learnable_dataset: str | None = Field(
        default=None,
        description="JSONL of the probed rows with mixed outcomes: a pre-filtered training set (DAPO's dynamic "
        "sampling done ahead, since TRL has none).",
    )


def measured_verdict(evidence: RouteEvidence) -> Verdict:
    """The route from a probe: pass@1 over its samples (over both rounds when neither found a success: all are
    evidence the model fails) and the learnable fraction over its prompts.

    >>> from skill.routing.evidence import probe_evidence
    >>> never = measured_verdict(probe_evidence([0] * 8, 8, None, [1.0, 0.2], 1.0))
    >>> print(never.route); print(never.reasons[-1])
    lora-qlora-recipes
    The 128 samples are 2 rounds of 8 prompts x 8, at temperature 1 and 0.2: none passed at the first.
    >>> measured_verdict(probe_evidence([1] + [0] * 6, 8, None, [1.0], 1.0)).route  # 1 in 56: sample more
    'sample-more'
    """
    successes = sum(evidence.per_prompt_successes)
    rounds = len(evidence.temperatures) if successes == 0 else 1
    pass_rate = Rate(successes, evidence.prompts * evidence.n * rounds, "samples")
    verdict = decide(pass_rate, Rate(len(evidence.learnable_prompt_indices), evidence.prompts, "prompts"))
    if rounds > 1:  # an agent read "over 128 samples" against 8 prompts x 8 and could not square them
        temperatures = " and ".join(f"{t:g}" for t in evidence.temperatures)
        verdict.reasons.append(
            f"The {pass_rate.n} samples are {rounds} rounds of {evidence.prompts} prompts x {evidence.n}, at "
            f"temperature {temperatures}: none passed at the first."
        )
    return verdict


def sample_more_step(prompts: int | None, n: int, estimate: ProbeEstimate | None) -> str:
    """The next step of a 'sample-more' decision: the probe that would decide (``prompts`` at ``n``), or, when
    none does, what to do instead.

    >>> sample_more_step(29, 8, None)
    'Probe again with num_prompts=29 at n=8.'
    """
    if prompts is None:
        return (
            "No probe size decides at this rate: decide on other grounds (an SFT baseline, the task's value), or "
            "train anyway with run_grpo's force and your reason."
        )
    when = f": {describe(estimate)}" if estimate is not None else ""
    return f"Probe again with num_prompts={prompts} at n={n}{when}."


def save_route(
    decision: RouteDecision,
    samples: list[dict[str, Any]],
    rows: list[dict[str, Any]] | None = None,
    probe: ProbeSpec | None = None,
) -> Path:
    """Write routes/<id>.json atomically: the decision, every scored sample (inspection reuses them) and the probe
    that drew them (an inspection samples the policy again the same way when it needs fresh samples); with rows,
    also routes/<id>.learnable.jsonl holding the rows whose group had mixed outcomes."""
    directory = state_dir("routes")
    if rows is not None and decision.evidence is not None:
        learnable = directory / f"{decision.id}.learnable.jsonl"
        indices = decision.evidence.learnable_prompt_indices
        write_atomically(learnable, "".join(json.dumps(rows[i], default=str) + "\n" for i in indices))
        decision.learnable_dataset = str(learnable)
    path = directory / f"{decision.id}.json"
    saved = {"decision": decision.model_dump(mode="json"), "samples": samples}
    if probe is not None:
        saved["probe"] = probe.model_dump(mode="json")
    write_atomically(path, json.dumps(saved, default=str))
    return path


def _route_file(route_id: str) -> dict[str, Any]:
    path = state_dir("routes") / f"{validate_identifier(route_id, 'route decision')}.json"
    if not path.is_file():
        raise SkillError(
            f"No route decision {route_id!r} under {path.parent}.", "Send an id that route_check returned."
        )
    return json.loads(path.read_text())


def load_route(route_id: str) -> tuple[RouteDecision, list[dict[str, Any]]]:
    """A saved decision and its samples."""
    data = _route_file(route_id)
    return RouteDecision.model_validate(data["decision"]), data["samples"]


def route_probe(route_id: str) -> ProbeSpec | None:
    """The probe a measured decision sampled with; None for a decision without one (or saved before probes were)."""
    probe = _route_file(route_id).get("probe")
    try:
        return None if probe is None else ProbeSpec.model_validate(probe)
    except ValidationError:  # saved under another version's contract: the samples stand, the way to draw more not
        return None


def route_for_recipe(route_id: str, model: str, dataset: str, rewards: list[RewardSpec]) -> tuple[RouteDecision, str]:
    """The decision a recipe follows and the recipe's provenance line for it; refused when the route went
    elsewhere or was measured on another model, dataset or verifier."""
    decision, _samples = load_route(route_id)
    if decision.route != "grpo":
        raise SkillError(
            f"Route decision {route_id} routed this task to {decision.route!r}, not GRPO: {decision.reasons[0]}",
            f"Follow its next step ({decision.next_step}) or run route_check again.",
        )
    if decision.measured_on is not None:
        check_recipe_subject(route_id, decision.measured_on, model, dataset, rewards, decision.learnable_dataset)
    why = "the base model was not probed" if decision.basis == "unmeasured" else "most of the probe was cut"
    line = f"Route {route_id}: grpo" + (f" (provisional: {why})" if decision.provisional else "")
    if decision.evidence is not None and decision.pass_at_1_interval and decision.learnable_fraction_interval:
        (a, b), (c, d) = decision.pass_at_1_interval, decision.learnable_fraction_interval
        line += (
            f"; pass@1 {decision.evidence.pass_at_1:.2f} (95% interval {a:.2f}-{b:.2f}), learnable fraction "
            f"{decision.evidence.learnable_fraction:.2f} ({c:.2f}-{d:.2f}), measured on this model, data and verifier"
        )
    if decision.learnable_dataset:
        line += f"; the learnable prompts are in {decision.learnable_dataset} (send it as dataset.name to train on it)"
    return decision, line + "."


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
    verdict = declared_verdict(summary)
    model = request.model or EMBEDDED_MODEL_ID
    measure, estimates = probe_advice(model)
    decision = RouteDecision(
        id=route_id,
        route=verdict.route,  # type: ignore[arg-type]  # one of Route's values
        provisional=verdict.route == "sample-more",
        basis="declared",
        reasons=verdict.reasons,
        pass_at_1_interval=summary.interval_95,
        learnable_fraction_interval=summary.learnable_interval_95,
        declared=summary,
        next_skill="lora-qlora-recipes" if verdict.route == "lora-qlora-recipes" else None,
        next_step=f"Declared evidence is not checked here; measure it when you can. {measure} "
        f"{AFTER_DECLARED[verdict.route]}",
        probe_estimates=estimates,
    )
    if verdict.route == "sample-more":
        n, tokens = DEFAULT_PROBE[1], DEFAULT_PROBE[2]
        prompts = decision.decisive_num_prompts = verdict.prompts_to_decide(n)
        estimate = estimate_before(model, prompts, n, tokens) if prompts else None
        decision.next_step = f"The declared evidence cannot decide. {sample_more_step(prompts, n, estimate)}"
    return decision


def _probed_decision(
    request: RouteRequest, route_id: str, progress: Progress | None, should_stop: ShouldStop | None
) -> tuple[RouteDecision, list[dict[str, Any]], list[dict[str, Any]]]:
    """The decision from a measured probe, with its scored samples and the probed rows."""
    probe, verifier = request.probe, request.verifier
    assert probe is not None and verifier is not None
    evidence, samples, rows = run_probe(probe, verifier, progress, should_stop)
    verdict = measured_verdict(evidence)
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
        route=verdict.route,  # type: ignore[arg-type]  # one of Route's values
        provisional=verdict.route == "sample-more",
        basis="measured",
        reasons=verdict.reasons,
        evidence=evidence,
        pass_at_1_interval=_rounded(verdict.pass_rate.interval),
        learnable_fraction_interval=_rounded(verdict.learnable.interval) if verdict.learnable else None,
        completion_lengths=measure_lengths(samples, probe.max_new_tokens, probe.temperature, probe.success_threshold),
        measured_on=measured_subject(probe.model, probe.dataset.name if probe.dataset else None, verifier),
        declared=declared,
        next_skill="lora-qlora-recipes" if verdict.route == "lora-qlora-recipes" else None,
        next_step=NEXT_STEP.get(verdict.route, ""),
        warnings=warnings,
        probe_estimates=[estimate_from(*measured, size) for size in LARGER_PROBES],
    )
    if verdict.route == "sample-more":
        prompts = decision.decisive_num_prompts = verdict.prompts_to_decide(probe.n)
        estimate = estimate_from(*measured, (prompts, probe.n, probe.max_new_tokens)) if prompts else None
        decision.next_step = sample_more_step(prompts, probe.n, estimate)
    say_what_was_cut(decision, probe.max_new_tokens)
    provisional_when_read_strictly(decision, verifier)
    return decision, samples, rows


def leaning_to_sft(decision: RouteDecision) -> str | None:
    """'lora-qlora-recipes' for a measured 'sample-more' whose pass rate lies below MIN_PASS (its interval reaching
    above it): the handover it would get, for a user who cannot probe more, said in the next step."""
    if decision.route != "sample-more" or decision.evidence is None or decision.evidence.pass_at_1 >= MIN_PASS:
        return None
    decision.next_step += (
        f" If you cannot probe more: pass@1 {decision.evidence.pass_at_1:.2f} lies below {MIN_PASS:.2f}, on the SFT "
        "side, and handover is that starting point."
    )
    return "lora-qlora-recipes"


def provisional_when_read_strictly(decision: RouteDecision, verifier: RewardSpec) -> None:
    """A probe where nothing passed, while the same verifier reading another way passes some of the same
    completions, measured the verifier's reading as much as the model: its route is provisional, with the reading
    to probe again with (when that is how answers should be read)."""
    looser = decision.evidence.looser_extract if decision.evidence else None
    if looser is None or decision.route not in ("lora-qlora-recipes", "sample-more"):
        return
    mode, share = looser
    decision.provisional = True
    decision.warnings.append(
        f"Nothing passed as {verifier.name} reads answers now, but read with params.extract {mode!r} {share:.0%} "
        "of the same completions pass: the verifier may be stricter than the task, so this route is provisional."
    )
    decision.next_step = (
        f"If a right answer may come with words around it, probe again with params.extract {mode!r}; if only the "
        f"bare answer is right, the route stands. {decision.next_step}"
    )


def _task_data(probe: ProbeSpec | None) -> DataReading | None:
    """What an SFT handover reads of the task's data: the probe's dataset or rows (prompts alone say nothing)."""
    if probe is None or probe.prompts is not None:
        return None
    if probe.rows is not None:
        return read_demonstrations(probe.rows[:DATA_SAMPLE], len(probe.rows), "the probe's rows", {probe.prompt_column})
    spec = probe.dataset
    assert spec is not None  # the one source left
    rows, total = raw_sample(spec, DATA_SAMPLE)
    prompt = set(prompt_columns(spec.prompt_template)) if spec.prompt_template else {spec.prompt_column}
    return read_demonstrations(rows, total, spec.name, prompt, spec.answer_column or ANSWER)


def say_what_was_cut(decision: RouteDecision, budget: int) -> None:
    """A cut completion has no answer and counts as failed. Past a quarter cut, the pass rate is a floor; past
    half, the probe measured its budget, not the model: the route is provisional, with the budget to probe again at.
    """
    lengths = decision.completion_lengths
    if lengths is None or not lengths.tokens or lengths.truncated / len(lengths.tokens) <= CUT_AT_MOST:
        return
    cut = f"{lengths.truncated / len(lengths.tokens):.0%} of the probe's completions were cut at {budget} tokens"
    if lengths.truncated / len(lengths.tokens) <= MOST_CUT:
        decision.warnings.append(
            f"{cut}: a cut completion counts as failed, so the pass rate is a floor (max_new_tokens={2 * budget} "
            "measures them)."
        )
        return
    decision.provisional = True
    decision.warnings.append(f"{cut}: a cut completion has no answer, so this route is provisional.")
    decision.next_step += f" Before acting on this route, probe again with max_new_tokens={2 * budget} ({cut})."


def _rounded(interval: tuple[float, float]) -> tuple[float, float]:
    return round(interval[0], 4), round(interval[1], 4)


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
    handed_to = leaning_to_sft(decision) or decision.route
    data = _task_data(request.probe) if handed_to == "lora-qlora-recipes" else None
    decision.handover = handover_for(handed_to, model, request.parameters_billions, never, request.accelerator, data)
    save_route(decision, samples, rows, request.probe if samples else None)
    return decision
