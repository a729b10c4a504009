"""Placement checks and their consequences: remedies that re-estimate on their own, vLLM tensor parallel sizes,
the layers ZeRO-3 / FSDP gather, FSDP's all-or-nothing offload, the container's RAM limit, GPU capacities from
reported MiB totals, and the published rows whose mapping this project had to correct."""

from __future__ import annotations

import pytest

from skill.errors import SkillError
from skill.hardware.specs import KNOWN_GPUS, HardwareSpec, cgroup_memory_limit_bytes, machine_ram_gib
from skill.memory.components import estimate_components, full_logits_bytes
from skill.memory.estimate import estimate_memory
from skill.memory.schema import GIB, MemoryRequest
from skill.memory.search import smallest_configuration
from skill.memory.validation import load_reports, validate
from skill.models.shapes import SHAPES

LLAMA_70B = SHAPES["llama-3.1-70b"].shape
QWEN_7B = SHAPES["qwen2.5-7b"].shape


def reapplied(request: MemoryRequest, changes: dict[str, object]) -> MemoryRequest:
    """The request with a remedy's changes applied, nothing else."""
    layout = {"gpus_per_node": changes["gpus_per_node"], "nodes": changes["nodes"]}
    fields = {k: v for k, v in changes.items() if k not in ("gpus", "gpus_per_node", "nodes")}
    hardware = request.hardware.model_copy(update=layout)
    return MemoryRequest(
        **{**request.model_dump(exclude={"hardware", "shape"}), **fields}, hardware=hardware, shape=request.shape
    )


@pytest.mark.parametrize(
    "request_fields",
    [
        {"shape": LLAMA_70B, "hardware": HardwareSpec(gpu_model="H100"), "method": "full"},
        {"shape": QWEN_7B, "hardware": HardwareSpec(gpu_model="L4"), "method": "full", "completion_length": 1024},
        {"shape": LLAMA_70B, "hardware": HardwareSpec(gpu_model="A100-40GB"), "method": "lora"},
    ],
    ids=["70b-full-h100", "7b-full-l4", "70b-lora-a100-40"],
)
@pytest.mark.parametrize("keep_method", [False, True])
def test_smallest_configuration_changes_alone_reproduce_a_fitting_estimate(request_fields, keep_method):
    request = MemoryRequest(**request_fields)
    remedy = smallest_configuration(request, keep_method=keep_method)
    assert remedy is not None and remedy.fits
    again = estimate_components(reapplied(request, remedy.changes))[1]
    assert again.fits and again.peak_gib == pytest.approx(remedy.peak_gib), remedy.changes
    if remedy.changes.get("use_vllm") and remedy.changes.get("vllm_mode") == "colocate":
        for field in ("vllm_enable_sleep_mode", "vllm_gpu_memory_utilization"):
            assert field in remedy.changes, remedy.changes


def test_a_colocated_remedy_carries_its_sleep_mode_share_and_tensor_parallel_size():
    request = MemoryRequest(shape=QWEN_7B, hardware=HardwareSpec(gpu_model="L4"), method="full")
    remedy = smallest_configuration(request, keep_method=True)
    assert remedy is not None and remedy.changes["vllm_mode"] == "colocate", remedy.changes
    assert remedy.changes["vllm_enable_sleep_mode"] is True
    assert remedy.changes["vllm_gpu_memory_utilization"] != request.vllm_gpu_memory_utilization
    tp = remedy.changes.get("vllm_tensor_parallel_size", 1)
    assert QWEN_7B.heads % tp == 0 and remedy.changes["gpus"] % tp == 0


@pytest.mark.parametrize(
    ("hardware", "tp", "words"),
    [
        (HardwareSpec(gpu_model="L4"), 8, "needs 8 GPUs"),
        (HardwareSpec(gpu_model="L4", gpus_per_node=4), 3, "does not divide the 4 GPUs"),
        (HardwareSpec(gpu_model="L4", gpus_per_node=8), 8, "28 attention heads"),
    ],
)
def test_an_impossible_vllm_tensor_parallel_size_is_refused_with_what_to_send(hardware, tp, words):
    with pytest.raises(SkillError) as refused:
        estimate_memory(MemoryRequest(shape=QWEN_7B, hardware=hardware, vllm_tensor_parallel_size=tp))
    assert words in str(refused.value) and "Send a vllm_tensor_parallel_size" in str(refused.value)


def test_a_valid_tensor_parallel_size_is_accepted_and_halves_vllms_weights():
    hardware = HardwareSpec(gpu_model="L4", gpus_per_node=2)
    one, two = (
        estimate_memory(
            MemoryRequest(
                shape=QWEN_7B,
                hardware=hardware,
                method="lora",
                vllm_tensor_parallel_size=tp,
                vllm_gpu_memory_utilization=0.6,
            )
        )
        for tp in (1, 2)
    )
    assert two.vllm_kv_cache_tokens > one.vllm_kv_cache_tokens


@pytest.mark.parametrize("sharding", ["zero3", "fsdp"])
def test_parameter_offload_never_raises_the_estimate_and_gathered_layers_count_without_it(sharding):
    hardware = HardwareSpec(gpu_model="H100", gpus_per_node=8, nodes=8)
    base = {"shape": LLAMA_70B, "hardware": hardware, "method": "full", "sharding": sharding, "dtype": "bfloat16"}
    plain = estimate_components(MemoryRequest(**base))[1]
    offloaded = estimate_components(MemoryRequest(**base, offload_optimizer=True, offload_parameters=True))[1]
    assert offloaded.peak_train_gib < plain.peak_train_gib
    # Without offload the shard plus the two gathered whole layers, less their share already in the shard.
    whole = LLAMA_70B.parameters() * (2 if sharding == "zero3" else 2) / GIB
    expected = whole / 64 * (1 + 2 / LLAMA_70B.layers * 63)
    assert plain.components.weights == pytest.approx(expected, rel=1e-6)
    assert offloaded.components.weights == pytest.approx(whole * 2 / LLAMA_70B.layers, rel=1e-6)


@pytest.mark.parametrize(("optimizer", "parameters"), [(True, False), (False, True)])
def test_fsdp_refuses_offloading_only_one_of_optimizer_and_parameters(optimizer, parameters):
    hardware = HardwareSpec(gpu_model="H100", gpus_per_node=8)
    with pytest.raises(SkillError, match="FSDP's CPU offload"):
        estimate_memory(
            MemoryRequest(
                shape=QWEN_7B,
                hardware=hardware,
                sharding="fsdp",
                offload_optimizer=optimizer,
                offload_parameters=parameters,
            )
        )


def test_cpu_ram_is_the_smaller_of_the_host_and_the_containers_cgroup_limit(tmp_path):
    v2, v1 = tmp_path / "memory.max", tmp_path / "memory.limit_in_bytes"
    v2.write_text("max\n")
    assert cgroup_memory_limit_bytes((str(v2),)) is None
    v1.write_text(f"{2**63 - 4096}\n")
    assert cgroup_memory_limit_bytes((str(v1),)) is None
    v2.write_text(f"{2 * 2**30}\n")
    assert cgroup_memory_limit_bytes((str(v2), str(v1))) == 2 * 2**30
    assert machine_ram_gib((str(v2),)) == 2.0  # a 2 GiB container on any host
    assert machine_ram_gib((str(tmp_path / "absent"),)) == machine_ram_gib(())


def test_gpu_capacities_are_reported_mib_totals_where_one_was_found():
    reported = {"rtx3090": 24576, "a6000": 49140, "h200": 143771, "v100": 32768, "gh200": 97871, "h100": 81559}
    for key, mib in reported.items():
        assert KNOWN_GPUS[key].memory_gib == round(mib / 1024, 1), key
        assert str(mib) in KNOWN_GPUS[key].source or key == "h100", KNOWN_GPUS[key].source
    assert "issue 15" not in KNOWN_GPUS["h200"].source
    unverified = {gpu.name for gpu in KNOWN_GPUS.values() if "no published nvidia-smi total" in gpu.source}
    assert unverified == {"V100 16GB"}  # under two keys: its SXM2 and its PCIe name


def test_ms_swift_offload_flags_are_not_mapped_to_deepspeed_training_offload():
    report = next(report for report in load_reports() if report.id == "ms-swift-3426-qwen2.5-vl-7b-lora")
    assert "--offload_optimizer true" in report.quote and not report.request.offload_optimizer
    assert "while vLLM generates" in report.mapping and validate(report).agreement == "agrees"


def test_the_unsloth_row_is_labelled_computed_and_its_logits_figure_checks_out():
    report = next(report for report in load_reports() if report.id == "unsloth-blog-llama-8b-20k")
    assert report.evidence == "computed"
    assert round(full_logits_bytes(8, 20480, 128256) / GIB, 1) == 78.3  # the blog's "78.3GB"
    logprob = estimate_components(report.request)[0].logprob
    assert logprob == pytest.approx(76.3, abs=0.05) and abs(logprob - 78.3) / 78.3 < 0.03


@pytest.mark.parametrize("method", ["full", "lora"])
def test_zero_holds_a_float32_loaded_model_in_bf16_so_it_gathers_and_trains_as_one_loaded_in_bf16(method):
    # DeepSpeed's engine casts the module to bf16 when bf16 is on (module.bfloat16()), so a float32 load under
    # ZeRO-3 gathers, shards and saves activations exactly as a bf16 load; DDP keeps the float32 residual stream.
    fields = {"shape": QWEN_7B, "hardware": HardwareSpec(gpu_model="H100", gpus_per_node=8), "method": method}
    fields |= {"sharding": "zero3", "use_vllm": False, "activation_checkpointing": False}
    fp32, bf16 = (estimate_components(MemoryRequest(**fields, dtype=dtype))[0] for dtype in ("float32", "bfloat16"))
    assert fp32.weight_gather == pytest.approx(bf16.weight_gather)
    assert 1 <= fp32.weight_gather / (QWEN_7B.parameters() * 2 / GIB) < 1.01  # bf16 (+ LoRA adapters)
    assert fp32.activations == pytest.approx(bf16.activations)
    ddp = {**fields, "sharding": "none", "method": "full"}
    ddp_fp32, ddp_bf16 = (estimate_components(MemoryRequest(**ddp, dtype=d))[0] for d in ("float32", "bfloat16"))
    assert ddp_fp32.activations > ddp_bf16.activations


def test_the_coursia_probe_rows_compare_reserved_memory_and_keep_trl_1_12s_full_logits():
    rows = [report for report in load_reports() if report.id.startswith("coursia-")]
    assert len(rows) == 3
    for report in rows:
        reserved = float(report.quote.split('"max_vram_reserved_gb": ')[1].split()[0].rstrip(","))
        assert report.reported_gib == reserved and report.request.logits == "full"
        assert report.request.method == "qlora" and report.request.beta == 0 and not report.request.use_vllm
        assert abs(validate(report).relative_error) <= 0.25
