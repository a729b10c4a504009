"""inspect_rewards: the mandatory reward read before training.

The rewards are run on the collected samples in a fresh process (``inspection.scoring``: the code on disk, the
code fingerprinted); statistics and role-aware hack probes do half the reading. A balanced draw of 50-60 of
them (``inspection.draw``, samples not yet revealed on this state root first; where those are too few, fresh
samples of the policy: ``inspection.fresh_samples``) is put before a reader, who labels each blind
(``inspection.agreement``: the rule). A fixed reward inspected on an earlier inspection's samples (``samples_of``)
keeps their ids and that read's labels, so it is judged at once. The report is sealed and stored
(``inspection.reports``) with the rewards' fingerprint, which the gate (``inspection.gate``) compares before every
run; what it returns is what a reader may see before labelling (``inspection.render.visible``).

Owns: ``inspect_rewards`` (collect, score, flags, checks). May import: the rest of ``inspection``,
``rewards``, ``routing``, ``sampling``, ``state``, ``errors``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from pydantic import BaseModel

from skill.errors import SkillError
from skill.inspection.agreement import read_roles
from skill.inspection.draw import balanced_draw, outcome_flags
from skill.inspection.flags import hack_flags, reward_flags, reward_stats, set_flags
from skill.inspection.fresh_samples import MAX_COLLECTED, collect_unseen, policy_of_probe, sample_policy
from skill.inspection.gate import carry_read
from skill.inspection.quick import quick_report
from skill.inspection.render import visible
from skill.inspection.reports import load_report, save_report
from skill.inspection.schema import (
    MAX_SAMPLES,
    QUICK_SAMPLES,
    Flag,
    GenerateSamples,
    InspectionReport,
    InspectionRequest,
    RewardStats,
    SampleResult,
    SuppliedSample,
)
from skill.inspection.scoring import score_fresh
from skill.rewards.fingerprint import reward_fingerprint
from skill.rewards.spec import RewardSpec
from skill.routing.evidence import MIN_SAMPLES
from skill.routing.probe import ProbeSpec, probe_rows
from skill.routing.route import load_route, route_probe
from skill.routing.subject import check_inspection_subject
from skill.sampling.progress import Progress
from skill.state import new_id


class Collected(BaseModel):
    """The samples to score, where they came from, whose they are, and how to sample more of the same."""

    samples: list[SuppliedSample]
    source: str
    policy_model: str | None = None
    earlier: InspectionReport | None = None
    policy: GenerateSamples | None = None


def _collect(
    request: InspectionRequest, progress: Progress | None, should_stop: Callable[[], bool] | None
) -> Collected:
    if request.samples is not None:
        return Collected(samples=request.samples, source="supplied")
    if request.samples_of is not None:
        earlier = load_report(request.samples_of)
        samples = [
            SuppliedSample(prompt=s.prompt, completion=s.completion, columns=s.columns, group=s.group)
            for s in earlier.samples
        ]
        source = f"the samples of inspection {earlier.id} ({earlier.source})"
        return Collected(samples=samples, source=source, policy_model=earlier.policy_model, earlier=earlier)
    if request.route_decision_id is not None:
        decision, saved = load_route(request.route_decision_id)
        if decision.measured_on is not None:
            check_inspection_subject(decision.id, decision.measured_on, request.rewards)
        samples = [
            SuppliedSample(
                prompt=s["prompt"],
                completion=s["completion"],
                columns=s.get("columns", {}),
                group=s.get("prompt_index"),
            )
            for s in saved
        ]
        model = decision.measured_on.model if decision.measured_on is not None else None
        probe = route_probe(request.route_decision_id)
        policy = None if probe is None else policy_of_probe(probe)
        if policy is not None and decision.evidence is not None:  # the round that passed: the low one, if that was it
            policy = policy.model_copy(update={"temperature": decision.evidence.temperatures[-1] or policy.temperature})
        return Collected(
            samples=samples, source=f"route_check probe {request.route_decision_id}", policy_model=model, policy=policy
        )
    generate = request.generate
    assert generate is not None
    probe = ProbeSpec(
        rows=generate.rows,
        dataset=generate.dataset,
        prompt_column=generate.prompt_column,
        num_prompts=generate.num_prompts,
    )
    samples, source = sample_policy(generate, probe_rows(probe), generate.seed, progress, should_stop)
    return Collected(samples=samples, source=source, policy_model=generate.model, policy=generate)


def _stats_and_flags(
    specs: list[RewardSpec], results: list[SampleResult], timing: dict[str, float]
) -> tuple[dict[str, RewardStats], list[Flag]]:
    """Each reward's statistics over these samples, and what they and the reward set say is wrong."""
    stats = {name: reward_stats(name, results, seconds) for name, seconds in timing.items()}
    flags = [
        flag for spec, name in zip(specs, stats, strict=True) for flag in reward_flags(spec, name, stats[name], results)
    ]
    return stats, flags + set_flags(specs, stats)


def inspect_rewards(
    request: InspectionRequest, progress: Progress | None = None, should_stop: Callable[[], bool] | None = None
) -> InspectionReport:
    """Run every reward on 50-100 samples, compute statistics and flags, probe known hacks, store the report.

    The verdict is 'pending' until a reader records a review (record_review). Returns the report as a reader
    may see it before labelling: no score, statistic or probe figure (they are sealed until the labels).
    ``should_stop`` (checked between sampling batches) cancels a request that samples (``generate``, or fresh samples
    of a route's policy) before anything is stored.
    """
    started = time.perf_counter()
    reward_fingerprint(request.rewards)  # the allowlist, before any sampling or import
    collected = _collect(request, progress, should_stop)
    samples = (collected.samples[:QUICK_SAMPLES] if request.quick else collected.samples)[:MAX_COLLECTED]
    if len(samples) < MIN_SAMPLES and not request.quick:
        raise SkillError(
            f"Only {len(samples)} sample{'s' if len(samples) != 1 else ''}: a reward read needs at least "
            f"{MIN_SAMPLES} to see its failure modes.",
            f"Send {MIN_SAMPLES}-{MAX_SAMPLES} samples (or generate more: raise num_prompts or n).",
        )
    tokenizer = request.tokenizer or (request.generate.model if request.generate is not None else None)
    scored = score_fresh(request.rewards, samples, tokenizer)
    source, found = collected.source, None
    if not request.quick and collected.earlier is None:  # a read: enough of it unseen, sampling more if need be
        found = collect_unseen(request.rewards, collected.policy, samples, scored, tokenizer, progress, should_stop)
        scored, source = found.scored, "; ".join([source, *found.sources])
    results = scored.results
    if progress is not None:
        progress(1, 3, f"scored {len(results)} samples with {len(scored.timing)} rewards, in a fresh process")
    if progress is not None:
        progress(2, 3, f"ran {len(scored.probes)} hack probes")
    stats, flags = _stats_and_flags(request.rewards, results, scored.timing)
    flags += hack_flags(scored.probes) + scored.flags
    if request.quick:
        return quick_report(request, collected.source, scored, results, stats, flags)
    if found is None:  # the same samples under the same ids: the earlier read still applies
        assert collected.earlier is not None
        drawn, draw = list(range(len(results))), f"The samples of inspection {collected.earlier.id}, ids kept."
    else:
        drawn, draw = balanced_draw(results, request.rewards, unseen=found.unseen)
        draw = f"{draw.rstrip('.')}; {found.said}." if found.said else draw
        flags += outcome_flags([results[i] for i in drawn], results, request.rewards, flags)
    renumber = {old: new for new, old in enumerate(drawn)}  # a flag's evidence, among the samples drawn
    for flag in flags:
        flag.evidence = [renumber[old] for old in flag.evidence if old in renumber]
    report = InspectionReport(
        id=new_id("insp"),
        created_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        rewards=request.rewards,
        reward_fingerprint=scored.fingerprint,
        fingerprint_parts=scored.fingerprint_parts,
        source=source,
        policy_model=collected.policy_model,
        samples=[results[old].model_copy(update={"id": new}) for new, old in enumerate(drawn)],
        stats=stats,
        flags=flags,
        probe_results=scored.probes,
        draw=draw,
        read_roles=read_roles(request.rewards),
        seconds=round(time.perf_counter() - started, 3),
    )
    report = save_report(report)
    if collected.earlier is not None:
        report = carry_read(report, collected.earlier)
    if progress is not None:
        progress(3, 3, f"report {report.id} written")
    return visible(report)
