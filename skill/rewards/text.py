"""Rewards that read text: ``format`` (structure only), ``exact_match`` and ``math`` (the answer).

Every regular expression here is anchored and DOTALL: structure is judged on the whole completion,
so repeated blocks, an empty answer or trailing junk earn nothing.

May import: ``skill.rewards`` (base, params, registry), ``skill.errors``.
"""

from __future__ import annotations

import atexit
import re
from typing import Annotated, Any

from skill.errors import SkillError
from skill.rewards.base import RewardFunction
from skill.rewards.params import Param
from skill.rewards.registry import register

_NUMBER = r"-?\d+(?:\.\d+)?"
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


@register("format", roles=("format",))
def build_format(
    pattern: Annotated[str | None, Param(f"a named structure: {', '.join(FORMATS)}")] = "number",
    regex: Annotated[str | None, Param("a custom regex instead, matched against the whole completion")] = None,
) -> RewardFunction:
    """1.0 when the whole completion has the required structure, else 0.0; never looks at correctness.

    number: just a number; answer_tag: one non-empty ``<answer>...</answer>``, optionally after free text;
    think_answer: ``<think>...</think>`` then one non-empty answer; code_block: exactly one fenced block.

    Resists: a correct block followed by junk, repeated blocks and an empty ``<answer></answer>``, which
    unanchored patterns pay for; the match here is anchored and DOTALL over the whole text. Format says
    nothing about correctness: never train on it alone.

    >>> reward = build_format(pattern="answer_tag")
    >>> reward([""] * 4, ["so <answer>7</answer>", "<answer> </answer>", "<answer>7</answer> junk",
    ...                   "<answer>7</answer><answer>8</answer>"])
    [1.0, 0.0, 0.0, 0.0]
    """
    compiled = _compile_format(pattern, regex)

    def score(text: str, row: dict[str, Any]) -> float:
        return 1.0 if compiled.fullmatch(text) else 0.0

    return RewardFunction("format", score=score, doc=build_format.__doc__ or "")


_CANDIDATE_LIST = re.compile(rf"{_NUMBER}(?:\s*(?:,|/|;|\bor\b|\band\b)\s*{_NUMBER})+\s*\.?\s*$")
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_BOXED = re.compile(r"\\boxed\{((?:[^{}]|\{[^{}]*\})*)\}")


def extract_answer(text: str, mode: str = "answer_tag", regex: str | None = None) -> str | None:
    """The answer a completion commits to, or None when it commits to none (or to several).

    >>> extract_answer("so <answer> 12 </answer>")
    '12'
    >>> extract_answer("<answer>3</answer> no, <answer>4</answer>") is None  # two different answers
    True
    >>> extract_answer("It is 12.", "last_number"), extract_answer("maybe 11, 12 or 13", "last_number")
    ('12', None)
    """
    if mode == "answer_tag":
        answers = {answer.strip() for answer in _ANSWER_TAG.findall(text)}
        return answers.pop() if len(answers) == 1 else None
    if mode == "boxed":
        answers = {answer.strip() for answer in _BOXED.findall(text)}
        return answers.pop() if len(answers) == 1 else None
    if mode == "last_number":
        if _CANDIDATE_LIST.search(text.strip()):
            return None
        numbers = re.findall(_NUMBER, text)
        return numbers[-1] if numbers else None
    if mode == "regex":
        matches = re.findall(regex or "", text, re.DOTALL)
        if not matches:
            return None
        last = matches[-1]
        return (last[0] if isinstance(last, tuple) else last).strip()
    if mode == "whole":
        return text.strip()
    raise SkillError(f"Unknown extract mode {mode!r}.", "Send answer_tag, boxed, last_number, regex or whole.")


def normalise_answer(answer: str, case_sensitive: bool = False) -> str:
    """Collapse whitespace, drop a trailing period and thousands separators, fold case.

    >>> normalise_answer("  1,000.  "), normalise_answer("Paris")
    ('1000', 'paris')
    """
    text = " ".join(answer.split()).rstrip(".")
    if re.fullmatch(r"-?\d{1,3}(,\d{3})+(\.\d+)?", text):
        text = text.replace(",", "")
    return text if case_sensitive else text.casefold()


def answers_equal(given: str, gold: str, numeric: bool = True, case_sensitive: bool = False) -> bool:
    """Equal after normalisation, or as numbers when both parse as numbers.

    >>> answers_equal("12.0", "12"), answers_equal("twelve", "12")
    (True, False)
    """
    a, b = normalise_answer(given, case_sensitive), normalise_answer(gold, case_sensitive)
    if a == b:
        return True
    if numeric:
        try:
            return abs(float(a) - float(b)) <= 1e-9 * max(1.0, abs(float(b)))
        except ValueError:
            return False
    return False


@register("exact_match", roles=("correctness",))
def build_exact_match(
    extract: Annotated[
        str, Param("where the answer is: answer_tag, boxed, last_number, regex or whole")
    ] = "answer_tag",
    regex: Annotated[str | None, Param("for extract=regex: the answer is the last match (group 1 if any)")] = None,
    answer_column: Annotated[str, Param("dataset column holding the gold answer")] = "answer",
    numeric: Annotated[bool, Param("compare as numbers when both sides parse as numbers")] = True,
    case_sensitive: Annotated[bool, Param("compare case-sensitively")] = False,
) -> RewardFunction:
    """1.0 when the extracted answer equals the gold column after normalisation (numbers compared as numbers);
    0.0 otherwise, including no answer or a list of candidates.

    Normalisation collapses whitespace and drops a trailing period and thousands separators, then folds case.

    Resists: listing candidates. A trailing list like "11, 12 or 13", or several different tagged answers,
    extracts to nothing and scores 0.0 (a plain "last number" rule pays it when the gold is 13). Looser
    normalisation (dropping all punctuation) would merge different answers. Not resisted: ``last_number``
    pays a number copied from the prompt; prefer a tagged answer.

    >>> reward = build_exact_match(extract="last_number")
    >>> reward([""] * 4, ["12", "It is 12.0", "11, 12 or 13", "no idea"], answer=["12"] * 4)
    [1.0, 1.0, 0.0, 0.0]
    """
    if extract == "regex" and not regex:
        raise SkillError("extract='regex' needs a regex.", "Send params.regex, e.g. 'Answer: (.+)'.")
    extract_answer("", extract, regex)  # refuse an unknown mode now, not inside training

    def score(text: str, row: dict[str, Any]) -> float | None:
        if answer_column not in row:
            raise KeyError(f"dataset column {answer_column!r} missing")
        answer = extract_answer(text, extract, regex)
        if answer is None:
            return 0.0
        return 1.0 if answers_equal(answer, str(row[answer_column]), numeric, case_sensitive) else 0.0

    reward = RewardFunction("exact_match", score=score, doc=build_exact_match.__doc__ or "")
    reward.extract = lambda text: extract_answer(text, extract, regex)  # type: ignore[attr-defined]
    return reward


_MATH_POOL: Any = None


def _math_verify_pair(gold: str, answer: str) -> bool:
    """Runs in the worker process: math-verify with its signal-based timeouts off (we time out outside)."""
    from math_verify import parse, verify

    return bool(verify(parse(gold, parsing_timeout=None), parse(answer, parsing_timeout=None), timeout_seconds=None))


def _math_pool() -> Any:
    global _MATH_POOL
    if _MATH_POOL is None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        _MATH_POOL = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
        atexit.register(_restart_math_pool)  # stop the worker before interpreter teardown, not during it
    return _MATH_POOL


def _restart_math_pool() -> None:
    global _MATH_POOL
    if _MATH_POOL is not None:
        for process in list(getattr(_MATH_POOL, "_processes", {}).values()):
            process.kill()
        _MATH_POOL.shutdown(wait=False, cancel_futures=True)
        _MATH_POOL = None


def math_equal(gold: str, answer: str, timeout_s: float = 5.0) -> bool:
    """math-verify's equivalence (gold first), in a worker process killed past ``timeout_s``.

    math-verify's own timeouts use signal.alarm, which fails off the main thread (the MCP server
    and TRL's async rewards run there), so they are disabled and this limit replaces them.

    >>> math_equal("$\\\\frac{1}{2}$", "0.5")
    True
    """
    from concurrent.futures import TimeoutError as FutureTimeout

    future = _math_pool().submit(_math_verify_pair, gold, answer)
    try:
        return future.result(timeout=timeout_s)
    except FutureTimeout:
        _restart_math_pool()
        raise TimeoutError(f"math-verify took longer than {timeout_s} s") from None


@register("math", roles=("correctness",))
def build_math(
    answer_column: Annotated[str, Param("dataset column holding the gold answer")] = "answer",
    timeout_s: Annotated[float, Param("seconds per comparison; past it the completion scores None")] = 5.0,
) -> RewardFunction:
    """1.0 when math-verify finds the completion's final answer equivalent to the gold answer, else 0.0.

    Resists: hanging the trainer. math-verify's own timeouts use ``signal.alarm``, which fails off the main
    thread (the MCP server, threaded rewards); here they are off and a worker process is killed past
    ``timeout_s``. A timeout is a failure (None, counted in failure_rate), not a zero.

    >>> completions = ["so the answer is $\\\\boxed{\\\\frac{1}{2}}$", "$\\\\boxed{3}$"]
    >>> build_math()(["", ""], completions, answer=["0.5", "0.5"])
    [1.0, 0.0]
    """

    def score(text: str, row: dict[str, Any]) -> float:
        gold = str(row[answer_column])
        return 1.0 if math_equal(gold, text, timeout_s) else 0.0

    return RewardFunction("math", score=score, doc=build_math.__doc__ or "")
