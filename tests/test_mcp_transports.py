"""The server as a separate process, through real clients: stdio, streamable HTTP on loopback (and the token
rules), and the MCP Inspector CLI when npx can fetch it.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from server.http_transport import MIN_TOKEN_CHARS, TOKEN_ENV
from server.tool_errors import ERROR_SHAPE
from skill.state import STATE_ROOT_ENV

REPOSITORY = Path(__file__).resolve().parent.parent
INSPECTOR = "@modelcontextprotocol/inspector@2.12.0"
TOKEN = "test-token-" + "x" * MIN_TOKEN_CHARS


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """The server's environment: an isolated state root, and no token unless a test sets one."""
    environment = {key: value for key, value in os.environ.items() if key != TOKEN_ENV}
    environment[STATE_ROOT_ENV] = str(tmp_path / "state")
    return environment


def serve_command(*extra: str) -> list[str]:
    return [sys.executable, "-m", "server.cli", "serve", *extra]


# ---- stdio ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_stdio_client_sees_tools_resources_prompts_and_the_error_shape(env):
    async def go():
        params = StdioServerParameters(command=sys.executable, args=["-m", "server.cli", "serve"], env=env)
        async with Client(params) as client:
            tools = (await client.list_tools()).tools
            estimate = await client.call_tool(
                "estimate_memory",
                {"request": {"model": "Qwen/Qwen2.5-7B-Instruct", "hardware": {"gpu_model": "H100"}, "method": "lora"}},
            )
            bad = await client.call_tool("run_logs", {"run_id": 7, "lines": "many"})
            skill = (await client.read_resource("grpo://skill/SKILL.md")).contents[0]
            prompt = await client.get_prompt("finetune", {"task": "tool calls that parse"})
            return tools, estimate, bad, skill, prompt

    tools, estimate, bad, skill, prompt = asyncio.run(go())
    assert len(tools) == 11 and all(tool.output_schema for tool in tools)
    assert not estimate.is_error and estimate.structured_content["fits"] is True
    assert bad.is_error and ERROR_SHAPE.match(bad.content[0].text)
    assert "- run_id:" in bad.content[0].text and "- lines:" in bad.content[0].text
    assert skill.text == (REPOSITORY / "SKILL.md").read_text(encoding="utf-8")
    assert "tool calls that parse" in prompt.messages[0].content.text


@pytest.mark.slow
def test_stdio_stdout_carries_only_protocol_messages_and_logs_go_to_stderr(env):
    """Raw JSON-RPC over the pipe: a log line on stdout would break every stdio client."""
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw-test", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "list_runs", "arguments": {"x": 1}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "run_status", "arguments": {}}},
    ]
    process = subprocess.Popen(
        serve_command(), env=env, cwd=REPOSITORY, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    lines = []
    try:
        for message in messages:
            process.stdin.write((json.dumps(message) + "\n").encode())
            process.stdin.flush()
            if "id" in message:
                lines.append(process.stdout.readline())
        rest, stderr = process.communicate(timeout=30)  # closes stdin: the server exits on EOF
    finally:
        process.kill()
    lines += rest.splitlines()
    replies = [json.loads(line) for line in lines if line.strip()]  # every stdout line parses as JSON-RPC
    assert [reply["id"] for reply in replies] == [1, 2, 3]
    assert replies[0]["result"]["serverInfo"]["name"] == "grpo-rlvr-training"
    for reply in replies[1:]:
        assert reply["result"]["isError"] is True and ERROR_SHAPE.match(reply["result"]["content"][0]["text"])
    assert b"run_status" in stderr  # the server's log line about the refused call went to stderr


# ---- streamable HTTP --------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def http_server(env: dict[str, str], tmp_path: Path, *args: str) -> Iterator[tuple[str, Path, Path]]:
    """Start ``serve --http`` and wait until it accepts connections; yields (url, stdout file, stderr file)."""
    port = free_port()
    stdout, stderr = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    with stdout.open("wb") as out, stderr.open("wb") as err:
        process = subprocess.Popen(
            serve_command("--http", "--port", str(port), *args), env=env, cwd=REPOSITORY, stdout=out, stderr=err
        )
        try:
            deadline = time.time() + 60
            while True:
                assert process.poll() is None, stderr.read_text()
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    assert time.time() < deadline, "the HTTP server did not start"
                    time.sleep(0.2)
            yield f"http://127.0.0.1:{port}/mcp", stdout, stderr
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()


async def http_session(url: str, token: str | None = None) -> tuple[Any, Any, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        tools = (await client.list_tools()).tools
        runs = await client.call_tool("list_runs", {})
        bad = await client.call_tool("cancel_run", {"run_id": "../../etc"})
        return tools, runs, bad


def raw_post(url: str, headers: dict[str, str]) -> httpx2.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers}
    return httpx2.post(url, json=body, headers=headers, timeout=30)


@pytest.mark.slow
def test_http_on_loopback_serves_the_same_tools_and_logs_to_stderr(env, tmp_path):
    with http_server(env, tmp_path) as (url, stdout, stderr):
        tools, runs, bad = asyncio.run(http_session(url))
    assert len(tools) == 11
    assert not runs.is_error and runs.structured_content == {"runs": []}
    assert bad.is_error and bad.content[0].text.startswith("cancel_run: Run id '../../etc' is not allowed")
    assert stdout.read_text() == ""
    assert "MCP over streamable HTTP at http://127.0.0.1:" in stderr.read_text()


@pytest.mark.slow
def test_http_with_a_token_answers_401_without_it_or_with_a_wrong_one(env, tmp_path):
    env[TOKEN_ENV] = TOKEN
    with http_server(env, tmp_path) as (url, _, stderr):
        missing = raw_post(url, {})
        wrong = raw_post(url, {"Authorization": "Bearer " + "y" * len(TOKEN)})
        not_bearer = raw_post(url, {"Authorization": f"Basic {TOKEN}"})
        tools, runs, _ = asyncio.run(http_session(url, TOKEN))
    for response in (missing, wrong, not_bearer):
        assert response.status_code == 401
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert TOKEN_ENV in response.json()["error_description"]
    assert len(tools) == 11 and not runs.is_error
    assert TOKEN not in stderr.read_text()


@pytest.mark.slow
def test_any_address_with_a_token_is_served_behind_it(env, tmp_path):
    env[TOKEN_ENV] = TOKEN
    with http_server(env, tmp_path, "--host", "0.0.0.0") as (url, _, stderr):
        assert raw_post(url, {}).status_code == 401
        tools, _, _ = asyncio.run(http_session(url, TOKEN))
    assert len(tools) == 11 and "bearer token from GRPO_RLVR_MCP_TOKEN required" in stderr.read_text()


@pytest.mark.parametrize(
    ("args", "token", "message"),
    [
        (["--http", "--host", "0.0.0.0"], None, "Refusing to serve on '0.0.0.0' without a bearer token"),
        (["--http", "--host", "192.168.1.20"], None, TOKEN_ENV),
        (["--http", "--host", "example.org"], None, TOKEN_ENV),
        (["--http", "--host", "0.0.0.0"], "short", f"needs at least {MIN_TOKEN_CHARS}"),
        (["--http", "--port", "70000"], None, "is not a TCP port"),
        (["--port", "8765"], None, "--host and --port apply to --http only"),
    ],
)
def test_refused_bindings_exit_2_with_a_message(monkeypatch, capsys, args, token, message):
    from server.cli import main

    if token is None:
        monkeypatch.delenv(TOKEN_ENV, raising=False)
    else:
        monkeypatch.setenv(TOKEN_ENV, token)
    assert main(["serve", *args]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("error: ") and message in captured.err and captured.out == ""


@pytest.mark.slow
def test_a_refused_binding_exits_2_before_serving(env):
    result = subprocess.run(
        serve_command("--http", "--host", "0.0.0.0"),
        env=env,
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and TOKEN_ENV in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


# ---- MCP Inspector CLI ------------------------------------------------------------------------


def inspector(env: dict[str, str], tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """Run the Inspector CLI, or skip when npx is missing or the package cannot be fetched."""
    npx = shutil.which("npx")
    if npx is None:
        pytest.skip("npx is not installed; the MCP Inspector CLI checks need Node.js")
    command = [npx, "-y", INSPECTOR, "--cli", *args]
    environment = {**env, "MCP_CATALOG_PATH": str(tmp_path / "inspector-catalog.json")}
    try:
        result = subprocess.run(command, env=environment, cwd=REPOSITORY, capture_output=True, text=True, timeout=240)
    except subprocess.TimeoutExpired:
        pytest.skip(f"npx could not run {INSPECTOR} within 240 s (offline?)")
    fetch_failed = ("ENOTFOUND", "EAI_AGAIN", "ETIMEDOUT", "ECONNREFUSED", "npm error code E404", "npm ERR!")
    if result.returncode != 0 and any(marker in result.stderr for marker in fetch_failed):
        pytest.skip(f"npx could not fetch {INSPECTOR}: {result.stderr.strip().splitlines()[-1]}")
    return result


def stdio_target(env: dict[str, str]) -> list[str]:
    return ["-e", f"{STATE_ROOT_ENV}={env[STATE_ROOT_ENV]}", sys.executable, "-m", "server.cli", "serve"]


@pytest.mark.slow
def test_inspector_cli_lists_tools_with_no_portability_errors(env, tmp_path):
    result = inspector(env, tmp_path, "--strict", *stdio_target(env), "--method", "tools/list")
    assert result.returncode == 0, result.stderr[-2000:]
    tools = json.loads(result.stdout)["tools"]
    assert len(tools) == 11 and all(tool.get("outputSchema") and tool.get("annotations") for tool in tools)
    assert "0 errors" in result.stderr


@pytest.mark.slow
def test_inspector_cli_calls_a_tool_and_gets_the_projects_errors(env, tmp_path):
    request = {"model": "Qwen/Qwen2.5-7B-Instruct", "hardware": {"gpu_model": "H100"}, "method": "lora"}
    ok = inspector(
        env, tmp_path, *stdio_target(env), "--method", "tools/call", "--tool-name", "estimate_memory",
        "--tool-arg", f"request={json.dumps(request)}",
    )  # fmt: skip
    assert ok.returncode == 0, ok.stderr[-2000:]
    answer = json.loads(ok.stdout)
    assert not answer.get("isError") and answer["structuredContent"]["fits"] is True
    bad = inspector(
        env, tmp_path, *stdio_target(env), "--method", "tools/call", "--tool-name", "run_logs",
        "--tool-arg", "run_id=gsm8k", "--tool-arg", "lines=-3",
    )  # fmt: skip
    answer = json.loads(bad.stdout)
    assert answer["isError"] is True
    assert answer["content"][0]["text"].startswith("run_logs: invalid arguments (1 problem).\n- lines:")


@pytest.mark.slow
def test_inspector_cli_over_http_with_the_token(env, tmp_path):
    env[TOKEN_ENV] = TOKEN
    with http_server(env, tmp_path) as (url, _, _):
        result = inspector(env, tmp_path, url, "--method", "tools/list", "--header", f"Authorization: Bearer {TOKEN}")
    assert result.returncode == 0, result.stderr[-2000:]
    assert len(json.loads(result.stdout)["tools"]) == 11
