"""What a reward is handed outside a trainer, as TRL 1.16 hands it in one: token ids (a local tokenizer's, else
pseudo-ids, flagged), the dataset columns TRL passes (reserved names refused), and log_extra as TRL takes it."""

from __future__ import annotations

import math

import pytest

from skill.errors import SkillError
from skill.inspection.schema import SuppliedSample
from skill.inspection.scoring import score_fresh, score_samples
from skill.models.sources import EMBEDDED_MODEL_ID, embedded_tokenizer_dir
from skill.rewards.base import GuardedUserReward, call_reward
from skill.rewards.registry import build_reward_functions
from skill.rewards.spec import RewardSpec

COMPLETIONS = ["<answer>5</answer>", "The sum of two and three is five.", "", "x" * 41, "Ünïcödé text, 12 + 3 = 15"]


@pytest.fixture(autouse=True)
def allow_style_module(monkeypatch):
    import os

    allowed = os.environ.get("GRPO_RLVR_REWARD_MODULES", "")
    monkeypatch.setenv("GRPO_RLVR_REWARD_MODULES", f"{allowed},trl_style_rewards".strip(","))


def samples(count: int = 60, **columns) -> list[SuppliedSample]:
    return [
        SuppliedSample(
            prompt="What is 2 + 3?", completion=COMPLETIONS[i % len(COMPLETIONS)], columns=dict(columns), group=i // 6
        )
        for i in range(count)
    ]


LENGTH_READERS = [
    RewardSpec(name="trl_style_rewards:reward_func", role="shaping", weight=0.01),  # TRL's docs, verbatim
    RewardSpec(name="trl_style_rewards:soft_overlong", role="shaping", weight=0.05),  # TRL's own reward
    RewardSpec(name="exact_match", role="correctness", params={"extract": "answer_tag"}),
]


# TRL's soft overlong punishment, max 10 tokens, buffer 4, on pseudo-ids (characters / 4, rounded up), by hand:
# 0 up to 6 tokens, then (6 - tokens) / 4, -1 past 10.
OVERLONG = dict(zip(COMPLETIONS, [0.0, -0.75, 0.0, -1.0, -0.25], strict=True))  # 5, 9, 0, 11 and 7 tokens


def test_trls_completion_ids_example_is_scored_on_pseudo_ids_and_the_report_says_so():
    from skill.inspection.reports import load_report
    from skill.inspection.run import inspect_rewards
    from skill.inspection.schema import InspectionRequest

    report = load_report(inspect_rewards(InspectionRequest(rewards=LENGTH_READERS, samples=samples(answer="5"))).id)
    for sample in report.samples:  # one pseudo-id per 4 characters, rounded up; none of them failed
        tokens = math.ceil(len(sample.completion) / 4)
        assert sample.scores["reward_func"] == float(tokens) and not sample.errors, sample
        assert sample.scores["soft_overlong_punishment_reward"] == OVERLONG[sample.completion], sample
    flag = next(flag for flag in report.flags if flag.code == "pseudo_completion_ids")
    assert flag.severity == "warning" and "reward_func, soft_overlong_punishment_reward" in flag.message
    assert "exact_match" not in flag.message and "one per 4 characters" in flag.message and flag.fix


def test_an_inspection_of_supplied_samples_tokenizes_with_the_named_model():
    from transformers import AutoTokenizer

    from skill.inspection.reports import load_report
    from skill.inspection.run import inspect_rewards
    from skill.inspection.schema import InspectionRequest

    request = InspectionRequest(rewards=LENGTH_READERS, samples=samples(answer="5"), tokenizer=EMBEDDED_MODEL_ID)
    report = load_report(inspect_rewards(request).id)
    tokenizer = AutoTokenizer.from_pretrained(str(embedded_tokenizer_dir()))
    assert "pseudo_completion_ids" not in {flag.code for flag in report.flags}
    for sample in report.samples:
        assert sample.scores["reward_func"] == len(tokenizer(sample.completion, add_special_tokens=False).input_ids)


@pytest.mark.parametrize("source", ["embedded", "local directory"])
def test_completion_ids_come_from_the_models_tokenizer_when_it_is_on_this_machine(source, tiny_model_dir):
    from transformers import AutoTokenizer

    model = EMBEDDED_MODEL_ID if source == "embedded" else str(tiny_model_dir)
    tokenizer = AutoTokenizer.from_pretrained(str(embedded_tokenizer_dir()))  # the tiny model shares it
    scored = score_fresh(LENGTH_READERS[:1], samples(), model)
    assert scored.completion_ids == f"tokenized with {model}'s tokenizer" and scored.flags == []
    for result in scored.results:
        ids = tokenizer(result.completion, add_special_tokens=False)["input_ids"]
        assert result.scores["reward_func"] == float(len(ids))
    assert {r.scores["reward_func"] for r in scored.results} != {  # real tokens, not 4-character pieces
        float(math.ceil(len(r.completion) / 4)) for r in scored.results
    }


def test_a_hub_tokenizer_that_cannot_be_had_gives_pseudo_ids_and_says_why():
    # The suite runs with HF_HUB_OFFLINE (tests/conftest.py): an uncached hub id cannot be fetched.
    model = "grpo-rlvr-tests/never-downloaded-model"
    scored = score_fresh(LENGTH_READERS[:1], samples(), model)
    assert scored.completion_ids.startswith("pseudo-ids, one per 4 characters")
    assert f"{model}'s tokenizer could not be had (HF_HUB_OFFLINE is set" in scored.completion_ids
    assert [flag.code for flag in scored.flags] == ["pseudo_completion_ids"]


def test_no_pseudo_id_flag_when_no_reward_reads_the_ids():
    specs = [RewardSpec(name="exact_match", role="correctness", params={"extract": "answer_tag"})]
    functions = build_reward_functions(specs)
    results, _timing, flags, origin = score_samples(specs, functions, samples(6, answer="5"))
    assert origin.startswith("pseudo-ids") and flags == []
    assert [r.scores["exact_match"] for r in results[:2]] == [1.0, 0.0]


def test_columns_reach_rewards_as_trl_passes_them():
    seen: dict = {}

    def recorder(prompts, completions, completion_ids, **kwargs):
        seen.update(kwargs, prompts=prompts, completion_ids=completion_ids)
        return [0.0 for _ in completions]

    columns = {"prompt": "shadow", "completion": "shadow", "completion_ids": [1, 2], "solution": "5"}
    weight = [RewardSpec(name="exact_match", role="correctness")]  # score_samples weighs by spec
    score_samples(weight, [GuardedUserReward(recorder)], samples(3, **columns))
    # TRL withholds prompt, completion and completion_ids columns: the prompt travels as prompts=, the ids are ours.
    assert "prompt" not in seen and "completion" not in seen and seen["solution"] == ["5"] * 3
    assert seen["prompts"] == ["What is 2 + 3?"] * 3 and seen["completion_ids"][0] != [1, 2]
    seen.clear()
    call_reward(recorder, ["q"], ["a"], prompt=["shadow"], completion=["shadow"], answer=["4"])
    assert "prompt" not in seen and "completion" not in seen and seen["answer"] == ["4"]


@pytest.mark.parametrize("column", ["prompts", "completions", "trainer_state", "log_metric", "environments"])
def test_a_column_trl_cannot_pass_is_refused_with_what_to_rename(column):
    from skill.inspection.run import inspect_rewards
    from skill.inspection.schema import InspectionRequest

    request = InspectionRequest(
        rewards=[RewardSpec(name="exact_match", role="correctness")], samples=samples(**{column: "x", "answer": "5"})
    )
    with pytest.raises(SkillError, match=f"dataset column {column} cannot reach a reward") as error:
        inspect_rewards(request)
    assert f"Rename the column {column} (e.g. to reference_{column})" in error.value.fix
    with pytest.raises(SkillError, match="cannot reach a reward"):  # a training run's columns are checked too
        build_reward_functions(request.rewards, columns={"prompt", column})


def test_log_extra_takes_what_trls_extend_takes():
    import numpy as np

    logged: dict = {}

    def extra(completions, log_extra, **kwargs):
        log_extra("lengths", np.array([len(c) for c in completions]))
        log_extra("doubled", (2 * len(c) for c in completions))  # a generator, as list.extend takes it
        log_extra("pair", ("a", "b"))
        return [0.0 for _ in completions]

    guarded = GuardedUserReward(extra)
    assert guarded(["p", "p"], ["ab", "c"], log_extra=lambda name, values: logged.setdefault(name, values)) == [0, 0]
    assert logged == {"lengths": [2, 1], "doubled": [4, 2], "pair": ["a", "b"]} and guarded.failures == 0

    for wrong in ("ab", np.array([1, 2, 3]), 5):  # a string, the wrong count, not iterable: the batch fails

        def bad(completions, log_extra, value=wrong, **kwargs):
            log_extra("bad", value)
            return [0.0 for _ in completions]

        failing = GuardedUserReward(bad)
        assert failing(["p", "p"], ["ab", "c"], log_extra=lambda *args: None) == [None, None]
        assert "needs 2 values (a list or array), one per completion" in failing.last_errors[0]
