"""What a reward reads: the share of completions it finds an answer in, and which extract mode would read most.

A correctness reward that finds no answer scores every completion 0: its zeros then say nothing about the model,
and a route or a gate decided on them is wrong (``exact_match`` reading ``<answer>`` tags from a model that writes
a bare number passes 0 of 128). A reward that shows what it read (``fn.extract``) is measured here; one that does
not is not judged.

May import: ``rewards.registry``, ``rewards.answers``, ``rewards.base``, ``rewards.spec``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from skill.rewards.answers import EXTRACT_MODES
from skill.rewards.base import call_reward, completion_text
from skill.rewards.registry import build_reward_function, load_library
from skill.rewards.spec import RewardSpec

# Under this share of completions read, a reward's verdicts do not measure the model. The issue that introduced the
# check names 20%: a verifier reading one completion in five still sees enough answers to compare with the gold.
MIN_READ_SHARE = 0.2


def read_share(function: Callable[..., Any], completions: Sequence[Any]) -> float | None:
    """The share of completions the reward found an answer in (``fn.extract`` not None); None when the reward
    does not show what it reads, or there are no completions.

    >>> tags = build_reward_function(RewardSpec(name="exact_match", role="correctness"))
    >>> read_share(tags, ["16", "The answer is 16.", "<answer>16</answer>", "no idea"])
    0.25
    """
    extract = getattr(function, "extract", None)
    if extract is None or not completions:
        return None
    texts = [completion_text(completion) for completion in completions]
    return sum(extract(text) is not None for text in texts) / len(texts)


def best_extract(spec: RewardSpec, completions: Sequence[Any]) -> tuple[str, float] | None:
    """The extract mode that reads the most of these completions, with its share, for a reward that takes an
    ``extract`` parameter (None for one that does not). ``regex`` needs the caller's pattern and ``whole`` reads
    every completion by definition (it says nothing about the form), so neither is tried.

    >>> spec = RewardSpec(name="exact_match", role="correctness")
    >>> best_extract(spec, ["16", "It is 16.", "So 3 + 13 = 16"])
    ('last_number', 1.0)
    """
    entry = load_library().get(spec.name)  # a user function ('module:function') has parameters of its own
    if entry is None or "extract" not in entry.params:
        return None
    shares = []
    for mode in (mode for mode in EXTRACT_MODES if mode not in ("regex", "whole")):
        function = build_reward_function(spec.model_copy(update={"params": {**spec.params, "extract": mode}}))
        shares.append((read_share(function, completions) or 0.0, -EXTRACT_MODES.index(mode), mode))
    share, _, mode = max(shares)
    return mode, share


def reads_too_little(spec: RewardSpec, share: float | None, completions: Sequence[Any]) -> tuple[str, str] | None:
    """(what is wrong, what to send) when a reward reads an answer in under ``MIN_READ_SHARE`` of the completions,
    naming the extract mode that reads the most of the same ones; None when it reads enough or does not show what
    it reads.

    >>> spec = RewardSpec(name="exact_match", role="correctness")
    >>> problem, fix = reads_too_little(spec, 0.0, ["16", "It is 16."])
    >>> problem[:46], fix[:47]
    ('exact_match found an answer in 0% of 2 complet', "Send params.extract 'last_number' (it reads 100")
    """
    if share is None or share >= MIN_READ_SHARE:
        return None
    mode = spec.params.get("extract")
    label = spec.name + (f" (extract {mode!r})" if mode else "")
    problem = (
        f"{label} found an answer in {share:.0%} of {len(completions)} completions (under {MIN_READ_SHARE:.0%}), "
        "so its scores say what it could not read, not what the model can do."
    )
    best = best_extract(spec, completions)
    if best is not None and best[1] > share:
        return problem, (
            f"Send params.extract {best[0]!r} (it reads {best[1]:.0%} of the same completions), or a verifier that "
            "reads how the model answers; or ask for the answer's form in the prompt."
        )
    return problem, "Send a verifier that reads how the model answers, or ask for the answer's form in the prompt."


TAGGED_ANSWER = "<think>Two and two.</think>\n<answer>4</answer>"
BARE_ANSWER = "4"


def tag_readers(specs: Sequence[RewardSpec]) -> list[str]:
    """The library rewards that read an answer only inside ``<answer>`` tags: each scores (or reads) a tagged
    right answer and not the same answer bare. A user function is not called here (its module may not be
    importable where the recipe is written).

    >>> tag_readers([RewardSpec(name="exact_match", role="correctness"),
    ...     RewardSpec(name="math", role="correctness"), RewardSpec(name="format", role="format",
    ...     params={"pattern": "answer_tag"})])
    ['exact_match', 'format']
    """
    found = []
    for spec in specs:
        if ":" in spec.name:
            continue
        function = build_reward_function(spec)
        extract = getattr(function, "extract", None)
        if extract is not None:
            tagged, bare = extract(TAGGED_ANSWER) is not None, extract(BARE_ANSWER) is not None
        else:
            scores = call_reward(function, ["What is 2 + 2?"] * 2, [TAGGED_ANSWER, BARE_ANSWER], answer=["4", "4"])
            tagged, bare = (isinstance(score, int | float) and score > 0 for score in scores)
        if tagged and not bare:
            found.append(spec.name)
    return found
