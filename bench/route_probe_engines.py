"""The default route probe through each sampling engine, in one run: transformers, vLLM's offline LLM, and a
``vllm serve`` endpoint on 127.0.0.1 (vLLM's CPU build here).

Runs under the target environment (.venv-target); `make bench` calls it from bench/run_all.py. Each engine runs
route_check's default probe (8 prompts x 8 completions x 32 tokens of the embedded SmolLM2-135M on
``embedded:addition``) twice: the first call includes the engine's start (model load; vLLM's engine build; the
server is started beforehand and its start timed apart), the second is the probe alone. Tokens per second count
the completions' tokens (end tokens aside). The load average before and after is recorded: on a shared 2-core
machine other processes move every figure here.
Run: .venv-target/bin/python bench/route_probe_engines.py [--json OUT]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROUNDS = 2


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def vllm_serve(model_dir: Path, served_name: str):
    """``vllm serve`` on a free 127.0.0.1 port until healthy; yields the API root and the start time; stopped after."""
    port = free_port()
    log = Path(tempfile.mkdtemp(prefix="grpo-bench-serve-")) / "server.log"
    command = [str(Path(sys.executable).with_name("vllm")), "serve", str(model_dir), "--served-model-name",
               served_name, "--host", "127.0.0.1", "--port", str(port), "--gpu-memory-utilization", "0.1",
               "--max-model-len", "512", "--enforce-eager"]  # fmt: skip
    started = time.perf_counter()
    with log.open("w") as out:
        server = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        while True:
            if server.poll() is not None or time.perf_counter() - started > 900:
                raise RuntimeError(f"vllm serve did not come up:\n{log.read_text()[-2000:]}")
            with contextlib.suppress(OSError):
                if urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5).status == 200:
                    break
            time.sleep(1)
        yield f"http://127.0.0.1:{port}/v1", time.perf_counter() - started
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)


def probe_once(engine) -> dict:
    from skill.rewards.spec import RewardSpec
    from skill.routing.probe import ProbeSpec
    from skill.routing.route import RouteRequest, route_check

    started = time.perf_counter()
    decision = route_check(
        RouteRequest(
            signal="exact_answer",
            verifier=RewardSpec(name="exact_match", role="correctness", params={"extract": "last_number"}),
            probe=ProbeSpec(dataset="embedded:addition", engine=engine),
        )
    )
    seconds = time.perf_counter() - started
    lengths = decision.completion_lengths
    tokens = sum(lengths.tokens) if lengths is not None else 0
    used = decision.evidence.sampled_with
    return {
        "seconds": seconds,
        "tokens": tokens,
        "tokens_per_s": tokens / seconds,
        "pass_at_1": decision.evidence.pass_at_1,
        "interval": decision.pass_at_1_interval,
        "engine": used.engine,
        "version": used.version,
        "device": used.device,
        "dtype": used.dtype,
    }


def measure() -> dict:
    from skill.models.sources import EMBEDDED_MODEL_ID, embedded_model_dir
    from skill.sampling.schema import SamplingEngine

    load_before = os.getloadavg()
    results = {}
    for kind in ("transformers", "vllm"):
        results[kind] = [probe_once(SamplingEngine(kind=kind)) for _ in range(ROUNDS)]
    with vllm_serve(embedded_model_dir(), EMBEDDED_MODEL_ID) as (base_url, start_s):
        engine = SamplingEngine(kind="endpoint", base_url=base_url)
        results["endpoint"] = [probe_once(engine) for _ in range(ROUNDS)]
    return {"engines": results, "server_start_s": start_s, "load_before": load_before, "load_after": os.getloadavg()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    os.environ.setdefault("GRPO_RLVR_HOME", tempfile.mkdtemp(prefix="grpo-bench-engines-"))
    result = measure()
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text)


if __name__ == "__main__":
    main()
