"""inspect_rewards: the mandatory reward read before training.

The rewards are run on 50-100 sampled outputs; statistics and known-hack probes do half the reading;
a reader (human or agent) labels each sample as agreeing with the rewards' judgment or not, with a
few planted attention checks mixed in unmarked. Any disagreement means: fix the reward function
first. The report is stored (``inspection.reports``) with the rewards' fingerprint, which the gate
(``inspection.gate``) compares before every run.

Owns: ``inspect_rewards`` (collect, score, statistics, flags, planted checks). May import: the rest of
``inspection``, ``rewards``, ``routing``, ``sampling``, ``state``, ``errors``.
"""

from __future__ import annotations

import math
import random
import time
from typing import Any

from skill.errors import SkillError
from skill.inspection.gate import reward_fingerprint
from skill.inspection.hack_probes import probe_rewards
from skill.inspection.reports import save_key, save_report
from skill.inspection.schema import (
    MAX_SAMPLES,
    MIN_SAMPLES,
    Flag,
    InspectionReport,
    InspectionRequest,
    ProbeResult,
    RewardStats,
    SampleResult,
    SuppliedSample,
)
from skill.rewards.composite import check_composite
from skill.rewards.registry import build_reward_functions
from skill.rewards.spec import RewardSpec
from skill.routing.route import ProbeSpec, load_route, probe_rows
from skill.sampling import Progress, SamplingSettings, sample_completions
from skill.state import new_id


def _collect(request: InspectionRequest, progress: Progress | None) -> tuple[list[SuppliedSample], str]:
    if request.samples is not None:
        return request.samples, "supplied"
    if request.route_decision_id is not None:
        _decision, saved = load_route(request.route_decision_id)
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
    rows = probe_rows(
        ProbeSpec(
            rows=generate.rows,
            dataset=generate.dataset,
            prompt_column=generate.prompt_column,
            num_prompts=generate.num_prompts,
        )
    )
    settings = SamplingSettings(
        n=generate.n, temperature=generate.temperature, max_new_tokens=generate.max_new_tokens, seed=generate.seed
    )
    groups = sample_completions(generate.model, [row[generate.prompt_column] for row in rows], settings, progress)
    samples = [
        SuppliedSample(
            prompt=g.prompt,
            completion=c,
            group=g.prompt_index,
            columns={k: v for k, v in rows[g.prompt_index].items() if k != generate.prompt_column},
        )
        for g in groups
        for c in g.completions
    ]
    return samples, f"sampled from {generate.model}"


def _score(specs: list[RewardSpec], samples: list[SuppliedSample]) -> tuple[list[SampleResult], dict[str, Any], dict]:
    functions = build_reward_functions(specs)
    prompts = [sample.prompt for sample in samples]
    completions = [sample.completion for sample in samples]
    keys = sorted({key for sample in samples for key in sample.columns})
    columns = {key: [sample.columns.get(key) for sample in samples] for key in keys}
    per_reward: dict[str, list[float | None]] = {}
    timing: dict[str, float] = {}
    results = [
        SampleResult(
            id=i, prompt=s.prompt, completion=s.completion, columns=s.columns, group=s.group, scores={}, total=None
        )
        for i, s in enumerate(samples)
    ]
    for function in functions:
        name = function.__name__
        started = time.perf_counter()
        scores = function(prompts, completions, **columns)
        timing[name] = time.perf_counter() - started
        per_reward[name] = scores
        errors = getattr(function, "last_item_errors", [None] * len(samples))
        extract = getattr(function, "extract", None)
        for result, score, error in zip(results, scores, errors, strict=True):
            result.scores[name] = score
            if error:
                result.errors[name] = error
            if extract is not None:
                result.extracted[name] = extract(result.completion)
    for result in results:
        values = [result.scores[f.__name__] for f in functions]
        if all(value is not None for value in values):
            result.total = sum(spec.weight * value for spec, value in zip(specs, values, strict=True))
    return results, {f.__name__: f for f in functions}, timing


def _pearson(xs: list[float], ys: list[float]) -> float | None:
    if len(xs) < 3:
        return None
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sx = math.sqrt(sum((x - mx) ** 2 for x in xs))
    sy = math.sqrt(sum((y - my) ** 2 for y in ys))
    if sx == 0 or sy == 0:
        return None
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / (sx * sy)


def _stats(name: str, results: list[SampleResult], seconds: float) -> RewardStats:
    scored = [(r, r.scores[name]) for r in results if r.scores[name] is not None]
    values = [value for _, value in scored]
    groups: dict[int, set[float]] = {}
    for result, value in scored:
        if result.group is not None:
            groups.setdefault(result.group, set()).add(value)
    mean = sum(values) / len(values) if values else None
    return RewardStats(
        mean=mean,
        std=math.sqrt(sum((v - mean) ** 2 for v in values) / len(values)) if values else None,
        minimum=min(values) if values else None,
        maximum=max(values) if values else None,
        none_rate=1 - len(values) / len(results),
        failure_rate=sum(1 for r in results if name in r.errors) / len(results),
        distinct_values=len(set(values)),
        length_correlation=_pearson([float(len(r.completion)) for r, _ in scored], values),
        zero_variance_groups=(sum(len(v) == 1 for v in groups.values()) / len(groups)) if groups else None,
        seconds=round(seconds, 4),
    )


def _reward_flags(spec: RewardSpec, name: str, s: RewardStats, results: list[SampleResult]) -> list[Flag]:
    """What one reward's statistics say is wrong with it: no signal, failures, length, saturation."""
    flags = []
    if s.distinct_values <= 1:
        flags.append(
            Flag(
                code="constant_reward",
                severity="blocking",
                reward=name,
                message=f"{name} gives the same value ({s.mean}) to every sample: no learning signal, "
                "and likely a bug (wrong column, wrong extraction).",
            )
        )
    if s.failure_rate > 0:
        failed = [r.id for r in results if name in r.errors]
        flags.append(
            Flag(
                code="reward_failures",
                severity="blocking" if s.failure_rate > 0.05 else "warning",
                reward=name,
                evidence=failed[:10],
                message=f"{name} failed on {s.failure_rate:.0%} of samples (TRL drops these from its "
                f"means, so training would hide them): {results[failed[0]].errors[name]}",
            )
        )
    elif s.none_rate > 0:
        flags.append(
            Flag(
                code="reward_none",
                severity="warning",
                reward=name,
                evidence=[r.id for r in results if r.scores[name] is None][:10],
                message=f"{name} returned None (not applicable) for {s.none_rate:.0%} of samples.",
            )
        )
    if s.length_correlation is not None and abs(s.length_correlation) > 0.5 and spec.role != "shaping":
        flags.append(
            Flag(
                code="length_correlated",
                severity="warning",
                reward=name,
                message=f"{name} correlates with completion length (r = {s.length_correlation:.2f}): "
                "the policy may learn length instead of the task.",
            )
        )
    if spec.role in ("correctness", "judge"):
        flags += _correctness_flags(name, s)
    return flags


def _correctness_flags(name: str, s: RewardStats) -> list[Flag]:
    """A correctness reward that leaves GRPO little to learn: saturated, or constant within groups."""
    flags = []
    if s.mean is not None and s.maximum and s.mean >= 0.9 * s.maximum:
        flags.append(
            Flag(
                code="saturated",
                severity="warning",
                reward=name,
                message=f"{name} is near its maximum on average ({s.mean:.2f}): little to learn; use "
                "harder prompts or a stricter check.",
            )
        )
    if s.zero_variance_groups is not None and s.zero_variance_groups > 0.5:
        flags.append(
            Flag(
                code="zero_variance_groups",
                severity="warning",
                reward=name,
                message=f"{name} is constant within {s.zero_variance_groups:.0%} of prompt groups: GRPO "
                "learns nothing there (filter prompts by learnability, or sample more).",
            )
        )
    return flags


def _set_flags(specs: list[RewardSpec], stats: dict[str, RewardStats]) -> list[Flag]:
    """What is wrong with the rewards together: one dominating the advantage, or composite rules broken."""
    flags = []
    spreads = {name: s.std for name, s in stats.items() if s.std}
    if len(spreads) > 1 and max(spreads.values()) > 10 * min(spreads.values()):
        flags.append(
            Flag(
                code="scale_imbalance",
                severity="warning",
                message="Reward spreads differ more than tenfold "
                f"({', '.join(f'{k}: {v:.3g}' for k, v in spreads.items())}): the widest dominates the "
                "advantage; rescale, or set multi_objective_aggregation='normalize_then_sum'.",
            )
        )
    for warning in check_composite(specs).warnings:
        blocking = "does not beat" in warning or "outweigh" in warning
        flags.append(Flag(code="composite_rule", severity="blocking" if blocking else "warning", message=warning))
    return flags


def _hack_flags(probes: list[ProbeResult]) -> list[Flag]:
    """A blocking flag for every known hack a reward pays for."""
    return [
        Flag(
            code=f"hack_{probe.probe}",
            severity="blocking",
            reward=probe.reward,
            evidence=[] if probe.sample_id is None else [probe.sample_id],
            message=f"{probe.reward} gives {probe.score} to the '{probe.probe}' hack (an honest "
            f"reward gives {probe.expected}): {probe.completion[:80]!r}",
        )
        for probe in probes
        if probe.hacked
    ]


def _plant_attention_checks(
    results: list[SampleResult], specs: list[RewardSpec], count: int, seed: int
) -> tuple[list[SampleResult], list[int]]:
    """Copies of real samples whose correctness score is shown inverted: a reader who agrees did not read."""
    correctness = [i for i, spec in enumerate(specs) if spec.role in ("correctness", "judge")]
    if not correctness or count == 0:
        return results, []
    position = correctness[0]
    name = list(results[0].scores)[position]
    rng = random.Random(seed)
    candidates = [r for r in results if r.scores.get(name) in (0.0, 1.0)]
    planted = []
    for original in rng.sample(candidates, min(count, len(candidates))):
        copy = original.model_copy(deep=True)
        copy.scores[name] = 1.0 - (original.scores[name] or 0.0)
        values = list(copy.scores.values())
        copy.total = None if None in values else sum(s.weight * v for s, v in zip(specs, values, strict=True))
        planted.append(copy)
    mixed = results + planted
    rng.shuffle(mixed)
    planted_ids = []
    for position, result in enumerate(mixed):
        if any(result is p for p in planted):
            planted_ids.append(position)
        result.id = position
    return mixed, planted_ids


def inspect_rewards(request: InspectionRequest, progress: Progress | None = None) -> InspectionReport:
    """Run every reward on 50-100 samples, compute statistics and flags, probe known hacks, store the report.

    The verdict is 'pending' until a reader records a review (record_review).
    """
    started = time.perf_counter()
    samples, source = _collect(request, progress)
    if len(samples) < MIN_SAMPLES:
        raise SkillError(
            f"Only {len(samples)} sample{'s' if len(samples) != 1 else ''}: a reward read needs at least "
            f"{MIN_SAMPLES} to see its failure modes.",
            f"Send {MIN_SAMPLES}-{MAX_SAMPLES} samples (or generate more: raise num_prompts or n).",
        )
    samples = samples[:MAX_SAMPLES]
    results, functions, timing = _score(request.rewards, samples)
    if progress is not None:
        progress(1, 3, f"scored {len(results)} samples with {len(functions)} rewards")
    stats = {name: _stats(name, results, timing[name]) for name in functions}
    flags = [
        flag
        for spec, name in zip(request.rewards, stats, strict=True)
        for flag in _reward_flags(spec, name, stats[name], results)
    ]
    flags += _set_flags(request.rewards, stats)
    probes = probe_rewards(request.rewards, functions, results)
    flags += _hack_flags(probes)
    if progress is not None:
        progress(2, 3, f"ran {len(probes)} hack probes")
    shown, planted = _plant_attention_checks(results, request.rewards, request.planted, request.seed)
    fingerprint, parts = reward_fingerprint(request.rewards)
    report = InspectionReport(
        id=new_id("insp"),
        created_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        rewards=request.rewards,
        reward_fingerprint=fingerprint,
        source=source,
        samples=shown,
        stats=stats,
        flags=flags,
        probe_results=probes,
        seconds=round(time.perf_counter() - started, 3),
    )
    save_key(report.id, planted, parts)
    save_report(report)
    if progress is not None:
        progress(3, 3, f"report {report.id} written")
    return report
