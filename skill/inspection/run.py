"""inspect_rewards: the mandatory reward read before training.

The rewards are run on 50-100 sampled outputs, in a fresh process (``inspection.scoring``: the code on
disk, the code fingerprinted); statistics and role-aware hack probes do half the reading; a reader
(human or agent) labels every sample as agreeing with the rewards' judgment or not, with a few
attention checks shown in place (``inspection.attention``). Any disagreement means: fix the reward
function first. The report is stored (``inspection.reports``) with the rewards' fingerprint, which the
gate (``inspection.gate``) compares before every run.

Owns: ``inspect_rewards`` (collect, score, flags, checks). May import: the rest of ``inspection``,
``rewards``, ``routing``, ``sampling``, ``state``, ``errors``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from skill.errors import SkillError
from skill.inspection.attention import plant_checks, review_blocker
from skill.inspection.flags import hack_flags, reward_flags, reward_stats, set_flags
from skill.inspection.reports import (
    attention_secret,
    record_last_shown,
    save_key,
    save_report,
    shown_keys,
    shown_statuses,
)
from skill.inspection.schema import (
    MAX_SAMPLES,
    Flag,
    InspectionReport,
    InspectionRequest,
    ProbeResult,
    RewardStats,
    SampleResult,
    SuppliedSample,
)
from skill.inspection.scoring import score_fresh
from skill.rewards.fingerprint import reward_fingerprint
from skill.rewards.spec import RewardSpec
from skill.routing.evidence import MIN_SAMPLES
from skill.routing.probe import ProbeSpec, probe_rows, prompt_key, warn_before_long_sampling
from skill.routing.route import load_route
from skill.routing.subject import check_inspection_subject
from skill.sampling.engines import sample_completions
from skill.sampling.progress import Progress
from skill.sampling.schema import SamplingSettings
from skill.state import new_id


def _collect(
    request: InspectionRequest, progress: Progress | None, should_stop: Callable[[], bool] | None
) -> tuple[list[SuppliedSample], str]:
    if request.samples is not None:
        return request.samples, "supplied"
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
        return samples, f"route_check probe {request.route_decision_id}"
    generate = request.generate
    assert generate is not None
    probe = ProbeSpec(
        rows=generate.rows,
        dataset=generate.dataset,
        prompt_column=generate.prompt_column,
        num_prompts=generate.num_prompts,
    )
    rows, column = probe_rows(probe), prompt_key(probe)
    settings = SamplingSettings(
        n=generate.n, temperature=generate.temperature, max_new_tokens=generate.max_new_tokens, seed=generate.seed
    )
    prompts = [row[column] for row in rows]
    warn_before_long_sampling(progress, generate.model, len(prompts), generate.n, generate.max_new_tokens)
    sampled = sample_completions(generate.model, prompts, settings, progress, should_stop, generate.engine)
    samples = [
        SuppliedSample(
            prompt=g.prompt,
            completion=c,
            group=g.prompt_index,
            columns={k: v for k, v in rows[g.prompt_index].items() if k != column},
        )
        for g in sampled.groups
        for c in g.completions
    ]
    used = sampled.sampled_with
    revision = f", revision {used.model_revision}" if used.model_revision else ""
    return samples, f"sampled from {generate.model} by {used.engine} {used.version} on {used.device}{revision}"


READ_FIX = "To train on these rewards without a read, record_review with accept_unread=true and a reason."


def quiet(probe: ProbeResult) -> ProbeResult:
    """A probe the rewards withstood, without what it was built from: its text and bars come from the sample the
    reward scored best (really, not as shown), so they would point at attention checks. A hacked probe keeps
    them: it blocks the report, and the user needs them to fix the reward."""
    return probe.model_copy(update={"completion": "", "expected": "", "reference_score": None, "total_bar": None})


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

    The verdict is 'pending' until a reader records a review (record_review). ``should_stop`` (checked between
    sampling batches) cancels a ``generate`` request before anything is stored.
    """
    started = time.perf_counter()
    reward_fingerprint(request.rewards)  # the allowlist, before any sampling or import
    samples, source = _collect(request, progress, should_stop)
    if len(samples) < MIN_SAMPLES:
        raise SkillError(
            f"Only {len(samples)} sample{'s' if len(samples) != 1 else ''}: a reward read needs at least "
            f"{MIN_SAMPLES} to see its failure modes.",
            f"Send {MIN_SAMPLES}-{MAX_SAMPLES} samples (or generate more: raise num_prompts or n).",
        )
    tokenizer = request.tokenizer or (request.generate.model if request.generate is not None else None)
    scored = score_fresh(request.rewards, samples[:MAX_SAMPLES], tokenizer)
    results = scored.results
    if progress is not None:
        progress(1, 3, f"scored {len(results)} samples with {len(scored.timing)} rewards, in a fresh process")
    if progress is not None:
        progress(2, 3, f"ran {len(scored.probes)} hack probes")
    report_id = new_id("insp")
    with shown_statuses() as statuses:
        shown, key = plant_checks(request.rewards, results, attention_secret(), statuses, shown_keys())
        record_last_shown(key["sightings"], report_id)
    # What the reader sees is computed from the scores as shown: statistics of the real scores beside the shown
    # ones would say where the checks are. Blocking flags come from the real scores (while one stands, no read
    # can pass, so it tells a reader nothing worth knowing); every other flag and figure from the shown ones.
    _real_stats, real_flags = _stats_and_flags(request.rewards, results, scored.timing)
    stats, shown_flags = _stats_and_flags(request.rewards, shown, scored.timing)
    flags = [f for f in real_flags if f.severity == "blocking"] + [f for f in shown_flags if f.severity != "blocking"]
    flags += hack_flags(scored.probes) + scored.flags
    blocker = review_blocker(key)
    if blocker is not None:  # said before anyone reads: no read of this report can pass
        flags.append(Flag(code="read_cannot_pass", severity="warning", message=blocker, fix=READ_FIX))
    report = InspectionReport(
        id=report_id,
        created_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        rewards=request.rewards,
        reward_fingerprint=scored.fingerprint,
        source=source,
        samples=shown,
        stats=stats,
        flags=flags,
        probe_results=[probe if probe.hacked else quiet(probe) for probe in scored.probes],
        seconds=round(time.perf_counter() - started, 3),
    )
    save_key(report.id, {**key, "fingerprint_parts": scored.fingerprint_parts})
    save_report(report)
    if progress is not None:
        progress(3, 3, f"report {report.id} written")
    return report
