"""A route_check probe: sample the base model on the task's prompts and score every sample with the verifier.

n completions per prompt at the training temperature, and again at a low temperature when nothing
passed (a model that fails hot may succeed cold: then it has the capability, sharpened by training);
at least MIN_SAMPLES in all, the reward read's floor, so inspect_rewards can read the probe's own samples.
"""

from __future__ import annotations

import math
import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from skill.absolute_paths import LocalModelOrNamed
from skill.data import DatasetSpec, load_rows
from skill.errors import SkillError
from skill.models.hub import local_copy
from skill.models.sources import EMBEDDED_MODEL_ID
from skill.rewards.answers import EXTRACT_MODES
from skill.rewards.base import call_reward
from skill.rewards.reading import read_share, reads_too_little
from skill.rewards.registry import build_reward_function, library_entry
from skill.rewards.spec import RewardSpec
from skill.routing.evidence import MIN_SAMPLES, RouteEvidence, probe_evidence
from skill.routing.probe_time import DEFAULT_PROBE, busy_factor, estimate_before, machine_load
from skill.sampling.engines import sample_completions
from skill.sampling.progress import Progress, ShouldStop, stop_if_asked
from skill.sampling.schema import Prompt, SamplingEngine, SamplingSettings

LOW_TEMPERATURE = 0.2
# The MCP SDKs' default request timeout (DEFAULT_REQUEST_TIMEOUT_MSEC = 60000 in the TypeScript SDK): a probe
# expected to outlast it says so before it samples.
USUAL_CLIENT_TIMEOUT_S = 60


class ProbeSpec(BaseModel):
    """Sample the base model on the task's prompts and score the samples with the verifier."""

    model_config = ConfigDict(extra="forbid")  # a misspelled field is an error, not silently dropped

    model: LocalModelOrNamed = Field(
        default=EMBEDDED_MODEL_ID,
        description="A hub id (downloaded as huggingface_hub does, honouring HF_HUB_OFFLINE, HF_HOME and HF_TOKEN), "
        "a local model directory, or the embedded id.",
    )
    prompts: list[Prompt] | None = Field(default=None, description="Prompts (text or chat messages), no columns.")
    rows: list[dict[str, Any]] | None = Field(default=None, description="Rows with the prompt and verifier columns.")
    dataset: DatasetSpec | None = Field(default=None, description="The task's data, as emit_grpo_config takes it.")
    prompt_column: str = Field(default="prompt", description="The prompt's column in rows (a dataset names its own).")
    engine: SamplingEngine = Field(default_factory=SamplingEngine)
    num_prompts: int = Field(
        default=DEFAULT_PROBE[0],
        gt=0,
        description=f"Prompts to probe (the first ones); prompts x n >= {MIN_SAMPLES}. The defaults (8 x 8 x 32 "
        "tokens) take about 30 s a round for the embedded model on 2 CPU cores; time grows with prompts x n x "
        "tokens x (1 + tokens/40) and model size; the decision estimates larger probes.",
    )
    n: int = Field(default=8, description="Completions per prompt; 8 is GRPO's group size, fewer warns.")
    k: int | None = Field(default=None, description="Largest k for pass@k (default n).")
    temperature: float = Field(default=1.0, gt=0, description="The training temperature.")
    low_temperature: float = Field(default=LOW_TEMPERATURE, ge=0, description="Re-probe here if nothing succeeds.")
    max_new_tokens: int = Field(default=DEFAULT_PROBE[2], gt=0, description="Completion budget per sample.")
    seed: int = 3407
    success_threshold: float = Field(default=1.0, description="A sample passes when the verifier gives at least this.")

    @field_validator("dataset", mode="before")
    @classmethod
    def _dataset_by_name(cls, value: Any) -> Any:
        return {"name": value} if isinstance(value, str) else value

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


def prompt_key(probe: ProbeSpec) -> str:
    """The column holding each row's prompt: a dataset's rows are shaped (``data.shape_row``) with it under
    'prompt'; inline rows name theirs."""
    return "prompt" if probe.dataset is not None else probe.prompt_column


def probe_rows(probe: ProbeSpec) -> list[dict[str, Any]]:
    """The rows a probe samples: its first ``num_prompts``, each holding the prompt column.

    >>> [row["q"] for row in probe_rows(ProbeSpec(prompts=["a", "b", "c"], prompt_column="q", num_prompts=2))]
    ['a', 'b']
    """
    if probe.prompts is not None:
        rows = [{probe.prompt_column: prompt} for prompt in probe.prompts]
    elif probe.rows is not None:
        rows = probe.rows
    else:
        rows = load_rows(probe.dataset, limit=probe.num_prompts)  # type: ignore[arg-type]  # the one source left
    rows = rows[: probe.num_prompts]
    if not rows:
        raise SkillError("The probe has no prompts.", "Send prompts, rows or a non-empty dataset.")
    missing = [index for index, row in enumerate(rows) if prompt_key(probe) not in row]
    if missing:
        raise SkillError(
            f"Rows {missing[:5]} lack the prompt column {prompt_key(probe)!r}.", "Send prompt_column or fix rows."
        )
    return rows


def score_groups(
    verifier: RewardSpec, rows: list[dict[str, Any]], groups: list[Any], probe: ProbeSpec
) -> list[list[float]]:
    """The verifier's score of every sample, one list per prompt group; a verifier that cannot score the rows is
    refused with what it needs."""
    function = build_reward_function(verifier)
    prompts, completions, columns = [], [], {}
    for group in groups:
        row = rows[group.prompt_index]
        for completion in group.completions:
            prompts.append(group.prompt)
            completions.append(completion)
            for key, value in row.items():
                if key != prompt_key(probe):
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


def warn_before_long_sampling(progress: Progress | None, model: str, prompts: int, n: int, tokens: int) -> None:
    """Say, before sampling starts, when it is expected to outlast a client's usual timeout, and how to shrink it."""
    expected = estimate_before(model, prompts, n, tokens)
    if progress is None or expected is None:
        return
    load, cores = machine_load()
    busy = busy_factor(load, cores)
    seconds = expected.seconds * busy
    if seconds <= USUAL_CLIENT_TIMEOUT_S:
        return
    when = (
        f"at least {seconds:.0f} s a round at this machine's load now (load average {load:.1f} on {cores} cores; "
        f"about {expected.seconds:.0f} s on a less busy one)"
        if busy > 1
        else f"about {seconds:.0f} s a round here"
    )
    progress(
        0,
        prompts * n,
        f"Sampling {prompts} prompts x {n} x {tokens} tokens is expected to take {when}, up to {2 * seconds:.0f} s "
        "when nothing passes (a second round samples at the low temperature): past the "
        f"{USUAL_CLIENT_TIMEOUT_S} s many clients wait for a call. Shrink num_prompts or max_new_tokens, or raise "
        "the client's timeout (progress follows at least every 5 s).",
    )


def run_probe(
    probe: ProbeSpec, verifier: RewardSpec, progress: Progress | None, should_stop: ShouldStop | None
) -> tuple[RouteEvidence, list[dict[str, Any]], list[dict[str, Any]]]:
    """Sample and score: at the training temperature, and again at the low one when nothing passed. Returns the
    evidence, every scored sample (what inspect_rewards reuses) and the probed rows."""
    rows = probe_rows(probe)
    if len(rows) * probe.n < MIN_SAMPLES:
        raise SkillError(
            f"The probe would score {len(rows)} prompts x n={probe.n} = {len(rows) * probe.n} samples: too few to "
            f"decide a route, and under the {MIN_SAMPLES} a reward read needs from the same samples.",
            f"Send at least {math.ceil(MIN_SAMPLES / probe.n)} prompts at n={probe.n} (num_prompts and the data), "
            "or raise n.",
        )
    prompts = [row[prompt_key(probe)] for row in rows]
    if probe.engine.kind != "endpoint":  # an unreachable model fails here, before a time is announced
        local_copy(probe.model, "model", progress)
    warn_before_long_sampling(progress, probe.model, len(rows), probe.n, probe.max_new_tokens)
    started = time.perf_counter()
    temperatures, samples = [], []
    for temperature in (probe.temperature, probe.low_temperature):
        settings = SamplingSettings(
            n=probe.n, temperature=temperature, max_new_tokens=probe.max_new_tokens, seed=probe.seed
        )
        sampled = sample_completions(probe.model, prompts, settings, progress, should_stop, probe.engine)
        groups = sampled.groups
        scores = score_groups(verifier, rows, groups, probe)
        share = refuse_a_verifier_reading_too_little(verifier, [c for g in groups for c in g.completions])
        successes = [sum(score >= probe.success_threshold for score in group) for group in scores]
        temperatures.append(temperature)
        samples.extend(
            {
                "prompt_index": g.prompt_index,
                "prompt": g.prompt,
                "completion": c,
                "tokens": tokens,
                "truncated": cut,
                "score": s,
                "temperature": temperature,
                "columns": {k: v for k, v in rows[g.prompt_index].items() if k != prompt_key(probe)},
            }
            for g, group_scores in zip(groups, scores, strict=True)
            for c, s, tokens, cut in zip(g.completions, group_scores, g.token_counts, g.truncated, strict=True)
        )
        if sum(successes) > 0:
            break
        stop_if_asked(should_stop, f"the probe stopped before re-sampling at temperature {probe.low_temperature}")
    seconds = time.perf_counter() - started
    evidence = probe_evidence(successes, probe.n, probe.k, temperatures, seconds)
    evidence.sampled_with = sampled.sampled_with
    evidence.verifier_read_share = share
    if sum(successes) == 0:
        evidence.looser_extract = looser_extract(verifier, rows, groups, probe)
    return evidence, samples, rows


def looser_extract(
    verifier: RewardSpec, rows: list[dict[str, Any]], groups: list[Any], probe: ProbeSpec
) -> tuple[str, float] | None:
    """For a verifier with an ``extract`` parameter that passed nothing: the other mode under which the most of the
    same completions pass, with that share; None when no mode passes any. ``regex`` needs the caller's pattern and
    ``whole`` is the strictest reading, so neither is tried. A verifier reading the whole completion routes a model
    that writes "9 + 8 = 17" to SFT; read as its last number, 16% of the same completions passed."""
    entry = library_entry(verifier.name)
    if entry is None or "extract" not in entry.params:
        return None
    own = verifier.params.get("extract", entry.params["extract"].default)
    best: tuple[str, float] | None = None
    for mode in (mode for mode in EXTRACT_MODES if mode not in ("regex", "whole", own)):
        spec = verifier.model_copy(update={"params": {**verifier.params, "extract": mode}})
        scores = [score for group in score_groups(spec, rows, groups, probe) for score in group]
        share = sum(score >= probe.success_threshold for score in scores) / max(1, len(scores))
        if share > 0 and (best is None or share > best[1]):
            best = (mode, round(share, 3))
    return best


def refuse_a_verifier_reading_too_little(verifier: RewardSpec, completions: list[Any]) -> float | None:
    """The share of completions the verifier read an answer in; a refusal, before any route, when it is under
    ``MIN_READ_SHARE`` (its zeros would send a model that answers in another form to SFT)."""
    share = read_share(build_reward_function(verifier), completions)
    refusal = reads_too_little(verifier, share, completions)
    if refusal is not None:
        raise SkillError(refusal[0] + " No route was decided.", refusal[1])
    return share
