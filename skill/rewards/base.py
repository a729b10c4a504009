"""What every reward shares: calling it as TRL does, never raising into the trainer, counting failures.

TRL 1.16 calls every reward function by keyword (``_calculate_rewards`` in ``trl/trainer/grpo_trainer.py``):
``f(prompts=..., completions=..., completion_ids=..., **dataset_columns, trainer_state=..., log_extra=...,
log_metric=...)``, every dataset column except ``prompt``/``completion``/``completion_ids`` under its own name;
an async function is awaited on one event loop that lives as long as the trainer. :func:`call_reward` calls a
reward the same way where there is no trainer (inspection, route checks, evaluation).

TRL turns a reward's ``None`` into NaN and drops it from the logged means, so a correctness reward
that crashes on half the batch would look *better*. Every reward built here therefore counts its
internal failures, reports the rate through TRL's ``log_metric`` as ``rewards/<name>/failure_rate``,
and keeps the counts on the function for inspection.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import math
import threading
from collections.abc import Callable, Coroutine, Iterable, Sequence
from typing import Any

from skill.rewards.trl_inputs import TRL_KEYWORDS, pseudo_token_ids

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


def is_async_reward(function: Callable[..., Any]) -> bool:
    """Whether calling ``function`` returns a coroutine, by TRL's rule: partials unwrapped, and a callable
    instance judged by its ``__call__``.

    >>> async def judge(completions, **kwargs): return [1.0 for _ in completions]
    >>> is_async_reward(judge), is_async_reward(functools.partial(judge)), is_async_reward(len)
    (True, True, False)
    """
    while isinstance(function, functools.partial):
        function = function.func
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(type(function).__call__)


def is_conversational_prompt(prompt: Any) -> bool:
    """Whether a prompt is chat messages (then TRL hands rewards each completion as ``[{"role": "assistant",
    "content": text}]``).

    >>> is_conversational_prompt([{"role": "user", "content": "2+2?"}]), is_conversational_prompt("2+2?")
    (True, False)
    """
    return isinstance(prompt, list) and bool(prompt) and all(isinstance(m, dict) and "role" in m for m in prompt)


def trl_completions(prompts: Sequence[Any], completions: Sequence[Any]) -> list[Any]:
    """The completions in the shape TRL gives rewards: text for text prompts, one assistant message for chat ones.

    >>> trl_completions([[{"role": "user", "content": "2+2?"}]], ["4"])
    [[{'role': 'assistant', 'content': '4'}]]
    >>> trl_completions(["2+2?"], ["4"])
    ['4']
    """
    if not (prompts and is_conversational_prompt(prompts[0])):
        return list(completions)
    return [[{"role": "assistant", "content": c}] if isinstance(c, str) else c for c in completions]


class RewardEventLoop:
    """One event loop on a daemon thread for async rewards outside a trainer, as TRL keeps one for the whole
    training run: an async client a reward opens once (an HTTP session) stays bound to the loop it was opened on.
    """

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        """Run ``coroutine`` on the loop and wait for its result."""
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                threading.Thread(target=self._loop.run_forever, name="reward-event-loop", daemon=True).start()
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()


REWARD_LOOP = RewardEventLoop()


def discard_logged(name: str, value: Any) -> None:
    """``log_metric`` / ``log_extra`` where there is no trainer to log to: the call works, the value is dropped."""


def start_of_training_state() -> Any:
    """The ``trainer_state`` TRL passes before the first step (a fresh ``transformers.TrainerState``, step 0)."""
    from transformers.trainer_callback import TrainerState  # heavy: only for user rewards, outside a trainer

    return TrainerState()


def call_reward(
    function: Callable[..., Any], prompts: Sequence[Any], completions: Sequence[Any], **columns: Any
) -> list[Any]:
    """Call a reward as TRL does, by keyword, with completions shaped as TRL shapes them; an async reward is
    awaited on :data:`REWARD_LOOP`. ``columns`` are dataset columns (one list entry per completion) and any of
    TRL's keywords; those missing are filled in as at the start of training (``completion_ids``: the caller's, else
    :func:`pseudo_token_ids` of the texts, as there is no tokenizer here; ``log_metric``/``log_extra`` accept and
    drop; a user reward gets a step-0 ``trainer_state``). Columns named ``prompt`` or ``completion`` are withheld,
    as TRL withholds them.

    >>> def accuracy(completions, solution, **kwargs):
    ...     return [float(c[0]["content"] == s) for c, s in zip(completions, solution)]
    >>> call_reward(accuracy, [[{"role": "user", "content": "2+2?"}]] * 2, ["4", "5"], solution=["4", "4"])
    [1.0, 0.0]
    """
    columns = {name: values for name, values in columns.items() if name not in ("prompt", "completion")}
    if columns.get("completion_ids") is None:
        columns["completion_ids"] = [pseudo_token_ids(completion_text(c)) for c in completions]
    columns.setdefault("log_metric", discard_logged)
    columns.setdefault("log_extra", discard_logged)
    if isinstance(function, GuardedUserReward) and "trainer_state" not in columns:
        columns["trainer_state"] = start_of_training_state()
    result = function(prompts=list(prompts), completions=trl_completions(prompts, completions), **columns)
    if inspect.isawaitable(result):
        result = REWARD_LOOP.run(result)  # type: ignore[arg-type]
    return list(result)


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
        # How to build this reward again in another process (set by the registry): a reward holding closures,
        # a process pool or a judge's client pickles as its spec, and the receiving process rebuilds it.
        self.rebuild: tuple[Callable[..., Any], tuple[Any, ...]] | None = None

    def __reduce_ex__(self, protocol: Any) -> Any:
        if self.rebuild is None:
            return super().__reduce_ex__(protocol)
        build, arguments = self.rebuild
        state = {"__name__": self.__name__, "__qualname__": self.__qualname__}
        state |= {"scored": self.scored, "failures": self.failures}
        return build, arguments, state

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


def checked_scores(result: Any, count: int) -> list[float | None]:
    """A user reward's return value as TRL can use it: one number or None per completion (NaN reads as None).

    >>> checked_scores([1, None, 0.5, float("nan")], 4)
    [1.0, None, 0.5, None]
    >>> checked_scores(["1.0"], 1)
    Traceback (most recent call last):
    ...
    TypeError: score 0 is '1.0' (str), not a number or None
    """
    scores = list(result)
    if len(scores) != count:
        raise ValueError(f"returned {len(scores)} scores for {count} completions")
    checked: list[float | None] = []
    for index, score in enumerate(scores):
        if score is not None and (isinstance(score, str | bytes) or not hasattr(score, "__float__")):
            raise TypeError(f"score {index} is {score!r} ({type(score).__name__}), not a number or None")
        value = None if score is None else float(score)
        checked.append(None if value is None or math.isnan(value) else value)
    return checked


def guarded_logging(kwargs: dict[str, Any], count: int) -> dict[str, Any]:
    """TRL's keywords with ``log_metric`` / ``log_extra`` checked before TRL stores the value: TRL averages
    metrics and tabulates extras later, outside the reward, where a bad value would stop training. Here it
    raises inside the user's call, which the guard turns into a failed batch.

    >>> logged = []
    >>> keywords = guarded_logging({"log_metric": lambda name, value: logged.append((name, value))}, 2)
    >>> keywords["log_metric"]("answered", 0.5), logged
    (None, [('answered', 0.5)])
    >>> keywords["log_metric"]("answered", "half")
    Traceback (most recent call last):
    ...
    TypeError: log_metric('answered', ...) needs a number, got 'half'
    """
    keywords = dict(kwargs)
    log_metric, log_extra = kwargs.get("log_metric"), kwargs.get("log_extra")
    if callable(log_metric):

        def checked_metric(name: str, value: float) -> None:
            if not isinstance(name, str) or isinstance(value, str | bytes) or not hasattr(value, "__float__"):
                raise TypeError(f"log_metric({name!r}, ...) needs a number, got {value!r}")
            log_metric(name, float(value))

        keywords["log_metric"] = checked_metric
    if callable(log_extra):

        def checked_extra(column: str, values: Iterable[Any]) -> None:
            # TRL ``.extend``s its table column with any iterable (a list, a tuple, a numpy array, a generator);
            # a string would extend it one character per completion, so it is refused with the wrong length.
            if isinstance(column, str) and isinstance(values, Iterable) and not isinstance(values, str | bytes):
                values = list(values)
                if len(values) == count:
                    log_extra(column, values)
                    return
            raise TypeError(f"log_extra({column!r}, ...) needs {count} values (a list or array), one per completion")

        keywords["log_extra"] = checked_extra
    return keywords


class GuardedUserReward:
    """A user's reward function, called by keyword exactly as TRL calls it, that never raises into the trainer.

    An exception, a wrong number of scores or a score that is not a number fails the whole batch (every item
    None, counted and logged as failure_rate) instead of stopping training.

    >>> def accuracy(completions, solution, **kwargs):
    ...     return [float(c == s) for c, s in zip(completions, solution)]
    >>> GuardedUserReward(accuracy)(["p", "p"], ["4", "5"], solution=["4", "4"])
    [1.0, 0.0]
    >>> def flaky(prompts, completions, **kwargs):
    ...     raise RuntimeError("boom")
    >>> guarded = GuardedUserReward(flaky)
    >>> guarded(["p"], ["c"]), guarded.failures, guarded.__name__
    ([None], 1, 'flaky')
    """

    def __init__(self, function: Callable[..., Any]) -> None:
        self.function = function
        inner = function.func if isinstance(function, functools.partial) else function
        self.__name__ = getattr(inner, "__name__", None) or type(inner).__name__
        self.__qualname__ = self.__name__
        self.__doc__ = inner.__doc__
        if callable(getattr(inner, "extract", None)):  # what the reveal shows it read: ``fn.extract = callable``
            self.extract = inner.extract
        self.scored = 0
        self.failures = 0
        self.last_errors: list[str] = []
        self.last_item_errors: list[str | None] = []

    def __call__(
        self, prompts: list[Any], completions: list[Any], completion_ids: Any = None, **kwargs: Any
    ) -> list[float | None]:
        try:
            keywords = guarded_logging(kwargs, len(completions))
            result = self.function(prompts=prompts, completions=completions, completion_ids=completion_ids, **keywords)
            return self._record(checked_scores(result, len(completions)), None, kwargs)
        except Exception as exc:
            return self._record([None] * len(completions), f"{type(exc).__name__}: {exc}", kwargs)

    def _record(self, scores: list[float | None], error: str | None, kwargs: dict[str, Any]) -> list[float | None]:
        self.scored += len(scores)
        self.failures += len(scores) if error else 0
        self.last_errors = [error] if error else []
        self.last_item_errors = [error] * len(scores)
        log_metric = kwargs.get("log_metric")
        if callable(log_metric) and scores:
            log_metric(f"rewards/{self.__name__}/failure_rate", 1.0 if error else 0.0)
        return scores


class AsyncGuardedUserReward(GuardedUserReward):
    """An async user reward, guarded: TRL sees an async callable and awaits it on its event loop beside the
    other async rewards; :func:`call_reward` awaits it where there is no trainer.

    >>> async def judge(completions, **kwargs):
    ...     return [1.0 if "please" in c else 0.0 for c in completions]
    >>> call_reward(AsyncGuardedUserReward(judge), ["p", "p"], ["please", "no"])
    [1.0, 0.0]
    """

    async def __call__(  # type: ignore[override]
        self, prompts: list[Any], completions: list[Any], completion_ids: Any = None, **kwargs: Any
    ) -> list[float | None]:
        try:
            keywords = guarded_logging(kwargs, len(completions))
            result = await self.function(
                prompts=prompts, completions=completions, completion_ids=completion_ids, **keywords
            )
            return self._record(checked_scores(result, len(completions)), None, kwargs)
        except Exception as exc:
            return self._record([None] * len(completions), f"{type(exc).__name__}: {exc}", kwargs)
