"""User rewards written the ways TRL's and open-r1's documentation write them, for the conformance suite.

Each style a user is shown: completions only; a dataset column by name; conversational completions
(``completion[0]["content"]``); prompts read; ``None`` for a row the reward does not apply to;
``log_metric`` / ``log_extra``; ``trainer_state``; ``completion_ids``; ``async def``; a callable class
instance (sync and async); a ``functools.partial``. They score the addition task ("What is a + b?") for
real; ``STANDARD`` and ``CONVERSATIONAL`` list which of them expect text or chat completions.
"""

from __future__ import annotations

import asyncio
import functools
import re

from trl.rewards import get_soft_overlong_punishment

THINK_ANSWER = re.compile(r"<think>.+?</think>\s*<answer>.+?</answer>", re.DOTALL)
ANSWER_TAG = re.compile(r"<answer>\s*(.*?)\s*</answer>", re.DOTALL)
BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
QUESTION = re.compile(r"What is (-?\d+) \+ (-?\d+)\?")


def _content(completion) -> str:
    """Text of a completion in either format (what a user writes when one reward serves both)."""
    return completion if isinstance(completion, str) else completion[0]["content"]


def _tagged(text: str) -> str | None:
    match = ANSWER_TAG.search(text)
    return match.group(1) if match else None


# --- standard (text) completions ---------------------------------------------------------------------------


def think_answer_format(completions, **kwargs):
    """Completions only: 1.0 for <think>...</think><answer>...</answer>, as TRL's format example."""
    return [1.0 if THINK_ANSWER.fullmatch(completion.strip()) else 0.0 for completion in completions]


def boxed_accuracy(completions, solution, **kwargs):
    """A dataset column by name: the \\boxed{} answer against ``solution``, as TRL's reference-answer example."""
    matches = [BOXED.search(completion) for completion in completions]
    answers = [match.group(1).strip() if match else "" for match in matches]
    return [1.0 if answer == gold else 0.0 for answer, gold in zip(answers, solution, strict=True)]


def no_prompt_echo(prompts, completions, **kwargs):
    """Reads the prompts: -1.0 when the completion repeats the question instead of answering it."""
    return [
        -1.0 if prompt.strip() in completion else 0.0 for prompt, completion in zip(prompts, completions, strict=True)
    ]


def length_by_ids(completion_ids, **kwargs):
    """completion_ids for length: shorter is better, 0 to -1 (the ids are the sampled tokens in training, and
    tokenizer or pseudo ids in an inspection: never None)."""
    return [-min(len(ids), 64) / 64 for ids in completion_ids]


def reward_func(completion_ids, **kwargs):
    """TRL's first custom-reward example, exactly as its GRPO docs write it: longer completions score higher."""
    return [float(len(ids)) for ids in completion_ids]


# TRL's own reward, picked up from a user module as TRL's docs show it (it reads only completion_ids).
soft_overlong = get_soft_overlong_punishment(max_completion_len=10, soft_punish_cache=4)


class RepetitionPenalty:
    """A callable class instance (picklable, as TRL's own rewards are): minus the share of repeated n-grams."""

    def __init__(self, ngram_size: int = 3, max_penalty: float = -1.0) -> None:
        self.ngram_size = ngram_size
        self.max_penalty = max_penalty

    def __call__(self, completions, **kwargs):
        scores = []
        for completion in completions:
            words = _content(completion).lower().split()
            ngrams = [tuple(words[i : i + self.ngram_size]) for i in range(len(words) - self.ngram_size + 1)]
            repeated = 1 - len(set(ngrams)) / len(ngrams) if ngrams else 0.0
            scores.append(self.max_penalty * repeated)
        return scores


repetition_penalty = RepetitionPenalty(ngram_size=3, max_penalty=-1.0)


def capped_length(completions, max_chars, **kwargs):
    """Configured with functools.partial (open-r1 configures its rewards with arguments): 0 under max_chars."""
    return [0.0 if len(_content(c)) <= max_chars else -1.0 for c in completions]


short_answers = functools.partial(capped_length, max_chars=200)


# --- conversational completions ----------------------------------------------------------------------------


def chat_format(completions, **kwargs):
    """Conversational completions, as open-r1's format reward reads them."""
    contents = [completion[0]["content"] for completion in completions]
    return [1.0 if THINK_ANSWER.fullmatch(content.strip()) else 0.0 for content in contents]


def chat_accuracy(completions, solution, **kwargs):
    """Conversational, a column by name, None where the row has no checkable solution (open-r1's accuracy)."""
    rewards = []
    for completion, gold in zip(completions, solution, strict=True):
        if not gold:
            rewards.append(None)  # not applicable: TRL leaves it out of the sums
            continue
        rewards.append(1.0 if _tagged(completion[0]["content"]) == gold else 0.0)
    return rewards


def task_routed_accuracy(prompts, completions, task, **kwargs):
    """Multi-task, as TRL's example: scores only ``task == "addition"`` rows (None for the rest), computing the
    sum from the prompt itself."""
    rewards = []
    for prompt, completion, kind in zip(prompts, completions, task, strict=True):
        question = QUESTION.search(prompt[-1]["content"] if isinstance(prompt, list) else prompt)
        if kind != "addition" or question is None:
            rewards.append(None)
            continue
        expected = str(int(question.group(1)) + int(question.group(2)))
        rewards.append(1.0 if _tagged(_content(completion)) == expected else 0.0)
    return rewards


def logged_accuracy(completions, solution, log_metric=None, log_extra=None, **kwargs):
    """Logs through TRL: the share with a tagged answer (log_metric) and the parsed answers (log_extra)."""
    answers = [_tagged(_content(c)) for c in completions]
    if log_metric is not None:
        log_metric("tagged_answer_share", sum(a is not None for a in answers) / len(answers))
    if log_extra is not None:
        log_extra("parsed_answer", [a or "" for a in answers])
    return [
        1.0 if answer is not None and answer == gold else 0.0 for answer, gold in zip(answers, solution, strict=True)
    ]


def curriculum_accuracy(completions, solution, trainer_state, **kwargs):
    """trainer_state for a curriculum: for the first 100 steps any mention of the answer earns 0.5; the tagged
    answer always earns 1.0."""
    early = trainer_state.global_step < 100
    rewards = []
    for completion, gold in zip(completions, solution, strict=True):
        text = _content(completion)
        if _tagged(text) == gold:
            rewards.append(1.0)
        else:
            rewards.append(0.5 if early and gold and re.search(rf"(?<!\d){re.escape(gold)}(?!\d)", text) else 0.0)
    return rewards


async def async_accuracy(prompts, completions, solution, **kwargs):
    """async def, as TRL's example: each item checked in its own task (a remote verifier would await here)."""

    async def check(completion, gold):
        await asyncio.sleep(0)
        return 1.0 if _tagged(_content(completion)) == gold else 0.0

    return list(await asyncio.gather(*(check(c, g) for c, g in zip(completions, solution, strict=True))))


class AsyncAnswerJudge:
    """An async callable instance (TRL reads the ``async`` from ``__call__``): 1.0 for a tagged integer."""

    async def __call__(self, completions, **kwargs):
        await asyncio.sleep(0)
        return [1.0 if re.fullmatch(r"-?\d+", _tagged(_content(c)) or "") else 0.0 for c in completions]


async_answer_judge = AsyncAnswerJudge()

STANDARD = ["think_answer_format", "boxed_accuracy", "no_prompt_echo", "length_by_ids"]
CONVERSATIONAL = ["chat_format", "chat_accuracy"]
EITHER = [
    "repetition_penalty",
    "short_answers",
    "task_routed_accuracy",
    "logged_accuracy",
    "curriculum_accuracy",
    "async_accuracy",
    "async_answer_judge",
]
