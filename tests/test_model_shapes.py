"""Any model with a config.json is sized: its shape and parameter count come from the config (a local directory,
the user's Hub cache, the Hub), the table being only a cache of checked rows. No test here needs a network.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from skill.errors import SkillError
from skill.hardware.specs import HardwareSpec
from skill.memory.estimate import estimate_memory
from skill.memory.schema import MemoryRequest
from skill.models.shapes import known_model
from skill.models.size import SHAPE_TOLERANCE, parameters_billions, resolve_shape, transformers_count
from skill.recipe.emit import RecipeRequest, emit_grpo_config
from skill.recipe.schema import DatasetSpec, ModelSpec
from skill.rewards.spec import RewardSpec

REPOSITORY = Path(__file__).resolve().parents[1]
# Qwen/Qwen3-4B's config.json (the fields that size it); its model card: "Number of Parameters: 4.0B".
QWEN3_4B = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "hidden_size": 2560,
    "intermediate_size": 9728,
    "num_hidden_layers": 36,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 151936,
    "tie_word_embeddings": True,
    "attention_bias": False,
    "rms_norm_eps": 1e-06,
    "torch_dtype": "bfloat16",
}
QWEN3_4B_STATED_B = 4.0
TINY_MIXTRAL = {
    "model_type": "mixtral",
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_local_experts": 4,
    "num_experts_per_tok": 2,
    "vocab_size": 1000,
}
HUB_CACHE_PROBE = """
import json
from skill.models.size import parameters_billions, resolve_shape
try:
    parameters_billions("acme/not-cached")
except Exception as exc:
    missing = str(exc)
print(json.dumps({"b": parameters_billions("acme/mystery"), "layers": resolve_shape("acme/mystery").layers,
                  "missing": missing}))
"""


def config_dir(path: Path, config: dict) -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps(config))
    return path


def test_a_config_outside_the_table_gives_the_shape_and_the_publisher_s_count(tmp_path):
    model = str(config_dir(tmp_path / "mystery-4b", QWEN3_4B))
    assert known_model(model) is None
    shape = resolve_shape(model)
    assert (shape.layers, shape.head_dim, shape.kv_heads, shape.qk_norm) == (36, 128, 8, True)
    counted = parameters_billions(model)
    assert abs(counted - QWEN3_4B_STATED_B) / QWEN3_4B_STATED_B < 0.02  # 4.022B
    assert counted == shape.parameters() / 1e9  # transformers' own count agrees with the shape's, exactly
    h100 = HardwareSpec(gpu_model="H100")
    estimate = estimate_memory(MemoryRequest(model=model, hardware=h100, method="lora"))
    assert estimate == estimate_memory(MemoryRequest(shape=shape, hardware=h100, method="lora"))


def test_emit_needs_no_parameter_count_for_a_model_whose_config_reads(tmp_path, tiny_model_dir):
    model = config_dir(tmp_path / "mystery-4b", QWEN3_4B)
    for file in tiny_model_dir.glob("tokenizer*"):  # the prompt budget is measured with a tokenizer: any will do
        (model / file.name).write_bytes(file.read_bytes())
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"{i} + 1 = ?", "answer": str(i + 1)}) + "\n" for i in range(20)))
    recipe = emit_grpo_config(
        RecipeRequest(
            model=ModelSpec(name=str(model)),
            hardware=HardwareSpec(gpu_model="H100"),
            method="auto",
            rewards=[RewardSpec(name="exact_match", role="correctness", params={"extract": "last_number"})],
            dataset=DatasetSpec(name=str(data), columns=["answer"]),
        )
    )
    assert abs(recipe.model.parameters_billions - QWEN3_4B_STATED_B) < 0.08
    assert recipe.provenance.memory_estimate is not None and recipe.method in ("full", "lora")


# Tiny configs of each mixture-of-experts family the shape reads: routed experts (Mixtral, gpt-oss), a wider
# shared expert (Qwen2-MoE), multi-head latent attention with dense leading layers and a shared expert (DeepSeek-V3).
TINY_MOE = {
    "mixtral": TINY_MIXTRAL,
    "qwen3_moe": {
        **TINY_MIXTRAL,
        "model_type": "qwen3_moe",
        "num_local_experts": None,
        "num_experts": 8,
        "moe_intermediate_size": 16,
        "head_dim": 16,
    },
    "qwen2_moe": {
        **TINY_MIXTRAL,
        "model_type": "qwen2_moe",
        "num_local_experts": None,
        "num_experts": 8,
        "moe_intermediate_size": 16,
        "shared_expert_intermediate_size": 64,
    },
    "deepseek_v3": {
        **TINY_MIXTRAL,
        "model_type": "deepseek_v3",
        "num_local_experts": None,
        "num_hidden_layers": 3,
        "first_k_dense_replace": 1,
        "num_key_value_heads": 4,
        "n_routed_experts": 8,
        "n_shared_experts": 1,
        "moe_intermediate_size": 16,
        "n_group": 2,
        "topk_group": 1,
        "q_lora_rank": 24,
        "kv_lora_rank": 16,
        "qk_nope_head_dim": 16,
        "qk_rope_head_dim": 8,
        "v_head_dim": 16,
    },
    "gpt_oss": {**TINY_MIXTRAL, "model_type": "gpt_oss", "head_dim": 16},
}


@pytest.mark.parametrize("family", sorted(TINY_MOE))
def test_a_mixture_of_experts_is_shaped_and_its_count_agrees_with_transformers(tmp_path, family):
    config = {key: value for key, value in TINY_MOE[family].items() if value is not None}
    model = str(config_dir(tmp_path / family, config))
    shape = resolve_shape(model)  # refused if its count were more than SHAPE_TOLERANCE from transformers'
    counted = transformers_count(config)
    assert parameters_billions(model) == counted / 1e9
    assert abs(shape.parameters() - counted) <= SHAPE_TOLERANCE * counted  # gpt-oss: expert biases, sinks
    assert shape.experts == config.get("num_local_experts", 8)
    assert shape.active_linear_parameters() < shape.linear_parameters()  # a token passes through 2 experts


def test_experts_on_some_layers_only_are_refused_with_the_reason(tmp_path):
    sparse = {**TINY_MOE["qwen3_moe"], "num_local_experts": None, "mlp_only_layers": [0]}
    model = str(config_dir(tmp_path / "sparse", {k: v for k, v in sparse.items() if v is not None}))
    with pytest.raises(SkillError, match="experts on some layers only"):
        resolve_shape(model)


def test_a_mixture_of_experts_stores_every_expert_and_computes_with_the_routed_ones():
    """Qwen3-30B-A3B (the config's numbers): memory holds 30.5B parameters, a token multiplies by about 3B."""
    from skill.models.shapes import shape_from_config
    from skill.timing.generation import matmul_parameters

    moe = shape_from_config(
        {
            **TINY_MOE["qwen3_moe"],
            "hidden_size": 2048,
            "intermediate_size": 6144,
            "moe_intermediate_size": 768,
            "num_hidden_layers": 48,
            "num_attention_heads": 32,
            "num_key_value_heads": 4,
            "head_dim": 128,
            "num_experts": 128,
            "num_experts_per_tok": 8,
            "vocab_size": 151936,
            "tie_word_embeddings": False,
        }
    )
    assert round(moe.parameters() / 1e9, 1) == 30.5  # the model card: 30.5B in total
    assert round(matmul_parameters(moe) / 1e9, 1) == 3.0  # 3.3B activated per the card, embeddings included
    h100 = HardwareSpec(gpu_model="H100", gpus_per_node=8)
    estimate = estimate_memory(MemoryRequest(shape=moe, hardware=h100, method="full", sharding="zero3"))
    assert estimate.components.weights > 30.5e9 * 2 / 8 / 2**30 * 0.99  # GiB: every expert's weights, sharded


def test_a_decoder_the_formulas_do_not_describe_is_refused_not_misestimated(tmp_path):
    neox = {
        "model_type": "gpt_neox",
        "hidden_size": 64,
        "intermediate_size": 256,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "vocab_size": 1000,
    }
    model = str(config_dir(tmp_path / "tiny-neox", neox))
    assert parameters_billions(model) * 1e9 == transformers_count(neox)
    with pytest.raises(SkillError, match="do not describe model_type 'gpt_neox'"):
        resolve_shape(model)


def test_a_model_type_newer_than_the_installed_transformers_is_sized_by_its_dense_shape(tmp_path):
    future = {**QWEN3_4B, "model_type": "qwen9", "architectures": ["Qwen9ForCausalLM"]}
    model = str(config_dir(tmp_path / "future", future))
    assert transformers_count(future) is None
    assert parameters_billions(model) == resolve_shape(model).parameters() / 1e9


def test_a_directory_without_config_json_says_so(tmp_path):
    with pytest.raises(SkillError, match="has no config.json"):
        parameters_billions(str(tmp_path))
    assert parameters_billions(str(tmp_path), given=1.5) == 1.5  # the caller's number needs no file


def test_a_hub_id_resolves_from_the_user_s_hub_cache_offline(tmp_path):
    revision = "0123456789abcdef0123456789abcdef01234567"
    repository = tmp_path / "hub" / "models--acme--mystery"
    (repository / "refs").mkdir(parents=True)
    (repository / "refs" / "main").write_text(revision)
    config_dir(repository / "snapshots" / revision, QWEN3_4B)
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(
        [sys.executable, "-c", HUB_CACHE_PROBE], cwd=REPOSITORY, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    assert abs(answer["b"] - QWEN3_4B_STATED_B) / QWEN3_4B_STATED_B < 0.02 and answer["layers"] == 36
    assert "HF_HUB_OFFLINE is set" in answer["missing"] and answer["missing"].endswith(
        "Or send model.parameters_billions."
    )
