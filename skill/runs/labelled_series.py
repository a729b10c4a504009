"""Labelled metric series for validating run health: runs with one known failure each, and healthy runs.

Each run is simulated the way TRL 1.16's GRPOTrainer measures it, not drawn as a smooth line plus
noise: every logged step samples ``groups`` prompts (each with its own difficulty, a logit offset
of sd 1), ``group_size`` completions per prompt, 0/1 correctness and format outcomes, and lengths cut
at max_completion_length; the logged row is computed from those samples as TRL computes it
(``rewards/<name>/mean`` and ``std``, ``reward``, ``reward_std``, ``frac_reward_zero_std`` over groups of
the weighted total, ``completions/mean_length``, ``clipped_ratio``, ...), beside ``entropy``, ``kl`` (beta
> 0), ``grad_norm`` (log-normal, sd 0.4) and ``clip_ratio/*``. Every ``eval_every`` steps (and at step 0) a
fixed held-out sample (``eval_prompts`` x ``eval_generations``) is scored into ``eval_*`` rows, as the
worker's in-training evaluation logs them. So batch noise, group uniformity and held-out noise are
those of the stated shape. What each failure looks like (the curves) is in FAILURE_PROFILES; healthy
runs draw their curves from ranges (``healthy_profile``).

The two measured runs of this project (docs/architecture.md §7, bench/demo_result.json) are reconstructed at the
demo's shape from their reported first/last-10-step means (``measured_runs``), and the demo's own rows
as its worker logged them (``demo_metrics.jsonl``, `grpo-rlvr demo --yes` on 2 CPU cores, 2026-12-01)
are labelled as they are (``real_demo_run``): nothing to say while it learns, the prompts solved by its end.
"""

from __future__ import annotations

import json
import math
import random
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from skill.rewards.spec import RewardSpec
from skill.runs.health import diagnose
from skill.runs.health_warning import HealthWarning
from skill.runs.series import BatchShape

Curve = Callable[[float], float]  # progress u in [0, 1] -> value

CORRECTNESS_LED = (0.2, 1.0)  # (format weight, correctness weight): the demo's
EQUAL_WEIGHTS = (1.0, 1.0)
EXPECTED = {
    "well_formed_wrong": "reward_divergence",
    "all_pass": "no_learning_signal_all_pass",
    "all_fail": "no_learning_signal_all_fail",
    "reward_hacking": "heldout_divergence",
    "length_hacking": "length_growth",
    "truncation": "clipped_completions",
    "entropy_collapse": "entropy_collapse",
    "kl_blowup": "kl_blowup",
    "gradient_spike": "gradient_spikes",
    "vanishing_gradients": "vanishing_gradients",
    "clip_saturation": "clip_saturation",
    "format_dominates": "reward_composition",
    "plateau": "reward_plateau",
    "reward_failures": "reward_failures",
    "training_inference_mismatch": "training_inference_mismatch",
    "rare_tokens_clipped": "rare_tokens_clipped",
    "length_collapse_under_gspo": "length_collapse",
    "gradient_spike_under_gspo": "gradient_spikes",
}
# What the run already trains with, where a label's failure depends on it (the symptom then calls for another loss).
SEQUENCE_RATIOS = {"importance_sampling_level": "sequence", "epsilon": 3e-4, "epsilon_high": 4e-4}
LENGTHS = (20, 40, 100, 200)


class LabelledRun(NamedTuple):
    """One simulated run: its label, the check that must name it (None: healthy), and what diagnose reads."""

    label: str
    expected: str | None
    seed: int
    metrics: list[dict[str, Any]]
    rewards: list[RewardSpec]
    shape: BatchShape
    max_completion_length: int
    max_steps: int
    trl: dict[str, Any] | None = None

    def diagnose(self, rows: int | None = None) -> list[HealthWarning]:
        """What run health says of this run, from its first ``rows`` logged rows (all by default), read as
        run_status reads a run: with its shape, limits, planned length and loss."""
        metrics = self.metrics if rows is None else self.metrics[:rows]
        return diagnose(metrics, self.rewards, self.max_completion_length, self.shape, self.max_steps, self.trl)


def linear(a: float, b: float) -> Curve:
    return lambda u: a + (b - a) * u


def decay(a: float, b: float) -> Curve:
    """Exponential from a to b (entropy, gradient norms, KL growth: multiplicative processes)."""
    return lambda u: a * (b / a) ** u


def rise_then_flat(a: float, b: float, until: float = 0.5) -> Curve:
    return lambda u: a + (b - a) * min(u / until, 1.0)


def peak(a: float, top: float, end: float, at: float = 0.4) -> Curve:
    return lambda u: a + (top - a) * u / at if u <= at else top + (end - top) * (u - at) / (1 - at)


def _logit(p: float) -> float:
    p = min(max(p, 1e-4), 1 - 1e-4)
    return math.log(p / (1 - p))


def _draw(rng: random.Random, p: float, offset: float) -> int:
    return int(rng.random() < 1 / (1 + math.exp(-(_logit(p) + offset))))


def _sd(values: list[float]) -> float:
    return statistics.pstdev(values) if len(values) > 1 else 0.0


def healthy_profile(rng: random.Random) -> dict[str, Any]:
    """Curves of a run that learns: correctness rises steadily, format is learned, the held-out score follows,
    length drifts, entropy eases down, KL creeps up, gradients stay within their noise."""
    c0 = rng.uniform(0.1, 0.4)
    c1 = min(0.92, c0 + rng.uniform(0.3, 0.55))
    e0 = rng.uniform(0.4, 1.5)
    length = rng.uniform(30, 400)
    gap = rng.uniform(0.0, 0.05)
    return {
        "correct": (lambda u: c0 + (c1 - c0) * u**0.8),
        "format": rise_then_flat(rng.uniform(0.1, 0.5), rng.uniform(0.85, 0.98), rng.uniform(0.2, 0.6)),
        "heldout": (lambda u: max(0.0, c0 + (c1 - c0) * u**0.8 - gap * u)),
        "length": linear(length, length * rng.uniform(0.85, 1.2)),
        "max_len": int(length * rng.uniform(2.0, 4.0)),
        "entropy": decay(e0, e0 * rng.uniform(0.6, 0.95)),
        "kl": decay(0.0005, rng.uniform(0.01, 0.08)) if rng.random() < 0.5 else None,
        "grad": decay(g0 := rng.uniform(0.05, 2.0), g0 * rng.uniform(0.5, 1.5)),
        "clip": linear(rng.uniform(0.0, 0.02), rng.uniform(0.01, 0.08)) if rng.random() < 0.5 else None,
        "weights": CORRECTNESS_LED if rng.random() < 0.7 else EQUAL_WEIGHTS,
    }


def healthy_loss_profile(rng: random.Random) -> dict[str, Any]:
    """What a healthy run shows of its loss and sampler: half sample with vLLM and log its log-prob gap to the
    trainer (flat near 0.011 nats, vllm-project/vime#64), a third clip per sequence (GSPO), and the clipped tokens
    split between the lower and upper bound. Drawn from its own stream, so the other curves keep their draws."""
    gap = rng.uniform(0.006, 0.016)
    return {
        "logp_gap": linear(gap, gap * rng.uniform(0.8, 1.3)) if rng.random() < 0.5 else None,
        "clip_high_share": rng.uniform(0.3, 0.7),
        "trl": dict(SEQUENCE_RATIOS) if rng.random() < 1 / 3 else {},
    }


def _loss_failure_overrides(label: str, rng: random.Random, base: dict[str, Any]) -> dict[str, Any]:
    """The curves of the failures that depend on the run's loss or sampler, from the loss stream."""
    u = rng.uniform
    c0 = u(0.15, 0.3)
    profiles: dict[str, Callable[[], dict[str, Any]]] = {
        # The gap grows multiplicatively (the vime#64 drift: 0.011 -> 0.036 in 30 steps), gradients follow.
        "training_inference_mismatch": lambda: {
            "logp_gap": decay(u(0.008, 0.015), u(0.05, 0.2)),
            "spikes": rng.randint(0, 2),
            "spike_ratio": u(15, 60),
        },
        "rare_tokens_clipped": lambda: {"clip": linear(u(0.01, 0.03), u(0.02, 0.08)), "clip_high_share": u(0.85, 0.95)},
        "length_collapse_under_gspo": lambda: {
            "trl": dict(SEQUENCE_RATIOS),
            "length": decay(length := u(150, 600), length * u(0.15, 0.45)),
            "max_len": int(length * 3),
            "format": linear(u(0.85, 0.95), u(0.9, 0.98)),  # learned already: the answers only get shorter
            "correct": rise_then_flat(c0, c0 + (stall := u(0.03, 0.1)), 0.3),
            "heldout": rise_then_flat(c0, c0 + stall, 0.3),
        },
        "gradient_spike_under_gspo": lambda: {
            "trl": dict(SEQUENCE_RATIOS),
            "spikes": rng.randint(1, 3),
            "spike_ratio": u(50, 200),
        },
    }
    return base | profiles[label]() if label in profiles else base


def _failure_overrides(label: str, rng: random.Random, base: dict[str, Any]) -> dict[str, Any]:
    """The curves that make ``label``: each failure changes what it is about and leaves the rest healthy."""
    u = rng.uniform
    c0 = u(0.15, 0.3)
    profiles: dict[str, Callable[[], dict[str, Any]]] = {
        "well_formed_wrong": lambda: {
            "weights": EQUAL_WEIGHTS,
            "format": linear(u(0.05, 0.2), u(0.8, 0.95)),
            "correct": linear(c0, c0 - u(0.05, 0.1)),
            "heldout": linear(c0, c0 - u(0.05, 0.1)),
        },
        "all_pass": lambda: {"correct": linear(u(0.97, 0.99), 0.995), "format": linear(0.995, 0.999)},
        "all_fail": lambda: {"correct": linear(u(0.002, 0.01), 0.01), "format": linear(0.995, 0.999)},
        "reward_hacking": lambda: {
            "correct": linear(c0, u(0.75, 0.9)),
            "heldout": peak(c0, c0 + u(0.2, 0.3), u(0.02, 0.1), at=u(0.3, 0.5)),
        },
        "length_hacking": lambda: {
            "length": linear(438, 1205),
            "max_len": 2048,
            "correct": linear(c0, c0 + u(0.25, 0.4)),
            "heldout": linear(c0, c0 - u(0.0, 0.05)),
        },
        "truncation": lambda: {"length": linear(u(0.8, 0.85) * 512, u(0.95, 1.05) * 512), "max_len": 512},
        "entropy_collapse": lambda: {
            "entropy": decay(e0 := u(0.6, 1.2), e0 * u(0.03, 0.2)),
            "correct": rise_then_flat(c0, c0 + (stall := u(0.05, 0.15)), 0.3),  # what collapse does: learning stalls
            "heldout": rise_then_flat(c0, c0 + stall, 0.3),  # on held-out prompts too
        },
        "kl_blowup": lambda: {"kl": decay(u(0.002, 0.01), u(0.3, 1.5))},
        "gradient_spike": lambda: {"spikes": rng.randint(1, 3), "spike_ratio": u(50, 200)},
        "vanishing_gradients": lambda: {
            "grad": decay(g0 := u(0.1, 1.0), g0 * u(0.0005, 0.004)),
            "correct": rise_then_flat(c0, c0 + u(0.1, 0.2), 0.3),
        },
        "clip_saturation": lambda: {"clip": linear(u(0.03, 0.08), u(0.25, 0.4))},
        "format_dominates": lambda: {
            "weights": EQUAL_WEIGHTS,
            "format": linear(u(0.4, 0.55), u(0.45, 0.6)),
            "correct": linear(c1 := u(0.08, 0.15), c1 + u(-0.02, 0.02)),
            "heldout": linear(c1, c1),
        },
        "plateau": lambda: {
            "correct": rise_then_flat(u(0.05, 0.15), p := u(0.35, 0.5)),
            "heldout": rise_then_flat(0.1, p),
        },
        "reward_failures": lambda: {"failure_rate": linear(0.0, u(0.15, 0.3))},
    }
    return base | profiles[label]() if label in profiles else base


def _reward_rows(
    rng: random.Random, profile: dict[str, Any], u: float, groups: int, size: int, offsets: list[float] | None = None
) -> dict[str, Any]:
    """One batch scored the way GRPOTrainer logs it (keys without the ``eval_`` prefix)."""
    wf, wc = profile["weights"]
    correct, formats, totals, lengths, uniform = [], [], [], [], 0
    max_len = profile["max_len"]
    for g in range(groups):
        offset = offsets[g] if offsets else rng.gauss(0, 1.0)
        c = [_draw(rng, profile["correct" if offsets is None else "heldout"](u), offset) for _ in range(size)]
        f = [_draw(rng, profile["format"](u), rng.gauss(0, 0.5)) for _ in range(size)]
        total = [wf * fi + wc * ci for fi, ci in zip(f, c, strict=True)]
        uniform += len(set(total)) == 1
        correct += c
        formats += f
        totals += total
        mean_length = profile["length"](u)
        lengths += [min(max_len, max(1, round(rng.gauss(mean_length, 0.25 * mean_length)))) for _ in range(size)]
    return {
        "completions/mean_length": statistics.fmean(lengths),
        "completions/min_length": min(lengths),
        "completions/max_length": max(lengths),
        "completions/clipped_ratio": sum(length >= max_len for length in lengths) / len(lengths),
        "rewards/format/mean": statistics.fmean(formats),
        "rewards/format/std": _sd(formats),
        "rewards/exact_match/mean": statistics.fmean(correct),
        "rewards/exact_match/std": _sd(correct),
        "reward": statistics.fmean(totals),
        "reward_std": _sd(totals),
        "frac_reward_zero_std": uniform / groups,
    }


def _training_row(rng: random.Random, profile: dict[str, Any], step: int, steps: int, shape: BatchShape) -> dict:
    u = (step - 1) / max(1, steps - 1)
    row: dict[str, Any] = {"loss": rng.gauss(0, 0.01), "step": step}
    row |= _reward_rows(rng, profile, u, shape.groups, shape.group_size)
    grad = profile["grad"](u) * math.exp(rng.gauss(0, 0.4))
    row |= {"grad_norm": grad * profile["spike_at"].get(step, 1.0), "learning_rate": 1e-6, "epoch": u}
    row |= {"entropy": profile["entropy"](u) * math.exp(rng.gauss(0, 0.03)), "num_tokens": step * 1000.0}
    if profile["kl"] is not None:
        row["kl"] = profile["kl"](u) * math.exp(rng.gauss(0, 0.1))
    clip = profile["clip"](u) * math.exp(rng.gauss(0, 0.2)) if profile["clip"] is not None else 0.0
    high = clip * profile.get("clip_high_share", 0.5)
    row |= {"clip_ratio/low_mean": clip - high, "clip_ratio/high_mean": high, "clip_ratio/region_mean": clip}
    if profile.get("logp_gap") is not None:
        row |= _sampling_rows(profile["sampling_rng"], profile["logp_gap"](u))
    rate = profile.get("failure_rate")
    if rate is not None:
        failed = sum(rng.random() < rate(u) for _ in range(shape.completions)) / shape.completions
        row["rewards/exact_match/failure_rate"] = failed
        row["rewards/format/failure_rate"] = 0.0
    return row


def _sampling_rows(rng: random.Random, gap: float) -> dict[str, float]:
    """What GRPOTrainer logs on the vLLM path with importance-sampling correction, for a mean per-token log-prob gap
    ``gap``: the gap's mean and max over tokens, and the token ratios (token_truncate, capped at 3.0)."""
    mean = gap * math.exp(rng.gauss(0, 0.1))
    worst = mean * rng.uniform(15, 40)
    return {
        "sampling/sampling_logp_difference/mean": mean,
        "sampling/sampling_logp_difference/max": worst,
        "sampling/importance_sampling_ratio/min": math.exp(-worst),
        "sampling/importance_sampling_ratio/mean": 1.0 + rng.gauss(0, mean),
        "sampling/importance_sampling_ratio/max": min(3.0, math.exp(worst)),
    }


def _eval_row(rng: random.Random, profile: dict[str, Any], step: int, steps: int, shape: BatchShape) -> dict:
    u = max(0.0, (step - 1) / max(1, steps - 1))
    batch = _reward_rows(rng, profile, u, shape.eval_prompts, shape.eval_generations, profile["eval_offsets"])
    return {"step": step, "eval_loss": rng.gauss(0, 0.01)} | {f"eval_{key}": value for key, value in batch.items()}


def simulate(
    profile: dict[str, Any], steps: int, shape: BatchShape, eval_every: int, seed: int
) -> list[dict[str, Any]]:
    """Training rows for steps 1..steps and held-out rows at step 0 and every ``eval_every`` steps, in log order."""
    rng = random.Random(seed)
    profile = dict(profile)
    profile["eval_offsets"] = [rng.gauss(0, 1.0) for _ in range(shape.eval_prompts)]
    profile["sampling_rng"] = random.Random(seed + 1)  # its own stream: runs without vLLM rows keep their draws
    spiky = list(range(max(2, steps // 4), steps + 1))
    chosen = rng.sample(spiky, min(len(spiky), profile.get("spikes", 0)))
    profile["spike_at"] = {step: profile.get("spike_ratio", 1.0) for step in chosen}
    rows = [_eval_row(rng, profile, 0, steps, shape)] if eval_every and shape.eval_prompts else []
    for step in range(1, steps + 1):
        rows.append(_training_row(rng, profile, step, steps, shape))
        if eval_every and shape.eval_prompts and step % eval_every == 0:
            rows.append(_eval_row(rng, profile, step, steps, shape))
    for index, row in enumerate(rows):
        row["time"] = 1.0e9 + index
    return rows


def rewards_for(weights: tuple[float, float]) -> list[RewardSpec]:
    return [
        RewardSpec(name="format", role="format", weight=weights[0]),
        RewardSpec(name="exact_match", role="correctness", weight=weights[1]),
    ]


def run_shape(seed: int, eval_prompts: int = 16, eval_generations: int = 2) -> BatchShape:
    """A batch shape drawn per seed: groups of 8 or 16, 2 to 8 groups per logged step (16 to 128 completions)."""
    rng = random.Random(10_000 + seed)
    size = rng.choice((8, 16))
    return BatchShape(size * rng.choice((2, 4, 8)), size, eval_prompts, eval_generations)


def labelled_run(label: str, seed: int, steps: int = 40, shape: BatchShape | None = None) -> LabelledRun:
    """One run: ``label`` 'healthy' or a key of EXPECTED, its curves drawn from ``seed``."""
    rng = random.Random(seed * 7919 + sum(map(ord, label)))
    loss_rng = random.Random(seed * 104_729 + sum(map(ord, label)))
    profile = healthy_profile(rng) | healthy_loss_profile(loss_rng)
    if label != "healthy":
        profile = _loss_failure_overrides(label, loss_rng, _failure_overrides(label, rng, profile))
    shape = shape or run_shape(seed)
    eval_every = max(1, steps // 8)
    metrics = simulate(profile, steps, shape, eval_every, seed)
    expected = EXPECTED.get(label)
    return LabelledRun(
        label,
        expected,
        seed,
        metrics,
        rewards_for(profile["weights"]),
        shape,
        profile["max_len"],
        steps,
        profile["trl"],
    )


def validation_set(seeds: int = 10, healthy_seeds: int = 10) -> list[LabelledRun]:
    """Every failure at ``seeds`` seeds (lengths cycling through 40, 100, 200 steps) and healthy runs at every
    length in LENGTHS x ``healthy_seeds`` (40 runs by default), plus the measured runs at 5 seeds each and the
    real demo's rows."""
    runs = [labelled_run(label, seed, steps=(40, 100, 200)[seed % 3]) for label in EXPECTED for seed in range(seeds)]
    runs += [labelled_run("healthy", seed, steps) for steps in LENGTHS for seed in range(healthy_seeds)]
    return runs + measured_runs(range(5)) + [real_demo_run()]


def real_demo_run() -> LabelledRun:
    """The demo's metrics.jsonl as its worker wrote it (40 steps, 2 prompts x 8, 16 tokens, correctness 1.0 /
    format 0.2, held-out every 5 steps; correctness 0.31 -> 0.84, held-out 0.03 -> 0.75, entropy 1.5 -> 0.08
    nats). It learns all the way; by its last step three groups in four are all-pass, which is what a
    practitioner would be told then: the prompts are solved (and nothing before that)."""
    path = Path(__file__).with_name("demo_metrics.jsonl")
    metrics = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    solved = EXPECTED["all_pass"]
    return LabelledRun("real_demo", solved, 0, metrics, rewards_for(CORRECTNESS_LED), DEMO_SHAPE, 16, 40)


DEMO_SHAPE = BatchShape(16, 8, 16, 2)  # 2 prompts x 8 generations per step; the default CPU held-out sample


def _matching(first: float, last: float, steps: int = 40, window: int = 10) -> Curve:
    """A linear curve whose first- and last-``window`` step means are ``first`` and ``last``."""
    start, end = (window - 1) / 2 / (steps - 1), (steps - 1 - (window - 1) / 2) / (steps - 1)
    return lambda u: first + (last - first) * (u - start) / (end - start)


def measured_runs(seeds: Any = range(5)) -> list[LabelledRun]:
    """The project's two measured 40-step CPU runs at the demo's shape: the demo (correctness 1.0 / format 0.2,
    correctness 0.25 -> 0.79, bench/demo_result.json; healthy) and the equal-weights run (format 0.11 -> 0.85,
    correctness 0.19 -> 0.12, docs/architecture.md §7; well-formed but wrong)."""
    runs = []
    for seed in seeds:
        rng = random.Random(seed)
        base = healthy_profile(rng) | {"kl": None, "clip": None, "length": linear(4, 4), "max_len": 16}
        demo = base | {"weights": CORRECTNESS_LED, "correct": _matching(0.25, 0.7875)}
        demo |= {"format": _matching(0.3, 0.95), "heldout": linear(0.105, 0.7)}
        wrong = base | {"weights": EQUAL_WEIGHTS, "correct": _matching(0.19, 0.12), "format": _matching(0.11, 0.85)}
        wrong["heldout"] = linear(0.105, 0.1)
        for label, profile, expected in (
            ("measured_demo", demo, None),
            ("measured_equal_weights", wrong, EXPECTED["well_formed_wrong"]),
        ):
            metrics = simulate(profile, 40, DEMO_SHAPE, 5, seed)
            runs.append(
                LabelledRun(label, expected, seed, metrics, rewards_for(profile["weights"]), DEMO_SHAPE, 16, 40)
            )
    return runs
