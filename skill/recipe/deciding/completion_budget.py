"""max_completion_length from the task: the probe's completion lengths, the reference answers, the reward's kind.

The budget is the largest of what the evidence asks for, rounded up to a multiple of STEP:
- it cuts at most a quarter (``routing.evidence.CUT_AT_MOST``) of the probe's completions; when the probe cut more
  than that at its own budget, how long they run is unknown, so the budget is at least twice the probe's and the
  recipe says to probe again there;
- it leaves HEADROOM x the p90 length of the probe's passing completions and of the reference answers (a worked
  solution in the answer column is about as long as an answer that passes);
- a reward that checks a worked result (one registered with ``reasoning``) gets at least REASONING_FLOOR;
- without a probe the model's own lengths are unknown: the seed's value is the least it gets.
An override the probe shows cutting more than half of its completions (REFUSED_ABOVE) is refused. A CPU target is
slow at long budgets: that is a warning with the cost, never a reason to cut the budget.

May import: ``skill.data``, ``skill.errors``, ``skill.recipe.deciding.prompts``, ``skill.rewards.spec``,
``skill.routing.evidence``.
"""

from __future__ import annotations

import math

from pydantic import BaseModel

from skill.data import DatasetSpec, load_rows
from skill.errors import SkillError
from skill.recipe.deciding.prompts import SAMPLE_ROWS, model_tokenizer, percentile
from skill.rewards.registry import library_entry
from skill.rewards.spec import RewardSpec
from skill.routing.evidence import CUT_AT_MOST, CompletionLengths

STEP = 16
REFUSED_ABOVE = 0.5  # an explicit override is refused only past half, where most rewards judge cut-off text
HEADROOM = 1.5  # over the p90 of passing completions and reference answers: training may lengthen them
# TRL's own default max_completion_length (GRPOConfig, 1.16) and the seed's: room for a short worked solution.
REASONING_FLOOR = 256
# Measured on 2 idle CPU cores with the embedded 135M model, 16 completions a step (2026-12-03): 10 s a step at a
# 32-token budget (the learning test), 14.6 s at 48 (make demo); generation and the backward pass grow about
# linearly with the budget.
CPU_SECONDS_PER_TOKEN = 14.6 / 48
CPU_WARN_ABOVE = 64


class CompletionBudget(BaseModel):
    """The budget, the reason with its evidence, and what the caller should know."""

    value: int
    reason: str
    warnings: list[str] = []


def rounded(tokens: float) -> int:
    """Up to a multiple of STEP, at least STEP.

    >>> rounded(1), rounded(16), rounded(17.5)
    (16, 16, 32)
    """
    return max(STEP, math.ceil(tokens / STEP) * STEP)


def reference_answer_tokens(dataset: DatasetSpec, model: str) -> list[int] | None:
    """The token lengths of the reference answers as the data holds them (before any extractor: a gsm8k answer
    column is the worked solution), with ``model``'s tokenizer; None when there are none or they cannot be read
    (the Hub unreachable and nothing cached, a gated model without a token)."""
    raw = dataset.model_copy(update={"answer_extractor": None})
    try:
        rows = load_rows(raw, limit=SAMPLE_ROWS)
        answers = [str(row["answer"]) for row in rows if row.get("answer") is not None]
        if not answers:
            return None
        return [len(ids) for ids in model_tokenizer(model)(text=answers)["input_ids"]]
    except (SkillError, ValueError, KeyError):
        return None


def _from_probe(probe: CompletionLengths) -> tuple[list[tuple[int, str]], list[str]]:
    """What the probe asks for: the shortest budget (a multiple of STEP, or its own) that cuts at most CUT_AT_MOST
    of its completions, or twice its own when it cut more; and room for the completions that passed."""
    count, cut = len(probe.tokens), probe.truncated / len(probe.tokens)
    seen = f"the probe cut {cut:.0%} of its {count} completions at {probe.budget} tokens"
    if cut > CUT_AT_MOST:
        raised = 2 * probe.budget
        warning = (
            f"max_completion_length: {seen}, so how many finish within the recipe's budget is unmeasured: probe "
            "again (route_check) with max_new_tokens at that budget."
        )
        return [(raised, f"{seen}: raised to at least twice that, {raised}")], [warning]
    candidates = [*range(STEP, probe.budget, STEP), probe.budget]
    need = next(budget for budget in candidates if (probe.truncated_at(budget) or 0.0) <= CUT_AT_MOST)
    asks = [(need, f"{seen}: {need} cuts {probe.truncated_at(need):.0%}, {need}")]
    # Room for the passes that finished: one cut at the budget passed within it and asks for no more.
    finished = [length for length in probe.passing_tokens if length < probe.budget]
    if finished:
        p90 = percentile(finished, 0.9)
        room = math.ceil(HEADROOM * p90)
        asks.append((room, f"the p90 of the {len(finished)} that passed and finished is {p90}: x{HEADROOM}, {room}"))
    return asks, []


def size_completion_budget(
    probe: CompletionLengths | None, references: list[int] | None, rewards: list[RewardSpec], seed: int
) -> CompletionBudget:
    """The budget the evidence asks for, each piece of evidence in the reason with what it asks.

    >>> exact = RewardSpec(name="exact_match", role="correctness")
    >>> math_reward = RewardSpec(name="math", role="correctness")
    >>> probe = CompletionLengths(budget=32, tokens=[4] * 60 + [32] * 4, truncated=4, passing_tokens=[4] * 10)
    >>> print(size_completion_budget(probe, [2] * 100, [exact], 256).reason)  # doctest: +NORMALIZE_WHITESPACE
    sized from the task, the largest of: the probe cut 6% of its 64 completions at 32 tokens: 16 cuts 6%, 16;
    the p90 of the 10 that passed and finished is 4: x1.5, 6; the reference answers' p90 is 2 tokens (100 read):
    x1.5, 3; rounded up to a multiple of 16 = 16
    >>> third = CompletionLengths(budget=32, tokens=[4] * 40 + [32] * 24, truncated=24, passing_tokens=[4] * 10)
    >>> size_completion_budget(third, None, [exact], 256).value  # cut 38% at its own budget: twice it, probe again
    64
    >>> [size_completion_budget(None, [2] * 100, [reward], 256).value for reward in (math_reward, exact)]
    [256, 256]
    >>> cut = CompletionLengths(budget=16, tokens=[16] * 64, truncated=64, passing_tokens=[])
    >>> budget = size_completion_budget(cut, None, [exact], 256); budget.value, budget.warnings[0].split(',')[0]
    (32, 'max_completion_length: the probe cut 100% of its 64 completions at 16 tokens')
    """
    asks: list[tuple[int, str]] = []
    warnings: list[str] = []
    if probe is not None and probe.tokens:
        asks, warnings = _from_probe(probe)
    else:
        asks.append((seed, f"no probe measured the model's own lengths (route_check's probe would): the seed's {seed}"))
    if references:
        p90, count = percentile(references, 0.9), len(references)
        room = math.ceil(HEADROOM * p90)
        asks.append((room, f"the reference answers' p90 is {p90} tokens ({count} read): x{HEADROOM}, {room}"))
    for spec in rewards:
        entry = library_entry(spec.name)
        if entry is not None and entry.reasoning:
            asks.append((REASONING_FLOOR, f"{spec.name}: {entry.reasoning}, {REASONING_FLOOR}"))
    value = rounded(max(need for need, _why in asks))
    evidence = "; ".join(why for _need, why in asks)
    reason = f"sized from the task, the largest of: {evidence}; rounded up to a multiple of {STEP} = {value}"
    return CompletionBudget(value=value, reason=reason, warnings=warnings)


def check_budget_override(value: object, probe: CompletionLengths | None, sized: int) -> None:
    """Refuse an explicit max_completion_length that the probe shows cutting more than half of its completions.

    >>> probe = CompletionLengths(budget=32, tokens=[8] * 20 + [32] * 44, truncated=44, passing_tokens=[])
    >>> check_budget_override(16, probe, 64)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    skill.errors.SkillError: max_completion_length=16 would cut 69% of the route's probe completions ...
    """
    if probe is None or not probe.tokens or not isinstance(value, int) or isinstance(value, bool) or value < 1:
        return  # not a budget at all: the field check names what it must be
    cut = probe.truncated_at(value)
    if cut is not None and cut > REFUSED_ABOVE:
        raise SkillError(
            f"max_completion_length={value} would cut {cut:.0%} of the route's probe completions ({len(probe.tokens)} "
            f"sampled at up to {probe.budget} tokens): the rewards would judge cut-off text.",
            f"Send at least {sized} (what the task's evidence sizes), or leave the field out.",
        )


def cpu_budget_warning(value: int) -> str | None:
    """The cost of a long budget on a CPU target; None at a budget a CPU runs quickly.

    >>> cpu_budget_warning(32) is None, cpu_budget_warning(256)[:43]
    (True, 'CPU target: completions of up to 256 tokens')
    """
    if value <= CPU_WARN_ABOVE:
        return None
    return (
        f"CPU target: completions of up to {value} tokens make a step slow: the embedded 135M model took about 15 s "
        f"a step at 48 tokens on 2 cores, so expect about {value * CPU_SECONDS_PER_TOKEN:.0f} s a step for it, more "
        "for a larger model. The budget is what the task needs; a GPU target is the way to go faster."
    )
