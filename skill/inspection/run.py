"""inspect_rewards: the mandatory reward read before training, and the gate the runner enforces.

The rewards are run on 50-100 sampled outputs; statistics and known-hack probes do half the reading;
a reader (human or agent) labels each sample as agreeing with the rewards' judgment or not, with a
few planted attention checks mixed in unmarked. Any disagreement means: fix the reward function
first. Reports are stored under the state root with a fingerprint of everything that decides what
the rewards score, so the gate knows when a reward changed since it was inspected.
"""

from __future__ import annotations

import json
import math
import random
import time
from pathlib import Path
from typing import Any

from skill.errors import SkillError
from skill.inspection.schema import (
    MAX_SAMPLES,
    MIN_SAMPLES,
    Flag,
    InspectionReport,
    InspectionRequest,
    RewardStats,
    SampleResult,
    SuppliedSample,
)
from skill.rewards.composite import check_composite
from skill.rewards.spec import RewardSpec
from skill.sampling import Progress
from skill.state import new_id, state_dir, validate_identifier, write_atomically

# The gate policy on a non-interactive review (--yes, accept all without a per-sample read): it is accepted
# when nothing else blocks (no blocking flag), recorded as exactly that, and named as such in the run's
# record and the model card. It cannot clear a blocking flag, and it is never counted as a read.
ACCEPT_NON_INTERACTIVE = True


def _collect(request: InspectionRequest, progress: Progress | None) -> tuple[list[SuppliedSample], str]:
    if request.samples is not None:
        return request.samples, "supplied"
    if request.route_decision_id is not None:
        from skill.routing.route import load_route

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
    from skill.routing.route import ProbeSpec, _load_rows
    from skill.sampling import SamplingSettings, sample_completions

    generate = request.generate
    assert generate is not None
    rows = _load_rows(
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


def _fingerprint_parts(specs: list[RewardSpec]) -> dict[str, str]:
    """One hash per reward: its spec, the source of every module defining it, and the library versions."""
    import hashlib
    import importlib
    import importlib.metadata
    import inspect

    from skill.rewards import base, registry

    versions = {}
    for package in ("grpo-rlvr", "math-verify", "jsonschema"):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = "absent"
    parts = {}
    for position, spec in enumerate(specs):
        if ":" in spec.name:
            modules = [importlib.import_module(spec.name.split(":", 1)[0])]
        else:
            modules = [inspect.getmodule(registry.registered_reward(spec).build), base]
        sources = {
            module.__name__: hashlib.sha256(inspect.getsource(module).encode()).hexdigest() for module in modules
        }
        if spec.name == "length_penalty" and "wrap" in spec.params:
            wrapped = RewardSpec.model_validate({"role": "correctness", **spec.params["wrap"]})
            sources["wrapped"] = _fingerprint_parts([wrapped])[f"0:{wrapped.name}"]
        payload = {"spec": spec.model_dump(mode="json"), "sources": sources, "versions": versions}
        parts[f"{position}:{spec.name}"] = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
    return parts


def reward_fingerprint(specs: list[RewardSpec]) -> tuple[str, dict[str, str]]:
    """The fingerprint of a reward set, and its per-reward parts (to say which reward changed).

    >>> fingerprint, parts = reward_fingerprint([RewardSpec(name="format", role="format")])
    >>> len(fingerprint), list(parts)
    (64, ['0:format'])
    """
    import hashlib

    parts = _fingerprint_parts(specs)
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest(), parts


def _score(specs: list[RewardSpec], samples: list[SuppliedSample]) -> tuple[list[SampleResult], dict[str, Any], dict]:
    from skill.rewards.registry import build_reward_functions

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


def _flags(specs: list[RewardSpec], results: list[SampleResult], stats: dict[str, RewardStats]) -> list[Flag]:
    flags = []
    names = list(stats)
    for spec, name in zip(specs, names, strict=True):
        s = stats[name]
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
        if spec.role in ("correctness", "judge") and s.mean is not None and s.maximum and s.mean >= 0.9 * s.maximum:
            flags.append(
                Flag(
                    code="saturated",
                    severity="warning",
                    reward=name,
                    message=f"{name} is near its maximum on average ({s.mean:.2f}): little to learn; use "
                    "harder prompts or a stricter check.",
                )
            )
        if (
            s.zero_variance_groups is not None
            and s.zero_variance_groups > 0.5
            and spec.role in ("correctness", "judge")
        ):
            flags.append(
                Flag(
                    code="zero_variance_groups",
                    severity="warning",
                    reward=name,
                    message=f"{name} is constant within {s.zero_variance_groups:.0%} of prompt groups: GRPO "
                    "learns nothing there (filter prompts by learnability, or sample more).",
                )
            )
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
    composite = check_composite(specs)
    for warning in composite.warnings:
        blocking = "does not beat" in warning or "outweigh" in warning
        flags.append(Flag(code="composite_rule", severity="blocking" if blocking else "warning", message=warning))
    return flags


def _plant_attention_checks(results: list[SampleResult], specs: list[RewardSpec], count: int, seed: int):
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


def _report_dir() -> Path:
    return state_dir("inspections")


def save_report(report: InspectionReport) -> InspectionReport:
    """Store the report (JSON, Markdown, HTML) atomically under inspections/."""
    from skill.inspection.render import render_html, render_markdown

    directory = _report_dir()
    paths = {
        "json": directory / f"{report.id}.json",
        "markdown": directory / f"{report.id}.md",
        "html": directory / f"{report.id}.html",
    }
    report.paths = {kind: str(path) for kind, path in paths.items()}
    for kind, text in (
        ("markdown", render_markdown(report)),
        ("html", render_html(report)),
        ("json", report.model_dump_json(indent=1)),
    ):
        write_atomically(paths[kind], text)
    return report


def load_report(report_id: str) -> InspectionReport:
    """A stored report by id."""
    path = _report_dir() / f"{validate_identifier(report_id, 'inspection')}.json"
    if not path.is_file():
        raise SkillError(f"No inspection {report_id!r} under {path.parent}.", "Send an id inspect_rewards returned.")
    return InspectionReport.model_validate_json(path.read_text())


def inspect_rewards(request: InspectionRequest, progress: Progress | None = None) -> InspectionReport:
    """Run every reward on 50-100 samples, compute statistics and flags, probe known hacks, store the report.

    The verdict is 'pending' until a reader records a review (record_review).
    """
    from skill.inspection.hack_probes import probe_rewards

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
    flags = _flags(request.rewards, results, stats)
    probes = probe_rewards(request.rewards, functions, results)
    for probe in probes:
        if probe.hacked:
            flags.append(
                Flag(
                    code=f"hack_{probe.probe}",
                    severity="blocking",
                    reward=probe.reward,
                    evidence=[] if probe.sample_id is None else [probe.sample_id],
                    message=f"{probe.reward} gives {probe.score} to the '{probe.probe}' hack (an honest "
                    f"reward gives {probe.expected}): {probe.completion[:80]!r}",
                )
            )
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
    key = _report_dir() / f"{report.id}.key.json"
    write_atomically(key, json.dumps({"planted": planted, "fingerprint_parts": parts}))
    save_report(report)
    if progress is not None:
        progress(3, 3, f"report {report.id} written")
    return report
