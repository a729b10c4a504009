"""User rewards exactly as TRL 1.16 calls them: by keyword, sync or async, through inspection and a real
GRPOTrainer step; the signature check; reward-model ids; every registered reward pickles."""

from __future__ import annotations

import math
import pickle

import pytest
import trl_style_rewards as styles

from skill.data import ADDITION_QUESTION
from skill.errors import SkillError
from skill.rewards.base import AsyncGuardedUserReward, GuardedUserReward, call_reward, is_async_reward
from skill.rewards.registry import (
    build_reward_function,
    build_reward_functions,
    check_reward_signature,
    load_library,
    signature_problems,
)
from skill.rewards.spec import RewardSpec

ROLES = {
    "think_answer_format": ("format", 0.2),
    "chat_format": ("format", 0.2),
    "length_by_ids": ("shaping", 0.05),
    "repetition_penalty": ("shaping", 0.05),
    "short_answers": ("shaping", 0.05),
    "no_prompt_echo": ("shaping", 0.05),
}
# Six kinds of answer to "What is a + b?" (s = a + b); kind 5 is a row the accuracy rewards do not apply to.
KINDS = (
    "<think>{a} plus {b}</think><answer>{s}</answer>",
    "<think>{a} plus {b}</think><answer>{wrong}</answer>",
    "The sum is \\boxed{{{s}}}.",
    "{question} I am not sure.",
    "the answer is the answer is the answer is",
    "<think>a greeting</think><answer>hello</answer>",
)
# What each reward gives each kind, from the reward's own rule (None: not applicable).
EXPECTED = {
    "think_answer_format": (1.0, 1.0, 0.0, 0.0, 0.0, 1.0),
    "chat_format": (1.0, 1.0, 0.0, 0.0, 0.0, 1.0),
    "boxed_accuracy": (0.0, 0.0, 1.0, 0.0, 0.0, 0.0),
    "no_prompt_echo": (0.0, 0.0, 0.0, -1.0, 0.0, 0.0),
    "chat_accuracy": (1.0, 0.0, 0.0, 0.0, 0.0, None),
    "task_routed_accuracy": (1.0, 0.0, 0.0, 0.0, 0.0, None),
    "logged_accuracy": (1.0, 0.0, 0.0, 0.0, 0.0, 0.0),
    "curriculum_accuracy": (1.0, 0.0, 0.5, 0.0, 0.0, 0.0),
    "async_accuracy": (1.0, 0.0, 0.0, 0.0, 0.0, 0.0),
    "async_answer_judge": (1.0, 1.0, 0.0, 0.0, 0.0, 0.0),
}


@pytest.fixture(autouse=True)
def allow_style_module(monkeypatch):
    import os

    allowed = os.environ.get("GRPO_RLVR_REWARD_MODULES", "")
    monkeypatch.setenv("GRPO_RLVR_REWARD_MODULES", f"{allowed},trl_style_rewards".strip(","))


def spec(name: str) -> RewardSpec:
    role, weight = ROLES.get(name, ("correctness", 1.0))
    return RewardSpec(name=f"trl_style_rewards:{name}", role=role, weight=weight)


def addition_samples(count: int, conversational: bool) -> list[dict]:
    import random

    rng = random.Random(7)
    samples = []
    for index in range(count):
        a, b, kind = rng.randint(1, 20), rng.randint(1, 20), index % len(KINDS)
        question = ADDITION_QUESTION.format(a=a, b=b)
        completion = KINDS[kind].format(a=a, b=b, s=a + b, wrong=a + b + 1, question=question)
        prompt = [{"role": "user", "content": question}] if conversational else question
        columns = {"solution": None, "task": "smalltalk"} if kind == 5 else {"solution": str(a + b), "task": "addition"}
        samples.append({"prompt": prompt, "completion": completion, "columns": columns, "group": index // 6})
    return samples


def test_every_style_loads_and_async_ones_stay_async():
    names = styles.STANDARD + styles.CONVERSATIONAL + styles.EITHER
    assert len(names) >= 10
    functions = {name: build_reward_function(spec(name)) for name in names}
    for name, function in functions.items():
        assert isinstance(function, GuardedUserReward)
        assert is_async_reward(function) == (name in ("async_accuracy", "async_answer_judge")), name
        assert isinstance(function, AsyncGuardedUserReward) == is_async_reward(function)
        assert pickle.loads(pickle.dumps(function)).__name__ == function.__name__  # picklable for rollout workers
    # TRL's names for its logs: the function's, the partial's function's, the instance's class.
    assert functions["short_answers"].__name__ == "capped_length"
    assert functions["repetition_penalty"].__name__ == "RepetitionPenalty"


def test_called_by_keyword_with_columns_and_trl_keywords():
    logged = {}
    accuracy = build_reward_function(spec("logged_accuracy"))
    completions = ["<answer>7</answer>", "<answer>8</answer>", "no tag"]
    scores = accuracy(
        prompts=["What is 3 + 4?"] * 3,
        completions=completions,
        completion_ids=[[1], [2], [3]],
        solution=["7", "7", "7"],
        trainer_state=None,
        log_extra=lambda column, values: logged.setdefault(column, values),
        log_metric=lambda name, value: logged.setdefault(name, value),
    )
    assert scores == [1.0, 0.0, 0.0]
    assert logged == {
        "tagged_answer_share": pytest.approx(2 / 3),
        "parsed_answer": ["7", "8", ""],
        "rewards/logged_accuracy/failure_rate": 0.0,
    }


def test_async_rewards_are_awaited_outside_a_trainer():
    judge = build_reward_function(spec("async_answer_judge"))
    assert call_reward(judge, ["q", "q"], ["<answer>5</answer>", "<answer>five</answer>"]) == [1.0, 0.0]
    accuracy = build_reward_function(spec("async_accuracy"))
    chat = [[{"role": "user", "content": "What is 2 + 3?"}]] * 2
    assert call_reward(accuracy, chat, ["<answer>5</answer>", "5"], solution=["5", "5"]) == [1.0, 0.0]


@pytest.mark.parametrize(
    ("source", "problem"),
    [
        ("def f(prompts, completions): ...", "does not accept **kwargs"),
        ("def f(completions, /, **kwargs): ...", "takes 'completions' positionally only"),
        ("def f(prompt, completion, **kwargs): ...", "requires 'prompt', which TRL never passes"),
        ("def f(completions, environments, **kwargs): ...", "requires 'environments'"),
    ],
)
def test_a_function_trl_could_not_call_is_refused_with_one_message(source, problem):
    namespace: dict = {}
    exec(source, namespace)
    with pytest.raises(SkillError, match="cannot be called as TRL calls rewards") as error:
        check_reward_signature(namespace["f"], "mine:f")
    assert problem in error.value.problem and "def accuracy(completions, solution, **kwargs)" in error.value.fix


def test_trl_docs_signatures_are_accepted_and_columns_checked_when_known():
    def accuracy(completions, solution, **kwargs): ...

    def everything(prompts, completions, completion_ids, trainer_state, log_extra, log_metric, **kwargs): ...

    def with_default(completions, solution=None, *args, **kwargs): ...

    for function in (accuracy, everything, with_default):
        assert signature_problems(function) == []
    assert signature_problems(accuracy, columns={"solution", "task"}) == []
    assert signature_problems(with_default, columns={"answer"}) == []
    assert signature_problems(accuracy, columns={"answer"}) == [
        "it requires 'solution', which is not a dataset column (columns: answer)"
    ]


def test_user_reward_results_trl_could_not_use_fail_the_batch_not_the_trainer():
    def words(completions, **kwargs):
        return ["one" for _ in completions]

    def short(completions, **kwargs):
        return [1.0]

    def bad_metric(completions, log_metric, **kwargs):
        log_metric("share", "half")
        return [1.0 for _ in completions]

    def not_a_number(completions, **kwargs):
        return [float("nan"), None, 2]

    for function, error in ((words, "not a number or None"), (short, "returned 1 scores for 3"),
                            (bad_metric, "needs a number")):  # fmt: skip
        guarded = GuardedUserReward(function)
        assert guarded(["p"] * 3, ["a", "b", "c"], log_metric=lambda *a: None) == [None] * 3
        assert guarded.failures == 3 and error in guarded.last_errors[0]
    assert GuardedUserReward(not_a_number)(["p"] * 3, ["a", "b", "c"]) == [None, None, 2.0]


@pytest.mark.parametrize("name", ["OpenAssistant/reward-model-deberta-v3-large-v2", "./models/rm", "/srv/rm"])
def test_a_reward_model_id_is_refused_with_what_to_send_instead(name):
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="looks like a reward model") as error:
        RewardSpec(name=name, role="correctness")
    assert "nothing is fetched from a hub" in str(error.value) and "rubric_judge" in str(error.value)


MINIMAL_PARAMS = {
    "json_schema": {"schema": {"type": "object", "required": ["a"]}},
    "tool_call": {"tools": [{"name": "add", "parameters": {"type": "object"}}]},
    "rubric_judge": {"criteria": [{"question": "Is the response polite?"}]},
}
PROBE = ["12", "<answer>12</answer>", '{"a": 1}', '{"name": "add", "arguments": {}}', "", "x" * 200]


@pytest.mark.parametrize("name", sorted(load_library()))
def test_every_registered_reward_pickles_and_scores_the_same_after(name):
    entry = load_library()[name]
    function = build_reward_function(RewardSpec(name=name, role=entry.roles[0], params=MINIMAL_PARAMS.get(name, {})))
    function.__name__ = f"{name}_2"  # renamed as build_reward_functions does for a second spec of one reward
    copy = pickle.loads(pickle.dumps(function))
    assert type(copy) is type(function) and copy.__name__ == f"{name}_2"
    if name == "rubric_judge":  # a judge model is not loaded here: the rebuilt judge asks the same questions
        assert copy.criteria == function.criteria and type(copy.backend) is type(function.backend)
        return
    completions = PROBE
    columns = {"answer": ["12"] * len(PROBE)}
    if name == "unit_tests":  # a right and a wrong program, run in the sandbox by both
        completions = ["def add(a, b):\n    return a + b\n", "def add(a, b):\n    return a - b\n"]
        columns = {"tests": [["assert add(1, 2) == 3"]] * 2}
    scores = function([""] * len(completions), completions, **columns)
    after = pickle.loads(pickle.dumps(function))  # a copy made after scoring keeps the counts
    assert after.scored == function.scored == len(completions) and after.failures == function.failures
    assert copy([""] * len(completions), completions, **columns) == scores


@pytest.mark.parametrize(
    ("length", "expected"),
    # DAPO's Eq. 13 by hand, max 32, buffer 8: 0 up to 32 - 8 = 24 tokens, then (24 - length) / 8, -1 past 32.
    [(0, 0.0), (24, 0.0), (25, -0.125), (28, -0.5), (31, -0.875), (32, -1.0), (33, -1.0), (200, -1.0)],
)
def test_length_penalty_follows_dapos_soft_overlong_formula(length, expected):
    ours = build_reward_function(
        RewardSpec(name="length_penalty", role="shaping", params={"max_length": 32, "buffer": 8})
    )
    assert ours([""], [""], completion_ids=[[7] * length]) == [expected]
    scaled = build_reward_function(
        RewardSpec(name="length_penalty", role="shaping", params={"max_length": 32, "buffer": 8, "scale": 0.5})
    )
    assert scaled([""], [""], completion_ids=[[7] * length]) == [expected * 0.5]


def inspected(names: list[str], conversational: bool):
    from skill.inspection.reports import load_report
    from skill.inspection.run import inspect_rewards
    from skill.inspection.schema import InspectionRequest

    request = InspectionRequest(
        rewards=[spec(name) for name in names], samples=addition_samples(60, conversational=conversational)
    )
    return load_report(inspect_rewards(request).id)  # the whole report: scores and statistics


@pytest.mark.parametrize("conversational", [False, True], ids=["standard", "conversational"])
def test_inspection_scores_every_style_as_trl_would(conversational):
    names = (styles.CONVERSATIONAL if conversational else styles.STANDARD) + styles.EITHER
    report = inspected(names, conversational)
    assert not [flag for flag in report.flags if flag.code == "reward_failures"]
    style_of = {build_reward_function(spec(style)).__name__: style for style in names}  # TRL's name -> style
    assert sorted(report.stats) == sorted(style_of)
    for name, stats in report.stats.items():
        assert stats.failure_rate == 0.0, name
        style = style_of[name]
        expected = [EXPECTED[style][i % len(KINDS)] for i in range(60)] if style in EXPECTED else None
        real = [sample.scores[name] for sample in report.samples if sample.scores[name] is not None]
        if expected is None:  # shaping: never positive, and the repetitive kind is penalised
            assert real and max(real) <= 0.0, name
            continue
        applicable = [value for value in expected if value is not None]
        assert sum(real) / len(real) == pytest.approx(sum(applicable) / len(applicable), abs=1e-3), name
        assert stats.none_rate == pytest.approx(1 - len(applicable) / len(expected), abs=1e-3), name
    assert report.stats["RepetitionPenalty"].minimum < 0.0  # the repetitive kind is penalised


def tiny_run(tiny_model_dir, tmp_path, names: list[str], conversational: bool):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    rows = [
        {"prompt": sample["prompt"], **sample["columns"]}
        for sample in addition_samples(8, conversational=conversational)
    ]
    seen: dict = {}

    def recorder(prompts, completions, completion_ids, **kwargs):
        seen.update(prompts=prompts, completions=completions, completion_ids=completion_ids, columns=kwargs)
        return [0.0] * len(completions)

    args = GRPOConfig(
        output_dir=str(tmp_path / ("chat" if conversational else "text")),
        use_cpu=True,
        bf16=False,
        max_steps=1,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=8,
        logging_steps=1,
        report_to="none",
        beta=0.0,
    )
    functions = build_reward_functions([spec(name) for name in names])
    trainer = GRPOTrainer(
        model=str(tiny_model_dir),
        reward_funcs=[*functions, recorder],
        args=args,
        train_dataset=Dataset.from_list(rows),
    )
    trainer.train()
    return trainer.state.log_history[0], functions, seen


@pytest.mark.slow
@pytest.mark.parametrize("conversational", [False, True], ids=["standard", "conversational"])
def test_a_real_grpo_step_calls_every_style_and_logs_what_it_returns(tiny_model_dir, tmp_path, conversational):
    names = (styles.CONVERSATIONAL if conversational else styles.STANDARD) + styles.EITHER
    logged, functions, seen = tiny_run(tiny_model_dir, tmp_path, names, conversational)
    assert bool(seen["prompts"]) and isinstance(seen["completions"][0], list) == conversational
    assert "tagged_answer_share" in logged  # log_metric from inside a user reward reached TRL's logs
    columns = {key: value for key, value in seen["columns"].items() if key in ("solution", "task")}
    for style, function in zip(names, functions, strict=True):
        name = function.__name__
        assert logged[f"rewards/{name}/failure_rate"] == 0.0, (name, function.last_errors)
        fresh = build_reward_function(spec(style))  # the same reward, called again on the batch TRL scored
        again = call_reward(
            fresh, seen["prompts"], seen["completions"], completion_ids=seen["completion_ids"], **columns
        )
        values = [value for value in again if value is not None]
        mean = logged[f"rewards/{name}/mean"]
        if values:
            assert mean == pytest.approx(sum(values) / len(values), abs=1e-5), name
        else:
            assert mean is None or math.isnan(mean), name


@pytest.mark.slow
def test_rewards_score_the_same_in_a_spawned_process_as_trls_rollout_worker_would():
    """TRL's async rollout worker scores in a spawned child: the rewards travel pickled and run there."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    specs = [
        RewardSpec(name="format", role="format", weight=0.2, params={"pattern": "answer_tag"}),
        RewardSpec(name="exact_match", role="correctness"),
        RewardSpec(name="length_penalty", role="shaping", weight=0.05, params={"max_length": 8, "buffer": 4}),
        spec("chat_accuracy"),
        spec("async_answer_judge"),
        spec("short_answers"),
    ]
    functions = build_reward_functions(specs)
    prompts = [[{"role": "user", "content": "What is 2 + 3?"}]] * 3
    completions = ["<answer>5</answer>", "<answer>6</answer>", "five " * 40]
    columns = {"answer": ["5"] * 3, "solution": ["5", "5", None], "completion_ids": [[1] * 3, [1] * 3, [1] * 9]}
    here = [call_reward(function, prompts, completions, **columns) for function in functions]
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        there = [pool.submit(call_reward, f, prompts, completions, **columns).result(120) for f in functions]
    assert there == here
    assert here[1] == [1.0, 0.0, 0.0] and here[3] == [1.0, 0.0, None] and here[2][2] == -1.0
