"""Server mode on CPU: a real ``trl vllm-serve`` on 127.0.0.1 answers TRL's own client, started by hand and by the
runner (the accelerate engine's launch_node.sh, the GPU plan's code path).

What this cannot verify here is the server-mode weight sync: TRL 1.16 pushes weights through vLLM's NCCL
weight-transfer engine, which needs CUDA; the client refuses a CPU device before any transfer (checked
below, so the docs' statement stays true to the installed TRL). A runner-managed CPU server run is therefore
refused unless forced, and forced it stops exactly there, after the server check generated through it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cpu_vllm import addition_file, pass_inspection, vllm_recipe

from skill.errors import SkillError
from skill.recipe.launching.node_script import VLLM_LOG
from skill.runs.jobs import RunRequest, run_grpo, run_logs, run_status
from skill.runs.store import read_record, run_dir, runs_root
from skill.runs.vllm_server_check import SERVER_CHECK_FILE

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
@pytest.mark.host_memory(5)
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
    """The facts QLoRA's refusal of vLLM rests on (skill.recipe.checking.plan_checks), read from the installed
    sources: vLLM's quantization methods, and TRL's colocated engine asking for "bitsandbytes" when the policy holds
    4-bit layers."""
    import inspect

    from trl.generation import vllm_generation
    from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS

    assert "bitsandbytes" not in QUANTIZATION_METHODS
    assert 'quantization = "bitsandbytes"' in inspect.getsource(vllm_generation)


def group_members(pgid: int | None) -> list[tuple[int, str]]:
    """The live processes of a process group (pid, command line), or of every group for None."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError):
            continue
        if stat[0] != "Z" and pgid in (None, int(stat[2])):
            found.append((int(proc.name), command))
    return found


def server_run(model_dir: Path, tmp_path: Path, run_id: str) -> Path:
    """A forced CPU run against a runner-managed ``trl vllm-serve`` (one trainer, groups of 8, 8 tokens)."""
    pass_inspection()
    recipe = vllm_recipe(model_dir, addition_file(tmp_path), 2, vllm_mode="server")
    assert recipe.launch.launcher == "accelerate" and "vllm (node 0)" in recipe.launch.commands
    run_grpo(RunRequest(recipe=recipe, run_id=run_id, force=True, force_reason="server mode's CPU code path"))
    return run_dir(run_id)


def test_a_cpu_recipe_against_a_vllm_server_is_refused_unless_forced(vllm_model_dir, tmp_path):
    pass_inspection()
    recipe = vllm_recipe(vllm_model_dir, addition_file(tmp_path), 2, vllm_mode="server")
    with pytest.raises(SkillError, match="NCCL weight-transfer engine, which needs CUDA"):
        run_grpo(RunRequest(recipe=recipe, run_id="vllm-server-on-cpu"))
    assert not (runs_root() / "vllm-server-on-cpu").exists()


@pytest.mark.slow
@pytest.mark.host_memory(5)
def test_the_runner_starts_the_server_checks_it_through_trls_client_and_tears_it_down(vllm_model_dir, tmp_path):
    started = time.time()
    directory = server_run(vllm_model_dir, tmp_path, "server-run")
    record = read_record(directory)
    port = record.ports["vllm"]
    status = run_status("server-run", wait_seconds=START_TIMEOUT_S + 300)
    logs = run_logs("server-run", 400).lines
    print(f"runner-managed server run: {status.state} after {time.time() - started:.0f} s")
    assert any(f"vLLM server healthy at http://127.0.0.1:{port}/health" in line for line in logs), logs[-30:]

    # Rank 0 generated one group through TRL's VLLMClient on the run's own port, from the trainer's token ids.
    check = json.loads((directory / SERVER_CHECK_FILE).read_text())
    assert check["base_url"].endswith(f":{port}") and check["served_model"] == str(vllm_model_dir)
    assert check["server_prompt_ids_match"] and len(check["completion_tokens"]) == 8
    assert all(0 < tokens <= 8 for tokens in check["completion_tokens"])
    assert check["server_max_model_len"] >= check["needed_context"]

    # Then TRL built the trainer and refused the weight sync off CUDA, in its own words: the run failed there.
    assert status.state == "failed"
    assert "NCCL weight-transfer engine, which needs a CUDA device" in status.reason, status.reason
    until_gone(record.pid, directory)
    with pytest.raises(ConnectionRefusedError):  # nobody listens on the server's port any more
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


def left_behind(pgid: int, directory: Path) -> list[tuple[int, str]]:
    """The launcher's process group, and the ranks (sessions of their own, their run directory in the command)."""
    ranks = [(pid, command) for pid, command in group_members(None) if str(directory) in command]
    return group_members(pgid) + ranks


def until_gone(pgid: int, directory: Path, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while left_behind(pgid, directory):
        assert time.time() < deadline, f"left behind: {left_behind(pgid, directory)}"
        time.sleep(0.5)


@pytest.mark.slow
def test_a_server_that_dies_fails_the_run_with_its_log_lines_and_leaves_nothing(vllm_model_dir, tmp_path):
    directory = server_run(vllm_model_dir, tmp_path, "server-dies")
    record = read_record(directory)
    log = directory / VLLM_LOG
    deadline = time.time() + START_TIMEOUT_S
    while not (log.is_file() and log.read_text().strip()):  # the server has started and said something
        assert time.time() < deadline, run_logs("server-dies", 50).lines
        time.sleep(0.5)
    # the server's processes: everything in the launcher's group but the launcher script and its sleep
    servers = [
        pid
        for pid, command in group_members(record.pid)
        if "vllm" in command and not command.startswith(("bash ", "sleep "))
    ]
    assert servers, group_members(record.pid)
    os.kill(servers[0], signal.SIGKILL)
    status = run_status("server-dies", wait_seconds=120)
    assert status.state == "failed"
    assert status.reason.startswith("the vLLM server exited") and f"last lines of {VLLM_LOG}" in status.reason
    until_gone(record.pid, directory)
