"""The vLLM path's decisions (importance sampling, colocated tensor parallel, sleep mode, a remote server's URL),
the cross-field refusals emit stands in front of GRPOTrainer with, and the reference model's price."""

from __future__ import annotations

import pytest

from skill.errors import SkillError
from skill.hardware.specs import HardwareSpec
from skill.memory.estimate import estimate_memory
from skill.memory.schema import MemoryRequest
from skill.recipe.checking.compatibility import refuse_incompatible
from skill.recipe.deciding.vllm_decisions import (
    colocate_tensor_parallel,
    importance_sampling_fields,
    sleep_mode_decision,
)
from skill.recipe.emit import RecipeRequest, emit_as_asked
from skill.recipe.launching.launch import launch_files
from skill.recipe.schema import DatasetSpec, ModelSpec
from skill.rewards.spec import RewardSpec


def gpu_recipe(model: str, method: str, gpus: int = 1, gpu: str = "H100", **changes):
    """The recipe as asked, whatever its memory verdict: these tests read its vLLM decisions."""
    return emit_as_asked(
        RecipeRequest(
            model=ModelSpec(name=model),
            hardware=HardwareSpec(gpu_model=gpu, gpus_per_node=gpus),
            method=method,
            rewards=[RewardSpec(name="exact_match", role="correctness")],
            dataset=DatasetSpec(name="embedded:addition", columns=["answer"]),
            **changes,
        )
    )


def test_importance_sampling_truncates_per_token_and_its_cap_follows_a_chosen_mode():
    for level in ("token", "sequence"):  # GSPO's ratios too: sequence_mask would drop long answers whole
        fields = importance_sampling_fields({"use_vllm": True, "importance_sampling_level": level})
        assert {f: v for f, v, _ in fields} == {
            "vllm_importance_sampling_correction": True,
            "vllm_importance_sampling_mode": "token_truncate",
            "vllm_importance_sampling_clip_max": 2.0,
        }
    masked = importance_sampling_fields({"use_vllm": True, "vllm_importance_sampling_mode": "token_mask"})
    assert masked[2][1] == 3.0 and "drops its token" in masked[2][2]


def test_a_caller_or_variant_mode_keeps_its_cap_and_variant_provenance_names_only_what_stayed():
    masked = {"vllm_importance_sampling_mode": "sequence_mask"}
    mask = gpu_recipe("Qwen/Qwen2.5-1.5B-Instruct", "full", overrides=masked)
    assert mask.trl["vllm_importance_sampling_clip_max"] == 3.0  # not TIS's 2.0 for a mask
    gspo = gpu_recipe("Qwen/Qwen2.5-1.5B-Instruct", "full", variant="gspo", overrides={"epsilon": 0.2})
    assert gspo.trl["vllm_importance_sampling_mode"] == "token_truncate"
    assert "epsilon" not in gspo.variant.changes and gspo.variant.changes["loss_type"] == "gspo"
    assert any("overruled by the caller's override epsilon=0.2" in line for line in gspo.variant.dropped)


def test_colocated_tensor_parallel_splits_only_what_does_not_fit():
    eight = HardwareSpec(gpu_model="H100", gpus_per_node=8)
    colocate = {"use_vllm": True, "vllm_mode": "colocate", "vllm_gpu_memory_utilization": 0.3}
    assert colocate_tensor_parallel(colocate, eight, 7.6)[0][1] == 1
    assert colocate_tensor_parallel(colocate, eight, 32.8)[0][1] == 4  # 61 GiB bf16 over a 23.9 GiB share
    assert colocate_tensor_parallel(colocate, eight, 72.7)[0][1] == 8
    assert colocate_tensor_parallel(colocate, HardwareSpec(accelerator="cpu"), 32.8) == []


def test_sleep_mode_is_on_only_when_it_makes_colocated_memory_fit():
    short = MemoryRequest(
        model="Qwen/Qwen2.5-1.5B-Instruct", hardware=HardwareSpec(gpu_model="L4"), beta=0.01, dtype="bfloat16"
    )
    field, value, reason = sleep_mode_decision(short, 1.54, 6.7)
    assert (field, value) == ("vllm_enable_sleep_mode", True)
    assert "does not fit" in reason and "sleep(level=2)" in reason and "no host copy" in reason
    assert "at most about 0.4 s a step" in reason  # 0.17 s + 0.078 s/GB x 3.08 GB of bf16 weights
    roomy = short.model_copy(update={"hardware": HardwareSpec(gpu_model="H100")})
    assert sleep_mode_decision(roomy, 1.54, 23.9)[1] is False


def test_emit_decides_the_vllm_fields_and_states_the_reference_price():
    recipe = gpu_recipe("Qwen/Qwen2.5-7B-Instruct", "full", max_steps=10)
    trl, reasons = recipe.trl, {reason.field: reason.reason for reason in recipe.reasons}
    assert trl["vllm_importance_sampling_mode"] == "token_truncate" and trl["vllm_tensor_parallel_size"] == 1
    assert trl["vllm_enable_sleep_mode"] in (True, False) and "vllm_enable_sleep_mode" in reasons
    assert "28.4 GiB per GPU under DDP" in reasons["beta"] and "beta=0" in reasons["beta"]
    lora = gpu_recipe("Qwen/Qwen2.5-7B-Instruct", "lora", max_steps=10)
    assert "GiB" not in {reason.field: reason.reason for reason in lora.reasons}["beta"]  # no copy under PEFT


def test_a_remote_server_url_is_kept_with_its_reason_and_refused_without_a_server():
    url = "http://10.0.0.5:8000"
    recipe = gpu_recipe("Qwen/Qwen2.5-1.5B-Instruct", "lora", 8, overrides={"vllm_server_base_url": url})
    assert recipe.trl["vllm_server_base_url"] == url
    assert "rank-0 client" in {reason.field: reason.reason for reason in recipe.reasons}["vllm_server_base_url"]
    # The server runs elsewhere: the plan starts none and every GPU of the node trains.
    assert recipe.launch.vllm_server_gpus == 0 and recipe.launch.training_processes == 8
    assert not any(name.startswith("vllm") for name in recipe.launch.commands)
    assert "vllm-serve" not in next(text for name, text in launch_files(recipe).files.items() if name.endswith(".sh"))
    with pytest.raises(SkillError, match="only in server mode"):
        gpu_recipe("Qwen/Qwen2.5-1.5B-Instruct", "lora", overrides={"vllm_server_base_url": url})


@pytest.mark.parametrize(
    ("trl", "method", "words"),
    [
        ({"loss_type": "vespo", "use_vllm": True}, "lora", "GRPOTrainer refuses it"),
        ({"loss_type": "luspo"}, "full", "LUSPO is a sequence-level loss"),
        ({"loss_type": "vespo", "importance_sampling_level": "sequence"}, "full", "VESPO builds"),
        ({"loss_type": "dapo", "importance_sampling_level": "sequence"}, "full", "weighs by its length"),
        ({"sync_ref_model": True}, "full", "no reference model to synchronise"),
        ({"sync_ref_model": True, "beta": 0.01}, "lora", "NotImplementedError"),
        ({"use_vllm": True, "vllm_importance_sampling_clip_min": 3.0}, "full", "is not below"),
        ({"use_vllm": True, "ds3_gather_for_generation": False}, "full", "gathered weights"),
        ({"loss_type": "cispo"}, "full", r"epsilon \(epsilon_high is unset\) = 0.2"),
        ({"loss_type": "cispo", "epsilon_high": 0.28}, "full", "every on-policy token is capped"),
        ({"multi_objective_aggregation": "normalize_then_sum", "scale_rewards": "none"}, "full", "ignores"),
        ({"use_liger_kernel": True, "liger_kernel_config": {"fused_linear_cross_entropy": True}}, "lora", "refuses"),
        ({"vllm_importance_sampling_cap": 5.0}, "full", "overwrites vllm_importance_sampling_clip_max"),
        ({"use_transformers_paged": True}, "full", "overwrites use_transformers_continuous_batching"),
    ],
)
def test_combinations_grpo_trainer_rejects_are_refused(trl, method, words):
    with pytest.raises(SkillError, match=words) as refused:
        refuse_incompatible(trl, method)
    assert refused.value.fix.startswith("Send")


def test_what_the_refusals_ask_for_is_accepted():
    refuse_incompatible({"loss_type": "cispo", "epsilon_high": 5.0}, "full")
    refuse_incompatible({"multi_objective_aggregation": "normalize_then_sum", "scale_rewards": "group"}, "full")
    refuse_incompatible({"use_liger_kernel": True, "liger_kernel_config": {"rms_norm": True}}, "lora")
    refuse_incompatible({"vllm_importance_sampling_clip_max": 5.0}, "full")


def test_beta_zero_is_the_first_remedy_when_it_is_the_cheapest_that_fits():
    request = MemoryRequest(
        model="Qwen/Qwen2.5-7B-Instruct",
        hardware=HardwareSpec(gpu_model="H100"),
        dtype="bfloat16",
        beta=0.01,
        use_vllm=False,
        per_device_train_batch_size=1,
    )
    fitting = [remedy for remedy in estimate_memory(request).remedies if remedy.fits]
    assert fitting[0].name == "beta_zero" and fitting[0].changes == {"beta": 0.0}
    assert "beta_zero" not in [r.name for r in estimate_memory(request.model_copy(update={"beta": 0.0})).remedies]


def test_the_deprecated_aliases_really_overwrite(tmp_path):
    from trl import GRPOConfig

    aliased = GRPOConfig(
        output_dir=str(tmp_path),
        use_cpu=True,
        report_to="none",
        vllm_importance_sampling_cap=5.0,
        vllm_importance_sampling_clip_max=2.0,
        use_transformers_paged=True,
    )
    assert aliased.vllm_importance_sampling_clip_max == 5.0 and aliased.use_transformers_continuous_batching
