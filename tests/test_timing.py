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
    # One completion per engine: the decode reads the weights once a token, so more bandwidth shortens it by the
    # ratio; vLLM's scheduling per iteration does not scale with the card.
    from skill.hardware.throughput import gpu_throughput
    from skill.timing.constants import VLLM_DECODE_ITERATION_OVERHEAD_S
    from skill.timing.generation import gpu_generation_seconds

    one = dict(completions_per_step=8, prompt_tokens=1, max_completion_length=512)
    h100, h200 = _request(**one), _request(**one, hardware=HardwareSpec(gpu_model="H200", gpus_per_node=8))
    for end in ("fast", "slow"):
        scheduling = 512 * VLLM_DECODE_ITERATION_OVERHEAD_S.at(end)
        on_h100 = gpu_generation_seconds(h100, gpu_throughput(h100.hardware), end=end) - scheduling
        on_h200 = gpu_generation_seconds(h200, gpu_throughput(h200.hardware), end=end) - scheduling
        assert on_h200 == pytest.approx(on_h100 * 3.35 / 4.8, rel=0.05)  # same peak compute, 4.8 vs 3.35 TB/s


def test_eager_decode_takes_at_least_its_kernel_launches():
    """transformers' generate on a large GPU and a small model is launch-bound: the layers, not the bytes, decide."""
    from skill.timing.constants import EAGER_DECODE_LAYER_S

    small = SHAPES["qwen2.5-0.5b"].shape
    eager = estimate_step_time(_request(shape=small, generation="transformers", completions_per_step=8))
    floor = 1024 * small.layers * EAGER_DECODE_LAYER_S.middle
    assert eager.generation_s == pytest.approx(floor, rel=0.02)


def test_the_estimate_is_a_range_with_its_point_in_the_geometric_middle_and_its_largest_part_named():
    estimate = estimate_step_time(_request())
    low, high = estimate.low_seconds_per_step, estimate.high_seconds_per_step
    assert low < estimate.seconds_per_step < high <= 2.5 * low
    assert estimate.seconds_per_step == pytest.approx((low * high) ** 0.5, rel=1e-3)
    largest = max(("generation", estimate.generation_s), ("training", estimate.training_s), key=lambda p: p[1])[0]
    assert estimate.largest_part.startswith(largest) and estimate.largest_uncertainty
    line = estimate.summary()
    assert f"{low:.1f}-{high:.1f}" in line and f"largest: {estimate.largest_part}" in line


def test_a_mixture_of_experts_computes_with_its_active_experts_and_decodes_all_of_them():
    """Qwen3-30B-A3B trains about as fast as a 3B dense model but, at a large batch, decodes reading every expert."""
    from skill.timing.validation import load_rows

    moe = next(row.request.shape for row in load_rows() if row.model == "Qwen/Qwen3-30B-A3B")
    dense_3b = SHAPES["qwen2.5-3b"].shape
    on_moe, on_dense = estimate_step_time(_request(shape=moe)), estimate_step_time(_request(shape=dense_3b))
    assert 0.5 < on_moe.training_s / on_dense.training_s < 2
    assert on_moe.generation_s > 3 * on_dense.generation_s  # 30.5B parameters read per iteration, not 3B


def test_measured_lengths_shorten_generation_and_are_said():
    probe = estimate_step_time(_request(completion_tokens=[100] * 50 + [300] * 10))
    budget = estimate_step_time(_request())
    assert probe.generation_s < budget.generation_s
    assert "measured completions" in probe.assumptions[0] and "max_completion_length" in budget.assumptions[0]


def test_a_stated_mean_sets_the_longest_of_a_batch_between_the_mean_and_the_budget():
    from skill.timing.generation import longest_of

    stated = _request(mean_completion_tokens=200, micro_batch=4)
    longest = [longest_of(stated, n) for n in (1, 4, 64, 4096)]
    assert longest[0] == pytest.approx(200, rel=0.01)
    assert longest == sorted(longest) and longest[-1] == pytest.approx(1024, rel=0.01)
    assert estimate_step_time(stated).generation_s < estimate_step_time(_request()).generation_s
    assert "exponential about that mean" in estimate_step_time(stated).assumptions[0]


def test_the_longest_from_a_mean_holds_on_the_projects_own_recorded_sampling():
    """The law behind a stated mean, checked on lengths this project sampled (no published row): the prediction lies
    within 30% of the measured longest of n (-14% to +25% as recorded), and closer to it than the budget wherever the
    budget is off by more than 10%."""
    runs = _recorded("completion_length_tail")
    assert len(runs) >= 3
    for run in runs:
        for row in run["by_batch"]:
            error, budget_error = abs(row["predicted_over_measured"] - 1), abs(row["budget_over_measured"] - 1)
            assert error <= 0.3, (run["file"], row)
            if budget_error > 0.1:
                assert error < budget_error, (run["file"], row)


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


def test_zero3_gathers_hide_behind_large_micro_batches_and_bound_small_ones_on_slow_links():
    """Each micro-batch all-gathers the weights for its forward and backward, overlapped with its matmuls: over an
    H100 node's NVLink (or two nodes' InfiniBand links together) a 4-completion micro-batch hides them, a 1-completion
    one waits; FSDP reduces the gradients once a step where ZeRO-3 reduces every micro-batch; PCIe cards wait longer."""

    def training(**changes) -> float:
        return estimate_step_time(_request(**changes)).training_s

    assert training(micro_batch=4, sharding="zero3") == training(micro_batch=4, sharding="zero2")
    two_nodes = dict(hardware=HardwareSpec(gpu_model="H100", gpus_per_node=8, nodes=2), training_processes=16)
    assert training(micro_batch=4, sharding="zero3", **two_nodes) == training(
        micro_batch=4, sharding="zero2", **two_nodes
    )
    whole, fsdp, zero3 = (training(micro_batch=1, sharding=sharding) for sharding in ("zero2", "fsdp", "zero3"))
    assert whole < fsdp < zero3
    waiting = estimate_step_time(_request(micro_batch=1, sharding="zero3"))
    assert any("longer than its matmuls" in note for note in waiting.assumptions)
    l4 = dict(hardware=HardwareSpec(gpu_model="L4", gpus_per_node=8), micro_batch=1)  # PCIe Gen4, no NVLink
    assert training(sharding="zero3", **l4) / training(sharding="zero2", **l4) > 1.5 > zero3 / whole
    short = estimate_step_time(_request(sharding="zero3", max_completion_length=256, **l4))
    assert short.largest_uncertainty == "ZeRO-3/FSDP collectives at 50-100% of the link"  # training's range is widest


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


def test_the_time_line_compares_hardware_per_1000_completions():
    """One GPU trains on 32 completions a step and eight on 256: per step they differ, per 1,000 completions the
    line says which is cheaper."""
    one = estimate_step_time(
        _request(
            hardware=HardwareSpec(gpu_model="H100"),
            completions_per_step=32,
            training_processes=1,
            price_per_gpu_hour=2.0,
        )
    )
    eight = estimate_step_time(_request(completions_per_step=256, price_per_gpu_hour=2.0))
    for estimate in (one, eight):
        per = 1000 / (estimate.completions_per_step * estimate.steps)
        line = estimate.summary()
        assert f"{estimate.completions_per_step} completions a step, per 1,000: " in line
        assert line.endswith(f", {estimate.cost * per:,.2f}")


def _recorded(name: str):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "bench" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.recorded()


def test_an_engine_whose_kv_cache_holds_fewer_sequences_decodes_in_waves_and_says_so():
    ample = estimate_step_time(_request(completions_per_step=64, training_processes=1, max_completion_length=4096))
    cut = estimate_step_time(
        _request(completions_per_step=64, training_processes=1, max_completion_length=4096, vllm_kv_cache_tokens=80_000)
    )
    assert cut.generation_s > 1.5 * ample.generation_s
    assert any("waves" in note and "KV cache of 80,000 tokens" in note for note in cut.assumptions)
    assert not any("waves" in note for note in ample.assumptions)


def test_vllm_serve_decodes_at_most_its_default_max_num_seqs_at_once():
    server = dict(generation="vllm_server", vllm_server_gpus=1, training_processes=1, completions_per_step=512)
    a100 = estimate_step_time(_request(**server, hardware=HardwareSpec(gpu_model="A100-80GB", gpus_per_node=2)))
    h100 = estimate_step_time(_request(**server, hardware=HardwareSpec(gpu_model="H100", gpus_per_node=2)))
    assert any("max_num_seqs" in note and "2.0 waves" in note for note in a100.assumptions)
    assert not any("waves" in note for note in h100.assumptions)


def test_the_waves_bracket_the_iterations_vllm_itself_counted():
    """On vLLM's own counter (recorded runs, this CPU): the iterations of a cut KV cache lie between the estimate's
    fast and slow ends, and well above the uncut run's."""
    runs = _recorded("vllm_decode_waves")
    assert runs
    for run in runs:
        ends, measured = run["predicted"], run["cut"]["iterations"]
        assert ends["fast"]["iterations"] <= measured <= ends["slow"]["iterations"], (run["file"], ends, measured)
        assert measured > 1.3 * run["ample"]["iterations"]


def test_a_recipes_time_estimate_holds_the_kv_cache_its_memory_estimate_gives():
    from pathlib import Path

    from skill.memory.estimate import estimate_memory
    from skill.recipe.deciding.memory_request import memory_request
    from skill.recipe.deciding.step_time import step_time_request
    from skill.recipe.schema import load_recipe

    recipe = load_recipe(Path(__file__).parent / "golden" / "recipe_matrix" / "full-1gpu-colocate" / "recipe.json")
    request = step_time_request(recipe)
    assert request.vllm_kv_cache_tokens == estimate_memory(memory_request(recipe)).vllm_kv_cache_tokens > 0
    # The engine's 32 sequences of 8k tokens outgrow the KV cache a tenth of the card leaves beside the weights.
    recipe.trl |= {"max_completion_length": 8192, "vllm_gpu_memory_utilization": 0.1}
    long = estimate_step_time(step_time_request(recipe))
    assert any("waves" in note and "vllm_gpu_memory_utilization" in note for note in long.assumptions)
    assert "KV held per running sequence" in long.largest_uncertainty


def test_a_kv_cache_below_one_sequence_is_refused_and_a_stated_mean_stays_within_the_budget():
    with pytest.raises(SkillError, match="vLLM would refuse to start"):
        _request(vllm_kv_cache_tokens=1000)
    over = estimate_step_time(_request(mean_completion_tokens=5000, vllm_kv_cache_tokens=100_000))
    at = estimate_step_time(_request(mean_completion_tokens=1024, vllm_kv_cache_tokens=100_000))
    assert over.generation_s == at.generation_s


def test_a_groups_prompt_is_held_once_by_the_prefix_cache():
    long_prompts = dict(prompt_tokens=4000, mean_completion_tokens=512, vllm_kv_cache_tokens=100_000)
    one = estimate_step_time(_request(completions_per_step=512, **long_prompts))
    group = estimate_step_time(_request(completions_per_step=512, group_size=8, **long_prompts))
    assert any("waves" in note for note in one.assumptions)
    assert not any("waves" in note for note in group.assumptions) and group.generation_s < one.generation_s


def test_a_server_recipes_engines_follow_its_launch_plans_tensor_parallel_size():
    from pathlib import Path

    from skill.recipe.deciding.step_time import step_time_request
    from skill.recipe.schema import load_recipe

    recipe = load_recipe(Path(__file__).parent / "golden" / "recipe_matrix" / "full-8gpu-server-zero3" / "recipe.json")
    recipe.launch.vllm_server_gpus, recipe.launch.vllm_tensor_parallel_size = 4, 4
    request = step_time_request(recipe)
    assert request.generation == "vllm_server" and request.vllm_tensor_parallel_size == 4
    assert request.group_size == recipe.grpo.num_generations
