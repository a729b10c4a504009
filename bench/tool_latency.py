"""Stateless tool latency in-process: emit_grpo_config, estimate_memory, route_check without probing; p50 / p95.

The first call of each tool pays one-time imports (torch, trl) and is reported separately.
Run: python bench/tool_latency.py [--repeats N]
"""

from __future__ import annotations

import argparse
import statistics
import time

from skill.hardware.specs import HardwareSpec
from skill.memory.estimate import estimate_memory
from skill.memory.schema import MemoryRequest
from skill.recipe.emit import RecipeRequest, emit_grpo_config
from skill.recipe.schema import DatasetSpec, ModelSpec
from skill.rewards.spec import RewardSpec
from skill.routing.route import RouteRequest, route_check

TARGET_P50_MS = 20.0


def _calls():
    recipe_request = RecipeRequest(
        model=ModelSpec(name="Qwen/Qwen2.5-7B-Instruct"),
        hardware=HardwareSpec(gpu_model="H100", gpus_per_node=8),
        method="lora",
        rewards=[
            RewardSpec(name="format", role="format", weight=0.2),
            RewardSpec(name="exact_match", role="correctness"),
        ],
        dataset=DatasetSpec(name="openai/gsm8k", columns=["answer"]),
    )
    memory_request = MemoryRequest(model="Qwen/Qwen2.5-7B-Instruct", hardware=HardwareSpec(gpu_model="A100-40GB"))
    route_request = RouteRequest(signal="math_answer")
    return {
        "emit_grpo_config": lambda: emit_grpo_config(recipe_request),
        "estimate_memory": lambda: estimate_memory(memory_request),
        "route_check (no probe)": lambda: route_check(route_request),
    }


def measure(repeats: int) -> dict[str, dict[str, float]]:
    """Per tool: first call, p50 and p95 in milliseconds."""
    results = {}
    for name, call in _calls().items():
        start = time.perf_counter()
        call()
        first = (time.perf_counter() - start) * 1000
        samples = []
        for _ in range(repeats):
            start = time.perf_counter()
            call()
            samples.append((time.perf_counter() - start) * 1000)
        samples.sort()
        results[name] = {
            "first_call_ms": first,
            "p50_ms": statistics.median(samples),
            "p95_ms": samples[min(len(samples) - 1, int(0.95 * len(samples)))],
            "target_p50_ms": TARGET_P50_MS,
        }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()
    for name, figures in measure(args.repeats).items():
        print(name, " ".join(f"{key}={value:.2f}" for key, value in figures.items()))


if __name__ == "__main__":
    main()
