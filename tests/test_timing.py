"""The step-time estimate (skill.timing): monotonic where it must be, bandwidth-bound decode, money only when
priced, refusals, and the validation table."""

from __future__ import annotations

import pytest

from skill.errors import SkillError
from skill.hardware.specs import KNOWN_GPUS, HardwareSpec
from skill.hardware.throughput import THROUGHPUT
from skill.models.shapes import SHAPES
from skill.timing.estimate import StepTimeRequest, estimate_step_time
from skill.timing.validation import load_rows, validation_summary


def _request(**changes) -> StepTimeRequest:
    base = dict(
        shape=SHAPES["qwen2.5-7b"].shape,
        hardware=HardwareSpec(gpu_model="H100", gpus_per_node=8),
        completions_per_step=256,
        prompt_tokens=200,
        max_completion_length=1024,
        training_processes=8,
        max_steps=100,
    )
    return StepTimeRequest(**{**base, **changes})


def test_more_tokens_and_larger_models_take_longer():
    short, long = estimate_step_time(_request(max_completion_length=256)), estimate_step_time(_request())
    assert short.generation_s < long.generation_s and short.training_s < long.training_s
    small = estimate_step_time(_request(shape=SHAPES["qwen2.5-1.5b"].shape))
    big = estimate_step_time(_request(shape=SHAPES["qwen2.5-32b"].shape))
    assert small.seconds_per_step < long.seconds_per_step < big.seconds_per_step


def test_decode_is_bandwidth_bound_at_small_batches():
    # One completion per engine: the decode reads the weights once a token, so twice the bandwidth halves it.
    one = dict(completions_per_step=8, prompt_tokens=1, max_completion_length=512)
    h100 = estimate_step_time(_request(**one)).generation_s
    h200 = estimate_step_time(_request(**one, hardware=HardwareSpec(gpu_model="H200", gpus_per_node=8))).generation_s
    assert h200 == pytest.approx(h100 * 3.35 / 4.8, rel=0.05)  # same peak compute, 4.8 vs 3.35 TB/s


def test_measured_lengths_shorten_generation_and_are_said():
    probe = estimate_step_time(_request(completion_tokens=[100] * 50 + [300] * 10))
    budget = estimate_step_time(_request())
    assert probe.generation_s < budget.generation_s
    assert "measured completions" in probe.assumptions[0] and "max_completion_length" in budget.assumptions[0]


def test_money_only_when_priced_and_refusals():
    assert estimate_step_time(_request()).cost is None
    priced = estimate_step_time(_request(price_per_gpu_hour=3.0))
    assert priced.cost == pytest.approx(priced.gpu_hours * 3.0, abs=0.01)
    assert priced.gpu_hours == pytest.approx(priced.total_s * 8 / 3600, rel=0.01)
    with pytest.raises(SkillError, match="negative"):
        _request(price_per_gpu_hour=-1.0)
    with pytest.raises(SkillError, match="No peak compute"):
        estimate_step_time(_request(hardware=HardwareSpec(gpu_model="Mystery", memory_gib_per_gpu=40)))


def test_server_mode_pays_a_weight_broadcast_and_lora_trains_cheaper():
    colocate = estimate_step_time(_request())
    server = estimate_step_time(_request(generation="vllm_server", vllm_server_gpus=2, training_processes=6))
    assert server.weight_sync_s > colocate.weight_sync_s
    assert estimate_step_time(_request(method="lora")).training_s < colocate.training_s


def test_cpu_target_and_summary():
    estimate = estimate_step_time(
        _request(
            shape=SHAPES["smollm2-135m"].shape,
            hardware=HardwareSpec(accelerator="cpu"),
            dtype="float32",
            generation="transformers",
            completions_per_step=16,
            prompt_tokens=35,
            max_completion_length=48,
            training_processes=1,
            max_steps=40,
        )
    )
    assert estimate.gpus == 0 and estimate.gpu_hours is None and estimate.overhead_s > 0
    assert estimate.summary().startswith("~") and "x 40 steps" in estimate.summary()


def test_every_known_gpu_has_a_throughput():
    assert set(KNOWN_GPUS) <= set(THROUGHPUT)


def test_validation_table_is_cited_and_summarised():
    rows = load_rows()
    published = [row for row in rows if row.kind == "published"]
    assert len(published) >= 8 and all(row.source and row.where for row in rows)
    summary = validation_summary()
    assert summary["median_absolute_error"] >= 0 and summary["within_2x"].endswith(f"/{len(published)}")
    assert summary["cpu_within_30_percent"], summary["cpu_errors"]
