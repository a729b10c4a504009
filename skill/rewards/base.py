"""What every reward shares: reading completions, never raising into the trainer, counting failures.

TRL turns a reward's ``None`` into NaN and drops it from the logged means, so a correctness reward
that crashes on half the batch would look *better*. Every reward built here therefore counts its
internal failures, reports the rate through TRL's ``log_metric`` as ``rewards/<name>/failure_rate``,
and keeps the counts on the function for inspection.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

# Keywords TRL passes that are not dataset columns.
TRL_KEYWORDS = frozenset({"trainer_state", "log_extra", "log_metric", "environments", "completion_ids"})

ItemScore = Callable[[str, dict[str, Any]], float | None]
# Batch scorer: texts, per-row columns, completion token ids (or None) -> one score, None or exception per item.
BatchScore = Callable[[list[str], list[dict[str, Any]], Sequence[Sequence[int]] | None], list[Any]]


def completion_text(completion: Any) -> str:
    """The text of a completion: a plain string, or the last message of a conversational one.

    >>> completion_text("42")
    '42'
    >>> completion_text([{"role": "assistant", "content": "42"}])
    '42'
    """
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion:
        content = completion[-1].get("content", "") if isinstance(completion[-1], dict) else completion[-1]
        if isinstance(content, list):  # content parts: keep the text ones
            return "".join(part.get("text", "") for part in content if isinstance(part, dict))
        return str(content)
    return "" if completion is None else str(completion)


def rows_from_columns(columns: dict[str, Any], count: int) -> list[dict[str, Any]]:
    """Per-completion rows from TRL's column lists (one value per completion).

    >>> rows_from_columns({"answer": ["4", "5"]}, 2)
    [{'answer': '4'}, {'answer': '5'}]
    """
    rows: list[dict[str, Any]] = [{} for _ in range(count)]
    for key, values in columns.items():
        if isinstance(values, list | tuple) and len(values) == count:
            for row, value in zip(rows, values, strict=True):
                row[key] = value
    return rows


class RewardFunction:
    """A TRL reward function with a unique ``__name__``, that never raises and counts its failures.

    >>> reward = RewardFunction("doubles", score=lambda text, row: float(int(text) == 2 * int(row["n"])))
    >>> reward(["p", "p", "p"], ["4", "3", "x"], n=["2", "2", "2"])
    [1.0, 0.0, None]
    >>> reward.failures, reward.scored
    (1, 3)
    """

    def __init__(
        self, name: str, *, score: ItemScore | None = None, batch_score: BatchScore | None = None, doc: str = ""
    ) -> None:
        if (score is None) == (batch_score is None):
            raise ValueError("give exactly one of score / batch_score")
        self.__name__ = name
        self.__qualname__ = name
        self.__doc__ = doc or (score or batch_score).__doc__
        self._score = score
        self._batch_score = batch_score
        self.scored = 0
        self.failures = 0
        self.last_errors: list[str] = []
        self.last_item_errors: list[str | None] = []

    def __call__(
        self, prompts: list[Any], completions: list[Any], completion_ids: Any = None, **kwargs: Any
    ) -> list[float | None]:
        texts = [completion_text(completion) for completion in completions]
        columns = {key: value for key, value in kwargs.items() if key not in TRL_KEYWORDS}
        rows = rows_from_columns(columns, len(texts))
        for row, prompt in zip(rows, prompts, strict=False):
            row.setdefault("prompt", prompt)
        try:
            if self._batch_score is not None:
                results = list(self._batch_score(texts, rows, completion_ids))
            else:
                results = [self._safe_item(text, row) for text, row in zip(texts, rows, strict=True)]
        except Exception as exc:  # a scorer bug must not stop training: every item fails instead
            results = [exc] * len(texts)
        scores: list[float | None] = []
        failed = 0
        errors = []
        item_errors: list[str | None] = []
        for result in results:
            if isinstance(result, BaseException):
                failed += 1
                errors.append(f"{type(result).__name__}: {result}")
                item_errors.append(errors[-1])
                scores.append(None)
            else:
                item_errors.append(None)
                scores.append(None if result is None else float(result))
        self.last_item_errors = item_errors
        self.scored += len(texts)
        self.failures += failed
        self.last_errors = errors[-10:]
        log_metric = kwargs.get("log_metric")
        if callable(log_metric) and texts:
            log_metric(f"rewards/{self.__name__}/failure_rate", failed / len(texts))
        return scores

    def _safe_item(self, text: str, row: dict[str, Any]) -> Any:
        try:
            return self._score(text, row)  # type: ignore[misc]
        except Exception as exc:
            return exc

    def __repr__(self) -> str:
        return f"<reward {self.__name__}>"


class GuardedUserReward:
    """A user's reward function, called as TRL would call it, that never raises into the trainer.

    An exception fails the whole batch (every item None, counted and logged as failure_rate) instead of
    stopping training.

    >>> def flaky(prompts, completions, **kwargs):
    ...     raise RuntimeError("boom")
    >>> guarded = GuardedUserReward(flaky)
    >>> guarded(["p"], ["c"]), guarded.failures, guarded.__name__
    ([None], 1, 'flaky')
    """

    def __init__(self, function: Callable[..., list[float | None]]) -> None:
        self.function = function
        self.__name__ = getattr(function, "__name__", "user_reward")
        self.__qualname__ = self.__name__
        self.__doc__ = function.__doc__
        self.scored = 0
        self.failures = 0
        self.last_errors: list[str] = []
        self.last_item_errors: list[str | None] = []

    def __call__(
        self, prompts: list[Any], completions: list[Any], completion_ids: Any = None, **kwargs: Any
    ) -> list[float | None]:
        try:
            scores = list(self.function(prompts, completions, completion_ids=completion_ids, **kwargs))
            if len(scores) != len(completions):
                raise ValueError(f"returned {len(scores)} scores for {len(completions)} completions")
            error = None
        except Exception as exc:
            scores, error = [None] * len(completions), f"{type(exc).__name__}: {exc}"
        self.scored += len(completions)
        self.failures += len(completions) if error else 0
        self.last_errors = [error] if error else []
        self.last_item_errors = [error] * len(completions)
        log_metric = kwargs.get("log_metric")
        if callable(log_metric) and completions:
            log_metric(f"rewards/{self.__name__}/failure_rate", 1.0 if error else 0.0)
        return scores
