"""emit_grpo_config: the seed recipe, what hardware implies, and every refusal a caller can fix."""

from __future__ import annotations

import pytest

from skill.errors import SkillError
from skill.hardware.specs import HardwareSpec
from skill.memory.estimate import MemoryRequest, estimate_memory
from skill.models.size import resolve_shape
from skill.recipe.checking.trl_contract import recipe_grpo_config, supported_choices
from skill.recipe.emit import RecipeRequest, emit_as_asked, emit_grpo_config
from skill.recipe.schema import DatasetSpec, ModelSpec
from skill.rewards.spec import RewardSpec

REWARDS = [
    RewardSpec(name="format", role="format", weight=0.2),
    RewardSpec(name="exact_match", role="correctness", weight=1.0),
]


def request(**changes) -> RecipeRequest:
    fields = {
        "model": ModelSpec(name="Qwen/Qwen2.5-1.5B-Instruct"),
        "hardware": HardwareSpec(gpu_model="H100"),
        "method": "full",
        "rewards": REWARDS,
        "dataset": DatasetSpec(name="openai/gsm8k", columns=["answer"]),
    }
    fields.update(changes)
    return RecipeRequest(**fields)


def test_a_dataset_file_that_is_not_there_is_refused_before_any_work(tmp_path):
    missing = tmp_path / "rows.jsonl"
    for method in ("full", "auto"):
        with pytest.raises(SkillError, match="is not a readable .jsonl/.json/.csv/.parquet file") as refused:
            emit_grpo_config(request(method=method, dataset=DatasetSpec(name=str(missing))))
        assert "Send the path of an existing file" in refused.value.fix


def test_seed_defaults_on_one_gpu():
    recipe = emit_grpo_config(request())
    trl = recipe.trl
    assert trl["num_generations"] == 8
    assert trl["learning_rate"] == 5e-7
    assert trl["beta"] == 0.01
    assert (trl["per_device_train_batch_size"], trl["gradient_accumulation_steps"]) == (8, 4)
    assert trl["logging_steps"] == 10 and trl["seed"] == 3407
    assert trl["bf16"] is True and trl["fp16"] is False
    assert trl["model_init_kwargs"]["dtype"] == "float32"  # fp32 master weights under bf16 autocast
    assert trl["use_vllm"] is True and trl["vllm_mode"] == "colocate"
    assert trl["reward_weights"] == [0.2, 1.0]
    assert recipe.launch.training_processes == 1 and recipe.launch.vllm_server_gpus == 0


def test_every_relied_on_value_is_stated_with_a_reason():
    recipe = emit_grpo_config(request())
    # TRL's own defaults differ from the seed on these; the recipe must never inherit them silently.
    for field in ("beta", "learning_rate", "loss_type", "bf16", "gradient_checkpointing", "scale_rewards"):
        assert field in recipe.trl
    assert "activation_checkpointing" not in recipe.trl  # the GPU target's transformers (5.17) lacks it
    reasons = {reason.field: reason for reason in recipe.reasons}
    assert set(reasons) == set(recipe.trl) | {"dataset.max_prompt_tokens"}  # the prompt budget, measured or not
    assert all(reason.reason for reason in reasons.values())


def test_several_gpus_use_a_separate_vllm_server():
    recipe = emit_grpo_config(request(hardware=HardwareSpec(gpu_model="A100-80GB", gpus_per_node=8, nodes=2)))
    assert recipe.trl["vllm_mode"] == "server"
    assert recipe.launch.vllm_server_gpus == 1
    assert recipe.launch.training_processes == 15
    assert recipe.launch.launcher == "accelerate"


def test_large_model_gets_tensor_parallel_vllm_server():
    recipe = emit_as_asked(  # 153.7 GiB per GPU under DDP: emit_grpo_config refuses it (the remedy is QLoRA)
        request(
            model=ModelSpec(name="meta-llama/Llama-3.1-70B-Instruct"),
            method="lora",
            hardware=HardwareSpec(gpu_model="H100", gpus_per_node=8),
            sharding="ddp",  # ZeRO-3's whole-model gather at each weight sync cannot fit: refused at emit
        )
    )
    # 70.6B params in bf16 is ~131 GiB: 4 x 74.5 GiB GPUs at half memory each.
    assert recipe.launch.vllm_tensor_parallel_size == 4
    assert recipe.launch.training_processes == 4


def test_cpu_target_has_no_vllm_and_trains_in_fp32():
    recipe = emit_grpo_config(request(model=ModelSpec(), hardware=HardwareSpec(accelerator="cpu")))
    trl = recipe.trl
    assert trl["use_vllm"] is False and "vllm_mode" not in trl
    assert trl["use_cpu"] is True and trl["bf16"] is False and trl["fp16"] is False
    assert trl["model_init_kwargs"] == {"dtype": "float32"}
    assert recipe.provenance.validation[0].startswith("Built a real trl.GRPOConfig")


def test_gpu_without_bf16_trains_in_fp16():
    recipe = emit_as_asked(request(hardware=HardwareSpec(gpu_model="T4")))  # a 1.5B full fine-tune: 41 of 15 GiB
    assert recipe.trl["fp16"] is True and recipe.trl["bf16"] is False
    assert recipe.trl["model_init_kwargs"]["dtype"] == "float32"  # fp32 master weights under fp16 autocast
    lora = emit_grpo_config(request(hardware=HardwareSpec(gpu_model="T4"), method="lora"))
    assert lora.trl["model_init_kwargs"]["dtype"] == "float16"  # a frozen base


def test_lora_raises_the_learning_rate_with_a_reason():
    recipe = emit_grpo_config(request(method="lora"))
    assert recipe.peft is not None and recipe.peft.quantize_4bit is False
    assert recipe.trl["learning_rate"] == 5e-6
    reason = next(r for r in recipe.reasons if r.field == "learning_rate")
    assert reason.source == "method" and "LoRA" in reason.reason


def test_qlora_loads_the_base_in_nf4():
    recipe = emit_grpo_config(request(method="qlora"))
    quantization = recipe.trl["model_init_kwargs"]["quantization_config"]
    assert quantization["bnb_4bit_quant_type"] == "nf4" and quantization["load_in_4bit"] is True


def test_gpu_recipe_is_proven_on_this_cpu_with_only_device_fields_neutralised():
    recipe = emit_grpo_config(request())
    assert any("bf16=False" in note and "every other field as emitted" in note for note in recipe.provenance.validation)
    config = recipe_grpo_config(recipe, output_dir="unused")
    assert type(config).__name__ == "GRPOConfig"
    assert config.learning_rate == 5e-7 and config.num_generations == 8 and config.beta == 0.01


def test_overrides_win_and_are_recorded():
    recipe = emit_grpo_config(
        request(overrides={"learning_rate": 1e-6}, override_reasons={"learning_rate": "sweep point 3"})
    )
    reason = next(r for r in recipe.reasons if r.field == "learning_rate")
    assert recipe.trl["learning_rate"] == 1e-6 and reason.source == "override" and reason.reason == "sweep point 3"


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"method": "auto", "model": ModelSpec(name="acme/x", parameters_billions=3)}, "needs the model's shape"),
        (
            {
                "method": "auto",
                "model": ModelSpec(name="meta-llama/Llama-3.1-70B"),
                "hardware": HardwareSpec(gpu_model="L4"),
            },
            "No method fits",
        ),
        ({"overrides": {"num_generations": 4}}, "num_generations=4 is below the floor of 8"),
        ({"overrides": {"max_prompt_length": 512}}, "no longer truncates prompts"),
        ({"overrides": {"learning_rat": 1e-6}}, "Close matches: learning_rate"),
        ({"overrides": {"loss_type": "nonsense"}}, "loss_type='nonsense' is not handled"),
        ({"overrides": {"per_device_train_batch_size": 3, "gradient_accumulation_steps": 1}}, "not divisible"),
        ({"model": ModelSpec(name="./no-such-model")}, "Or send model.parameters_billions"),  # no network asked
        ({"rewards": [RewardSpec(name="format", role="format")]}, "No reward checks correctness"),
        ({"method": "qlora", "hardware": HardwareSpec(accelerator="cpu")}, "QLoRA needs a CUDA GPU"),
        ({"overrides": {"reward_weights": [1.0]}}, "reward_weights has 1 entries for 2 rewards"),
    ],
)
def test_bad_requests_say_what_to_send(changes, expected):
    with pytest.raises(SkillError) as caught:
        emit_grpo_config(request(**changes))
    assert expected in str(caught.value)
    assert caught.value.fix, "every refusal says what to send instead"


@pytest.mark.parametrize(
    ("changes", "choices"),
    [({"variant": "grpo_plus_plus"}, ["'gspo'", "'dapo'"]), ({"symptoms": ["sadness"]}, ["'entropy_collapse'"])],
)
def test_variants_and_symptoms_are_enums_whose_error_lists_the_choices(changes, choices):
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as caught:
        request(**changes)
    assert all(choice in str(caught.value) for choice in choices)


def test_divisibility_uses_the_targets_world_size():
    # 3 GPUs: one serves vLLM, two train. 4 per device x 2 processes x 1 step = 8 is a whole group;
    # on the current single process it would also pass, so only the target's world size can fail it.
    ok = emit_grpo_config(
        request(
            hardware=HardwareSpec(gpu_model="H100", gpus_per_node=3),
            overrides={"per_device_train_batch_size": 4, "gradient_accumulation_steps": 1},
        )
    )
    assert ok.launch.training_processes == 2
    with pytest.raises(SkillError, match="2 training processes"):
        emit_grpo_config(
            request(
                hardware=HardwareSpec(gpu_model="H100", gpus_per_node=3),
                overrides={
                    "per_device_train_batch_size": 4,
                    "gradient_accumulation_steps": 1,
                    "generation_batch_size": 12,
                },
            )
        )


@pytest.mark.parametrize(
    "hardware",
    [
        {"gpu_model": "H100", "nodes": 0},
        {"gpu_model": "H100", "gpus_per_node": 0},
        {"gpu_model": "QuantumChip 9000"},
        {"memory_gib_per_gpu": 4096},
        {},
    ],
)
def test_impossible_hardware_is_refused(hardware):
    with pytest.raises(ValueError, match="Send"):
        HardwareSpec(**hardware)


def test_enumerations_come_from_the_installed_trainer():
    choices = supported_choices()
    assert {"grpo", "dr_grpo", "dapo", "bnpo"} <= set(choices["loss_type"])
    assert set(choices["scale_rewards"]) == {"group", "batch", "none"}
    assert set(choices["importance_sampling_level"]) == {"token", "sequence"}
    assert set(choices["multi_objective_aggregation"]) == {"sum_then_normalize", "normalize_then_sum"}


def test_local_model_is_sized_from_its_config(tiny_model_dir):
    recipe = emit_grpo_config(
        request(model=ModelSpec(name=str(tiny_model_dir)), hardware=HardwareSpec(accelerator="cpu"))
    )
    assert 0.001 < recipe.model.parameters_billions < 0.01


@pytest.mark.parametrize(
    ("model", "gpu", "overrides", "method"),
    [
        ("Qwen/Qwen2.5-0.5B-Instruct", "H100", {}, "full"),
        ("Qwen/Qwen2.5-3B-Instruct", "L4", {}, "lora"),
        ("Qwen/Qwen2.5-14B-Instruct", "L4", {"use_vllm": False}, "qlora"),
    ],
)
def test_auto_picks_the_cheapest_method_that_fits(model, gpu, overrides, method):
    recipe = emit_grpo_config(
        request(model=ModelSpec(name=model), hardware=HardwareSpec(gpu_model=gpu), method="auto", overrides=overrides)
    )
    assert recipe.method == method
    assert recipe.provenance.memory_estimate["fits"] is True
    reason = next(r for r in recipe.reasons if r.field == "method")
    assert "cheapest that fits" in reason.reason


def test_recipe_carries_its_memory_estimate_following_its_own_dtype():
    recipe = emit_grpo_config(request())
    estimate = recipe.provenance.memory_estimate
    # 1.54B parameters in float32 as the full recipe's model_init_kwargs say (fp32 master weights): ~5.8 GiB.
    assert 5.5 < estimate["components"]["weights"] < 6.0
    lora = emit_grpo_config(request(method="lora")).provenance.memory_estimate
    # A LoRA base in bf16: ~2.9 GiB, plus the float32 adapters.
    assert 2.7 < lora["components"]["weights"] < 3.2
    assert any(line.startswith("Memory: peak") for line in recipe.provenance.validation)


def test_estimate_memory_by_default_assumes_what_the_recipe_runs():
    """The issue's 8xH100 full fine-tune: a default estimate_memory request for the same model, GPUs and method
    assumed bf16 weights under DDP (95-104 GiB) while the recipe loads float32 master weights (199.5 GiB) and
    shards them with ZeRO-3. Both now follow one precision rule and one sharding decision."""
    hardware = HardwareSpec(gpu_model="H100", gpus_per_node=8)
    model = "Qwen/Qwen2.5-7B-Instruct"
    recipe = emit_grpo_config(request(model=ModelSpec(name=model), hardware=hardware, method="full"))
    default = estimate_memory(MemoryRequest(model=model, hardware=hardware, method="full"))
    assert recipe.grpo.model_init_kwargs["dtype"] == "float32" and recipe.launch.sharding == "zero3"
    assert default.sharding == recipe.provenance.memory_estimate["sharding"] == "zero3" and default.fits
    assert default.sharding_reason.startswith("ZeRO-3: with DDP each GPU would need 19")  # fp32 masters: ~190 GiB
    ddp = estimate_memory(MemoryRequest(model=model, hardware=hardware, method="full", sharding="none"))
    assert ddp.components.weights == pytest.approx(resolve_shape(model).parameters() * 4 / 2**30)


def test_a_recipe_that_does_not_fit_is_fixed_keeping_method_and_hardware_or_refused_with_the_remedies():
    """The issue: a recipe that "does NOT fit" the hardware it was asked for, with no way to ask for the remedy.
    Now emit applies the cheapest remedy that keeps the method, the hardware and the caller's own overrides, and
    says so; when none does, it refuses and lists every remedy that fits."""
    small = {"model": ModelSpec(name="Qwen/Qwen2.5-0.5B-Instruct"), "hardware": HardwareSpec(gpu_model="T4")}
    asked = {"max_completion_length": 1024, "vllm_gpu_memory_utilization": 0.45}
    assert emit_as_asked(request(**small, method="full", overrides=asked)).provenance.memory_estimate["fits"] is False
    fixed = emit_grpo_config(request(**small, method="full", overrides=asked))
    assert fixed.method == "full" and fixed.hardware == small["hardware"]
    assert fixed.provenance.memory_estimate["fits"] is True
    assert all(fixed.trl[field] == value for field, value in asked.items())  # the caller's choices kept
    [line] = [line for line in fixed.provenance.validation if line.startswith("Memory: as asked it does NOT fit")]
    remedied = {r.field: r.reason for r in fixed.reasons if r.reason.startswith("memory remedy")}
    assert remedied and not set(remedied) & set(asked)  # only what the remedy changed is credited to it
    names = {reason.split(":")[0].removeprefix("memory remedy ") for reason in remedied.values()}
    assert len(names) == 1 and f"; {names.pop()} makes it fit" in line

    with pytest.raises(SkillError) as refused:  # the 7B full fine-tune on one H100: 193 GiB
        emit_grpo_config(request(model=ModelSpec(name="Qwen/Qwen2.5-7B-Instruct"), method="full"))
    assert "does not fit" in refused.value.problem and "keeps method 'full'" in refused.value.problem
    assert "lora (" in refused.value.fix and "more_gpus (" in refused.value.fix


def test_a_base_config_is_answered_against_the_users_own_run():
    """The issue: with symptoms for an 8xH100 run, emit applied the variant to its own defaults (temperature, lr and
    group size unexamined). Sent as base_config, the user's run is kept and only what a symptom justifies changes,
    from the user's values."""
    hardware = HardwareSpec(gpu_model="H100", gpus_per_node=8)
    base = {
        "temperature": 0.7,
        "learning_rate": 3e-6,
        "num_generations": 16,
        "per_device_train_batch_size": 16,
        "beta": 0.02,
        "output_dir": "/scratch/their-run",
    }
    ask = {"model": ModelSpec(name="Qwen/Qwen2.5-7B-Instruct"), "hardware": hardware, "method": "full"}
    dapo = emit_grpo_config(request(**ask, base_config=base, symptoms=["entropy_collapse"]))
    kept = {field: dapo.trl[field] for field in ("temperature", "learning_rate", "num_generations", "beta")}
    assert kept == {"temperature": 0.7, "learning_rate": 3e-6, "num_generations": 16, "beta": 0.02}
    assert "output_dir" not in dapo.trl  # where the run writes is the runner's
    changed = {change.field: change for change in dapo.changes_from_base}
    assert {"epsilon_high", "mask_truncated_completions"} <= set(changed) and not set(changed) & set(kept)
    assert changed["epsilon_high"].recipe == 0.28 and "DAPO" in changed["epsilon_high"].reason
    assert changed["epsilon_high"].stated is False and changed["epsilon_high"].yours is None  # TRL's default

    # A symptom that does justify changing them changes the user's values, not ours.
    drift = emit_grpo_config(request(**ask, base_config=base, symptoms=["kl_blowup"]))
    changed = {change.field: change for change in drift.changes_from_base}
    assert changed["learning_rate"].yours == 3e-6 and changed["learning_rate"].recipe == pytest.approx(1.5e-6)
    assert changed["beta"].yours == 0.02 and changed["beta"].recipe == pytest.approx(0.08)
    assert drift.trl["temperature"] == 0.7 and "temperature" not in changed
    # A field the user set that the recipe would otherwise decide for the target stays the user's.
    chosen = emit_grpo_config(request(**ask, base_config={**base, "vllm_importance_sampling_mode": "sequence_mask"}))
    assert chosen.trl["vllm_importance_sampling_mode"] == "sequence_mask"
    assert "vllm_importance_sampling_mode" not in {change.field for change in chosen.changes_from_base}
    # Without base_config nothing is reported against a run the caller never sent.
    assert emit_grpo_config(request(**ask, symptoms=["kl_blowup"])).changes_from_base is None


def test_the_recipe_says_what_an_agent_missed_in_the_evaluation():
    """Found by the agents of bench/agent_eval: rewards reading <answer> tags from prompts that never ask for them,
    an 8-GPU step training on 7x the completions of a 1-GPU step unsaid, a suggested reward easy to miss."""
    tags = [
        RewardSpec(name="format", role="format", weight=0.2, params={"pattern": "answer_tag"}),
        RewardSpec(name="exact_match", role="correctness"),
    ]
    recipe = emit_grpo_config(
        request(
            rewards=tags,
            dataset=DatasetSpec(name="embedded:addition"),
            hardware=HardwareSpec(gpu_model="H100", gpus_per_node=8),
            method="lora",
            symptoms=["many_truncated_completions"],
        )
    )
    notes = " ".join(recipe.provenance.validation)
    assert "format, exact_match read the answer only inside <answer> tags, and the prompts never ask" in notes
    processes = recipe.launch.training_processes
    assert f"{processes} training processes, {processes}x one process's" in notes
    assert "Suggested, not added: " in notes and "reward length_penalty" in notes
    asked = DatasetSpec(name="embedded:addition", columns=["answer"])
    last_number = [RewardSpec(name="exact_match", role="correctness", params={"extract": "last_number"})]
    plain = emit_grpo_config(request(rewards=last_number, dataset=asked))
    assert "<answer> tags" not in " ".join(plain.provenance.validation)
