"""Which of the collected samples the reader reads: a draw balanced across the reward's outcomes.

Agreement needs both outcomes: at a 9% pass rate, 50 random samples hold about 5 passes, too few to tell a reader
who agrees with the reward from one who says "fail" to everything. So the draw takes up to half its samples
from those the first correctness reward (else the first read reward) passes and the rest from those it fails,
each at random (seeded), and shuffles them, so a sample's place says nothing of its score. The draw is stated
in the report. Owns: ``balanced_draw``. May import: ``inspection.schema``, ``inspection.agreement``.
"""

from __future__ import annotations

import random

from skill.inspection.agreement import READ_ROLES, said
from skill.inspection.schema import SampleResult
from skill.rewards.spec import RewardSpec, metric_names

DRAW_SIZE = 60  # the seed's 50-100 to read, with room for a few 'unsure' labels over the floor of 50
SEED = 3407


def _primary(rewards: list[RewardSpec]) -> str | None:
    """The name (as scores are kept) of the reward the draw balances on."""
    for role in READ_ROLES:
        for spec, name in metric_names(rewards):
            if spec.role == role:
                return name
    return None


def balanced_draw(
    samples: list[SampleResult], rewards: list[RewardSpec], size: int = DRAW_SIZE
) -> tuple[list[int], str]:
    """The ids of up to ``size`` samples, half passes and half fails where there are enough, in a shuffled order;
    and the sentence that states the draw.

    >>> samples = [SampleResult(id=i, prompt="p", completion=str(i), scores={"m": float(i < 3)}, total=None)
    ...            for i in range(20)]
    >>> drawn, how = balanced_draw(samples, [RewardSpec(name="m", role="correctness")], size=10)
    >>> len(drawn), sorted(drawn)[:3]
    (10, [0, 1, 2])
    >>> how
    "10 of 20 samples collected, balanced on m's outcome: 3 of 3 passes and 7 of 17 fails, in shuffled order."
    """
    primary = _primary(rewards)
    rng = random.Random(SEED)
    if primary is None:
        drawn = rng.sample(samples, min(size, len(samples)))
        how = f"{len(drawn)} of {len(samples)} samples collected, at random (no reward judges pass or fail)."
    else:
        scores = [sample.scores.get(primary) for sample in samples]
        passes = [s for s, score in zip(samples, scores, strict=True) if score is not None and said(score) == "pass"]
        fails = [s for s in samples if s not in passes]
        take_passes = min(len(passes), max(size // 2, size - len(fails)))
        take_fails = min(len(fails), size - take_passes)
        drawn = rng.sample(passes, take_passes) + rng.sample(fails, take_fails)
        how = (
            f"{len(drawn)} of {len(samples)} samples collected, balanced on {primary}'s outcome: "
            f"{take_passes} of {len(passes)} passes and {take_fails} of {len(fails)} fails, in shuffled order."
        )
    rng.shuffle(drawn)
    return [sample.id for sample in drawn], how
