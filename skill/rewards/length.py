"""``length_penalty``: DAPO's soft overlong punishment or a target-length penalty, alone or wrapped
around another reward.

The soft overlong punishment is TRL's own (``trl.rewards.get_soft_overlong_punishment``, the same formula);
this reward adds what TRL's does not do: a ``scale``, a character-based length when there are no token ids
(inspection scores text), the target mode and wrapping another reward.

Lengths are token counts when TRL passes ``completion_ids``; otherwise characters / 4 (a documented
approximation). The penalty is never positive and at most ``scale`` in size, so with a weight below
the correctness reward's it can never make a wrong answer beat a right one.

May import: ``skill.rewards`` (base, params, registry, spec, trl_inputs), ``skill.errors``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from skill.errors import SkillError
from skill.rewards.base import RewardFunction
from skill.rewards.params import Param
from skill.rewards.registry import build_reward_function, register
from skill.rewards.spec import RewardSpec
from skill.rewards.trl_inputs import pseudo_token_ids


def soft_overlong_penalty(length: int, max_length: int, buffer: int) -> float:
    """DAPO's soft overlong punishment (Eq. 13), computed by TRL's own ``get_soft_overlong_punishment``:
    0 up to ``max_length - buffer`` tokens, then linearly down to -1 at ``max_length``, -1 beyond.

    >>> [soft_overlong_penalty(n, 100, 20) for n in (50, 80, 90, 100, 150)]
    [0.0, 0.0, -0.5, -1.0, -1.0]
    """
    from trl.rewards import get_soft_overlong_punishment  # heavy: trl only when a penalty is computed

    # TRL's reward reads only the length of each id list: a range of that length stands for the ids.
    return float(get_soft_overlong_punishment(max_length, buffer)(completion_ids=[range(length)])[0])


def target_length_penalty(length: int, target: int, tolerance: float) -> float:
    """0 within ``tolerance`` (a fraction) of ``target``; beyond it, minus the relative excess distance, down to -1.

    >>> target_length_penalty(100, 100, 0.2), target_length_penalty(150, 100, 0.2), target_length_penalty(400, 100, 0.2)
    (0.0, -0.3, -1.0)
    """
    excess = round(max(0.0, abs(length - target) / target - tolerance), 10)
    return -min(1.0, excess) if excess else 0.0


@register("length_penalty", roles=("shaping",), wraps="wrap")
def build_length_penalty(
    mode: Annotated[str, Param("soft_overlong (DAPO) or target")] = "soft_overlong",
    max_length: Annotated[int, Param("soft_overlong: max_completion_length in tokens")] = 256,
    buffer: Annotated[
        int | None, Param("soft_overlong: tokens before max_length where the penalty ramps; null: max_length // 4")
    ] = None,
    target: Annotated[int | None, Param("target: the length aimed at, in tokens (required in that mode)")] = None,
    tolerance: Annotated[float, Param("target: free band around it, as a fraction of target")] = 0.2,
    scale: Annotated[float, Param("size of the largest penalty")] = 1.0,
    wrap: Annotated[
        dict[str, Any] | None, Param("a reward spec {name, params}; the penalty is added to its score")
    ] = None,
) -> RewardFunction:
    """A non-positive length penalty, ``scale`` x (DAPO's soft overlong punishment, or the distance from a target
    length), alone or added to a wrapped reward's score.

    soft_overlong: 0 up to ``max_length - buffer`` tokens, then linearly down to -1 at ``max_length``. target:
    0 within ``tolerance`` of ``target``, then minus the relative excess distance, down to -1. Lengths are
    token counts when TRL passes ``completion_ids``, else characters / 4. With ``wrap``, the wrapped reward's
    None stays None.

    Resists: teaching brevity instead of accuracy. The penalty is never positive and at most ``scale`` in size;
    keep its weight well under the correctness reward's, or a short wrong answer can beat a long right one.

    >>> reward = build_length_penalty(max_length=8, buffer=4)
    >>> reward(["", ""], ["short", "x"], completion_ids=[[1, 2, 3], [1] * 7])
    [0.0, -0.75]
    """
    if mode not in ("soft_overlong", "target"):
        raise SkillError(f"Unknown length_penalty mode {mode!r}.", "Send 'soft_overlong' or 'target'.")
    if mode == "target" and (target is None or target <= 0):
        raise SkillError("length_penalty mode 'target' needs a positive target.", "Send params.target in tokens.")
    ramp = buffer if buffer is not None else max(1, max_length // 4)
    if not 0 < ramp <= max_length:
        raise SkillError(f"buffer={ramp} must be in (0, max_length={max_length}].", "Send a smaller buffer.")
    inner = None
    if wrap is not None:
        inner = build_reward_function(RewardSpec.model_validate({"role": "correctness", **wrap}))

    overlong = None
    if mode == "soft_overlong":
        from trl.rewards import get_soft_overlong_punishment  # heavy: trl only when this reward is built

        overlong = get_soft_overlong_punishment(max_length, ramp)  # TRL's own, a picklable callable

    def penalty(length: int) -> float:
        if overlong is None:
            return scale * target_length_penalty(length, target or 1, tolerance)
        return scale * overlong(completion_ids=[range(length)])[0]  # TRL reads only each id list's length

    def batch_score(texts: list[str], rows: list[dict[str, Any]], ids: Sequence[Sequence[int]] | None) -> list[Any]:
        lengths = [len(ids[i]) if ids is not None else len(pseudo_token_ids(text)) for i, text in enumerate(texts)]
        if inner is None:
            return [penalty(length) for length in lengths]
        columns = {key: [row.get(key) for row in rows] for key in rows[0]} if rows else {}
        prompts = columns.pop("prompt", [""] * len(texts))
        base = inner(prompts, texts, completion_ids=ids, **columns)
        return [None if score is None else score + penalty(length) for score, length in zip(base, lengths, strict=True)]

    return RewardFunction("length_penalty", batch_score=batch_score, doc=build_length_penalty.__doc__ or "")
