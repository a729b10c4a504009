"""route_check: the rule table, the probe on real models, pass@k, saved samples, and the faces."""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from skill.errors import SkillError
from skill.rewards.spec import RewardSpec
from skill.routing.evidence import RouteEvidence, pass_at_k
from skill.routing.probe import ProbeSpec
from skill.routing.route import RouteRequest, load_route, route_check

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
        ({"prompts": ["x"] * 6}, r"6 prompts x n=8 = 48 samples: too few .* at least 7 prompts at n=8"),
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
    probe = ProbeSpec(model=str(tiny_model_dir), prompts=["a", "b"] * 4, max_new_tokens=4)
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
    decision = probe(tiny_model_dir, *["fail"] * 7)
    assert decision.route == "lora-qlora-recipes" and decision.next_skill == "lora-qlora-recipes"
    assert decision.evidence.temperatures == [1.0, 0.2]
    assert decision.evidence.pass_at_1 == 0
    assert decision.pass_at_1_interval[1] < 0.05  # 0 of 112: both rounds count
    assert "over 112 samples" in decision.reasons[0]


@pytest.mark.slow
def test_always_succeeds_is_not_worth_rl(tiny_model_dir):
    few = probe(tiny_model_dir, *["pass"] * 8)  # 8 prompts cannot bound the learnable fraction below 0.1
    assert few.route == "sample-more" and few.provisional and few.decisive_num_prompts == 35
    assert few.next_step.startswith("Probe again with num_prompts=35 at n=8: 35 prompts x 8 x 8 tokens: about")
    decision = probe(tiny_model_dir, *["pass"] * 40, n=2, num_prompts=40)
    assert decision.route == "not-worth-rl" and decision.evidence.learnable_fraction == 0
    assert decision.learnable_fraction_interval[1] < 0.1 < few.learnable_fraction_interval[1]
    assert "harder prompts or a stricter verifier" in decision.next_step


@pytest.mark.slow
def test_known_pattern_gives_grpo_with_the_right_learnable_fraction(tiny_model_dir):
    decision = probe(tiny_model_dir, "pass", "fail", "coin", "coin", "coin", "fail", "fail", n=8)
    evidence = decision.evidence
    assert decision.route == "grpo"
    successes = evidence.per_prompt_successes
    assert successes[0] == 8 and successes[1] == 0 and successes[5] == 0
    mixed = [i for i, s in enumerate(successes) if 0 < s < 8]
    assert set(mixed) <= {2, 3, 4} and evidence.learnable_prompt_indices == mixed
    assert evidence.learnable_fraction == pytest.approx(len(mixed) / 7)
    saved, samples = load_route(decision.id)
    assert saved == decision and len(samples) == 7 * 8
    assert decision.measured_on.model == str(tiny_model_dir) and decision.measured_on.verifier == BY_MODE.name
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
                            "rows": rows("pass", *["coin"] * 6),
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
    assert updates and updates[-1][0] == updates[-1][1] == 56


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
def test_smollm2_on_the_arithmetic_task_routes_to_grpo_and_its_lengths_size_the_recipe():
    from skill.hardware.specs import HardwareSpec
    from skill.recipe.emit import RecipeRequest, emit_grpo_config
    from skill.recipe.schema import DatasetSpec

    verifier = RewardSpec(name="exact_match", role="correctness", params={"extract": "last_number"})
    decision = route_check(
        RouteRequest(
            signal="exact_answer",
            verifier=verifier,
            probe=ProbeSpec(dataset="embedded:addition", num_prompts=12, max_new_tokens=16),
        )
    )
    assert decision.route == "grpo", decision.reasons
    assert 0 < decision.evidence.pass_at_1 < 0.5 and decision.evidence.learnable_fraction >= 0.25
    # The probe's lengths size the recipe: the base model rambles past 16 tokens more often than not, so a recipe
    # following this route is raised above the probe's budget, and a 16-token override is refused.
    lengths = decision.completion_lengths
    assert lengths.budget == 16 and len(lengths.tokens) == 96 and lengths.truncated > 48, lengths
    request = RecipeRequest(
        hardware=HardwareSpec(accelerator="cpu"),
        method="full",
        rewards=[verifier],
        dataset=DatasetSpec(name="embedded:addition"),
        route_decision_id=decision.id,
    )
    recipe = emit_grpo_config(request)
    assert recipe.trl["max_completion_length"] == 32, recipe.reasons
    assert any("probe again (route_check) with max_new_tokens" in line for line in recipe.provenance.validation)
    with pytest.raises(SkillError, match="max_completion_length=16 would cut"):
        emit_grpo_config(request.model_copy(update={"overrides": {"max_completion_length": 16}}))


@pytest.mark.slow
def test_a_verifier_that_reads_nothing_decides_no_route_and_names_the_mode_that_reads():
    """SmolLM2 asked for <answer> tags mostly answers without them: a verifier reading tags would score its right
    answers 0 and send it to SFT. The probe refuses instead, naming the extract mode that reads the most of the
    same completions."""
    from skill.data import addition_rows

    tagged = []
    for row in addition_rows(12):
        question = row["prompt"][0]["content"].replace(
            "Answer with just the number.", "Put the answer inside <answer></answer> tags."
        )
        tagged.append({"prompt": [{"role": "user", "content": question}], "answer": row["answer"]})
    with pytest.raises(SkillError, match=r"exact_match \(extract 'answer_tag'\) found an answer in \d+% of \d+ ") as no:
        route_check(
            RouteRequest(
                signal="exact_answer",
                verifier=RewardSpec(name="exact_match", role="correctness", params={"extract": "answer_tag"}),
                probe=ProbeSpec(rows=tagged, max_new_tokens=24),
            )
        )
    assert "No route was decided" in no.value.problem
    assert re.search(r"Send params.extract '(last_number|boxed)' \(it reads \d+% of the same", no.value.fix)


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


def test_declared_pass_rate_decides_marked_declared_and_still_asks_for_a_measurement():
    declared = {"pass_rate": 0.3, "n": 100, "source": "our unit-test eval of the base model, 2026-11-30"}
    decision = route_check(RouteRequest(signal="unit_tests", declared=declared))
    assert (decision.route, decision.basis, decision.provisional) == ("grpo", "declared", False)
    assert decision.declared.successes == 30 and decision.measured_on is None
    low, high = decision.declared.interval_95
    assert low == pytest.approx(0.219, abs=1e-3) and high == pytest.approx(0.396, abs=1e-3)
    assert "not measured here" in decision.reasons[0] and declared["source"] in decision.reasons[0]
    assert "measure it when you can" in decision.next_step and "Expected here: 8 prompts x 8 x 32 tokens" in (
        decision.next_step
    )
    saved, samples = load_route(decision.id)
    assert saved == decision and samples == []


@pytest.mark.parametrize(
    ("declared", "route", "decisive_prompts"),
    [
        ({"pass_rate": 0.0, "n": 200}, "lora-qlora-recipes", None),  # 0 of 200: below 0.05 at 95%
        ({"pass_rate": 0.0, "n": 30}, "sample-more", 10),  # 0 of 30 still allows 0.11; 80 samples would not
        ({"pass_rate": 1 / 48, "n": 48}, "sample-more", 29),  # the thin gsm8k probe: 232 samples would decide
        ({"pass_rate": 0.93, "n": 30}, "sample-more", 38),  # the interval reaches 0.9, mixed groups unknown
        ({"pass_rate": 0.97, "n": 500}, "sample-more", 38),  # surely above 0.9, but mixed groups unknown
        ({"pass_rate": 0.97, "n": 500, "learnable_fraction": 0.05, "prompts": 250}, "not-worth-rl", None),
        ({"pass_rate": 0.97, "n": 500, "learnable_fraction": 0.05, "prompts": 20}, "sample-more", 155),
        ({"pass_rate": 0.97, "n": 500, "learnable_fraction": 0.4, "prompts": 100}, "grpo", None),
    ],
)
def test_declared_evidence_decides_by_the_probe_rule_through_its_intervals(declared, route, decisive_prompts):
    decision = route_check(RouteRequest(signal="math_answer", declared={**declared, "source": "my evaluation"}))
    assert (decision.route, decision.basis) == (route, "declared")
    assert decision.provisional == (route == "sample-more") and decision.decisive_num_prompts == decisive_prompts
    assert decision.pass_at_1_interval == decision.declared.interval_95
    if route == "sample-more":
        assert f"Probe again with num_prompts={decisive_prompts} at n=8" in decision.next_step
    if route == "lora-qlora-recipes":
        assert decision.handover.method == "SFT" and "run route_check again" in " ".join(decision.handover.steps)


@pytest.mark.parametrize(
    ("pass_rate", "learnable", "route"),
    [
        ((0, 64), (0, 8), "sample-more"),  # 0 of 64 still allows 0.057: one round is not enough
        ((0, 128), (0, 8), "lora-qlora-recipes"),  # 0 of 128 (both rounds of a default probe): below 0.03
        ((1, 56), (1, 7), "sample-more"),  # 0.00-0.09 straddles 0.05
        ((8, 56), (3, 7), "grpo"),  # 0.07-0.26: above 0.05, below 0.9
        ((64, 64), (0, 8), "sample-more"),  # sure of 0.9, but 0 of 8 prompts allows a learnable 0.32
        ((64, 64), (0, 40), "not-worth-rl"),
        ((60, 64), (4, 8), "grpo"),  # mostly right, half the prompts mixed: GRPO has signal
        ((58, 64), (1, 8), "sample-more"),  # 0.81-0.96 straddles 0.9 with few mixed
    ],
)
def test_the_routing_rule_at_its_boundaries(pass_rate, learnable, route):
    from skill.routing.interval_rule import Rate, decide

    verdict = decide(Rate(*pass_rate, "samples"), Rate(*learnable, "prompts"))
    assert verdict.route == route, verdict.reasons
    if route == "sample-more":
        assert verdict.prompts_to_decide(8) is None or verdict.prompts_to_decide(8) > learnable[1]


@pytest.mark.parametrize(
    ("declared", "message"),
    [
        ({"pass_rate": 30, "n": 100, "source": "eval"}, "less than or equal to 1"),
        ({"pass_rate": 0.3, "n": 0, "source": "eval"}, "greater than 0"),
        ({"pass_rate": 0.3, "source": "eval"}, "n\n  Field required"),
        ({"pass_rate": 0.3, "n": 100}, "source\n  Field required"),
        ({"pass_rate": 0.3, "n": 100, "source": "eval", "samples": 5}, "Extra inputs are not permitted"),
        ({"pass_rate": 0.3, "n": 100, "source": "eval", "learnable_fraction": 0.2}, "learnable_fraction needs prompts"),
    ],
)
def test_bad_declared_evidence_is_refused_with_the_field(declared, message):
    with pytest.raises(ValidationError, match=message):
        RouteRequest(signal="unit_tests", declared=declared)


def test_a_declared_rate_is_ignored_for_signals_that_route_without_one():
    decision = route_check(
        RouteRequest(signal="preference_pairs", declared={"pass_rate": 0.3, "n": 100, "source": "eval"})
    )
    assert decision.route == "preference-optimization" and decision.basis == "signal"
    assert any("was not used" in warning for warning in decision.warnings)


def test_routes_away_hand_over_a_starting_point_that_trl_accepts(tmp_path):
    from trl import DPOConfig, ModelConfig, SFTConfig

    pairs = route_check(RouteRequest(signal="preference_pairs", model="Qwen/Qwen2.5-7B-Instruct"))
    small = route_check(RouteRequest(signal="preference_pairs"))
    demos = route_check(RouteRequest(signal="demonstrations", parameters_billions=0.5))
    judge = route_check(RouteRequest(signal="human_judgment"))
    assert route_check(RouteRequest(signal="math_answer")).handover is None
    dpo = pairs.handover
    assert (dpo.trainer, dpo.fine_tune, set(dpo.data.columns)) == (
        "trl.DPOTrainer",
        "lora",
        {"prompt", "chosen", "rejected"},
    )
    assert set(dpo.data.example) == set(dpo.data.columns)
    values = {value.field: value.value for value in dpo.config}
    assert values["learning_rate"] == 5e-6 and values["beta"] == 0.1 and values["lora_r"] == 32
    assert small.handover.fine_tune == "full" and "model size unknown" in small.handover.config[0].reason
    assert demos.handover.method == "SFT" and {v.field: v.value for v in demos.handover.config}["learning_rate"] == 2e-5
    assert judge.handover.trainer is None and "human_label" in judge.handover.data.columns
    # the judge's bar is the gate's: a judge calibrated to less would fail its blind read
    assert {v.field: v.value for v in judge.handover.config}["agreement_to_reach"] == 0.9
    # Every field is a real field of TRL's config classes (model flags belong to ModelConfig).
    model_fields = {"use_peft", "lora_r", "lora_alpha"}
    for handover, config_class in ((dpo, DPOConfig), (demos.handover, SFTConfig)):
        kwargs = {v.field: v.value for v in handover.config if v.field not in model_fields}
        config = config_class(output_dir=str(tmp_path), use_cpu=True, **{**kwargs, "bf16": False})
        # DPOConfig keeps loss_type as a list of losses; the CLI flag takes the one name.
        assert all(getattr(config, field) in (value, [value]) for field, value in kwargs.items() if field != "bf16")
        for value in handover.config:
            assert f"--{value.field}" in handover.command
    ModelConfig(**{v.field: v.value for v in dpo.config if v.field in model_fields})
    assert dpo.command.startswith("trl dpo --model_name_or_path Qwen/Qwen2.5-7B-Instruct")
    saved, _ = load_route(pairs.id)
    assert saved.handover == dpo


def test_an_sft_handover_reads_the_data_and_targets_the_cpu_it_was_told(tmp_path):
    """The issue's handover: 30 GSM8K-style rows whose answer column holds worked solutions, for a CPU user of
    the embedded model. It names the column as the demonstrations, says 30 rows are too few, and trains on the
    CPU from the model's local copy (no bf16, no Hub id)."""
    from skill.data import DatasetSpec, addition_rows
    from skill.models.sources import resolve_model_path
    from skill.routing.handover import read_demonstrations, sft_handover

    solution = "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips. #### 72"
    data = tmp_path / "gsm8k.jsonl"
    data.write_text(
        "".join(
            json.dumps({"question": f"Question {i}: how many clips?", "answer": solution}) + "\n" for i in range(30)
        )
    )
    request = RouteRequest(
        signal="demonstrations",
        verifier=RewardSpec(name="math", role="correctness"),
        probe=ProbeSpec(dataset=DatasetSpec(name=str(data), prompt_column="question")),
        accelerator="cpu",
    )
    decision = route_check(request)  # the embedded model never gets one right: SFT first
    assert decision.route == "lora-qlora-recipes", decision.reasons
    handover = decision.handover
    assert handover.data_read.model_dump() == {
        "source": str(data),
        "rows": 30,
        "too_few": True,
        "demonstrations_column": "answer",
        "median_words": 16,
        "prompt_columns": ["question"],
    }
    # the prompt is read from 'question' (an agent renamed a 'prompt' column the file does not have)
    assert "column 'answer' already holds worked solutions" in handover.steps[0]
    assert "(question -> prompt, answer -> completion)" in handover.steps[0]
    assert "30 rows are too few" in handover.steps[1]
    values = {value.field: value.value for value in handover.config}
    assert values["use_cpu"] is True and "bf16" not in values
    assert f"--model_name_or_path {resolve_model_path('embedded:SmolLM2-135M-Instruct')} " in handover.command
    # bare answers are no demonstrations, 200 rows are enough, and a GPU user gets bf16 and the published id
    bare = read_demonstrations(addition_rows(64), 200, "embedded:addition", {"prompt"})
    assert bare.demonstrations_column is None and not bare.too_few
    gpu = sft_handover("embedded:SmolLM2-135M-Instruct", None, never_succeeded=True, data=bare)
    assert {value.field: value.value for value in gpu.config}["bf16"] is True
    assert "--model_name_or_path HuggingFaceTB/SmolLM2-135M-Instruct " in gpu.command
    assert gpu.steps[0].startswith("Write or collect correct outputs")


def test_cancelling_a_probe_stops_between_batches_and_saves_nothing(tiny_model_dir, tmp_path, monkeypatch):
    from skill.sampling.progress import Cancelled
    from skill.state import STATE_ROOT_ENV, state_dir

    monkeypatch.setenv(STATE_ROOT_ENV, str(tmp_path / "state"))  # the other worker saves route decisions meanwhile

    asked = []

    def stop_after_first_batch() -> bool:
        asked.append(True)
        return len(asked) > 1

    before = set(state_dir("routes").iterdir())
    request = RouteRequest(
        signal="exact_answer",
        verifier=BY_MODE,
        # 10 prompts x 8 samples: two batches of at most 64 sequences, so there is a point between them.
        probe=ProbeSpec(model=str(tiny_model_dir), rows=rows(*["coin"] * 10), num_prompts=10, max_new_tokens=4),
    )
    with pytest.raises(Cancelled, match=r"Cancelled by the caller: sampling stopped after 64/80 completions"):
        route_check(request, should_stop=stop_after_first_batch)
    assert len(asked) == 2 and set(state_dir("routes").iterdir()) == before
    with pytest.raises(SkillError, match="nothing was saved"):
        route_check(request, should_stop=lambda: True)
    decision = route_check(request, should_stop=lambda: False)
    assert decision.basis == "measured"
    larger = {(e.num_prompts, e.max_new_tokens): e for e in decision.probe_estimates}
    assert set(larger) == {(32, 256), (32, 64)} and larger[(32, 256)].seconds > larger[(32, 64)].seconds
    assert "this probe's own sampling time" in larger[(32, 64)].basis


def test_the_default_probe_is_sized_for_a_minute_and_larger_ones_are_estimated():
    probe = ProbeSpec(dataset="embedded:addition")
    assert (probe.num_prompts, probe.n, probe.max_new_tokens) == (8, 8, 32)
    decision = route_check(RouteRequest(signal="exact_answer"))
    by_size = {(e.num_prompts, e.n, e.max_new_tokens): e.seconds for e in decision.probe_estimates}
    assert by_size[(8, 8, 32)] <= 60 and by_size[(32, 8, 256)] > 30 * 60  # what the old default cost here
    assert "HF_HUB_OFFLINE" in ProbeSpec.model_fields["model"].description


def test_a_measured_route_holds_only_for_its_model_data_and_verifier(tiny_model_dir, tmp_path):
    from skill.hardware.specs import HardwareSpec
    from skill.inspection.run import inspect_rewards
    from skill.inspection.schema import InspectionRequest
    from skill.recipe.emit import RecipeRequest, emit_grpo_config
    from skill.recipe.schema import DatasetSpec, ModelSpec

    data = tmp_path / "modes.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows("pass", "fail", *["coin"] * 5)))
    probe = ProbeSpec(model=str(tiny_model_dir), dataset=str(data), max_new_tokens=4)
    decision = route_check(RouteRequest(signal="exact_answer", verifier=BY_MODE, probe=probe))
    assert decision.route == "grpo", decision.reasons
    assert (decision.measured_on.model, decision.measured_on.dataset) == (str(tiny_model_dir), str(data))

    def emit(model=str(tiny_model_dir), dataset=str(data), rewards=(BY_MODE,)):
        return emit_grpo_config(
            RecipeRequest(
                model=ModelSpec(name=model),
                hardware=HardwareSpec(accelerator="cpu"),
                method="full",
                rewards=list(rewards),
                dataset=DatasetSpec(name=dataset),
                route_decision_id=decision.id,
            )
        )

    line = next(line for line in emit().provenance.validation if line.startswith(f"Route {decision.id}"))
    assert "95% interval" in line and "measured on this model, data and verifier" in line
    emit(rewards=(BY_MODE.model_copy(update={"weight": 0.5}), RewardSpec(name="format", role="format", weight=0.1)))
    emit(dataset=decision.learnable_dataset)  # the route's own learnable subset is its data
    exact = RewardSpec(name="exact_match", role="correctness")
    for kwargs, what in (
        ({"model": "embedded:SmolLM2-135M-Instruct"}, "model '"),
        ({"dataset": "embedded:addition"}, "dataset '"),
        ({"rewards": (exact,)}, "verifier 'rewards_for_tests:by_mode'"),
    ):
        with pytest.raises(SkillError, match=f"was measured on something else: {what}") as refused:
            emit(**kwargs)
        assert "Run route_check again" in refused.value.fix
    with pytest.raises(SkillError, match="not among this inspection's correctness rewards"):
        inspect_rewards(InspectionRequest(rewards=[exact], route_decision_id=decision.id))


def test_sampling_reports_inside_a_batch_with_the_time_left_and_stops_there(tiny_model_dir, monkeypatch):
    import time

    from skill.sampling import progress
    from skill.sampling.engines import sample_completions
    from skill.sampling.progress import Cancelled
    from skill.sampling.schema import SamplingSettings

    monkeypatch.setattr(progress, "PROGRESS_EVERY_S", 0.05)  # the tiny model decodes a batch in about a second
    updates = []
    settings = SamplingSettings(n=8, max_new_tokens=48, batch_sequences=16)
    stamps = [time.perf_counter()]

    def report(done, total, message):
        stamps.append(time.perf_counter())
        updates.append((done, total, message))

    sample_completions(str(tiny_model_dir), ["a", "b", "c", "d"], settings, report)
    ends = [done for done, _total, _message in updates if float(done).is_integer() and "token" not in _message]
    assert ends == [16, 32] and updates[-1][:2] == (32, 32)
    inside = [message for done, _total, message in updates if "token" in message]
    assert inside and all("of this batch" in message for message in inside)
    assert any("s left" in message for message in inside)
    # no time left is said before a whole batch finished: an early rate counts the load and the token budget
    assert not any("s left" in message for done, _total, message in updates if done < 16)
    assert [done for done, *_ in updates] == sorted(done for done, *_ in updates)  # progress never goes back
    assert max(b - a for a, b in itertools.pairwise(stamps)) < 10  # the promise a client relies on

    asked = []
    with pytest.raises(Cancelled, match="sampling stopped during a batch, after 0 completions"):
        sample_completions(
            str(tiny_model_dir), ["a", "b"], settings, report, should_stop=lambda: asked.append(1) or len(asked) > 1
        )


def test_a_probe_longer_than_a_clients_timeout_says_so_before_it_samples():
    from skill.sampling.progress import Cancelled

    messages = []
    request = RouteRequest(
        signal="exact_answer",
        verifier=RewardSpec(name="exact_match", role="correctness"),
        probe=ProbeSpec(dataset="embedded:addition", num_prompts=64, max_new_tokens=256),
    )
    with pytest.raises(Cancelled):
        route_check(request, progress=lambda done, total, message: messages.append(message), should_stop=lambda: True)
    assert messages and "past the 60 s many clients wait" in messages[0] and "Shrink num_prompts" in messages[0]
    assert "when nothing passes" in messages[0]  # the second round, at the low temperature, counted too
    # inspect_rewards' own sampling says so the same way.
    from skill.inspection.run import inspect_rewards
    from skill.inspection.schema import GenerateSamples, InspectionRequest

    messages.clear()
    generate = GenerateSamples(dataset="embedded:addition", num_prompts=64, max_new_tokens=256)
    with pytest.raises(Cancelled):
        inspect_rewards(
            InspectionRequest(rewards=[request.verifier], generate=generate),
            progress=lambda done, total, message: messages.append(message),
            should_stop=lambda: True,
        )
    assert messages and messages[0].startswith("Sampling 64 prompts x 8 x 256 tokens is expected to take ")


@pytest.mark.slow
def test_gsm8k_problems_with_the_embedded_model_are_never_routed_to_grpo_on_thin_evidence():
    from skill.data import DatasetSpec, load_rows
    from skill.recipe.deciding.completion_budget import reference_answer_tokens, size_completion_budget

    gsm8k = DatasetSpec(
        name=str(Path(__file__).parent / "data" / "gsm8k_sample.jsonl"),
        prompt_template="Solve: {question}",
        answer_column="answer",
        answer_extractor="gsm8k",
    )
    verifier = RewardSpec(name="exact_match", role="correctness", params={"extract": "last_number"})
    probe = ProbeSpec(rows=load_rows(gsm8k), n=10, max_new_tokens=32)  # 5 problems x 10: the 50-sample floor
    decision = route_check(RouteRequest(signal="math_answer", verifier=verifier, probe=probe))
    assert decision.route in ("lora-qlora-recipes", "sample-more"), decision.reasons
    # 32 tokens cut most of the model's worked answers: the budget a recipe for this task gets (the math reward,
    # the worked solutions) runs far past the probe's, and says the probe did not measure it.
    lengths = decision.completion_lengths
    assert lengths.truncated > len(lengths.tokens) / 2, lengths
    references = reference_answer_tokens(gsm8k, "embedded:SmolLM2-135M-Instruct")
    math = RewardSpec(name="math", role="correctness")
    sized = size_completion_budget(lengths, references, [math], seed=256)
    assert sized.value >= 256 and lengths.truncated_at(sized.value) is None, sized
    assert "the probe cut" in sized.reason and "reference answers' p90" in sized.reason and sized.warnings
    assert "95% interval" in decision.reasons[0] and "samples" in decision.reasons[0]
    if decision.route == "sample-more":
        assert decision.next_step.startswith(f"Probe again with num_prompts={decision.decisive_num_prompts} at n=10")


def test_a_probe_that_cut_most_completions_decides_only_provisionally(tiny_model_dir):
    """The tiny model never stops within 8 tokens: the route stands, provisional, with the budget to probe at."""
    decision = probe(tiny_model_dir, "pass", "fail", "coin", "coin", "coin", "fail", "fail", n=8)
    lengths = decision.completion_lengths
    assert lengths.truncated == len(lengths.tokens) and decision.provisional
    assert any("cut at 8 tokens: a cut completion has no answer" in warning for warning in decision.warnings)
    assert decision.next_step.endswith(
        "probe again with max_new_tokens=16 (100% of the probe's completions were cut at 8 tokens)."
    )
    # Every pass counts, cut ones at the budget: it passed within it.
    assert lengths.passing_tokens == [8] * sum(decision.evidence.per_prompt_successes) != []


def test_a_verifier_stricter_than_the_task_makes_a_never_succeeds_route_provisional():
    """Found by an agent of bench/agent_eval: exact_match reading the whole completion passed 0 of 128 and routed to
    SFT, while the model wrote "9 + 8 = 17"; read as the last number, 16% of the same completions passed."""
    from types import SimpleNamespace

    from skill.routing.probe import looser_extract
    from skill.routing.route import RouteDecision, provisional_when_read_strictly

    rows = [{"prompt": "What is 9 + 8?", "answer": "17"}, {"prompt": "What is 2 + 2?", "answer": "4"}]
    groups = [
        SimpleNamespace(prompt_index=0, prompt=rows[0]["prompt"], completions=["9 + 8 = 17", "It is 18."]),
        SimpleNamespace(prompt_index=1, prompt=rows[1]["prompt"], completions=["The answer is 4.", "Four."]),
    ]
    strict = RewardSpec(name="exact_match", role="correctness", params={"extract": "whole"})
    probe = ProbeSpec(rows=rows)
    assert looser_extract(strict, rows, groups, probe) == ("last_number", 0.5)
    assert looser_extract(RewardSpec(name="math", role="correctness"), rows, groups, probe) is None  # no extract

    evidence = RouteEvidence.model_construct(looser_extract=("last_number", 0.16))
    decision = RouteDecision(
        id="route-x",
        route="lora-qlora-recipes",
        provisional=False,
        basis="measured",
        reasons=["never"],
        evidence=evidence,
        next_skill="lora-qlora-recipes",
        next_step="Fine-tune first.",
    )
    provisional_when_read_strictly(decision, strict)
    assert (
        decision.provisional
        and "params.extract 'last_number' 16% of the same completions pass" in (decision.warnings[0])
    )
    assert decision.next_step.startswith("If a right answer may come with words around it")


def test_a_probe_that_cut_over_a_quarter_says_its_pass_rate_is_a_floor():
    """Found by an agent of bench/agent_eval: 25 of 64 completions cut at 32 tokens, and the route said nothing."""
    from types import SimpleNamespace

    from skill.routing.evidence import CompletionLengths
    from skill.routing.route import say_what_was_cut

    def decided(truncated: int) -> SimpleNamespace:
        tokens = sorted([32] * truncated + [9] * (64 - truncated))
        lengths = CompletionLengths(budget=32, tokens=tokens, truncated=truncated, passing_tokens=[9])
        decision = SimpleNamespace(completion_lengths=lengths, warnings=[], provisional=False, next_step="Emit.")
        say_what_was_cut(decision, 32)
        return decision

    assert decided(16).warnings == []  # a quarter: the recipe's own budget rule allows it
    floor = decided(25)
    assert not floor.provisional and floor.next_step == "Emit."
    assert floor.warnings == [
        "39% of the probe's completions were cut at 32 tokens: a cut completion counts as failed, so the pass rate "
        "is a floor (max_new_tokens=64 measures them)."
    ]
    assert decided(40).provisional


def test_a_sample_more_below_the_boundary_hands_over_where_it_leans():
    """Found by an agent of bench/agent_eval: 1 pass in 56 (interval 0.00-0.09) asked for a 16-minute probe on a CPU
    and gave no handover, so an agent that could not probe more worked out the SFT step alone."""
    from types import SimpleNamespace

    from skill.routing.route import leaning_to_sft

    def decision(route: str, pass_at_1: float) -> SimpleNamespace:
        evidence = SimpleNamespace(pass_at_1=pass_at_1)
        return SimpleNamespace(route=route, evidence=evidence, next_step="Probe again with num_prompts=28 at n=8.")

    low = decision("sample-more", 1 / 56)
    assert leaning_to_sft(low) == "lora-qlora-recipes"
    assert low.next_step.endswith("pass@1 0.02 lies below 0.05, on the SFT side, and handover is that starting point.")
    assert leaning_to_sft(decision("sample-more", 0.07)) is None  # above the boundary: GRPO's side, no handover
    assert leaning_to_sft(decision("grpo", 0.02)) is None


def test_a_default_probe_on_a_busy_machine_says_so_before_it_samples(monkeypatch):
    """Found by agents of bench/agent_eval: the default probe, "about 30 s a round", took 611 s while eight agents
    shared 2 cores, and nothing said so up front."""
    import skill.routing.probe as probe_module

    messages = []
    record = lambda done, total, message: messages.append(message)  # noqa: E731
    monkeypatch.setattr(probe_module, "machine_load", lambda: (1.0, 2))
    probe_module.warn_before_long_sampling(record, "embedded:SmolLM2-135M-Instruct", 8, 8, 32)
    assert messages == []  # about 30 s: within a client's minute
    monkeypatch.setattr(probe_module, "machine_load", lambda: (9.0, 2))
    probe_module.warn_before_long_sampling(record, "embedded:SmolLM2-135M-Instruct", 8, 8, 32)
    assert len(messages) == 1 and "at least" in messages[0]
    assert "at this machine's load now (load average 9.0 on 2 cores; about" in messages[0]
