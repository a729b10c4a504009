"""The reward library: right, wrong, malformed, empty and adversarial completions for each reward;
the registry's rules; and TRL's contract in a real GRPOTrainer step."""

from __future__ import annotations

import inspect
import math

import pytest

from skill.errors import SkillError
from skill.rewards.composite import check_composite
from skill.rewards.registry import build_reward_function, build_reward_functions, load_library
from skill.rewards.spec import RewardSpec


def reward(name: str, role: str = "correctness", **params):
    return build_reward_function(RewardSpec(name=name, role=role, params=params))


def scores(function, completions, **columns):
    return function([""] * len(completions), completions, **columns)


class TestFormat:
    def test_number(self):
        got = scores(reward("format", "format", pattern="number"), ["12", " -3.5\n", "12 apples", "", "1 2"])
        assert got == [1.0, 1.0, 0.0, 0.0, 0.0]

    def test_think_answer_is_strict(self):
        function = reward("format", "format", pattern="think_answer")
        good = "<think>add them</think>\n<answer>7</answer>"
        bad = [
            "<answer>7</answer>",  # no reasoning section
            "<think>x</think><answer></answer>",  # empty answer
            "<think>x</think><answer>7</answer><answer>8</answer>",  # repeated block
            "<think>x</think><answer>7</answer> and more",  # trailing junk
            "<think><answer>7</answer></think><answer>7</answer>",  # answer inside the reasoning
        ]
        assert scores(function, [good, *bad]) == [1.0] + [0.0] * len(bad)

    def test_code_block_allows_prose_before_but_one_block_only(self):
        function = reward("format", "format", pattern="code_block")
        one = "Here:\n```python\nprint(1)\n```"
        two = one + "\n```python\nprint(2)\n```"
        assert scores(function, [one, two, "print(1)"]) == [1.0, 0.0, 0.0]

    def test_unknown_pattern_and_bad_regex_are_refused_at_build_time(self):
        with pytest.raises(SkillError, match="Unknown format pattern"):
            reward("format", "format", pattern="haiku")
        with pytest.raises(SkillError, match="does not compile"):
            reward("format", "format", pattern=None, regex="(")


class TestExactMatch:
    def test_answer_tag(self):
        function = reward("exact_match")
        got = scores(
            function,
            ["<answer>12</answer>", "<answer> 1,2 </answer>", "12", "", "<answer>12.0</answer>"],
            answer=["12"] * 5,
        )
        assert got == [1.0, 0.0, 0.0, 0.0, 1.0]

    def test_listing_candidates_earns_nothing(self):
        tagged = reward("exact_match")
        last = reward("exact_match", extract="last_number")
        assert scores(tagged, ["<answer>11</answer><answer>12</answer>"], answer=["12"]) == [0.0]
        assert scores(last, ["It is 11, 12 or 13", "11/12/13", "The sum is 12"], answer=["12"] * 3) == [0.0, 0.0, 1.0]

    def test_case_and_whitespace_normalised_unless_asked(self):
        assert scores(reward("exact_match", extract="whole"), ["  Paris. "], answer=["paris"]) == [1.0]
        strict = reward("exact_match", extract="whole", case_sensitive=True)
        assert scores(strict, ["paris"], answer=["Paris"]) == [0.0]

    def test_missing_column_is_a_counted_failure_not_a_zero(self):
        function = reward("exact_match", answer_column="gold")
        metrics = {}
        got = function(["p"], ["<answer>1</answer>"], answer=["1"], log_metric=metrics.__setitem__)
        assert got == [None] and function.failures == 1
        assert metrics == {"rewards/exact_match/failure_rate": 1.0}

    def test_extract_is_exposed_for_inspection(self):
        assert reward("exact_match", extract="boxed").extract("so \\boxed{42}") == "42"


class TestMath:
    def test_equivalent_forms(self):
        function = reward("math")
        completions = ["$\\boxed{\\frac{1}{2}}$", "The answer is $0.5$", "$\\boxed{2}$", ""]
        assert scores(function, completions, answer=["$\\frac{1}{2}$"] * 4) == [1.0, 1.0, 0.0, 0.0]

    def test_runs_off_the_main_thread(self):
        from concurrent.futures import ThreadPoolExecutor

        function = reward("math")
        with ThreadPoolExecutor(1) as pool:
            assert pool.submit(scores, function, ["$4$"], answer=["4"]).result() == [1.0]

    # Completions that need math-verify (not plain numbers), with the score each must get.
    NEEDS_MATH_VERIFY = [
        ("\\boxed{\\frac{1}{\\sqrt{2}}}", "$\\frac{\\sqrt{2}}{2}$", 1.0),
        ("<answer>1 + x^2</answer>", "x^2+1", 1.0),
        ("<answer>x^2 - 1</answer>", "x^2+1", 0.0),
        ("\\boxed{(3, -1)}", "(3, -1)", 1.0),
        ("so $\\boxed{\\sqrt{8}}$", "2\\sqrt{2}", 1.0),
        ("\\boxed{\\pi}", "3.14", 0.0),
    ]

    @pytest.mark.slow
    def test_no_none_with_the_cpu_saturated(self):
        """Two CPU-bound processes beside it: the worker's start is not timed, its comparisons are, and every
        valid item gets its score (the issue: under load every item was None)."""
        import subprocess
        import sys

        from skill.rewards.math_workers import shared_pool

        shared_pool().close()  # so the worker also starts under load
        busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
        try:
            function = reward("math", timeout_s=5.0)
            rows = self.NEEDS_MATH_VERIFY * 10
            got = scores(function, [c for c, _, _ in rows], answer=[g for _, g, _ in rows])
        finally:
            for process in busy:
                process.kill()
                process.wait()
        assert None not in got, function.last_errors
        assert got == [expected for _, _, expected in rows]

    def test_a_timeout_replaces_one_worker_never_the_pool(self):
        from skill.rewards.math_workers import MathVerifyPool

        pool = MathVerifyPool(max_workers=2)
        try:
            pool.warm(2)
            before = pool.worker_pids()
            with pytest.raises(TimeoutError, match="math-verify comparison took longer"):
                pool.equal("$\\frac{1}{2}$", "0.5", timeout_s=1e-9)  # past its limit before any reply
            survivors = pool.worker_pids()
            assert len(before) == 2 and len(survivors) == 1 and survivors < before
            assert pool.equal("$\\frac{1}{2}$", "0.5", timeout_s=30) and pool.worker_pids() == survivors
            pool.warm(2)
            assert pool.started == 3 and survivors < pool.worker_pids()
        finally:
            pool.close()
        assert pool.worker_pids() == set()

    def test_many_threads_share_the_warm_workers(self):
        from concurrent.futures import ThreadPoolExecutor

        from skill.rewards.math_workers import MathVerifyPool

        pool = MathVerifyPool(max_workers=2)
        pairs = [("$\\frac{1}{2}$", "0.5", True), ("$x^2+1$", "$1+x^2$", True), ("$\\sqrt{2}$", "1.41", False)] * 8
        try:
            with ThreadPoolExecutor(8) as threads:
                got = list(threads.map(lambda pair: pool.equal(pair[0], pair[1], 30), pairs))
        finally:
            pool.close()
        assert got == [equal for _, _, equal in pairs]
        assert pool.started <= 2

    def test_a_forked_child_starts_its_own_workers_and_leaves_the_parents(self):
        import json
        import os

        from skill.rewards.math_workers import shared_pool

        function = reward("math")
        completion, gold, expected = self.NEEDS_MATH_VERIFY[0]
        assert scores(function, [completion], answer=[gold]) == [expected]
        parent_workers = shared_pool().worker_pids()
        read, write = os.pipe()
        child = os.fork()
        if child == 0:  # the child: score, report, and leave without running the parent's atexit hooks
            try:
                pool = shared_pool()
                got = scores(function, [completion], answer=[gold])
                os.write(write, json.dumps([got, sorted(pool.worker_pids())]).encode())
            finally:
                os._exit(0)
        os.close(write)
        with os.fdopen(read, "rb") as pipe:
            got, child_workers = json.loads(pipe.read())
        os.waitpid(child, 0)
        assert got == [expected]
        assert child_workers and not set(child_workers) & parent_workers
        assert shared_pool().worker_pids() == parent_workers
        assert scores(function, [completion], answer=[gold]) == [expected]


class TestJsonSchema:
    SCHEMA = {
        "type": "object",
        "required": ["name", "age"],
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "additionalProperties": False,
    }

    def test_valid_invalid_and_not_json(self):
        function = reward("json_schema", schema=self.SCHEMA)
        completions = [
            '{"name": "a", "age": 3}',
            '```json\n{"name": "a", "age": 3}\n```',
            '{"name": "a"}',
            "not json",
            "",
            '{"name": "a", "age": 3, "admin": true}',
            '```json\n{"name": "a", "age": 3}\n```\n```json\n{}\n```',
        ]
        assert scores(function, completions) == [1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]

    def test_partial_credit_options(self):
        parse = reward("json_schema", schema=self.SCHEMA, parse_credit=0.1)
        fraction = reward("json_schema", schema=self.SCHEMA, mode="required_fraction")
        assert scores(parse, ['{"name": "a"}', "nope"]) == [0.1, 0.0]
        assert scores(fraction, ['{"name": "a"}', '{"name": 1, "age": 2}']) == [0.5, 0.5]

    def test_schema_per_row_and_invalid_schema(self):
        function = reward("json_schema", schema_column="schema")
        assert scores(function, ["3"], schema=['{"type": "integer"}']) == [1.0]
        with pytest.raises(SkillError, match="schema is invalid"):
            reward("json_schema", schema={"type": "nonsense"})


class TestToolCall:
    TOOLS = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}},
            },
        }
    ]

    def test_valid_call_wrong_tool_bad_arguments(self):
        function = reward("tool_call", tools=self.TOOLS)
        completions = [
            '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>',
            '{"name": "get_weather", "arguments": "{\\"city\\": \\"Oslo\\"}"}',
            '{"name": "delete_files", "arguments": {}}',
            '{"name": "get_weather", "arguments": {"city": 3}}',
            "I would call get_weather",
            "",
        ]
        assert scores(function, completions) == [1.0, 1.0, 0.0, 0.0, 0.0, 0.0]

    def test_expected_call(self):
        function = reward("tool_call", tools=self.TOOLS, expected_column="expected")
        expected = [{"name": "get_weather", "arguments": {"city": "Oslo"}}] * 2
        completions = [
            '{"name": "get_weather", "arguments": {"city": "Oslo"}}',
            '{"name": "get_weather", "arguments": {"city": "Rome"}}',
        ]
        assert scores(function, completions, expected=expected) == [1.0, 0.0]


class TestLengthPenalty:
    def test_soft_overlong_on_tokens_and_characters(self):
        function = reward("length_penalty", "shaping", max_length=100, buffer=20)
        assert function(["", ""], ["a", "b"], completion_ids=[[0] * 50, [0] * 90]) == [0.0, -0.5]
        assert scores(function, ["x" * 4 * 100]) == [-1.0]

    def test_wrapping_never_lets_length_beat_correctness(self):
        wrapped = reward(
            "length_penalty",
            "shaping",
            max_length=10,
            buffer=5,
            scale=0.5,
            wrap={"name": "exact_match", "params": {"extract": "last_number"}},
        )
        got = wrapped(["", ""], ["12", "13"], completion_ids=[[0] * 10, [0] * 2], answer=["12", "12"])
        assert got == [0.5, 0.0]  # right but overlong (1 - 0.5) still beats wrong and short (0 - 0)

    def test_target_mode_needs_a_target(self):
        with pytest.raises(SkillError, match="needs a positive target"):
            reward("length_penalty", "shaping", mode="target")


class TestRegistry:
    def test_every_registered_reward_has_a_summary_and_roles(self):
        for entry in load_library().values():
            assert entry.summary and entry.roles

    def test_every_builder_parameter_is_described_on_its_signature(self):
        for entry in load_library().values():
            assert list(entry.params) == list(inspect.signature(entry.build).parameters)
            assert all(param.description for param in entry.params.values())

    def test_bad_params_are_refused_with_what_the_reward_takes(self):
        with pytest.raises(SkillError, match="unknown param 'patern'") as error:
            reward("format", "format", patern="number")
        assert "pattern (a named structure: number, answer_tag" in error.value.fix
        with pytest.raises(SkillError, match="missing param 'criteria'"):
            reward("rubric_judge", "judge")

    def test_role_the_reward_cannot_play_is_refused(self):
        with pytest.raises(SkillError, match="cannot play role 'correctness'"):
            reward("format", "correctness")

    def test_user_functions_load_only_from_the_allowlist(self, monkeypatch):
        assert callable(build_reward_function(RewardSpec(name="rewards_for_tests:just_a_number", role="format")))
        with pytest.raises(SkillError, match="not on the allowlist"):
            build_reward_function(RewardSpec(name="os.path:join", role="format"))
        monkeypatch.setenv("GRPO_RLVR_REWARD_MODULES", "")
        with pytest.raises(SkillError, match="not on the allowlist"):
            build_reward_function(RewardSpec(name="rewards_for_tests:just_a_number", role="format"))

    def test_user_function_without_kwargs_is_refused(self):
        with pytest.raises(SkillError, match=r"does not accept \*\*kwargs"):
            build_reward_function(RewardSpec(name="rewards_for_tests:without_kwargs", role="format"))

    def test_names_are_unique_for_trl_metrics(self):
        functions = build_reward_functions(
            [RewardSpec(name="exact_match", role="correctness"), RewardSpec(name="exact_match", role="correctness")]
        )
        assert [f.__name__ for f in functions] == ["exact_match", "exact_match_2"]

    def test_a_crashing_scorer_never_raises_into_the_trainer(self):
        function = reward("json_schema", schema_column="schema")  # the column is missing: every item fails
        assert scores(function, ["{}", "{}"]) == [None, None] and function.failures == 2


def test_composite_rule_both_sides():
    equal = [RewardSpec(name="format", role="format", weight=1.0), RewardSpec(name="exact_match", role="correctness")]
    check = check_composite(equal)
    assert not check.ok and "well-formed and wrong" in check.warnings[0]
    good = check_composite([equal[0].model_copy(update={"weight": 0.2}), equal[1]])
    assert good.ok and good.correct_malformed > good.wrong_well_formed > good.wrong_malformed
    large = check_composite([equal[0].model_copy(update={"weight": 0.6}), equal[1]])
    assert large.ok and "Format is 37%" in large.warnings[0]


@pytest.mark.slow
def test_trl_logs_exactly_what_the_rewards_give(tiny_model_dir, tmp_path):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from skill.data import addition_rows

    specs = [
        RewardSpec(name="format", role="format", weight=0.2, params={"pattern": "number"}),
        RewardSpec(name="exact_match", role="correctness", params={"extract": "last_number"}),
        RewardSpec(name="length_penalty", role="shaping", weight=0.1, params={"max_length": 8, "buffer": 4}),
        RewardSpec(name="exact_match", role="correctness", weight=0.0, params={"answer_column": "missing"}),
    ]
    seen = {}

    def recorder(prompts, completions, completion_ids=None, **kwargs):
        seen.update(prompts=prompts, completions=completions, ids=completion_ids, answer=kwargs["answer"])
        return [0.0] * len(completions)

    args = GRPOConfig(
        output_dir=str(tmp_path),
        use_cpu=True,
        bf16=False,
        max_steps=1,
        per_device_train_batch_size=8,
        num_generations=8,
        max_completion_length=8,
        logging_steps=1,
        report_to="none",
        beta=0.0,
        reward_weights=[0.2, 1.0, 0.1, 0.0, 0.0],
    )
    trainer = GRPOTrainer(
        model=str(tiny_model_dir),
        reward_funcs=[*build_reward_functions(specs), recorder],
        args=args,
        train_dataset=Dataset.from_list(addition_rows(16)),
    )
    trainer.train()
    logged = trainer.state.log_history[0]
    fresh = build_reward_functions(specs)
    for function in fresh[:3]:
        again = function(seen["prompts"], seen["completions"], completion_ids=seen["ids"], answer=seen["answer"])
        assert logged[f"rewards/{function.__name__}/mean"] == pytest.approx(sum(again) / len(again), abs=1e-6)
    assert logged["rewards/exact_match_2/failure_rate"] == 1.0
    assert logged["rewards/exact_match/failure_rate"] == 0.0
    # TRL drops None from the mean: a crashing reward leaves no mean, only the failure metric shows it.
    mean = logged["rewards/exact_match_2/mean"]
    assert mean is None or math.isnan(mean)


def test_a_new_reward_declares_its_facts_once_and_every_part_reads_them(monkeypatch):
    """The worked example of adding a reward: one registered builder (and this test); the preflight's columns, the
    completion budget, the code probes and the fingerprint read what it declares, and no list of names."""
    from types import SimpleNamespace

    from skill.inspection.hack_probes import runs_code
    from skill.inspection.schema import SampleResult
    from skill.recipe.deciding.completion_budget import size_completion_budget
    from skill.rewards import registry
    from skill.rewards.base import RewardFunction
    from skill.runs.checks import columns_read

    monkeypatch.setattr(registry, "REGISTRY", dict(registry.load_library()))  # the example leaves no trace

    @registry.register(
        "proof_check", roles=("correctness",), reads="proof", reasoning="a proof is written out first", runs_code=True
    )
    def build_proof_check():  # unannotated: the registry reads a builder's annotations in its own module
        """1.0 when the completion ends with the proof column's last line."""
        return RewardFunction("proof_check", score=lambda text, row: float(text.endswith(row["proof"])))

    spec = RewardSpec(name="proof_check", role="correctness")
    assert registry.build_reward_function(spec)(["p"], ["... QED"], proof=["QED"]) == [1.0]
    recipe = SimpleNamespace(dataset=SimpleNamespace(columns=[]), rewards=[spec])
    assert columns_read(recipe) == {"proof"}
    budget = size_completion_budget(None, None, [spec], seed=64)
    assert budget.value == 256 and "proof_check: a proof is written out first, 256" in budget.reason
    assert runs_code(spec, SampleResult(id=0, prompt="p", completion="c", scores={}, total=None))


def test_math_never_pays_the_question_s_own_expression():
    """'2 + 14' for 'What is 2 + 14?' evaluates to the gold; only a stated value earns the point."""
    from skill.rewards.text import build_math

    prompt = [{"role": "user", "content": "What is 2 + 14? Answer with just the number."}]
    completions = [
        "A positive integer, 2 + 14.",
        "The number is indeed just 2 + 14.",
        "<answer>2+14</answer>",
        "2 + 14 = 16",
        "16",
        "<answer>16</answer>",
    ]
    scores = build_math()([prompt] * len(completions), completions, answer=["16"] * len(completions))
    assert scores == [0.0, 0.0, 0.0, 1.0, 1.0, 1.0]


def test_an_unknown_reward_or_a_bad_parameter_points_at_the_catalogue():
    """An agent that guesses a name or a parameter learns where every reward, its params and columns are listed."""
    from skill.rewards.registry import CATALOGUE

    for spec in (
        RewardSpec(name="math_answer", role="correctness"),
        RewardSpec(name="exact_match", role="correctness", params={"xyz": 1}),
    ):
        with pytest.raises(SkillError) as refused:
            build_reward_function(spec)
        assert CATALOGUE in refused.value.fix and "grpo://references/reward-functions.md" in refused.value.fix
