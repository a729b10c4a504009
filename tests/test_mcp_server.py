"""The MCP face: typed structured output, true annotations, and the project's messages on bad input."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
from mcp import Client

from server.mcp_server import build_server

REQUEST = {
    "model": {"name": "Qwen/Qwen2.5-1.5B-Instruct"},
    "hardware": {"gpu_model": "H100", "gpus_per_node": 4},
    "method": "lora",
    "rewards": [{"name": "format", "role": "format", "weight": 0.2}, {"name": "exact_match", "role": "correctness"}],
    "dataset": {"name": "openai/gsm8k", "columns": ["answer"]},
}


def call(name: str, arguments: dict):
    async def go():
        async with Client(build_server()) as client:
            return await client.call_tool(name, arguments)

    return asyncio.run(go())


def test_tool_is_listed_with_schemas_and_annotations():
    async def go():
        async with Client(build_server()) as client:
            return (await client.list_tools()).tools

    (tool,) = [tool for tool in asyncio.run(go()) if tool.name == "emit_grpo_config"]
    assert tool.title and "route_check" in tool.description
    assert tool.output_schema is not None and "trl" in tool.output_schema["required"]
    assert "grpo://schemas/grpo_recipe.json" in tool.output_schema["description"]
    assert "request" in tool.input_schema["properties"]
    assert tool.annotations.read_only_hint is True and tool.annotations.destructive_hint is False
    assert tool.annotations.idempotent_hint is True and tool.annotations.open_world_hint is False


def test_emit_returns_a_structured_recipe():
    result = call("emit_grpo_config", {"request": REQUEST})
    assert not result.is_error
    recipe = result.structured_content
    assert recipe["trl"]["vllm_mode"] == "server"
    assert recipe["launch"]["training_processes"] == 3
    assert recipe["peft"]["r"] == 16


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"overrides": {"num_generations": 4}}, "num_generations=4 is below the floor of 8"),
        ({"overrides": {"max_prompt_length": 512}}, "no longer truncates prompts"),
        ({"method": "auto", "model": {"name": "acme/x", "parameters_billions": 3}}, "needs the model's shape"),
        ({"hardware": {"gpu_model": "H100", "nodes": 0}}, "nodes=0 is impossible"),
        ({"variant": "grpo_plus_plus"}, "request.variant: input should be 'gspo', 'kl_control'"),
    ],
)
def test_bad_requests_reach_the_client_with_the_projects_message(change, message):
    result = call("emit_grpo_config", {"request": {**REQUEST, **change}})
    assert result.is_error
    assert message in result.content[0].text


def test_server_start_imports_no_heavy_library():
    code = (
        "import sys, server.mcp_server as m; m.build_server(); "
        "print(sorted(n for n in ('torch', 'trl', 'transformers', 'datasets') if n in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.slow
def test_stdio_server_answers_tools_list():
    from mcp import StdioServerParameters

    async def go():
        params = StdioServerParameters(command=sys.executable, args=["-m", "server.cli", "serve"])
        async with Client(params) as client:
            return [tool.name for tool in (await client.list_tools()).tools]

    assert "emit_grpo_config" in asyncio.run(go())
