"""inspect_rewards and the gate: sound rewards pass, flawed rewards are caught by name, reviews decide."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from skill.data import addition_rows
from skill.errors import SkillError
from skill.inspection.gate import record_review, require_passed_inspection, reward_fingerprint
from skill.inspection.run import inspect_rewards
from skill.inspection.schema import InspectionRequest, ReviewRequest, SuppliedSample
from skill.rewards.spec import RewardSpec

SOUND = [
    RewardSpec(name="format", role="format", weight=0.2, params={"pattern": "think_answer"}),
    RewardSpec(name="exact_match", role="correctness", params={"extract": "answer_tag"}),
]


def tagged_samples(count=60, seed=0):
    """Realistic outputs for the addition task in think/answer format: right, wrong, malformed, multi-line."""
    rng = random.Random(seed)
    samples = []
    for group, row in enumerate(addition_rows(count // 6)):
        gold = int(row["answer"])
        for _ in range(6):
            answer = rng.choice([gold, gold, gold + 1, gold - 2])
            completion = rng.choice(
                [
                    f"<think>Add the two numbers.\nThat gives {answer}.</think>\n<answer>{answer}</answer>",
                    f"<think>Quick sum.</think>\n<answer>{answer}</answer>",
                    f"The answer is {answer}.",
                ]
            )
            samples.append(
                SuppliedSample(
                    prompt=row["prompt"], completion=completion, columns={"answer": row["answer"]}, group=group
                )
            )
    return samples


def inspect(rewards, samples=None, **extra):
    return inspect_rewards(InspectionRequest(rewards=rewards, samples=samples or tagged_samples(), **extra))


def planted(report):
    return json.loads(Path(report.paths["json"].replace(".json", ".key.json")).read_text())["planted"]


def honest_labels(report):
    return {sample.id: sample.id not in planted(report) for sample in report.samples}


def test_sound_composite_passes_the_automatic_checks():
    report = inspect(SOUND)
    assert [flag.code for flag in report.flags if flag.severity == "blocking"] == []
    assert report.probe_results and not any(probe.hacked for probe in report.probe_results)
    assert report.verdict == "pending" and len(report.samples) == 60 + 3
    assert report.stats["exact_match"].mean is not None and report.samples[0].extracted
    assert Path(report.paths["html"]).is_file() and Path(report.paths["markdown"]).is_file()


@pytest.mark.parametrize(
    ("spec", "samples", "flag"),
    [
        (RewardSpec(name="flawed_rewards:lenient_format", role="format", weight=0.2), None, "hack_empty_answer_tags"),
        (RewardSpec(name="flawed_rewards:lenient_format", role="format", weight=0.2), None, "hack_trailing_junk"),
        (RewardSpec(name="flawed_rewards:substring_match", role="correctness"), None, "hack_candidate_list"),
        (RewardSpec(name="flawed_rewards:one_on_exception", role="correctness"), None, "hack_echo_prompt"),
        (RewardSpec(name="flawed_rewards:colon_judge", role="judge"), None, "hack_master_key_0"),
    ],
)
def test_each_flawed_reward_is_caught_by_a_named_flag(spec, samples, flag):
    rewards = [spec] if spec.role in ("correctness", "judge") else [spec, SOUND[1]]
    report = inspect(rewards, samples)
    codes = {f.code for f in report.flags if f.severity == "blocking"}
    assert flag in codes, codes


def test_a_format_regex_without_dotall_is_caught():
    multi_line = [s for s in tagged_samples(300) if "\n" in s.completion.split("</think>")[0]][:60]
    report = inspect(
        [RewardSpec(name="flawed_rewards:no_dotall_format", role="format", weight=0.2), SOUND[1]], multi_line
    )
    assert "constant_reward" in {f.code for f in report.flags if f.reward == "no_dotall_format"}


def test_exit_code_grading_is_caught_by_the_sys_exit_probe():
    samples = [
        SuppliedSample(
            prompt="Write add(a, b).",
            completion="```python\ndef add(a, b):\n    return a + b\n```",
            columns={"tests": [{"call": "add(1, 2)", "expected": 3}]},
        )
        for _ in range(50)
    ]
    samples += [
        SuppliedSample(
            prompt="Write add(a, b).",
            completion="```python\nraise SystemExit(1)\n```",
            columns={"tests": [{"call": "add(1, 2)", "expected": 3}]},
        )
        for _ in range(10)
    ]
    report = inspect([RewardSpec(name="flawed_rewards:exit_code_grader", role="correctness")], samples)
    assert "hack_sys_exit_0" in {f.code for f in report.flags}


def test_equal_weights_break_the_composite_rule():
    equal = [SOUND[0].model_copy(update={"weight": 1.0}), SOUND[1]]
    report = inspect(equal)
    assert any(f.code == "composite_rule" and f.severity == "blocking" for f in report.flags)


def test_sample_count_limits():
    with pytest.raises(SkillError, match="at least 50"):
        inspect(SOUND, tagged_samples(48))
    assert len(inspect(SOUND, tagged_samples(120), planted=0).samples) == 100


def test_gate_refuses_then_accepts():
    with pytest.raises(SkillError, match="No passed inspection|changed since"):
        require_passed_inspection([SOUND[0].model_copy(update={"weight": 0.15}), SOUND[1]])
    report = inspect(SOUND)
    labels = honest_labels(report)
    first_real = next(i for i in labels if labels[i])
    disagreeing = record_review(
        ReviewRequest(report_id=report.id, reviewer="ana", labels={**labels, first_real: False})
    )
    assert disagreeing.verdict == "failed" and "disagrees" in " ".join(disagreeing.verdict_reasons)
    careless = record_review(ReviewRequest(report_id=report.id, reviewer="ana", labels={i: True for i in labels}))
    assert careless.verdict == "failed" and "attention check" in " ".join(careless.verdict_reasons)
    rubber = record_review(
        ReviewRequest(report_id=report.id, reviewer="bot", reviewer_kind="agent", non_interactive=True)
    )
    assert rubber.verdict == "passed" and rubber.review.non_interactive  # accepted by policy, recorded as unread
    passed = record_review(ReviewRequest(report_id=report.id, reviewer="ana", labels=labels))
    assert passed.verdict == "passed" and passed.review.reviewer == "ana"
    assert require_passed_inspection(SOUND).id == report.id


def test_blocking_flags_fail_the_gate_even_with_a_clean_review():
    report = inspect([RewardSpec(name="flawed_rewards:substring_match", role="correctness")])
    result = record_review(ReviewRequest(report_id=report.id, reviewer="ana", labels=honest_labels(report)))
    assert result.verdict == "failed" and any("candidate_list" in r for r in result.verdict_reasons)
    unread = record_review(ReviewRequest(report_id=report.id, reviewer="ana", non_interactive=True))
    assert unread.verdict == "failed"


def test_fingerprint_follows_the_source_of_a_user_reward(tmp_path, monkeypatch):
    module = tmp_path / "editable_reward.py"
    module.write_text("def score(prompts, completions, **kwargs):\n    return [1.0 for _ in completions]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("GRPO_RLVR_REWARD_PATHS", str(tmp_path))
    spec = [RewardSpec(name="editable_reward:score", role="correctness")]
    before, _ = reward_fingerprint(spec)
    module.write_text("def score(prompts, completions, **kwargs):\n    return [0.5 for _ in completions]\n")
    import importlib
    import sys

    sys.modules.pop("editable_reward", None)
    importlib.invalidate_caches()
    after, _ = reward_fingerprint(spec)
    assert before != after
    assert (
        reward_fingerprint(SOUND)[0] != reward_fingerprint([SOUND[0].model_copy(update={"weight": 0.3}), SOUND[1]])[0]
    )


def test_gate_names_the_reward_that_changed():
    report = inspect(SOUND)
    record_review(ReviewRequest(report_id=report.id, reviewer="ana", labels=honest_labels(report)))
    changed = [SOUND[0], SOUND[1].model_copy(update={"params": {"extract": "last_number"}})]
    with pytest.raises(SkillError, match="Reward function exact_match changed since inspection"):
        require_passed_inspection(changed)


@pytest.mark.slow
def test_route_samples_are_reused_without_sampling_again(tiny_model_dir):
    from skill.routing.route import ProbeSpec, RouteRequest, route_check

    rows = [{"prompt": f"question {i}", "mode": "coin"} for i in range(8)]
    verifier = RewardSpec(name="rewards_for_tests:by_mode", role="correctness")
    decision = route_check(
        RouteRequest(
            signal="exact_answer",
            verifier=verifier,
            probe=ProbeSpec(model=str(tiny_model_dir), rows=rows, max_new_tokens=6),
        )
    )
    report = inspect_rewards(InspectionRequest(rewards=[verifier], route_decision_id=decision.id, planted=0))
    assert report.source == f"route_check probe {decision.id}" and len(report.samples) == 64
    assert {s.group for s in report.samples} == set(range(8))


def test_emit_records_the_passed_inspection_it_relies_on():
    from skill.hardware.specs import HardwareSpec
    from skill.recipe.emit import RecipeRequest, emit_grpo_config
    from skill.recipe.schema import DatasetSpec

    report = inspect(SOUND)
    record_review(ReviewRequest(report_id=report.id, reviewer="ana", labels=honest_labels(report)))
    recipe = emit_grpo_config(
        RecipeRequest(
            hardware=HardwareSpec(accelerator="cpu"),
            method="full",
            rewards=SOUND,
            dataset=DatasetSpec(name="embedded:addition", columns=["answer"]),
        )
    )
    assert recipe.provenance.inspection_id == report.id
    uninspected = [SOUND[0].model_copy(update={"weight": 0.05}), SOUND[1]]
    other = emit_grpo_config(
        RecipeRequest(
            hardware=HardwareSpec(accelerator="cpu"),
            method="full",
            rewards=uninspected,
            dataset=DatasetSpec(name="embedded:addition", columns=["answer"]),
        )
    )
    assert other.provenance.inspection_id is None
    assert any("run_grpo will refuse" in line for line in other.provenance.validation)
