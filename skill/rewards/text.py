"""Rewards that read text: ``format`` (structure only), ``exact_match`` and ``math`` (the answer).

Every regular expression here is anchored and DOTALL: structure is judged on the whole completion,
so repeated blocks, an empty answer or trailing junk earn nothing. Reading answers as people write them
(thousands separators, currency, fractions, LaTeX, lists of candidates) lives in ``answers``; math-verify
runs in the warm workers of ``math_workers``.

Each reward's per-item scorer is an instance of a module-level class, so a built reward pickles (TRL's
rollout workers and spawned trainer processes receive rewards that way).

May import: ``skill.rewards`` (answers, base, math_workers, params, registry), ``skill.errors``.
"""

from __future__ import annotations

import re
from functools import partial
from typing import Annotated, Any

from skill.errors import SkillError
from skill.rewards.answers import (
    EXTRACT_MODES,
    MAX_ANSWER_CHARS,
    answers_equal,
    committed_answer,
    extract_answer,
    lists_candidates,
    normalise_answer,
    numbers_equal,
    prompt_text,
    read_number,
    restates_prompt_expression,
)
from skill.rewards.base import RewardFunction
from skill.rewards.math_workers import math_equal
from skill.rewards.params import Param
from skill.rewards.registry import register

__all__ = ["FORMATS", "answers_equal", "extract_answer", "math_answer_correct", "normalise_answer"]

# One number as written: sign, thousands groups, decimals, a fraction, a percent sign.
_NUMBER = r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:/\d+)?%?"
_ANSWER_BODY = r"(?:(?!</?answer>|</?think>).)*\S(?:(?!</?answer>|</?think>).)*"
FORMATS: dict[str, str] = {
    # Just a number, nothing around it but whitespace.
    "number": rf"\s*{_NUMBER}\s*",
    # One non-empty <answer>...</answer>, optionally after free text without tags.
    "answer_tag": rf"(?:(?!</?answer>).)*<answer>{_ANSWER_BODY}</answer>\s*",
    # R1 style: <think>...</think> then one non-empty <answer>...</answer>, nothing after.
    "think_answer": rf"\s*<think>(?:(?!</?think>|</?answer>).)*</think>\s*<answer>{_ANSWER_BODY}</answer>\s*",
    # Exactly one fenced code block, optional prose before it, nothing after.
    "code_block": r"(?:(?!```).)*```[\w+-]*\n(?:(?!```).)+\n?```\s*",
}


def _compile_format(pattern: str | None, regex: str | None) -> re.Pattern[str]:
    if regex is not None:
        try:
            return re.compile(regex, re.DOTALL)
        except re.error as exc:
            raise SkillError(f"format regex {regex!r} does not compile: {exc}.", "Send a valid Python regex.") from None
    if pattern not in FORMATS:
        raise SkillError(f"Unknown format pattern {pattern!r}.", f"Send one of: {', '.join(FORMATS)}, or a regex.")
    return re.compile(FORMATS[pattern], re.DOTALL)


class FormatScore:
    """1.0 when the whole text matches the compiled structure."""

    def __init__(self, compiled: re.Pattern[str]) -> None:
        self.compiled = compiled

    def __call__(self, text: str, row: dict[str, Any]) -> float:
        return 1.0 if self.compiled.fullmatch(text) else 0.0


@register("format", roles=("format",))
def build_format(
    pattern: Annotated[str | None, Param(f"a named structure: {', '.join(FORMATS)}")] = "number",
    regex: Annotated[str | None, Param("a custom regex instead, matched against the whole completion")] = None,
) -> RewardFunction:
    """1.0 when the whole completion has the required structure, else 0.0; never looks at correctness.

    number: just a number ("12", "-3.5", "1,000", "3/4", "50%"); answer_tag: one non-empty
    ``<answer>...</answer>``, optionally after free text; think_answer: ``<think>...</think>`` then one
    non-empty answer; code_block: exactly one fenced block.

    Resists: a correct block followed by junk, repeated blocks and an empty ``<answer></answer>``, which
    unanchored patterns pay for; the match here is anchored and DOTALL over the whole text. Format says
    nothing about correctness: never train on it alone.

    >>> reward = build_format(pattern="answer_tag")
    >>> reward([""] * 4, ["so <answer>7</answer>", "<answer> </answer>", "<answer>7</answer> junk",
    ...                   "<answer>7</answer><answer>8</answer>"])
    [1.0, 0.0, 0.0, 0.0]
    """
    return RewardFunction("format", score=FormatScore(_compile_format(pattern, regex)), doc=build_format.__doc__ or "")


class ExactMatchScore:
    """1.0 when the extracted answer equals the row's gold answer (see ``build_exact_match``)."""

    def __init__(self, extract: str, regex: str | None, answer_column: str, numeric: bool, case_sensitive: bool):
        self.extract, self.regex, self.answer_column = extract, regex, answer_column
        self.numeric, self.case_sensitive = numeric, case_sensitive

    def __call__(self, text: str, row: dict[str, Any]) -> float:
        if self.answer_column not in row:
            raise KeyError(f"dataset column {self.answer_column!r} missing")
        answer = extract_answer(text, self.extract, self.regex)
        if answer is None:
            return 0.0
        return 1.0 if answers_equal(answer, str(row[self.answer_column]), self.numeric, self.case_sensitive) else 0.0


@register("exact_match", roles=("correctness",), reads="answer")
def build_exact_match(
    extract: Annotated[
        str, Param("where the answer is: answer_tag, boxed, last_number, regex or whole")
    ] = "answer_tag",
    regex: Annotated[str | None, Param("for extract=regex: the answer is the last match (group 1 if any)")] = None,
    answer_column: Annotated[str, Param("dataset column holding the gold answer")] = "answer",
    numeric: Annotated[bool, Param("compare as numbers when both sides read as one number")] = True,
    case_sensitive: Annotated[bool, Param("compare case-sensitively")] = False,
) -> RewardFunction:
    """1.0 when the extracted answer equals the gold column after normalisation (numbers compared as numbers);
    0.0 otherwise, including no answer or a list of candidates.

    Normalisation collapses whitespace and drops a trailing period and thousands separators, then folds case.
    A number is read as people write it: "$1,250 dollars" is 1250, "3/4" and "\\frac{3}{4}" are 0.75, "50%"
    matches 50 or 0.5. ``last_number`` reads the final statement (after ``####`` when there is one).

    Resists: listing candidates. A trailing list like "11, 12 or 13", or several different tagged answers,
    extracts to nothing and scores 0.0 (a plain "last number" rule pays it when the gold is 13). Looser
    normalisation (dropping all punctuation) would merge different answers. Not resisted: ``last_number``
    pays a number copied from the prompt; prefer a tagged answer.

    >>> reward = build_exact_match(extract="last_number")
    >>> reward([""] * 5, ["12", "It is 12.0", "11, 12 or 13", "no idea", "The total is $1,200."],
    ...        answer=["12", "12", "12", "12", "1200"])
    [1.0, 1.0, 0.0, 0.0, 1.0]
    """
    if extract == "regex" and not regex:
        raise SkillError("extract='regex' needs a regex.", "Send params.regex, e.g. 'Answer: (.+)'.")
    if extract not in EXTRACT_MODES:  # refuse an unknown mode now, not inside training
        raise SkillError(f"Unknown extract mode {extract!r}.", f"Send one of: {', '.join(EXTRACT_MODES)}.")
    score = ExactMatchScore(extract, regex, answer_column, numeric, case_sensitive)
    reward = RewardFunction("exact_match", score=score, doc=build_exact_match.__doc__ or "")
    reward.extract = partial(extract_answer, mode=extract, regex=regex)  # type: ignore[attr-defined]
    return reward


def _as_latex(answer: str) -> str:
    """math-verify reads bare LaTeX ("\\{1,2\\}", "x^2+1") only between dollars; tagged answers come bare."""
    delimited = any(mark in answer for mark in ("$", "\\(", "\\[", "\\boxed"))
    return answer if delimited else f"${answer}$"


def math_answer_correct(completion: str, gold: str, timeout_s: float = 5.0, prompt: str = "") -> bool:
    """Whether the answer the completion commits to is the gold one.

    The tagged answer (``<answer>``, ``\\boxed{}``, ``####``) when there is one, else the final statement.
    A list of candidates never counts unless the gold is a list too, nor does a tagged answer longer than
    ``MAX_ANSWER_CHARS``, nor an answer that ends on an expression the prompt poses without its value ("2 + 14"
    for "What is 2 + 14?"); two plain numbers are compared exactly here; anything else goes to math-verify
    (TimeoutError past ``timeout_s`` of verification).

    >>> math_answer_correct("<answer>18</answer>", "18"), math_answer_correct("It is 18.0", "18")
    (True, True)
    >>> math_answer_correct("Final answer: 18 or 19", "18"), math_answer_correct("\\\\boxed{\\\\sqrt{4}}", "2")
    (False, True)
    >>> math_answer_correct("It is just 2 + 14.", "16", prompt="What is 2 + 14?"), math_answer_correct(
    ...     "2 + 14 = 16", "16", prompt="What is 2 + 14?")
    (False, True)
    """
    gold = gold.rsplit("####", 1)[1].strip() if "####" in gold else gold.strip()
    answer = committed_answer(completion)
    if answer is None or not gold or (answer.tagged and len(answer.text) > MAX_ANSWER_CHARS):
        return False
    if restates_prompt_expression(answer.text, prompt):
        return False
    if lists_candidates(answer.text) and not lists_candidates(gold):
        return False
    mine, theirs = read_number(answer.text), read_number(gold)
    if mine is not None and theirs is not None:
        return numbers_equal(mine, theirs)
    # An untagged completion goes whole: math-verify finds the final answer in prose better than a regex.
    return math_equal(_as_latex(gold), _as_latex(answer.text) if answer.tagged else completion, timeout_s)


class MathScore:
    """1.0 when ``math_answer_correct``; a timeout raises, so the item is a counted failure (None)."""

    def __init__(self, answer_column: str, timeout_s: float) -> None:
        self.answer_column, self.timeout_s = answer_column, timeout_s

    def __call__(self, text: str, row: dict[str, Any]) -> float:
        if self.answer_column not in row:
            raise KeyError(f"dataset column {self.answer_column!r} missing")
        prompt = prompt_text(row.get("prompt"))
        return 1.0 if math_answer_correct(text, str(row[self.answer_column]), self.timeout_s, prompt) else 0.0


@register("math", roles=("correctness",), reads="answer", reasoning="a math answer is worked out before it is given")
def build_math(
    answer_column: Annotated[str, Param("dataset column holding the gold answer")] = "answer",
    timeout_s: Annotated[
        float, Param("seconds of verification per comparison (not the worker's start); past it the item is None")
    ] = 5.0,
) -> RewardFunction:
    """1.0 when the completion's committed answer is equivalent to the gold answer (math-verify), else 0.0.

    The committed answer is the tagged one when there is one (``<answer>``, ``\\boxed{}``, GSM8K's ``####``;
    several different tagged answers earn nothing), else the final statement. Plain numbers are compared
    exactly in-process ("18.0", "$1,250", "3/4"); expressions go to math-verify.

    Resists: listing candidates ("17, 18 or 19", "\\boxed{17} or \\boxed{18}") scores 0.0 unless the gold is
    itself a list. Restating the question: an answer that ends on an expression the prompt poses ("2 + 14" for
    "What is 2 + 14?") scores 0.0, while "2 + 14 = 16" still scores 1.0. Hanging the trainer: math-verify's own
    timeouts use ``signal.alarm``, which fails off the main thread, so they are off and a warm worker process is
    killed past ``timeout_s`` of verification (a timeout is a failure, None, counted in failure_rate, not a zero;
    only that worker is replaced).

    >>> completions = ["so the answer is $\\\\boxed{\\\\frac{1}{2}}$", "$\\\\boxed{3}$", "<answer>0.5</answer>"]
    >>> build_math()(["", "", ""], completions, answer=["0.5", "0.5", "$\\\\frac{1}{2}$"])
    [1.0, 0.0, 1.0]
    """
    if timeout_s <= 0:
        raise SkillError(f"math timeout_s must be positive, got {timeout_s}.", "Send seconds, e.g. 5.0.")
    reward = RewardFunction("math", score=MathScore(answer_column, timeout_s), doc=build_math.__doc__ or "")
    reward.extract = committed_text  # type: ignore[attr-defined]  # what the reveal shows it read
    return reward


def committed_text(completion: str) -> str | None:
    """The answer the math reward reads: the committed answer's text, None when there is none.

    >>> committed_text("so <answer>18</answer>"), committed_text("It is 16."), committed_text("")
    ('18', 'It is 16.', None)
    """
    answer = committed_answer(completion)
    return answer.text if answer else None
