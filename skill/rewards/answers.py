"""Answers as people write them: the number a completion commits to, and when two answers are equal.

Reads thousands separators ("1,000"), currency ("$1,250 dollars"), signs (including the Unicode minus),
decimals, percentages, fractions ("3/4") and LaTeX fractions (``\\frac``, ``\\dfrac``, ``\\tfrac``) inside
``\\boxed{}`` with nested braces. Anything richer (radicals, sets, intervals, symbolic expressions) is left
to math-verify (``skill.rewards.math_workers``). A list of candidates ("17, 18 or 19") is never read as an
answer: it reads as a list, and the rewards refuse to pay for it.

The parent side is bounded on any completion: an untagged answer is looked for in the last ``TAIL_CHARS``
characters, a tagged one longer than ``MAX_ANSWER_CHARS`` is not read as a number, every pattern runs in
linear time (no nested backtracking, one pass for braces) and digit runs past ``MAX_DIGITS`` are not numbers.

Imports only the standard library and ``skill.errors``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import Any

from skill.errors import SkillError

# One number as written. Not inside a word or a decimal ("x2", "1.5.3"); a sign before or after the currency;
# thousands groups of exactly three digits; a fraction a/b only when no third number follows ("11/12/13" is a
# list or a date); never the base of a product, power or variable ("5x", "2^3", "3\sqrt{2}", "2\frac{1}{2}"),
# nor an argument of a LaTeX command ("\sqrt{2}") other than \boxed{} or a set's \{.
_NUMBER_TOKEN = re.compile(
    r"(?<![\w.^])(?:(?<=\\boxed\{)|(?<=\\fbox\{)|(?<=\\\{)|(?<!\{))(?P<sign>[-+\u2212]\s?)?(?P<currency>\\?\$\s?|[\u20ac\u00a3]\s?)?(?P<sign2>[-+\u2212])?"
    r"(?:\\[dt]?frac\s*\{\s*(?P<latex_num>\d+)\s*\}\s*\{\s*(?P<latex_den>\d+)\s*\}"
    r"|\\[dt]?frac(?P<short_num>\d)(?P<short_den>\d)"
    r"|(?P<digits>\d{1,3}(?:,\d{3})+(?![\d,])(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
    r"(?:\s*/\s*(?P<den>\d+)(?![\d.,]|\s*/\s*\d))?)"
    r"(?P<percent>\s?\\?%|\s?percent\b)?"
    r"(?![A-Za-z\d(^_{]|\.\d|\\(?!text|mathrm|mbox|[,;!%)\]}\s]))"
)
_SLASH_CHAIN = re.compile(r"(?<!\d)\d++(?:\s*+/\s*+\d++){2,}")  # possessive: linear on long digit runs
# What may separate two numbers of a list of candidates, once dollars, spaces and \text{} are gone.
_LIST_SEPARATORS = frozenset({",", ";", "or", "and", ",or", ",and", "and/or", "/"})
# Separators a sentence also names operands with ("add 7 and 9, ... = 16"): see lists_candidates' ``ending``.
_OPERAND_SEPARATORS = frozenset({",", ";", "and", ",and"})
# Around a number that is the whole answer: delimiters, \boxed{...}, \text{units}, unit words, "x =".
_IGNORABLE = re.compile(
    r"\\(?:text|mathrm|mbox|textbf)\s*\{[^{}]*\}|\\boxed|\\fbox|\\[()\[\],;! ]|[A-Za-z]+|[{}$\s.,:;!=]"
)
# The innermost tag's content: never scanning past another <answer>, so many open tags cost linear time.
_ANSWER_TAG = re.compile(r"<answer>((?:(?!</?answer>).)*)</answer>", re.DOTALL)
_DIGIT = re.compile(r"\d")
_BOXED_START = re.compile(r"\\(?:boxed|fbox)\s*\{")
_ANCHOR = re.compile(r"\b(?:final\s+answer|answer)\b\s*(?:is|:|=|would\s+be|will\s+be)?", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
EXTRACT_MODES = ("answer_tag", "boxed", "last_number", "regex", "whole")


MAX_DIGITS = 60  # longer digit runs are not answers; reading them exactly would cost more than they are worth
# Where an untagged answer is looked for: the end of the completion. It bounds the work on any completion.
TAIL_CHARS = 4000
MAX_ANSWER_CHARS = 1000  # a tagged answer longer than this is not read as a number or a list


@dataclass(frozen=True)
class Number:
    """A number as read from an answer: its plain text ("-1250", "3/4", "50%") and whether it was a percentage.
    Its exact value is computed on first use (reading a long completion touches many numbers, compares few)."""

    text: str
    percent: bool

    @cached_property
    def value(self) -> Fraction:
        numerator, _, denominator = self.text.rstrip("%").partition("/")
        return Fraction(numerator) / (int(denominator) if denominator else 1)

    def values(self) -> tuple[Fraction, ...]:
        """What it may stand for: 50% is 50 (the question asked for a percent) or 0.5 (it asked for a rate)."""
        return (self.value, self.value / 100) if self.percent else (self.value,)


def _number(match: re.Match[str]) -> Number | None:
    numerator = match["latex_num"] or match["short_num"] or (match["digits"] or "").replace(",", "")
    denominator = match["latex_den"] or match["short_den"] or match["den"]
    if len(numerator) + len(denominator or "") > MAX_DIGITS or (denominator and not denominator.strip("0")):
        return None
    negative = any(sign and sign.strip() in ("-", "\u2212") for sign in (match["sign"], match["sign2"]))
    text = ("-" if negative and numerator.strip("0.") else "") + numerator + (f"/{denominator}" if denominator else "")
    return Number(text + ("%" if match["percent"] else ""), bool(match["percent"]))


def numbers_in(text: str) -> list[tuple[re.Match[str], Number]]:
    """Every number written in a text, in order, with where it stands.

    >>> [number.text for _, number in numbers_in("Paid $1,250 for 3/4 of it, -7 left, 50% off, \\\\frac{1}{2}")]
    ['1250', '3/4', '-7', '50%', '1/2']
    """
    found = []
    for match in _NUMBER_TOKEN.finditer(text):
        number = _number(match)
        if number is not None:
            found.append((match, number))
    return found


def read_number(answer: str) -> Number | None:
    """The answer as one number, or None when it is anything else (an expression, a list, a word).

    >>> read_number("$1,250 dollars").text, read_number("\\\\boxed{\\\\dfrac{3}{4}}").value, read_number("x = -7.").text
    ('1250', Fraction(3, 4), '-7')
    >>> read_number("17, 18 or 19"), read_number("5x"), read_number("3\\\\sqrt{2}"), read_number("1,2")
    (None, None, None, None)
    """
    found = numbers_in(answer) if len(answer) <= MAX_ANSWER_CHARS else []
    if len(found) != 1:
        return None
    match, number = found[0]
    rest = answer[: match.start()] + " " + answer[match.end() :]
    return number if not _IGNORABLE.sub("", rest) else None


def lists_candidates(answer: str, ending: bool = False) -> bool:
    """True when the answer offers several different numbers joined as alternatives or a list. ``ending``: for a
    reading that takes the last number, a list joined by "," or "and" counts only where it holds that number
    ("add 7 and 9: 7 + 9 = 16" names operands; "It is 12 and 15." lists); alternatives ("or", "/") always count.

    >>> lists_candidates("17, 18 or 19"), lists_candidates("$17, 18$ or $19$"), lists_candidates("11/12/13")
    (True, True, True)
    >>> lists_candidates("1,000"), lists_candidates("3/4"), lists_candidates("18 or 18"), lists_candidates("4 + 5 = 9")
    (False, False, False, False)
    >>> lists_candidates("12 and 3 are 15."), lists_candidates("12 and 3 are 15.", ending=True)
    (True, False)
    >>> lists_candidates("It is 12 and 15.", ending=True), lists_candidates("Either 3 or 4, not 5", ending=True)
    (True, True)
    """
    answer = answer[-TAIL_CHARS:]
    if _SLASH_CHAIN.search(answer):
        return True
    found = numbers_in(answer)
    for index, ((before, first), (after, second)) in enumerate(zip(found, found[1:], strict=False)):
        gap = re.sub(r"[\s$]|\\text\s*\{|\\,|[{}]|\\", "", answer[before.end() : after.start()]).casefold()
        if gap not in _LIST_SEPARATORS or first.text == second.text or first.value == second.value:
            continue
        if ending and gap in _OPERAND_SEPARATORS and index + 2 < len(found):
            continue  # more numbers follow: operands of what comes after, not candidates for the last number
        return True
    return False


def boxed_contents(text: str) -> list[str]:
    """What every ``\\boxed{...}`` (or ``\\fbox``) holds, braces matched to any depth.

    >>> boxed_contents("so $\\\\boxed{\\\\frac{\\\\sqrt{2}}{2}}$ and \\\\boxed{3}")
    ['\\\\frac{\\\\sqrt{2}}{2}', '3']
    """
    starts = {match.end() - 1: match.end() for match in _BOXED_START.finditer(text)}  # its "{" -> content start
    if not starts:
        return []
    found: list[str] = []
    open_braces: list[int | None] = []  # per open "{": where its boxed content starts, None for other braces
    inside = 0  # a \boxed inside another is part of the outer one's content: the contents never overlap
    for position, character in enumerate(text):  # one pass, so many unclosed \boxed{ cost linear time
        if character == "{":
            content_start = starts.get(position) if not inside else None
            inside += content_start is not None
            open_braces.append(content_start)
        elif character == "}" and open_braces:
            content_start = open_braces.pop()
            if content_start is not None:
                inside -= 1
                found.append(text[content_start:position].strip())
    return found


def _sentences_with_numbers(text: str) -> list[str]:
    return [sentence for sentence in _SENTENCE_END.split(text) if _DIGIT.search(sentence)]


def final_statement(text: str) -> str:
    """Where an untagged completion states its answer: the sentence after the last "answer is" / "answer:",
    else the last sentence with a number in it, else the whole text.

    >>> final_statement("3 + 4 = 7 apples, and 2 more. So the answer is 9. Nice.")
    ' 9.'
    >>> final_statement("I tried 17. Then 18, or 19.\\nDone")
    'Then 18, or 19.'
    """
    text = text[-TAIL_CHARS:]
    anchors = list(_ANCHOR.finditer(text))
    if anchors:
        tail = text[anchors[-1].end() :]
        first = next(iter(_sentences_with_numbers(tail)), None)
        if first is not None:
            return tail[: tail.index(first) + len(first)]
    sentences = _sentences_with_numbers(text)
    return sentences[-1] if sentences else text


def _unique(answers: list[str]) -> str | None:
    distinct = {answer.strip() for answer in answers}
    return distinct.pop() if len(distinct) == 1 else None


@dataclass(frozen=True)
class CommittedAnswer:
    """What a completion commits to: the answer text, and whether a tag (``<answer>``, ``\\boxed``, ``####``)
    marked it (else it is the completion's final statement)."""

    text: str
    tagged: bool


def committed_answer(text: str) -> CommittedAnswer | None:
    """The tagged answer when there is one (``<answer>``, then ``\\boxed{}``, then GSM8K's ``####``), else the
    final statement; None when the tags disagree or the completion is empty.

    >>> committed_answer("work... <answer>18</answer>"), committed_answer("\\\\boxed{17} or \\\\boxed{18}")
    (CommittedAnswer(text='18', tagged=True), None)
    >>> committed_answer("so the total is 72\\n#### 72")
    CommittedAnswer(text='72', tagged=True)
    """
    if "<answer>" in text:
        answer = _unique(_ANSWER_TAG.findall(text))
        return CommittedAnswer(answer, True) if answer else None
    boxed = boxed_contents(text)
    if boxed:
        answer = _unique(boxed)
        return CommittedAnswer(answer, True) if answer else None
    if "####" in text:
        answer = text.rsplit("####", 1)[1].strip()
        return CommittedAnswer(answer, True) if answer else None
    statement = final_statement(text).strip()
    return CommittedAnswer(statement, False) if statement else None


# An arithmetic expression a prompt may pose: numbers joined by operators ("2 + 14", "3 x 4 - 1", "12/4").
_EXPRESSION = re.compile(r"\d+(?:\.\d+)?(?:\s*[-+*/×÷^x]\s*\d+(?:\.\d+)?)+")


def prompt_text(prompt: Any) -> str:
    """A prompt as text: the string, or the contents of its chat messages joined.

    >>> prompt_text([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2 + 14?"}])
    'Be brief.\\nWhat is 2 + 14?'
    """
    if isinstance(prompt, list):
        return "\n".join(str(m.get("content", "")) for m in prompt if isinstance(m, dict))
    return "" if prompt is None else str(prompt)


def posed_expressions(prompt: str) -> list[str]:
    """The arithmetic expressions a prompt poses, as written.

    >>> posed_expressions("What is 2 + 14? Then 3 x 4.")
    ['2 + 14', '3 x 4']
    """
    return _EXPRESSION.findall(prompt)


def restates_prompt_expression(answer: str, prompt: str) -> bool:
    """Whether an answer ends on an arithmetic expression the prompt already poses, without its value: "2 + 14"
    or "The number is just 2 + 14." for "What is 2 + 14?" (a verifier that evaluates expressions would pay it),
    not "2 + 14 = 16".

    >>> prompt = "What is 2 + 14?"
    >>> [restates_prompt_expression(a, prompt) for a in ("2 + 14", "The number is just 2+14.", "2 + 14 = 16", "16")]
    [True, True, False, False]
    """
    posed = {re.sub(r"\s+", "", match) for match in posed_expressions(prompt)}
    if not posed:
        return False
    written = _EXPRESSION.findall(answer)
    if not written or re.sub(r"\s+", "", written[-1]) not in posed:
        return False
    tail = answer[answer.rindex(written[-1]) + len(written[-1]) :]
    return not _DIGIT.search(tail)  # nothing after it states a value


def last_number(text: str) -> str | None:
    """The last number of the text (after GSM8K's ``####`` when there is one), written plainly; None when
    there is none, or when the last sentence with a number or the one after "answer is" lists candidates.

    >>> last_number("The total is 1,000."), last_number("$1,250 dollars"), last_number("so 3/4"), last_number("#### 72")
    ('1000', '1250', '3/4', '72')
    >>> last_number("maybe 11, 12 or 13"), last_number("The answer is 18 or 19. Since 3 + 4 = 7")
    (None, None)
    """
    text = (text.rsplit("####", 1)[1] if "####" in text else text)[-TAIL_CHARS:]
    sentences = _sentences_with_numbers(text)
    if (sentences and lists_candidates(sentences[-1], ending=True)) or lists_candidates(final_statement(text), True):
        return None
    found = numbers_in(text)
    return found[-1][1].text if found else None


def extract_answer(text: str, mode: str = "answer_tag", regex: str | None = None) -> str | None:
    """The answer a completion commits to, or None when it commits to none (or to several).

    >>> extract_answer("so <answer> 12 </answer>")
    '12'
    >>> extract_answer("<answer>3</answer> no, <answer>4</answer>") is None  # two different answers
    True
    >>> extract_answer("It is 12.", "last_number"), extract_answer("maybe 11, 12 or 13", "last_number")
    ('12', None)
    >>> extract_answer("so $\\\\boxed{\\\\frac{1}{2}}$", "boxed")
    '\\\\frac{1}{2}'
    """
    if mode == "answer_tag":
        return _unique(_ANSWER_TAG.findall(text))
    if mode == "boxed":
        return _unique(boxed_contents(text))
    if mode == "last_number":
        return last_number(text)
    if mode == "regex":
        matches = re.findall(regex or "", text, re.DOTALL)
        if not matches:
            return None
        last = matches[-1]
        return (last[0] if isinstance(last, tuple) else last).strip()
    if mode == "whole":
        return text.strip()
    raise SkillError(f"Unknown extract mode {mode!r}.", f"Send one of: {', '.join(EXTRACT_MODES)}.")


def normalise_answer(answer: str, case_sensitive: bool = False) -> str:
    """Collapse whitespace, drop a trailing period and thousands separators, fold case.

    >>> normalise_answer("  1,000.  "), normalise_answer("Paris")
    ('1000', 'paris')
    """
    text = " ".join(answer.split()).rstrip(".")
    if re.fullmatch(r"-?\d{1,3}(,\d{3})+(\.\d+)?", text):
        text = text.replace(",", "")
    return text if case_sensitive else text.casefold()


def numbers_equal(given: Number, gold: Number) -> bool:
    """Equal values (to a relative 1e-9), a percentage matching either its number or its rate.

    >>> numbers_equal(read_number("50%"), read_number("0.5")), numbers_equal(read_number("18.0"), read_number("18"))
    (True, True)
    """
    return any(
        abs(mine - theirs) <= Fraction(1, 10**9) * max(1, abs(theirs))
        for mine in given.values()
        for theirs in gold.values()
    )


def answers_equal(given: str, gold: str, numeric: bool = True, case_sensitive: bool = False) -> bool:
    """Equal after normalisation, or as numbers when both read as one number.

    >>> answers_equal("12.0", "12"), answers_equal("twelve", "12"), answers_equal("$1,250", "1250")
    (True, False, True)
    >>> answers_equal("\\\\frac{3}{4}", "0.75"), answers_equal("17, 18 or 19", "18")
    (True, False)
    """
    if normalise_answer(given, case_sensitive) == normalise_answer(gold, case_sensitive):
        return True
    if numeric:
        mine, theirs = read_number(given), read_number(gold)
        return mine is not None and theirs is not None and numbers_equal(mine, theirs)
    return False
