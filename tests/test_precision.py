"""Precision that learns: full fine-tunes keep float32 master weights under bf16 autocast, pure half-precision
weights need a stated reason, adapters stay float32, and the memory estimate counts the precision used."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from skill.errors import SkillError
from skill.hardware.specs import HardwareSpec
from skill.memory.estimate import estimate_memory
from skill.memory.schema import GIB
from skill.models.size import resolve_shape
from skill.recipe.deciding.memory_request import memory_request
from skill.recipe.emit import RecipeRequest, emit_grpo_config
from skill.recipe.schema import DatasetSpec, ModelSpec
from skill.rewards.spec import RewardSpec

BENCH = Path(__file__).resolve().parent.parent / "bench"
MODEL = "Qwen/Qwen2.5-1.5B-Instruct"
PURE_BF16 = {"model_init_kwargs": {"dtype": "bfloat16"}}


def request(**changes) -> RecipeRequest:
    fields = {
        "model": ModelSpec(name=MODEL),
        "hardware": HardwareSpec(gpu_model="H100"),
        "method": "full",
        "rewards": [RewardSpec(name="exact_match", role="correctness")],
        "dataset": DatasetSpec(name="openai/gsm8k", columns=["answer"]),
    }
    return RecipeRequest(**{**fields, **changes})


def test_a_full_gpu_recipe_keeps_fp32_master_weights_under_bf16_autocast():
    recipe = emit_grpo_config(request())
    assert recipe.trl["model_init_kwargs"] == {"dtype": "float32"} and recipe.trl["bf16"] is True
    reason = next(item.reason for item in recipe.reasons if item.field == "model_init_kwargs")
    assert "fp32 master weights" in reason


def test_pure_bf16_weights_need_a_stated_reason():
    with pytest.raises(SkillError, match="barely train") as refused:
        emit_grpo_config(request(overrides=PURE_BF16))
    assert "override_reasons['model_init_kwargs']" in refused.value.fix
    why = "stochastic-rounding AdamW from my own training loop"
    recipe = emit_grpo_config(request(overrides=PURE_BF16, override_reasons={"model_init_kwargs": why}))
    stated = next(item for item in recipe.reasons if item.field == "model_init_kwargs")
    assert recipe.trl["model_init_kwargs"]["dtype"] == "bfloat16" and stated.reason == why
    lora = emit_grpo_config(request(method="lora"))  # a frozen base needs no reason
    assert lora.trl["model_init_kwargs"]["dtype"] == "bfloat16"


def test_peft_keeps_lora_adapters_in_float32_on_a_bf16_base(tiny_model_dir):
    import torch
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM

    from skill.recipe.schema import PeftSpec

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.bfloat16)
    wrapped = get_peft_model(model, PeftSpec(r=4).to_peft_config())
    trained = {parameter.dtype for parameter in wrapped.parameters() if parameter.requires_grad}
    frozen = {parameter.dtype for parameter in wrapped.parameters() if not parameter.requires_grad}
    assert trained == {torch.float32} and frozen == {torch.bfloat16}


def test_the_estimate_counts_fp32_master_weights_and_half_precision_compute():
    full = memory_request(emit_grpo_config(request()))
    assert full.dtype == "float32" and full.mixed_precision is True
    parameters = resolve_shape(MODEL).parameters()
    estimate = estimate_memory(full)
    components = estimate.components
    assert components.weights == pytest.approx(parameters * 4 / GIB)  # fp32 weights
    assert components.gradients == pytest.approx(parameters * 4 / GIB)  # fp32 gradients
    assert components.optimizer == pytest.approx(parameters * 8 / GIB)  # two fp32 Adam states
    assert components.reference == pytest.approx(parameters * 4 / GIB)  # TRL loads the reference alike
    pure = estimate_memory(full.model_copy(update={"dtype": "bfloat16"}))
    # vLLM serves bf16 either way, so its KV cache is the same; autocast adds a bf16 copy of the matmul weights.
    assert estimate.vllm_kv_cache_tokens == pure.vllm_kv_cache_tokens
    assert components.activations > pure.components.activations + 0.9 * parameters * 2 / GIB
    no_autocast = estimate_memory(full.model_copy(update={"mixed_precision": False}))
    # vLLM's dtype "auto" serves a float32 checkpoint in half precision whatever the trainer computes in.
    assert no_autocast.vllm_kv_cache_tokens == estimate.vllm_kv_cache_tokens


@pytest.mark.slow
def test_fp32_master_weights_move_at_the_seed_learning_rate_where_bf16_weights_do_not(tiny_model_dir):
    spec = importlib.util.spec_from_file_location("weights_moved", BENCH / "weights_moved.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    result = bench.measure(str(tiny_model_dir), steps=5, learning_rate=5e-7)
    master, pure = result["fp32_master"], result["pure_bf16"]
    # Measured here: about 99.9% vs 0.9% of the decoder weights; the margins are wide on purpose.
    assert master["layer_moved_fraction"] > 0.9
    assert pure["layer_moved_fraction"] < 0.1
    assert master["moved_fraction"] > 10 * pure["moved_fraction"]
