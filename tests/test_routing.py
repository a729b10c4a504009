"""route_check: the rule table, the probe on real models, pass@k, saved samples, and the faces."""

from __future__ import annotations

import asyncio
import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from skill.errors import SkillError
from skill.rewards.spec import RewardSpec
from skill.routing.route import ProbeSpec, RouteRequest, load_route, pass_at_k, route_check

BY_MODE = RewardSpec(name="rewards_for_tests:by_mode", role="correctness")


def rows(*modes):
    return [{"prompt": [{"role": "user", "content": f"question {i}"}], "mode": m} for i, m in enumerate(modes)]


@pytest.mark.parametrize(
    ("signal", "route", "next_skill", "provisional"),
    [
        ("preference_pairs", "preference-optimization", "preference-optimization", False),
        ("demonstrations", "lora-qlora-recipes", "lora-qlora-recipes", False),
        ("human_judgment", "eval-harness-first", "eval-harness-first", False),
        ("unit_tests", "grpo", None, True),
        ("parser_schema", "grpo", None, True),
        ("tool_call_schema", "grpo", None, True),
        ("math_answer", "grpo", None, True),
        ("exact_answer", "grpo", None, True),
    ],
)
def test_rule_table_without_a_probe(signal, route, next_skill, provisional):
    decision = route_check(RouteRequest(signal=signal))
    assert (decision.route, decision.next_skill, decision.provisional) == (route, next_skill, provisional)
    assert decision.reasons and decision.next_step
    if provisional:
        assert "Probe the base model" in decision.next_step


def test_pass_at_k_matches_brute_force_over_all_subsets():
    for n, c in [(4, 1), (5, 2), (6, 3), (8, 2), (8, 0), (8, 8)]:
        outcomes = [True] * c + [False] * (n - c)
        for k in range(1, n + 1):
            subsets = list(itertools.combinations(outcomes, k))
            brute = sum(any(subset) for subset in subsets) / len(subsets)
            assert pass_at_k(n, c, k) == pytest.approx(brute)


@pytest.mark.parametrize(
    ("probe", "message"),
    [
        ({"prompts": []}, "no prompts"),
        ({"prompts": ["x"], "n": 1}, "at least 2 samples"),
        ({"prompts": ["x"], "n": 4, "k": 5}, "k=5 must be between 1 and n=4"),
        ({}, "exactly one of prompts, rows or dataset"),
        ({"dataset": "/nonexistent/file.jsonl"}, "not a readable"),
    ],
)
def test_bad_probes_are_refused_with_the_reason(probe, message, tiny_model_dir):
    with pytest.raises((SkillError, ValidationError), match=message):
        route_check(
            RouteRequest(signal="exact_answer", verifier=BY_MODE, probe=ProbeSpec(model=str(tiny_model_dir), **probe))
        )


def test_unknown_signal_and_probe_without_verifier():
    with pytest.raises(ValidationError, match="signal"):
        RouteRequest(signal="vibes")
    with pytest.raises(SkillError, match="needs a verifier"):
        route_check(RouteRequest(signal="exact_answer", probe=ProbeSpec(prompts=["x"])))


def test_verifier_column_missing_from_the_rows(tiny_model_dir):
    probe = ProbeSpec(model=str(tiny_model_dir), prompts=["a", "b"], max_new_tokens=4)
    with pytest.raises(SkillError, match="cannot score these rows|failed on every sample"):
        route_check(RouteRequest(signal="exact_answer", verifier=BY_MODE, probe=probe))


def probe(tiny_model_dir, *modes, **extra):
    return route_check(
        RouteRequest(
            signal="exact_answer",
            verifier=BY_MODE,
            probe=ProbeSpec(model=str(tiny_model_dir), rows=rows(*modes), max_new_tokens=8, **extra),
        )
    )


@pytest.mark.slow
def test_never_succeeds_routes_to_sft_after_a_low_temperature_reprobe(tiny_model_dir):
    decision = probe(tiny_model_dir, "fail", "fail", "fail")
    assert decision.route == "lora-qlora-recipes" and decision.next_skill == "lora-qlora-recipes"
    assert decision.evidence.temperatures == [1.0, 0.2]
    assert decision.evidence.pass_at_1 == 0


@pytest.mark.slow
def test_always_succeeds_is_not_worth_rl(tiny_model_dir):
    decision = probe(tiny_model_dir, "pass", "pass", "pass", "pass")
    assert decision.route == "not-worth-rl" and decision.evidence.learnable_fraction == 0
    assert "harder prompts or a stricter verifier" in decision.next_step


@pytest.mark.slow
def test_known_pattern_gives_grpo_with_the_right_learnable_fraction(tiny_model_dir):
    decision = probe(tiny_model_dir, "pass", "fail", "coin", "coin", "coin", "fail", n=8)
    evidence = decision.evidence
    assert decision.route == "grpo"
    successes = evidence.per_prompt_successes
    assert successes[0] == 8 and successes[1] == 0 and successes[5] == 0
    mixed = [i for i, s in enumerate(successes) if 0 < s < 8]
    assert set(mixed) <= {2, 3, 4} and evidence.learnable_prompt_indices == mixed
    assert evidence.learnable_fraction == pytest.approx(len(mixed) / 6)
    saved, samples = load_route(decision.id)
    assert saved == decision and len(samples) == 6 * 8
    assert sum(sample["score"] for sample in samples if sample["prompt_index"] == 2) == successes[2]
    learnable = [json.loads(line) for line in Path(decision.learnable_dataset).read_text().splitlines()]
    assert [row["prompt"][0]["content"] for row in learnable] == [f"question {i}" for i in mixed]


@pytest.mark.slow
def test_mcp_route_check_reports_progress(tiny_model_dir):
    from mcp import Client

    from server.mcp_server import build_server

    updates = []

    async def on_progress(progress, total, message):
        updates.append((progress, total, message))

    async def go():
        async with Client(build_server()) as client:
            return await client.call_tool(
                "route_check",
                {
                    "request": {
                        "signal": "exact_answer",
                        "verifier": BY_MODE.model_dump(),
                        "probe": {
                            "model": str(tiny_model_dir),
                            "rows": rows("pass", "coin"),
                            "n": 8,
                            "max_new_tokens": 4,
                        },
                    }
                },
                progress_callback=on_progress,
            )

    result = asyncio.run(go())
    assert not result.is_error, result.content
    assert result.structured_content["route"] == "grpo"
    assert updates and updates[-1][0] == updates[-1][1] == 16


def test_cli_route_without_a_probe():
    result = subprocess.run(
        [sys.executable, "-m", "server.cli", "route", "--signal", "preference_pairs"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0 and "route: preference-optimization" in result.stdout
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "server.cli",
            "route",
            "--signal",
            "exact_answer",
            "--n",
            "1",
            "--verifier",
            "exact_match,correctness",
            "--dataset",
            "embedded:addition",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "at least 2 samples" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.slow
def test_smollm2_on_the_arithmetic_task_routes_to_grpo():
    decision = route_check(
        RouteRequest(
            signal="exact_answer",
            verifier=RewardSpec(name="exact_match", role="correctness", params={"extract": "last_number"}),
            probe=ProbeSpec(dataset="embedded:addition", num_prompts=12, max_new_tokens=16),
        )
    )
    assert decision.route == "grpo", decision.reasons
    assert 0 < decision.evidence.pass_at_1 < 0.5 and decision.evidence.learnable_fraction >= 0.25


@pytest.mark.slow
def test_smollm2_asked_for_answer_tags_routes_to_sft():
    from skill.data import addition_rows

    tagged = []
    for row in addition_rows(12):
        question = row["prompt"][0]["content"].replace(
            "Answer with just the number.", "Put the answer inside <answer></answer> tags."
        )
        tagged.append({"prompt": [{"role": "user", "content": question}], "answer": row["answer"]})
    decision = route_check(
        RouteRequest(
            signal="exact_answer",
            verifier=RewardSpec(name="exact_match", role="correctness", params={"extract": "answer_tag"}),
            probe=ProbeSpec(rows=tagged, max_new_tokens=24),
        )
    )
    assert decision.route == "lora-qlora-recipes", decision.evidence
    assert decision.evidence.temperatures == [1.0, 0.2]


def test_emit_records_the_route_and_refuses_a_route_elsewhere():
    from skill.hardware.specs import HardwareSpec
    from skill.recipe.emit import RecipeRequest, emit_grpo_config
    from skill.recipe.schema import DatasetSpec

    def request(route_id):
        return RecipeRequest(
            hardware=HardwareSpec(accelerator="cpu"),
            method="full",
            rewards=[RewardSpec(name="exact_match", role="correctness")],
            dataset=DatasetSpec(name="embedded:addition"),
            route_decision_id=route_id,
        )

    grpo = route_check(RouteRequest(signal="math_answer"))
    recipe = emit_grpo_config(request(grpo.id))
    assert recipe.provenance.route_decision == grpo.id
    assert any("provisional" in line for line in recipe.provenance.validation)
    elsewhere = route_check(RouteRequest(signal="preference_pairs"))
    with pytest.raises(SkillError, match="not GRPO"):
        emit_grpo_config(request(elsewhere.id))
    with pytest.raises(SkillError, match="No route decision"):
        emit_grpo_config(request("route-missing"))
