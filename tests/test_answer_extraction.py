"""Answers as people write them: what ``exact_match`` extracts from real-world answer strings and whether it
equals the gold, what ``math`` credits (never a list of candidates), and that the text rewards pickle."""

from __future__ import annotations

import pickle
import subprocess
import sys

import pytest

from skill.rewards.answers import committed_answer, extract_answer, read_number
from skill.rewards.registry import build_reward_function
from skill.rewards.spec import RewardSpec
from skill.rewards.text import answers_equal

# (completion, extract mode, expected extraction, gold, equal to the gold?)
EXTRACTION_TABLE = [
    # GSM8K: the answer after ####, thousands separators.
    ("Natalia sold 48/2 = 24 clips in May.\nShe sold 48+24 = 72 clips.\n#### 72", "last_number", "72", "72", True),
    ("#### 1,000", "last_number", "1000", "1000", True),
    ("#### -3", "last_number", "-3", "-3", True),
    ("The total is 1,000.", "last_number", "1000", "1000", True),
    ("There were 1,234,567 people at the game.", "last_number", "1234567", "1234567", True),
    # Currency, before or after, escaped for LaTeX, with a sign.
    ("The answer is $1,250.", "last_number", "1250", "1250", True),
    ("$1,250 dollars", "last_number", "1250", "1250", True),
    ("He earns \\$12.50 per hour.", "last_number", "12.50", "12.5", True),
    ("It costs €5.", "last_number", "5", "5", True),
    ("She lost -$5 on the deal.", "last_number", "-5", "-5", True),
    ("Final answer: $\\$1,000$", "last_number", "1000", "1000", True),
    # Signs and decimals.
    ("-7", "last_number", "-7", "-7", True),
    ("The temperature fell to \u22127 degrees.", "last_number", "-7", "-7", True),
    ("The result is +7.", "last_number", "7", "7", True),
    ("12.50", "last_number", "12.50", "12.5", True),
    ("18.0", "last_number", "18.0", "18", True),
    ("Answer: 42", "last_number", "42", "42.0", True),
    ("x = 5", "last_number", "5", "5", True),
    ("18.5", "last_number", "18.5", "18", False),
    # Percentages: the number or the rate.
    ("50%", "last_number", "50%", "50", True),
    ("The discount is 50%.", "last_number", "50%", "0.5", True),
    ("So it rose by 50\\%.", "last_number", "50%", "50", True),
    ("50%", "last_number", "50%", "5", False),
    # Fractions, plain and LaTeX.
    ("so 3/4", "last_number", "3/4", "0.75", True),
    ("She ate 3/4 of the pie", "last_number", "3/4", "3/4", True),
    ("\\(\\frac{7}{2}\\)", "last_number", "7/2", "3.5", True),
    ("\\frac34", "last_number", "3/4", "0.75", True),
    ("2^{10} = 1024", "last_number", "1024", "1024", True),
    # Chatty model outputs: the final statement decides.
    ("I think 17. No wait, 18", "last_number", "18", "18", True),
    # Operands named before the result are not candidates (the embedded model's own words, from the demo's reads).
    ("Listen: 12 and 3 are 15.", "last_number", "15", "15", True),
    ("To add 7 and 9, the simple equation is 7 + 9 = 16.", "last_number", "16", "16", True),
    ("It is 15 and 16.", "last_number", None, "16", False),  # a list that ends the answer still is one
    ("3 + 4 = 7 apples, and 2 more. So the answer is 9. Nice.", "last_number", "9", "9", True),
    ("I computed 2 + 2 = 4.\n\n**Final Answer:** 4", "last_number", "4", "4", True),
    ("Answer: 5 + 7. So 12", "last_number", "12", "12", True),  # the last number, not the anchored one
    ("The answer is 18 or 19. Since 3 + 4 = 7", "last_number", None, "7", False),  # but a listed answer: none
    # Lists of candidates and things that are not one number: nothing extracted.
    ("It is 11, 12 or 13", "last_number", None, "12", False),
    ("The answer is 17, 18, or 19.", "last_number", None, "18", False),
    ("Either 18 or 19.", "last_number", None, "18", False),
    ("11/12/13", "last_number", None, "12", False),
    ("The ratio is 1,2", "last_number", None, "12", False),
    ("1,0000", "last_number", None, "10000", False),
    ("The area is 3\\sqrt{2}", "last_number", None, "3", False),
    ("Total: 3.5\\times 10^3", "last_number", None, "3500", False),
    ("twelve", "last_number", None, "12", False),
    # Tagged answers.
    ("<answer>18</answer>", "answer_tag", "18", "18", True),
    ("Work... <answer> 1,000 </answer>", "answer_tag", "1,000", "1000", True),
    ("<answer>$1,250</answer>", "answer_tag", "$1,250", "1250", True),
    ("<answer>50%</answer>", "answer_tag", "50%", "0.5", True),
    ("<answer>\\frac{1}{2}</answer>", "answer_tag", "\\frac{1}{2}", "1/2", True),
    ("<answer>17, 18 or 19</answer>", "answer_tag", "17, 18 or 19", "18", False),
    ("<answer>3</answer> no, <answer>4</answer>", "answer_tag", None, "4", False),
    ("<answer> 1,2 </answer>", "answer_tag", "1,2", "12", False),
    # MATH style: \boxed{} with nested braces.
    ("so $\\boxed{\\frac{1}{2}}$", "boxed", "\\frac{1}{2}", "0.5", True),
    ("\\boxed{\\dfrac{3}{4}}", "boxed", "\\dfrac{3}{4}", "0.75", True),
    ("The answer is \\boxed{-\\frac{1}{2}}.", "boxed", "-\\frac{1}{2}", "-0.5", True),
    ("$\\boxed{\\frac{\\sqrt{2}}{2}}$", "boxed", "\\frac{\\sqrt{2}}{2}", "\\frac{\\sqrt{2}}{2}", True),
    ("\\boxed{12} dollars", "boxed", "12", "12.00", True),
    ("\\boxed{17} or \\boxed{18}", "boxed", None, "18", False),
    # Free text compared whole.
    ("  Paris. ", "whole", "Paris.", "paris", True),
]


def test_the_table_is_large_enough():
    assert len(EXTRACTION_TABLE) >= 40


@pytest.mark.parametrize(("completion", "mode", "expected", "gold", "equal"), EXTRACTION_TABLE)
def test_extraction_and_equality(completion, mode, expected, gold, equal):
    extracted = extract_answer(completion, mode)
    assert extracted == expected
    assert (extracted is not None and answers_equal(extracted, gold)) is equal
    function = build_reward_function(RewardSpec(name="exact_match", role="correctness", params={"extract": mode}))
    assert function([""], [completion], answer=[gold]) == [1.0 if equal else 0.0]


def test_numbers_read_exactly():
    assert read_number("0.1").value * 3 == read_number("0.3").value  # exact, not floating point
    assert read_number("1/0") is None and read_number("") is None
    assert not answers_equal("0.3333", "1/3") and answers_equal("0.3333333333333", "1/3")


ADVERSARIAL = {
    "thousands of commas": "1," * 100_000,
    "dollar signs": "$" * 200_000,
    "unclosed boxes": "\\boxed{" * 40_000,
    "nested boxes": "\\boxed{" * 20_000 + "5" + "}" * 20_000,
    "open answer tags": "<answer>" * 25_000,
    "a slash chain": "1/" * 100_000,
    "one long digit run": "1234567890" * 20_000,
    "alternatives": "1 or 2 or " * 20_000,
    "minus signs": "-" * 200_000 + "5",
}


@pytest.mark.parametrize("completion", ADVERSARIAL.values(), ids=list(ADVERSARIAL))
def test_reading_a_crafted_completion_stays_linear(completion):
    """Each of these took from seconds to hours with nested backtracking or a scan per open brace; read in
    linear time they take well under a second. The bound is loose on purpose (a busy machine)."""
    import time

    started = time.perf_counter()
    for mode in ("answer_tag", "boxed", "last_number"):
        extract_answer(completion, mode)
    committed_answer(completion)
    read_number(completion)
    assert time.perf_counter() - started < 20.0


# (gold, completion, math score): the tagged answer when there is one; never a list of candidates.
MATH_TABLE = [
    ("18", "<answer>18</answer>", 1.0),
    ("18", "18.0", 1.0),
    ("18", "I checked twice. The answer is 18.", 1.0),
    ("18", "17, 18 or 19", 0.0),
    ("18", "Final answer: 18 or 19", 0.0),
    ("18", "The answer is 18 or 19. Because 3 + 4 = 7", 0.0),
    ("18", "<answer>17, 18 or 19</answer>", 0.0),
    ("18", "\\boxed{17} or \\boxed{18}", 0.0),
    ("18", "$\\boxed{17, 18, 19}$", 0.0),
    ("18", "<answer>19</answer> though 18 is close", 0.0),
    ("1000", "#### 1,000", 1.0),
    ("1250", "The answer is $1,250.", 1.0),
    ("0.75", "so 3/4", 1.0),
    ("$\\frac{1}{2}$", "$\\boxed{0.5}$", 1.0),
    ("$\\frac{\\sqrt{2}}{2}$", "\\boxed{\\frac{1}{\\sqrt{2}}}", 1.0),
    ("x^2+1", "<answer>1 + x^2</answer>", 1.0),
    ("x^2+1", "<answer>x^2 - 1</answer>", 0.0),
    ("(3, -1)", "\\boxed{(3, -1)}", 1.0),
    ("(3, -1)", "\\boxed{(-1, 3)}", 0.0),
    ("\\{1, 2\\}", "<answer>2, 1</answer>", 1.0),  # the gold is a list: a list may match it
    ("\\infty", "\\boxed{\\infty}", 1.0),
    ("72", "48/2 = 24 clips in May, 48+24 = 72 clips.\n#### 72", 1.0),
    ("72", "", 0.0),
]


@pytest.mark.parametrize(("gold", "completion", "expected"), MATH_TABLE)
def test_math_reads_the_committed_answer(gold, completion, expected):
    function = build_reward_function(RewardSpec(name="math", role="correctness"))
    assert function([""], [completion], answer=[gold]) == [expected]


TEXT_REWARDS = [
    (RewardSpec(name="format", role="format", params={"pattern": "answer_tag"}), ["<answer>1</answer>", "1"]),
    (RewardSpec(name="exact_match", role="correctness", params={"extract": "last_number"}), ["It is 1,000.", "7"]),
    (RewardSpec(name="math", role="correctness"), ["$\\boxed{\\frac{2000}{2}}$", "\\boxed{999}"]),
]


@pytest.mark.parametrize(("spec", "completions"), TEXT_REWARDS, ids=lambda value: getattr(value, "name", ""))
def test_text_rewards_pickle_and_score_the_same_in_another_process(spec, completions):
    function = build_reward_function(spec)
    expected = function(["", ""], completions, answer=["1000", "1000"])
    assert expected in ([1.0, 0.0], [1.0, 1.0])
    again = pickle.loads(pickle.dumps(function))
    assert again(["", ""], completions, answer=["1000", "1000"]) == expected
    if spec.name == "exact_match":
        assert again.extract("It is 1,000.") == "1000"
    # A spawned process (as TRL's rollout workers and spawned trainers receive rewards) scores the same.
    script = (
        "import pickle, sys; function = pickle.load(sys.stdin.buffer); "
        f"print(function(['', ''], {completions!r}, answer=['1000', '1000']))"
    )
    payload = pickle.dumps(function)
    done = subprocess.run([sys.executable, "-c", script], input=payload, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert done.stdout.decode().strip() == repr(expected)
