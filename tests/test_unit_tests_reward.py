"""The ``unit_tests`` reward: scoring, test formats, assert conversion, TRL's contract, the benchmark."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from skill.errors import SkillError
from skill.rewards.code.cases import UnconvertedAssert, convert_asserts, parse_tests
from skill.rewards.code.grading import MAX_VALUES, read_results
from skill.rewards.code.unit_tests import build_unit_tests, extract_code, same_value
from skill.rewards.registry import build_reward_function
from skill.rewards.spec import RewardSpec

ADD = "def add(a, b):\n    return a + b\n"
ADD_TESTS = ["assert add(1, 2) == 3", "assert add(2, 2) == 4", "assert add(0, 5) == 5", "assert add(-1, 1) == 0"]
SUM_TESTS = [{"input": "1 2\n", "output": "3\n"}, {"input": "5 5", "output": "10"}]
SUM = "a, b = map(int, input().split())\nprint(a + b)"


def scores(completions, tests, **params):
    reward = build_unit_tests(**params)
    return reward(["p"] * len(completions), completions, tests=[tests] * len(completions)), reward


def test_right_wrong_malformed_empty_and_partial():
    completions = [
        f"Here:\n```python\n{ADD}```",  # right
        "def add(a, b):\n    return a * b",  # wrong: 2 * 2 == 4 only
        "def add(a, b) return a + b",  # syntax error
        "",  # empty
        "def add(a, b):\n    return a + b if a >= 0 else 99",  # partial: fails only add(-1, 1)
    ]
    values, reward = scores(completions, ADD_TESTS)
    assert values == [1.0, 0.25, 0.0, 0.0, 0.75]
    assert reward.failures == 0


def test_binary_pays_only_when_every_test_passes():
    values, _ = scores([ADD, "def add(a, b):\n    return a + b if a >= 0 else 99"], ADD_TESTS, binary=True)
    assert values == [1.0, 0.0]


def test_stdin_stdout_programs():
    wrong = "a, b = map(int, input().split())\nprint(a * b)"  # 1*2 != 3, 5*5 != 10
    crash = "print(3)\nraise SystemExit(1)"  # right output for case 1, but a non-zero exit fails it
    values, _ = scores([SUM, wrong, crash, "print(3)"], SUM_TESTS)
    assert values == [1.0, 0.0, 0.0, 0.5]


def test_stdin_stdout_output_is_compared_line_by_line_with_whitespace_collapsed():
    tests = [{"input": "", "output": "1 2\n3"}]
    values, _ = scores(["print(' 1   2 ')\nprint(3)\nprint()", "print('1 2 3')"], tests)
    assert values == [1.0, 0.0]


def test_function_call_tests_are_type_aware():
    tests = [{"call": "f()", "expected": True}, {"call": "g()", "expected": [1, 2]}, {"call": "h()", "expected": 2}]
    program = "def f(): return True\ndef g(): return (1, 2)\ndef h(): return 2.0"
    liar = "def f(): return 1\ndef g(): return '[1, 2]'\ndef h(): return '2'"
    values, _ = scores([program, liar], tests)
    assert values == [1.0, 0.0]


def test_asserts_keep_python_types_tuples_and_tolerance():
    tests = [
        "assert pair() == (1, 2)",
        "assert abs(third() - 0.3333) < 1e-3",
        "assert is_even(4)",
        "assert not is_even(3)",
        "assert keys() == {1: 'a'}",
    ]
    right = "pair = lambda: (1, 2)\nthird = lambda: 1 / 3\nis_even = lambda n: n % 2 == 0\nkeys = lambda: {1: 'a'}"
    wrong = "pair = lambda: [1, 2]\nthird = lambda: 0.3\nis_even = lambda n: n % 2\nkeys = lambda: {'1': 'a'}"
    values, _ = scores([right, wrong], tests)
    assert values == [1.0, 0.0]


def test_assert_conversion_and_refusal():
    cases = convert_asserts("assert add(1, 2) == 3, 'message'\nassert 4 == add(2, 2)\nassert f(x=1) is None")
    assert [(case.call, case.expected) for case in cases] == [("add(1, 2)", 3), ("add(2, 2)", 4), ("f(x=1)", None)]
    cases = convert_asserts("assert add(1, 2) != 4\nassert add(1, 2) == add(2, 1)\nassert True, 'HumanEval'")
    assert [(case.call, case.truthy) for case in cases] == [("add(1, 2) != 4", True), ("add(1, 2) == add(2, 1)", True)]
    for source in ["for i in range(3):\n    assert f(i)", "while True:\n    assert f(1)"]:
        with pytest.raises(UnconvertedAssert, match="allow_unconverted_asserts"):
            convert_asserts(source)


def test_unconvertible_asserts_score_none_by_default_and_run_in_the_child_only_when_allowed():
    tests = ["assert add(1, 2) == 3", "for b in (1, 2):\n    assert add(1, b) != 4"]
    values, reward = scores([ADD], tests)
    assert values == [None] and reward.failures == 1 and "UnconvertedAssert" in reward.last_errors[0]
    assert reward.hackable is False
    values, reward = scores([ADD, "def add(a, b):\n    return 4"], tests, allow_unconverted_asserts=True)
    assert values == [1.0, 0.0] and reward.hackable is True


def test_humaneval_check_function_uses_the_entry_point():
    test = "METADATA = {}\n\ndef check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(0, 0) == 0\n"
    reward = build_unit_tests(tests_column="test")
    assert reward(["p"], [ADD], test=[test], entry_point=["add"]) == [1.0]
    assert reward(["p"], [ADD], test=[test]) == [None]  # no entry point: refused, counted


def test_code_extraction():
    assert extract_code("```python\nprint(1)\n```\ntext\n```python\nprint(2)\n```") == "print(2)\n"
    assert extract_code("```\nprint(3)\n```") == "print(3)\n"
    assert extract_code("```python\nprint(4)") == "print(4)"  # unclosed: a truncated generation
    assert extract_code("print(5)") == "print(5)"


def test_test_formats_and_bad_tests():
    assert len(parse_tests({"inputs": ["1", "2"], "outputs": ["1", "4"]})) == 2
    assert parse_tests('["assert f(1) == 2"]')[0].call == "f(1)"
    assert parse_tests([{"input": ["1 2", "3"], "output": 3}])[0].stdin == "1 2\n3"
    for bad in [[], 7, [{"x": 1}], ["assert f(1) == 1", {"call": "f(1)", "expected": 1}]]:
        with pytest.raises(SkillError):
            parse_tests(bad)
    reward = build_unit_tests()
    assert reward(["p", "p"], [ADD, ADD], tests=[ADD_TESTS, "not python ("]) == [1.0, None]
    assert reward(["p"], [ADD]) == [None]  # no tests column
    assert reward(["p"], [ADD], tests=["x = 1"]) == [None]  # no assert in it
    with pytest.raises(SkillError):
        build_unit_tests(timeout_s=0)


def test_same_value():
    assert same_value(True, True) and not same_value(1, True) and not same_value(True, 1)
    assert same_value({"a": (1,)}, {"a": [1]}, from_json=True) and not same_value({"a": (1,)}, {"a": [1]})
    assert same_value(0.30000001, 0.3, tolerance=1e-6) and not same_value(float("nan"), 0.3, tolerance=1.0)
    assert same_value({1, 2}, {2, 1}) and not same_value("1", 1)


def test_conversational_completions_and_trl_contract():
    metrics = {}
    reward = build_reward_function(RewardSpec(name="unit_tests", role="correctness"))
    completions = [[{"role": "assistant", "content": f"```python\n{ADD}```"}], [{"role": "assistant", "content": ""}]]
    values = reward(
        prompts=[[{"role": "user", "content": "write add"}]] * 3,
        completions=[*completions, completions[0]],
        completion_ids=None,
        log_metric=lambda key, value: metrics.__setitem__(key, value),
        trainer_state=None,
        log_extra=None,
        tests=[ADD_TESTS, ADD_TESTS, "for i in range(3):\n    assert add(i, 0) == i"],
    )
    assert values == [1.0, 0.0, None]
    assert metrics == {"rewards/unit_tests/failure_rate": pytest.approx(1 / 3)}
    assert reward.__name__ == "unit_tests"


def test_completions_run_in_parallel():
    import time

    sleepy = "import time\ntime.sleep(0.5)\ndef add(a, b):\n    return a + b"
    reward = build_unit_tests(workers=4)
    start = time.monotonic()
    assert reward(["p"] * 4, [sleepy] * 4, tests=[ADD_TESTS[:1]] * 4) == [1.0] * 4
    assert time.monotonic() - start < 2.0  # one after another, four half-second programs sleep 2 s alone


def test_throughput_benchmark_measures_both_sides():
    spec = importlib.util.spec_from_file_location(
        "sandbox_throughput", Path(__file__).resolve().parent.parent / "bench" / "sandbox_throughput.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = module.measure(programs=4)
    assert result["executions"] == 12
    assert result["sandboxed_executions_per_s"] > 0 and result["bare_ceiling_per_s"] > 0
    assert result["ratio"] == pytest.approx(result["sandboxed_executions_per_s"] / result["bare_ceiling_per_s"])


def test_output_with_unicode_line_separators_survives_the_report():
    values, _ = scores(["print('a\\u2028b\\x85c')"], [{"input": "", "output": "a\u2028b\x85c"}])
    assert values == [1.0]


def test_the_reward_pickles_and_scores_the_same_after():
    import pickle

    reward = build_unit_tests(binary=True, timeout_s=3.0, setup_columns=["test_setup_code"])
    restored = pickle.loads(pickle.dumps(reward))
    completions = [ADD, "def add(a, b):\n    return a * b"]
    before = reward(["p", "p"], completions, tests=[ADD_TESTS] * 2)
    assert restored(["p", "p"], completions, tests=[ADD_TESTS] * 2) == before == [1.0, 0.0]
    assert restored.__name__ == "unit_tests" and restored.scored == 2


def test_public_formats_codecontests_apps_mbpp_humaneval():
    codecontests = {"input": ["1 2\n", "5 5\n"], "output": ["3\n", "10\n"]}
    apps = {"inputs": ["1 2\n", "5 5\n"], "outputs": ["3\n", "10\n"]}
    values, _ = scores([SUM], codecontests)
    assert values == [1.0] and scores([SUM], apps)[0] == [1.0]
    mbpp_row = {
        "test_list": ["assert math.isclose(area(1), 3.14159, rel_tol=1e-4)", "assert round(area(2), 2) == 12.57"],
        "test_setup_code": "",
        "test_imports": ["import math"],
    }
    reward = build_unit_tests(tests_column="test_list")
    right = "def area(r):\n    return 3.141592653589793 * r * r"
    assert reward(["p"], [right], **{key: [value] for key, value in mbpp_row.items()}) == [1.0]
    calls = [{"call": "near(area(1))", "expected": True}]  # {"call", "expected"} tests use the setup too
    setup = "def near(x):\n    return abs(x - 3.14159) < 1e-4"
    values = build_unit_tests()(
        ["p"] * 2, [right, "area = lambda r: 3"], tests=[calls] * 2, test_setup_code=[setup] * 2
    )
    assert values == [1.0, 0.0]
    humaneval = "\n\nMETADATA = {}\n\n\ndef check(candidate):\n    assert candidate([1, 2]) == 3\n"
    reward = build_unit_tests(tests_column="test")
    assert reward(["p"], ["def total(xs):\n    return sum(xs)"], test=[humaneval], entry_point=["total"]) == [1.0]


def test_name_resolution_keeps_builtins_and_modules_and_takes_only_the_functions_under_test():
    from skill.rewards.code.cases import parse_suite

    suite = parse_suite(["assert sorted(pairs(3)) == [1, 2]", "assert first(string.ascii_lowercase) == 'a'"])
    assert suite.names == ["first", "pairs"] and suite.modules == ["string"]
    assert parse_suite(["assert max(3) == 3"], entry_point="max").names == ["max"]  # the entry point wins
    with pytest.raises(SkillError, match="setup does not parse"):
        parse_suite(["assert f(1) == 1"], setup="def (")
    with pytest.raises(SkillError, match="setup_columns"):
        build_unit_tests(setup_columns="test_setup_code")


@pytest.mark.slow
def test_worst_case_grading_benchmark_stays_under_the_timeout():
    spec = importlib.util.spec_from_file_location(
        "grading_worst_case", Path(__file__).resolve().parent.parent / "bench" / "grading_worst_case.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = module.measure(cap=4 << 20)  # a quarter of the cap: the shapes, not the figure
    assert result["rows"] and all(seconds < result["timeout_s"] for seconds in result["rows"].values())
    assert any("small_floats" in name for name in result["rows"]) and result["worst_peak_mib"] < 200


def test_a_report_of_many_scalars_is_not_parsed():
    # 16 MiB of "1.5, " would be 3.4 million floats parsed in the parent: past MAX_VALUES the record fails.
    line = '{"i": 0, "values": [[' + ", ".join(["1.5"] * (MAX_VALUES + 1)) + "]]}"
    assert read_results("M" + line, "M", 1) == [None]
    assert read_results("M" + line.replace(", 1.5" * 8, "", 1), "M", 1)[0] is not None  # just under: parsed


def test_comprehensions_gather_candidate_values_but_never_compare_beside_it():
    square = "def sq(x):\n    return x * x"
    values, _ = scores([square, "def sq(x):\n    return x"], ["assert [sq(x) for x in range(3)] == [0, 1, 4]"])
    assert values == [1.0, 0.0]
    values, _ = scores([square], ["assert sorted(sq(x) for x in (2, 1)) == [1, 4]", "assert 4 in [sq(2)]"])
    assert values == [1.0]
    values, reward = scores([square], ["assert all(sq(x) == x * x for x in range(3))"])  # a verdict: forgeable
    assert values == [None] and "Gather the values" in reward.last_errors[0]
