"""Server mode on CPU: a real ``trl vllm-serve`` on 127.0.0.1 answers TRL's own client.

What this cannot verify here is the server-mode weight sync: TRL 1.16 pushes weights through vLLM's NCCL
weight-transfer engine, which needs CUDA; the client refuses a CPU device before any transfer (checked
below, so the docs' statement stays true to the installed TRL).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

START_TIMEOUT_S = 420  # engine start with torch.compile warm-up: 30-130 s here, more on a busy 2-core runner
MAX_TOKENS = 8


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def trl_vllm_serve(model_dir: Path, log: Path):
    """``trl vllm-serve`` in its own process group, up within START_TIMEOUT_S, always killed afterwards."""
    import requests

    port = free_port()
    command = [
        str(Path(sys.executable).with_name("trl")),
        "vllm-serve",
        "--model",
        str(model_dir),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--gpu_memory_utilization",
        "0.15",  # on CPU a share of host RAM for the KV cache
        "--max_model_len",
        "256",
    ]
    with log.open("w") as out:
        server = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    base_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + START_TIMEOUT_S
        while True:
            assert server.poll() is None, f"trl vllm-serve exited ({server.returncode}):\n{log.read_text()[-3000:]}"
            assert time.time() < deadline, f"trl vllm-serve not up in {START_TIMEOUT_S} s:\n{log.read_text()[-3000:]}"
            with contextlib.suppress(requests.RequestException):
                if requests.get(f"{base_url}/health", timeout=5).status_code == 200:
                    break
            time.sleep(2)
        yield base_url
    finally:
        for sig, grace in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                server.wait(timeout=grace)
                break


@pytest.mark.slow
def test_trl_vllm_serve_generates_for_trls_client(vllm_model_dir, tmp_path):
    from transformers import AutoTokenizer
    from trl.generation.vllm_client import VLLMClient

    tokenizer = AutoTokenizer.from_pretrained(vllm_model_dir)
    prompts = ["What is 2 + 3?", "Name a colour."]
    started = time.time()
    with trl_vllm_serve(vllm_model_dir, tmp_path / "serve.log") as base_url:
        print(f"trl vllm-serve up in {time.time() - started:.0f} s")
        client = VLLMClient(base_url=base_url, connection_timeout=10)
        info = client.get_server_info()
        output = client.generate(prompts=prompts, n=4, max_tokens=MAX_TOKENS, temperature=1.0)

        # The server runs the way TRL's trainer expects: its logprobs after sampling processing, NCCL transfer.
        assert info["model_config"]["logprobs_mode"] == "processed_logprobs"
        assert "nccl" in str(info["weight_transfer_config"])
        # Our tokenizer's ids for each prompt, n completions per prompt, a log-prob for every sampled token.
        assert output["prompt_ids"] == [tokenizer(prompt)["input_ids"] for prompt in prompts]
        assert len(output["completion_ids"]) == len(prompts) * 4
        assert all(0 < len(ids) <= MAX_TOKENS for ids in output["completion_ids"])
        assert [len(row) for row in output["logprobs"]] == [len(ids) for ids in output["completion_ids"]]
        sampled = [token for row in output["logprob_token_ids"] for token in row]
        assert sampled and all(len(top) >= 1 for top in sampled)

        # What stays unverified on CPU: weight sync into the server is NCCL-only (CUDA) in TRL 1.16.
        with pytest.raises(NotImplementedError, match="NCCL weight-transfer engine, which needs a CUDA device"):
            client.init_communicator(device="cpu")


def test_the_target_vllm_has_no_bitsandbytes_method_that_trl_would_ask_a_qlora_engine_for():
    """The facts QLoRA's refusal of vLLM rests on (skill.recipe.plan_checks), read from the installed sources: vLLM's
    quantization methods, and TRL's colocated engine asking for "bitsandbytes" when the policy holds 4-bit layers."""
    import inspect

    from trl.generation import vllm_generation
    from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS

    assert "bitsandbytes" not in QUANTIZATION_METHODS
    assert 'quantization = "bitsandbytes"' in inspect.getsource(vllm_generation)
