"""Which of the collected samples the reader reads: a draw with enough of each outcome of every reward read.

Agreement needs both outcomes: at a 9% pass rate, 60 random samples hold about 5 passes, too few to tell a
reader who agrees with the reward from one who says "fail" to everything. So the draw first takes
``MIN_EACH_OUTCOME`` passes and as many fails of every reward a reader judges, then fills up to half its samples
from those the first correctness reward (else the first read reward) passes and the rest from those it fails,
each at random (seeded), and shuffles them, so a sample's place says nothing of its score. Samples already
revealed on this state root are drawn only when too few others are left (their labels would not count). Where
the collected samples hold fewer than ``MIN_EACH_OUTCOME`` of an outcome, a blocking flag asks for more samples
(``outcome_flags``): a read on fewer cannot survive an honest reader's few misreads. The draw is stated in the
report. Owns: ``balanced_draw``, ``outcome_flags``, ``outcome_of``. May import: ``inspection.schema``,
``inspection.agreement``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

from skill.inspection.agreement import MIN_EACH_OUTCOME, read_names, said
from skill.inspection.schema import Flag, SampleResult
from skill.rewards.spec import RewardSpec

DRAW_SIZE = 60  # the seed's 50-100 to read, with room for a few 'unsure' labels over the floor of 50
SEED = 3407


def outcome_of(sample: SampleResult, name: str) -> str | None:
    """What ``name`` says of the sample: 'pass', 'fail', or None when it gave no score."""
    score = sample.scores.get(name)
    return None if score is None else said(score)


def balanced_draw(
    samples: list[SampleResult], rewards: list[RewardSpec], size: int = DRAW_SIZE, unseen: set[int] | None = None
) -> tuple[list[int], str]:
    """The ids of up to ``size`` samples, with ``MIN_EACH_OUTCOME`` of each outcome of every read reward where
    there are that many, then half passes and half fails of the primary one, in a shuffled order; and the
    sentence that states the draw. ``unseen``: the ids not yet revealed on this state root, drawn first.

    >>> samples = [SampleResult(id=i, prompt="p", completion=str(i), scores={"m": float(i < 3)}, total=None)
    ...            for i in range(20)]
    >>> drawn, how = balanced_draw(samples, [RewardSpec(name="m", role="correctness")], size=10)
    >>> len(drawn), sorted(drawn)[:3]
    (10, [0, 1, 2])
    >>> how
    "10 of 20 samples collected, balanced on m's outcome: 3 of 3 passes and 7 of 17 fails, in shuffled order."
    """
    rng = random.Random(SEED)
    fresh = [s for s in samples if unseen is None or s.id in unseen]
    pool = fresh if len(fresh) >= min(size, len(samples)) else samples
    names = read_names(rewards)
    outcomes = {name: {s.id: outcome_of(s, name) for s in pool} for name in names}
    drawn: list[int] = []

    fresh_ids = {s.id for s in fresh}

    def take(wanted: int, fits: Callable[[int], bool]) -> None:
        """Up to ``wanted`` more that fit, at random: unseen ones first (a pool short of them holds seen ones too)."""
        taken, wanted = set(drawn), max(0, wanted)
        left = [s.id for s in pool if s.id not in taken and fits(s.id)]
        for group in ([i for i in left if i in fresh_ids], [i for i in left if i not in fresh_ids]):
            drawn.extend(rng.sample(group, min(len(group), wanted)))
            wanted -= min(len(group), wanted)

    for name in names:
        for outcome in ("pass", "fail"):
            have = sum(outcomes[name][i] == outcome for i in drawn)
            take(MIN_EACH_OUTCOME - have, lambda i, n=name, o=outcome: outcomes[n][i] == o)
    if not names:
        take(size, lambda i: True)
        how = f"{len(drawn)} of {len(samples)} samples collected, at random (no reward judges pass or fail)."
    else:
        primary = names[0]
        passes = {s.id for s in pool if outcomes[primary][s.id] == "pass"}
        fails = len(pool) - len(passes)
        take_passes = min(len(passes), max(size // 2, size - fails))
        take(min(take_passes - len(passes.intersection(drawn)), size - len(drawn)), lambda i: i in passes)
        take(size - len(drawn), lambda i: i not in passes)
        take(size - len(drawn), lambda i: True)  # fewer fails than asked: passes fill the draw
        drawn_passes = len(passes.intersection(drawn))
        how = (
            f"{len(drawn)} of {len(samples)} samples collected, balanced on {primary}'s outcome: "
            f"{drawn_passes} of {len(passes)} passes and {len(drawn) - drawn_passes} of {fails} fails, in "
            "shuffled order."
        )
    seen = sum(unseen is not None and i not in unseen for i in drawn)
    if len(pool) < len(samples):
        how = how.rstrip(".") + f"; {len(samples) - len(pool)} samples revealed before on this state root left out."
    elif seen:
        how = how.rstrip(".") + f"; {seen} of them revealed before on this state root: their labels will not count."
    rng.shuffle(drawn)
    return drawn, how


def outcome_flags(
    drawn: list[SampleResult], collected: list[SampleResult], rewards: list[RewardSpec], flags: list[Flag]
) -> list[Flag]:
    """A flag for each read reward with fewer than ``MIN_EACH_OUTCOME`` of an outcome in the draw, saying how many
    samples to collect: blocking for the reward the draw balances on (the read's statistic rests on it), a
    warning for the others (``agreement.short_of_an_outcome``: each of their disagreements is still resolved).
    A reward already flagged as constant is left to that flag."""
    constant = {flag.reward for flag in flags if flag.code == "constant_reward"}
    found = []
    names = read_names(rewards)
    for name in names:
        if name in constant:
            continue
        for outcome in ("pass", "fail"):
            count = sum(outcome_of(s, name) == outcome for s in drawn)
            if count >= MIN_EACH_OUTCOME:
                continue
            rate = sum(outcome_of(s, name) == outcome for s in collected) / max(1, len(collected))
            need = math.ceil(2 * MIN_EACH_OUTCOME / rate) if rate else None  # 2x: the count drawn is itself random
            collect = f"Collect about {need} samples of the policy" if need else "Collect samples where it does"
            found.append(
                Flag(
                    code="too_few_passes" if outcome == "pass" else "too_few_fails",
                    severity="blocking" if name == names[0] else "warning",
                    reward=name,
                    message=f"{name} says {outcome} on {count} of the {len(drawn)} samples drawn ({rate:.0%} of "
                    f"{len(collected)} collected): a read needs {MIN_EACH_OUTCOME} of each outcome to be told from "
                    "chance without failing on a reader's few misreads."
                    + ("" if name == names[0] else " Your labels judge it sample by sample only."),
                    fix=f"{collect} (generate: more prompts or completions per prompt) and inspect them; if the "
                    f"reward can never say {outcome} on this task, fix it or leave it out.",
                )
            )
    return found
