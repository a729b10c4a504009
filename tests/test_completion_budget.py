"""max_completion_length from the task (skill.recipe.deciding.completion_budget): the rule on boundary cases, the
lengths sampling measures, and emit_grpo_config's use of them. The probes of real models on the addition and
gsm8k-format tasks are in tests/test_routing.py, which sizes recipes from them."""

from __future__ import annotations

from pathlib import Path

import pytest

from skill.errors import SkillError
from skill.hardware.specs import HardwareSpec
from skill.recipe.deciding.completion_budget import (
    REASONING_FLOOR,
    check_budget_override,
    reference_answer_tokens,
    size_completion_budget,
)
from skill.recipe.emit import RecipeRequest, emit_grpo_config
from skill.recipe.schema import DatasetSpec, ModelSpec
from skill.rewards.spec import RewardSpec
from skill.routing.evidence import CUT_AT_MOST, CompletionLengths
from skill.sampling.engines import sample_completions
from skill.sampling.schema import SamplingSettings

EXACT = RewardSpec(name="exact_match", role="correctness", params={"extract": "last_number"})
MATH = RewardSpec(name="math", role="correctness")
GSM8K = DatasetSpec(
    name=str(Path(__file__).parent / "data" / "gsm8k_sample.jsonl"),
    prompt_template="Solve: {question}",
    answer_column="answer",
    answer_extractor="gsm8k",
)


def lengths(budget: int, finished: list[int], cut: int, passing: list[int] = ()) -> CompletionLengths:
    return CompletionLengths(
        budget=budget, tokens=sorted([*finished, *[budget] * cut]), truncated=cut, passing_tokens=sorted(passing)
    )


@pytest.mark.parametrize(
    ("probe", "references", "rewards", "budget", "says"),
    [
        # 14 of 64 cut at 32 (under a quarter): 16 would cut 44%, 32 cuts 22%.
        (lengths(32, [10] * 36 + [20] * 14, 14), None, [EXACT], 32, "32 cuts 22%"),
        # 24 of 64 cut at its own 32 (a budget that cut 38% trained a run clipping most): twice it, probe again.
        (lengths(32, [10] * 20 + [20] * 20, 24), None, [EXACT], 64, "raised to at least twice that, 64"),
        # Most cut at the probe's own budget: raised to twice it, unmeasured there.
        (lengths(16, [8] * 31, 33), None, [EXACT], 32, "raised to at least twice that, 32"),
        # The passing completions need room: 1.5 x their p90 of 40 tokens.
        (
            lengths(64, [8] * 60, 4, passing=[40] * 10),
            None,
            [EXACT],
            64,
            "the p90 of the 10 that passed and finished is 40",
        ),
        # Reference solutions of 150 tokens ask for 225 -> 240.
        (lengths(64, [8] * 64, 0), [150] * 50, [EXACT], 240, "reference answers' p90 is 150"),
        # A math reward never gets less than the floor, whatever the probe says.
        (lengths(64, [8] * 64, 0), None, [MATH], REASONING_FLOOR, "math: a math answer is worked out"),
        # No probe: the seed holds.
        (None, [2] * 50, [EXACT], 256, "no probe measured the model's own lengths"),
    ],
)
def test_the_budget_rule_on_boundary_cases(probe, references, rewards, budget, says):
    sized = size_completion_budget(probe, references, rewards, seed=256)
    assert sized.value == budget, sized.reason
    assert says in sized.reason
    if probe is not None and sized.value <= probe.budget:
        assert probe.truncated_at(sized.value) <= CUT_AT_MOST
    assert bool(sized.warnings) == (probe is not None and probe.truncated > CUT_AT_MOST * len(probe.tokens))


def test_an_override_that_cuts_most_probe_completions_is_refused_and_one_above_the_probe_is_kept():
    probe = lengths(32, [8] * 20 + [20] * 20, 24)
    with pytest.raises(SkillError, match=r"max_completion_length=16 would cut 69% of the route's probe") as refused:
        check_budget_override(16, probe, 32)
    assert "Send at least 32" in refused.value.fix
    check_budget_override(32, probe, 32)  # 38%: kept
    check_budget_override(512, lengths(16, [], 64), 32)  # above the probe's budget: unmeasured, kept
    check_budget_override(8, None, 256)  # no probe: nothing measured to refuse it on
    check_budget_override(0, probe, 32)  # no budget at all: the field check refuses it with what it must be


def test_the_reference_answers_are_read_before_the_extractor():
    """A gsm8k answer column is the worked solution; its '####' number is what the reward compares."""
    tokens = reference_answer_tokens(GSM8K, "embedded:SmolLM2-135M-Instruct")
    assert tokens is not None and len(tokens) == 5 and min(tokens) > 20, tokens
    assert reference_answer_tokens(DatasetSpec(name="embedded:addition"), "embedded:SmolLM2-135M-Instruct")
    assert reference_answer_tokens(DatasetSpec(name="/nonexistent.jsonl"), "embedded:SmolLM2-135M-Instruct") is None


def test_a_gsm8k_format_recipe_without_a_probe_gets_room_to_reason_and_a_cpu_one_is_warned_of_the_cost():
    def emit(hardware, overrides=None):
        return emit_grpo_config(
            RecipeRequest(
                model=ModelSpec(),
                hardware=hardware,
                method="full" if hardware.accelerator == "cpu" else "lora",
                rewards=[MATH],
                dataset=GSM8K,
                overrides=overrides or {},
            )
        )

    for hardware in (HardwareSpec(accelerator="cpu"), HardwareSpec(gpu_model="H100")):
        recipe = emit(hardware)
        reason = next(reason for reason in recipe.reasons if reason.field == "max_completion_length")
        assert recipe.trl["max_completion_length"] >= REASONING_FLOOR and reason.source == "task", reason
        assert "reference answers' p90" in reason.reason and "math:" in reason.reason
        slow = [line for line in recipe.provenance.validation if line.startswith("CPU target: completions")]
        assert bool(slow) == (hardware.accelerator == "cpu"), recipe.provenance.validation
    # Without a probe nothing measured refuses a short override; the reason keeps the caller's word.
    assert emit(HardwareSpec(accelerator="cpu"), {"max_completion_length": 32}).trl["max_completion_length"] == 32


def test_sampling_counts_each_completions_tokens_and_whether_the_budget_cut_it(tiny_model_dir):
    groups = sample_completions(
        str(tiny_model_dir), ["a b c", "d e"], SamplingSettings(n=8, max_new_tokens=6, temperature=1.0)
    ).groups
    counts = [count for group in groups for count in group.token_counts]
    cut = [flag for group in groups for flag in group.truncated]
    assert len(counts) == len(cut) == 16 and all(0 <= count <= 6 for count in counts)
    assert all(count == 6 for count, flag in zip(counts, cut, strict=True) if flag)
    assert any(cut), "a random 2-layer model rarely ends a completion within 6 tokens"
