"""Fresh samples of the policy, when the samples revealed on this state root leave too few unseen for a read.

A sample whose scores were shown once never counts toward a read again (``inspection.revealed``). A flow that
probes a task again (the demo run a second time, route_check repeated with its seed) collects the very samples an
earlier read revealed, and that read's draw revealed the passes first: what is left unseen can hold too few of an
outcome, or too few samples, for a read. Where the inspection knows how its samples were drawn (a route's probe,
or ``generate``), it samples the policy again the same way (model, engine, n, temperature, budget) on prompts no
read has revealed and not yet collected (then any not collected, then any), at the temperature the route's passes
came at and a seed moved on by the number of samples this state root has revealed (a read that revealed anything
moves the next one's); it scores them with the rest and repeats until the unseen samples hold what a read needs,
up to ``MAX_ROUNDS`` rounds and ``MAX_COLLECTED`` samples. The draw says what was collected and why, or why
nothing could be (the model or data gone, an endpoint down): the read then goes on with what it has, and the
draw's flags ask for more. Samples sent inline cannot be drawn again: the flags ask for them too.
An outcome the collected samples hold too few of even with the revealed ones counted is the task's, not the
reveal's: it is left to the draw's flags. Owns: ``policy_of_probe``, ``sample_policy``, ``unseen_shortfall``,
``collect_unseen``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from skill.data import load_rows
from skill.errors import SkillError
from skill.inspection.agreement import MIN_EACH_OUTCOME, read_names
from skill.inspection.draw import DRAW_SIZE, outcome_of
from skill.inspection.revealed import content_key, prompt_digest, revealed_keys, revealed_prompts
from skill.inspection.schema import GenerateSamples, SampleResult, SuppliedSample
from skill.inspection.scoring import Scored, score_fresh
from skill.rewards.spec import RewardSpec
from skill.routing.probe import ProbeSpec, warn_before_long_sampling
from skill.sampling.engines import sample_completions
from skill.sampling.progress import Cancelled, Progress
from skill.sampling.schema import SamplingSettings

MAX_ROUNDS = 3  # rounds of fresh sampling before the draw's flags speak instead
MAX_COLLECTED = 1024  # samples scored (statistics and the draw's pool); at a 2% pass rate, about 20 passes


class Unseen(BaseModel):
    """The samples with the fresh ones added, their scores, which are unseen, and what was collected and why."""

    samples: list[SuppliedSample]
    scored: Scored
    unseen: set[int]
    said: str = ""
    sources: list[str] = []


class Shortfall(BaseModel):
    """How many more samples a read wants, and what the unseen ones lack."""

    samples: int
    lacking: list[str]


def policy_of_probe(probe: ProbeSpec) -> GenerateSamples:
    """The route probe's way of sampling, as ``generate`` states it: the same model, engine, n, temperature and
    budget, over all the probe's prompts or rows (not only the first ``num_prompts`` it sampled).

    >>> policy = policy_of_probe(ProbeSpec(prompts=["a", "b", "c"], num_prompts=2, max_new_tokens=16))
    >>> [row["prompt"] for row in policy.rows], policy.num_prompts, policy.max_new_tokens
    (['a', 'b', 'c'], 2, 16)
    """
    rows = probe.rows
    if probe.prompts is not None:
        rows = [{probe.prompt_column: prompt} for prompt in probe.prompts]
    return GenerateSamples(
        model=probe.model,
        rows=rows,
        dataset=probe.dataset,
        prompt_column=probe.prompt_column,
        engine=probe.engine,
        num_prompts=probe.num_prompts,
        n=probe.n,
        temperature=probe.temperature,
        max_new_tokens=probe.max_new_tokens,
        seed=probe.seed,
    )


def _prompt_column(policy: GenerateSamples) -> str:
    return "prompt" if policy.dataset is not None else policy.prompt_column  # a dataset's rows are shaped


def sample_policy(
    policy: GenerateSamples,
    rows: list[dict[str, Any]],
    seed: int,
    progress: Progress | None,
    should_stop: Callable[[], bool] | None,
    first_group: int = 0,
) -> tuple[list[SuppliedSample], str]:
    """``policy.n`` samples of every row's prompt at ``seed``, grouped by prompt from ``first_group`` on, with the
    sentence saying what sampled them."""
    column = _prompt_column(policy)
    missing = [index for index, row in enumerate(rows) if column not in row]
    if missing:
        raise SkillError(f"Rows {missing[:5]} lack the prompt column {column!r}.", "Send prompt_column or fix rows.")
    settings = SamplingSettings(
        n=policy.n, temperature=policy.temperature, max_new_tokens=policy.max_new_tokens, seed=seed
    )
    prompts = [row[column] for row in rows]
    warn_before_long_sampling(progress, policy.model, len(prompts), policy.n, policy.max_new_tokens)
    sampled = sample_completions(policy.model, prompts, settings, progress, should_stop, policy.engine)
    samples = [
        SuppliedSample(
            prompt=group.prompt,
            completion=completion,
            group=first_group + group.prompt_index,
            columns={key: value for key, value in rows[group.prompt_index].items() if key != column},
        )
        for group in sampled.groups
        for completion in group.completions
    ]
    used = sampled.sampled_with
    revision = f", revision {used.model_revision}" if used.model_revision else ""
    return samples, f"sampled from {policy.model} by {used.engine} {used.version} on {used.device}{revision}"


def unseen_shortfall(results: list[SampleResult], rewards: list[RewardSpec], unseen: set[int]) -> Shortfall | None:
    """What the unseen samples lack for a read that the collected ones, revealed ones counted, would have: samples
    to fill a draw, and ``MIN_EACH_OUTCOME`` of each outcome of the primary read reward (the one the draw balances
    on and the gate's statistic rests on; the rule waives a second reward short of an outcome), sized at twice the
    count the collected samples' rate gives, as the draw's own flags size theirs. None when nothing was revealed
    or nothing is lacking.

    >>> results = [SampleResult(id=i, prompt="p", completion=str(i), scores={"m": float(i < 20)}, total=None)
    ...            for i in range(128)]
    >>> short = unseen_shortfall(results, [RewardSpec(name="m", role="correctness")], set(range(60, 128)))
    >>> short.samples, short.lacking
    (77, ['0 passes of m (6 needed)'])
    """
    if len(unseen) == len(results):
        return None
    wanted, lacking = 0, []
    if len(unseen) < DRAW_SIZE:
        wanted = DRAW_SIZE - len(unseen)
        lacking.append(f"{len(unseen)} samples of the {DRAW_SIZE} to draw")
    for name in read_names(rewards)[:1]:
        for outcome in ("pass", "fail"):
            collected = sum(outcome_of(result, name) == outcome for result in results)
            have = sum(outcome_of(result, name) == outcome for result in results if result.id in unseen)
            if have >= MIN_EACH_OUTCOME or collected < MIN_EACH_OUTCOME:
                continue
            rate = collected / len(results)
            wanted = max(wanted, math.ceil(2 * (MIN_EACH_OUTCOME - have) / rate))
            lacking.append(
                f"{have} {outcome}{'es' if outcome == 'pass' else 's'} of {name} ({MIN_EACH_OUTCOME} needed)"
            )
    return Shortfall(samples=wanted, lacking=lacking) if wanted else None


def _fresh_rows(
    policy: GenerateSamples, collected: list[SuppliedSample], count: int
) -> tuple[list[dict[str, Any]], str]:
    """Up to ``count`` rows to sample: first those whose prompt no read has revealed and none of ``collected``
    holds, then those not collected, then any; with the words for which were taken."""
    taken = {prompt_digest(sample.prompt) for sample in collected}
    revealed = revealed_prompts()
    if policy.rows is not None:
        rows = policy.rows
    else:  # enough of the file's first rows to pass over every prompt already read or collected
        assert policy.dataset is not None  # GenerateSamples holds one of the two
        rows = load_rows(policy.dataset, limit=policy.num_prompts + len(taken) + len(revealed) + 2 * count)
    column, seen_keys = _prompt_column(policy), set()
    tiers: tuple[list[dict[str, Any]], ...] = ([], [], [])
    for row in rows:
        if column not in row:  # a row that cannot be sampled (the probe checked only its own first ones)
            continue
        key = prompt_digest(row[column])
        if key in seen_keys:
            continue
        seen_keys.add(key)
        tiers[2 if key in taken else 1 if key in revealed else 0].append(row)
    chosen = [row for tier in tiers for row in tier][:count]
    new_ones = min(len(tiers[0]), len(chosen))
    read_ones = min(len(tiers[1]), len(chosen) - new_ones)
    again = len(chosen) - new_ones - read_ones
    parts = [
        f"{new_ones} prompts no read had revealed" if new_ones else "",
        f"{read_ones} prompts read before" if read_ones else "",
        f"{again} prompts sampled already, at a new seed" if again else "",
    ]
    return chosen, " and ".join(part for part in parts if part)


def collect_unseen(
    rewards: list[RewardSpec],
    policy: GenerateSamples | None,
    samples: list[SuppliedSample],
    scored: Scored,
    tokenizer: str | None,
    progress: Progress | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> Unseen:
    """The samples and their scores, with fresh ones of ``policy`` added while the revealed ones leave the unseen
    short of a read (see the module docstring); which are unseen; what was collected and why."""
    seen = revealed_keys()
    rounds: list[str] = []
    sources: list[str] = []
    lacked = failed = ""
    for round_number in range(1, MAX_ROUNDS + 1):
        unseen = {result.id for result in scored.results if content_key(result) not in seen}
        short = unseen_shortfall(scored.results, rewards, unseen)
        room = (MAX_COLLECTED - len(samples)) // policy.n if policy is not None else 0
        if short is None or policy is None or room < 1:
            break
        lacked = lacked or ", ".join(short.lacking)
        seed = policy.seed + len(seen) + round_number  # moves on with every read revealed on this state root
        groups = [sample.group for sample in samples if sample.group is not None]
        try:
            rows, how = _fresh_rows(policy, samples, min(room, math.ceil(short.samples / policy.n)))
            if not rows:
                raise SkillError("the data holds no prompt in its prompt column")
            fresh, source = sample_policy(
                policy, rows, seed, progress, should_stop, first_group=max(groups, default=-1) + 1
            )
        except Cancelled:
            raise
        except (SkillError, OSError, ValueError, RuntimeError) as exc:  # the read goes on; its flags ask for more
            failed = f"fresh samples of the policy could not be collected ({' '.join(str(exc).split())[:300]})"
            break
        samples = samples + fresh
        scored = score_fresh(rewards, samples, tokenizer)
        rounds.append(f"{len(fresh)} ({how}, x {policy.n}, seed {seed})")
        sources.append(f"{len(fresh)} more {source}, seed {seed}")
        if progress is not None:
            progress(1, 3, f"collected fresh samples of the policy: {rounds[-1]}")
    said = ""
    if rounds:
        said = (
            f"the samples not yet revealed held only {lacked}, so fresh samples of the policy were collected: "
            f"{' then '.join(rounds)}"
        )
    if failed:
        said = f"{said}; then {failed}" if said else f"the samples not yet revealed held only {lacked}; {failed}"
    unseen = {result.id for result in scored.results if content_key(result) not in seen}
    return Unseen(samples=samples, scored=scored, unseen=unseen, said=said, sources=sources)
