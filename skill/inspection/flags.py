"""What the statistics say: per-reward distributions, and the flags a reader must look at.

A flag blocks the gate only where training would optimise a wrong target, and every blocking flag says
what to change: a correctness (or judge) reward that is constant, fails on many samples or finds an answer in
under 20% of them (``rewards.reading``), weights that
rank well-formed-but-wrong above correct-but-malformed (or let shaping outweigh correctness), and a
hack probe the rewards pay for. A format reward that gives every sample the same score is information
(a format gap, or a format the base model already follows), not a block; a correctness reward alone,
without a format reward, is not a block either.

Owns: ``reward_stats``, ``reward_flags``, ``set_flags``, ``hack_flags``. May import:
``inspection.schema``, ``rewards`` (composite, reading, spec).
"""

from __future__ import annotations

import math

from skill.inspection.schema import Flag, ProbeResult, RewardStats, SampleResult
from skill.rewards.composite import check_composite
from skill.rewards.reading import reads_too_little
from skill.rewards.spec import CORRECTNESS_ROLES, RewardSpec


def _pearson(xs: list[float], ys: list[float]) -> float | None:
    if len(xs) < 3:
        return None
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sx = math.sqrt(sum((x - mx) ** 2 for x in xs))
    sy = math.sqrt(sum((y - my) ** 2 for y in ys))
    if sx == 0 or sy == 0:
        return None
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / (sx * sy)


def reward_stats(name: str, results: list[SampleResult], seconds: float) -> RewardStats:
    """The distribution of one reward over the real samples."""
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
        read_share=(
            sum(r.extracted[name] is not None for r in results) / len(results)
            if results and all(name in r.extracted for r in results)
            else None
        ),
    )


def _constant_flag(spec: RewardSpec, name: str, s: RewardStats) -> Flag:
    if spec.role in CORRECTNESS_ROLES:
        return Flag(
            code="constant_reward",
            severity="blocking",
            reward=name,
            message=f"{name} gives the same value ({s.mean}) to every sample: no learning signal, and likely a bug.",
            fix="Check the answer column and the extraction on a few samples; if the scores are right, the task is "
            "all-pass or all-fail for this model (route_check: harder or easier prompts, or SFT first).",
        )
    return Flag(
        code="constant_reward",
        severity="warning",
        reward=name,
        message=f"{name} gives the same value ({s.mean}) to every sample: a format gap (no sample has the structure) "
        "or a structure every sample already has. It adds no signal now; check it is not a bug (e.g. a regex "
        "without DOTALL on multi-line output).",
        fix="Read a few samples against the pattern; state the format in the prompt if the model never uses it.",
    )


def reward_flags(spec: RewardSpec, name: str, s: RewardStats, results: list[SampleResult]) -> list[Flag]:
    """What one reward's statistics say is wrong with it: no signal, failures, length, saturation."""
    flags = [_constant_flag(spec, name, s)] if s.distinct_values <= 1 else []
    if s.failure_rate > 0:
        failed = [r.id for r in results if name in r.errors]
        blocking = s.failure_rate > 0.05
        flags.append(
            Flag(
                code="reward_failures",
                severity="blocking" if blocking else "warning",
                reward=name,
                evidence=failed[:10],
                message=f"{name} failed on {s.failure_rate:.0%} of samples (TRL drops these from its "
                f"means, so training would hide them): {results[failed[0]].errors[name]}",
                fix="Fix the error shown: a reward must return a score (or None for 'not applicable') for any "
                "model output, never raise.",
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
    if spec.role in CORRECTNESS_ROLES:
        flags += _correctness_flags(name, s)
        unread = reads_too_little(spec, s.read_share, [r.completion for r in results])
        if unread is not None:
            flags.append(
                Flag(code="reads_too_little", severity="blocking", reward=name, message=unread[0], fix=unread[1])
            )
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


def set_flags(specs: list[RewardSpec], stats: dict[str, RewardStats]) -> list[Flag]:
    """What is wrong with the rewards together: one dominating the advantage, or weights that invert the order."""
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
    check = check_composite(specs)
    correctness = sum(spec.weight for spec in specs if spec.role in CORRECTNESS_ROLES)
    shaping = sum(abs(spec.weight) for spec in specs if spec.role == "shaping")
    for warning in check.warnings:
        if "does not beat wrong but well-formed" in warning:  # the weights invert the order
            blocking, fix = True, "Give correctness a larger weight than format (e.g. 1.0 vs 0.2)."
        elif "Shaping" in warning:
            blocking, fix = bool(correctness and shaping >= correctness), "Keep shaping weights well below correctness."
        elif "No format reward" in warning:
            blocking, fix = False, "Add a format reward at a small weight (e.g. format 0.2 beside correctness 1.0)."
        else:  # the format share: the only other warning check_composite gives
            blocking, fix = False, "Lower the format weight (e.g. 0.2 beside correctness 1.0)."
        flags.append(
            Flag(code="composite_rule", severity="blocking" if blocking else "warning", message=warning, fix=fix)
        )
    return flags


def hack_flags(probes: list[ProbeResult]) -> list[Flag]:
    """A blocking flag for every known hack the rewards pay for, saying what to change."""
    return [
        Flag(
            code=f"hack_{probe.probe}",
            severity="blocking",
            reward=probe.reward,
            message=f"The '{probe.probe}' hack pays: {probe.why}. Output: {probe.completion[:80]!r}",
            fix=probe.fix,
        )
        for probe in probes
        if probe.hacked
    ]
