"""The MCP surface through a real client in memory: tools, errors, resources, prompts, and the flow end to end.

Each test gets its own state root, so ids never collide with another run of the suite.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from blind_reader import addition_samples, judge
from mcp import Client
from mcp.shared.exceptions import MCPError

from server.mcp_resources import REPOSITORY
from server.mcp_server import SERVER_NAME, build_server
from server.mcp_tools import TOOL_SPECS
from server.tool_errors import ERROR_SHAPE
from server.tool_schemas import FULL_CONTRACTS, TOOLS_LIST_CHARACTERS
from skill.data import addition_rows
from skill.state import STATE_ROOT_ENV

TOOLS = [spec.name for spec in TOOL_SPECS]
EXAMPLES = {spec.name: spec.example for spec in TOOL_SPECS}
RAW_PYDANTIC = ("validation error for", "errors.pydantic.dev", "Error executing tool", "Traceback", "toolArguments")


@pytest.fixture(autouse=True)
def state_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(STATE_ROOT_ENV, str(tmp_path / "state"))
    return tmp_path / "state"


def session(work):
    """Run ``work(client)`` against a fresh in-memory server."""

    async def go():
        async with Client(build_server()) as client:
            return await work(client)

    return asyncio.run(go())


def call(name: str, arguments: dict[str, Any]):
    return session(lambda client: client.call_tool(name, arguments))


def assert_project_error(result, tool: str) -> str:
    assert result.is_error, result.structured_content
    text = result.content[0].text
    assert text.startswith(f"{tool}: "), text
    assert ERROR_SHAPE.match(text)
    for marker in RAW_PYDANTIC:
        assert marker not in text, text
    return text


# ---- tools/list -------------------------------------------------------------------------------


def test_every_tool_is_described_for_a_model():
    tools = session(lambda client: client.list_tools()).tools
    assert [tool.name for tool in tools] == TOOLS
    for tool in tools:
        assert tool.title, tool.name
        assert tool.output_schema and tool.output_schema.get("type") == "object", tool.name
        assert tool.input_schema.get("type") == "object", tool.name
        hints = tool.annotations
        for hint in ("read_only_hint", "destructive_hint", "idempotent_hint", "open_world_hint"):
            assert getattr(hints, hint) is not None, (tool.name, hint)
        assert not (hints.read_only_hint and hints.destructive_hint), tool.name
        description = tool.description
        assert 100 < len(description) < 1500, tool.name
        assert "\n    " not in description, f"{tool.name}: code indentation leaked into the description"
        assert ">>>" not in json.dumps(tool.input_schema) + json.dumps(tool.output_schema), tool.name
    described = {tool.name: tool.description for tool in tools}
    for name in ("route_check", "inspect_rewards", "record_review", "emit_grpo_config", "run_grpo", "run_status"):
        assert "Returns" in described[name] and "Next" in described[name], name


def test_annotations_say_what_each_tool_does():
    tools = {tool.name: tool.annotations for tool in session(lambda client: client.list_tools()).tools}
    read_only = {name for name, hints in tools.items() if hints.read_only_hint}
    assert read_only == {
        "inspection_samples",
        "emit_grpo_config",
        "estimate_memory",
        "run_status",
        "run_logs",
        "list_runs",
    }
    assert {name for name, hints in tools.items() if hints.destructive_hint} == {"record_review", "cancel_run"}
    # A probe, a generate source or a run may fetch a hub model or dataset: those touch the open world.
    assert {name for name, hints in tools.items() if hints.open_world_hint} == {
        "route_check",
        "inspect_rewards",
        "run_grpo",
    }


def test_tools_list_fits_an_agents_context_and_each_definition_is_documented_once():
    """The issue measured 78,243 characters; an agent reads tools/list whole before its first call."""

    async def work(client):
        listed = await client.list_tools()
        full = {spec.name: await client.read_resource(f"grpo://tools/{spec.name}/input-schema") for spec in TOOL_SPECS}
        return listed, full

    listed, full = session(work)
    assert len(listed.model_dump_json(by_alias=True, exclude_none=True)) <= TOOLS_LIST_CHARACTERS
    wire = {tool.name: tool.model_dump(by_alias=True, exclude_none=True, mode="json") for tool in listed.tools}
    text = json.dumps(wire)
    assert text.count("A library reward (e.g.") == 1, "RewardSpec's descriptions are published once"
    assert '"title"' not in json.dumps([tool["inputSchema"] for tool in wire.values()])
    for spec in TOOL_SPECS:
        published = wire[spec.name]["inputSchema"]
        jsonschema.Draft202012Validator.check_schema(published)
        jsonschema.validate(dict(spec.example), published)  # what the server accepts, the published schema accepts
        whole = json.loads(full[spec.name].contents[0].text)
        assert len(json.dumps(whole)) >= len(json.dumps(published)), spec.name
    # what tools/list leaves out is in the whole schema: e.g. the sharding option's meaning
    assert "sharding" in json.dumps(wire["estimate_memory"]["inputSchema"])
    assert "ZeRO-3" in full["estimate_memory"].contents[0].text
    for uri in FULL_CONTRACTS.values():  # every output schema's pointer is a document this server serves
        assert (REPOSITORY / "schemas" / uri.rsplit("/", 1)[-1]).is_file(), uri
    recipe = wire["run_grpo"]["inputSchema"]
    assert "GRPORecipe" not in json.dumps(recipe) and len(json.dumps(recipe)) < 2_500, "the recipe is not inlined"


def test_every_example_fits_its_tools_input_schema():
    server = build_server()
    for spec in TOOL_SPECS:
        assert server.argument_errors(spec.name, dict(spec.example)) == [], spec.name


# ---- bad input: the project's message, not pydantic's -----------------------------------------


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [
        ("emit_grpo_config", {}, ["- request: missing.", "Send a RecipeRequest object (required: hardware"]),
        (
            "emit_grpo_config",
            {"request": {"hardware": {}, "rewards": 3, "dataset": {"name": "x"}}},
            ["request.rewards"],
        ),
        (
            "emit_grpo_config",
            {"request": {**EXAMPLES["emit_grpo_config"]["request"], "method": "fast"}},
            ["'full', 'lora'"],
        ),
        ("estimate_memory", {"request": {"hardware": {"gpus_per_node": "four"}}}, ["request.hardware.gpus_per_node"]),
        ("route_check", {"request": {"signal": "vibes"}}, ["request.signal", "one of 'unit_tests'"]),
        ("inspect_rewards", {"request": {"rewards": []}}, ["request.rewards", "at least 1 item"]),
        ("record_review", {"request": {"report_id": 7}}, ["request.report_id", "request.reviewer: missing"]),
        ("run_grpo", {"request": []}, ["- request:", "a RunRequest object"]),
        ("run_status", {"run_id": "x", "wait_seconds": 601}, ["wait_seconds", "<= 600", "resets its timeout"]),
        ("run_logs", {"run_id": ["x"]}, ["- run_id:", "Send a string"]),
        ("cancel_run", {}, ["- run_id: missing"]),
        ("list_runs", {"verbose": True}, ["'verbose': not an argument of list_runs"]),
    ],
)
def test_bad_arguments_name_each_field_what_to_send_and_a_valid_call(tool, arguments, expected):
    text = assert_project_error(call(tool, arguments), tool)
    assert text.startswith(f"{tool}: invalid arguments (")
    assert f"Example of a valid call: {tool} {{" in text
    for fragment in expected:
        assert fragment in text, text


def test_fields_sent_beside_request_are_pointed_inside_it():
    text = assert_project_error(
        call("emit_grpo_config", dict(EXAMPLES["emit_grpo_config"]["request"])), "emit_grpo_config"
    )
    assert "'model'" in text and "belong inside {'request': {...}}" in text
    assert "not an argument of emit_grpo_config. Send only: request." in text


def test_huge_and_odd_values_come_back_short():
    huge = "\u00e9" * 1_000_000
    text = assert_project_error(call("run_logs", {"run_id": huge, "lines": huge}), "run_logs")
    assert len(text) < 5000 and "(1000000 characters)" in text
    text = assert_project_error(call("cancel_run", {"run_id": huge}), "cancel_run")
    assert len(text) < 5000


def test_core_refusals_keep_their_message_in_the_same_shape():
    text = assert_project_error(call("run_status", {"run_id": "../../etc/passwd"}), "run_status")
    assert "is not allowed" in text
    request = {**EXAMPLES["emit_grpo_config"]["request"], "overrides": {"num_generations": 4}}
    text = assert_project_error(call("emit_grpo_config", {"request": request}), "emit_grpo_config")
    assert "num_generations=4 is below the floor of 8" in text


def test_a_crash_in_the_core_is_an_internal_error_with_the_traceback_in_the_log(monkeypatch, caplog):
    from skill.runs import jobs

    def broken() -> None:
        raise RuntimeError("secret detail from the core")

    monkeypatch.setattr(jobs, "list_runs", broken)
    with caplog.at_level("ERROR", logger="grpo_rlvr.server"):
        text = assert_project_error(call("list_runs", {}), "list_runs")
    assert text.startswith("list_runs: internal error") and "secret detail" not in text
    assert any(record.exc_info and "secret detail" in str(record.exc_info[1]) for record in caplog.records)


def test_unknown_tool_lists_the_tools():
    result = call("train_model", {})
    assert result.is_error and result.content[0].text.startswith("train_model: unknown tool")
    assert all(name in result.content[0].text for name in TOOLS)


# ---- resources and prompts ---------------------------------------------------------------------


def test_documents_are_resources_with_the_files_text():
    async def work(client):
        listed = (await client.list_resources()).resources
        texts = {str(r.uri): (await client.read_resource(r.uri)).contents[0] for r in listed}
        return listed, texts

    listed, texts = session(work)
    expected = {"grpo://skill/SKILL.md": REPOSITORY / "SKILL.md"}
    expected |= {f"grpo://references/{p.name}": p for p in (REPOSITORY / "references").glob("*.md")}
    expected |= {f"grpo://schemas/{p.name}": p for p in (REPOSITORY / "schemas").glob("*.json")}
    assert set(texts) == set(expected) and len(expected) >= 10
    for uri, path in expected.items():
        assert texts[uri].text == path.read_text(encoding="utf-8"), uri
    for resource in listed:
        assert resource.title and resource.description and resource.mime_type, resource.uri
        if str(resource.uri).startswith("grpo://schemas/"):
            assert json.loads(texts[str(resource.uri)].text)["$schema"].startswith("https://json-schema.org/")


def test_state_templates_are_listed_and_unknown_ids_are_not_found():
    async def work(client):
        templates = {t.uri_template: t for t in (await client.list_resource_templates()).resource_templates}
        errors = {}
        for uri in (
            "grpo://runs/nope/status",
            "grpo://runs/nope/metrics",
            "grpo://inspections/insp-nope",
            "grpo://tools/nope/input-schema",
        ):
            with pytest.raises(MCPError) as caught:
                await client.read_resource(uri)
            errors[uri] = caught.value
        return templates, errors

    templates, errors = session(work)
    assert set(templates) == {
        "grpo://runs/{run_id}/status",
        "grpo://runs/{run_id}/metrics",
        "grpo://inspections/{report_id}",
        "grpo://tools/{tool}/input-schema",
    }
    assert "Send one of: route_check" in str(errors["grpo://tools/nope/input-schema"])
    assert "Send an id from list_runs" in str(errors["grpo://runs/nope/status"])
    assert "Send an id inspect_rewards returned" in str(errors["grpo://inspections/insp-nope"])


def test_the_finetune_prompt_walks_the_flow_in_order():
    async def work(client):
        prompts = (await client.list_prompts()).prompts
        result = await client.get_prompt("finetune", {"task": "answer GSM8K", "hardware": "1x H100"})
        return prompts, result

    prompts, result = session(work)
    (prompt,) = prompts
    assert prompt.name == "finetune" and prompt.title
    assert [(a.name, a.required) for a in prompt.arguments] == [
        ("task", True),
        ("model", False),
        ("hardware", False),
        ("dataset", False),
    ]
    text = result.messages[0].content.text
    assert "answer GSM8K" in text and "1x H100" in text and "grpo://skill/SKILL.md" in text
    order = [text.index(name) for name in ("route_check", "inspect_rewards", "record_review", "emit_grpo_config")]
    order += [text.index(name) for name in ("estimate_memory", "run_grpo", "run_status")]
    assert order == sorted(order)


def test_server_identifies_itself_and_points_at_the_flow():
    server = build_server()
    assert server.name == SERVER_NAME and server.version
    for name in ("route_check", "inspect_rewards", "emit_grpo_config", "run_grpo", "finetune", "SKILL.md"):
        assert name in server.instructions


# ---- the flow through the client ---------------------------------------------------------------

REWARDS = [
    {"name": "format", "role": "format", "weight": 0.2, "params": {"pattern": "number"}},
    {"name": "exact_match", "role": "correctness", "params": {"extract": "last_number"}},
]


def _samples() -> list[dict[str, Any]]:
    return addition_samples()


async def every_sample(client, digest: dict[str, Any]) -> list[dict[str, Any]]:
    """The digest's first page, then inspection_samples page by page, as an agent reads them."""
    page = digest["page"]
    samples = list(page["samples"])
    while page["next_offset"] is not None:
        arguments = {"report_id": digest["id"], "offset": page["next_offset"]}
        page = (await client.call_tool("inspection_samples", arguments)).structured_content
        samples += page["samples"]
    return samples


def test_inspect_review_and_read_the_report_through_the_client():
    async def work(client):
        result = await client.call_tool("inspect_rewards", {"request": {"rewards": REWARDS, "samples": _samples()}})
        report = result.structured_content
        samples = await every_sample(client, report)
        markdown = (await client.read_resource(f"grpo://inspections/{report['id']}")).contents[0]
        labels = {str(sample["id"]): judge(sample, report["read_roles"]) for sample in samples}  # blind, own check
        review = {"report_id": report["id"], "reviewer": "test-agent", "reviewer_kind": "agent", "labels": labels}
        reviewed = await client.call_tool("record_review", {"request": review})
        return result, samples, markdown, reviewed

    result, samples, markdown, reviewed = session(work)
    report = result.structured_content
    assert report["verdict"] == "pending" and report["page"]["samples_total"] == 60
    assert [sample["id"] for sample in samples] == list(range(60)), "every sample once, in order, across pages"
    assert report["page"]["next_offset"] is not None, "60 samples do not fit one compact result"
    assert len(result.content[0].text) <= 12_000 and json.loads(result.content[0].text) == report
    assert markdown.mime_type == "text/markdown" and report["id"] in markdown.text
    assert not reviewed.is_error, reviewed.content
    outcome = reviewed.structured_content
    assert outcome["verdict"] == "passed", outcome["verdict_reasons"]
    assert all(not sample["scores"] for sample in samples), "the samples are shown blind until labelled"
    assert outcome["labelled"] == 60 and outcome["stamp"].startswith("reviewed: agent test-agent labelled 60")
    assert "samples" not in outcome and len(reviewed.content[0].text) < 2_000


def test_a_page_past_the_last_sample_says_which_offsets_exist():
    async def work(client):
        report = await client.call_tool("inspect_rewards", {"request": {"rewards": REWARDS, "samples": _samples()}})
        return await client.call_tool(
            "inspection_samples", {"report_id": report.structured_content["id"], "offset": 60}
        )

    text = assert_project_error(session(work), "inspection_samples")
    assert "outside" in text and "Send an offset from 0 to 59" in text


@pytest.mark.slow
def test_a_run_through_the_client_status_metrics_logs(tiny_model_dir, tmp_path):
    """inspect -> review -> emit -> run_grpo -> run_status(wait) -> resources, all over MCP, on the tiny model."""
    dataset = tmp_path / "addition.jsonl"
    dataset.write_text("".join(json.dumps(row) + "\n" for row in addition_rows(64)))
    request = {
        "model": {"name": str(tiny_model_dir)},
        "hardware": {"accelerator": "cpu"},
        "method": "full",
        "rewards": REWARDS,
        "dataset": {"name": str(dataset), "columns": ["answer"]},
        "max_steps": 2,
        "overrides": {
            "per_device_train_batch_size": 8,
            "gradient_accumulation_steps": 1,
            "max_completion_length": 8,
            "logging_steps": 1,
            "beta": 0.0,
        },
    }

    async def work(client):
        report = await client.call_tool("inspect_rewards", {"request": {"rewards": REWARDS, "samples": _samples()}})
        report = report.structured_content
        labels = {str(s["id"]): judge(s, report["read_roles"]) for s in await every_sample(client, report)}
        review = {"report_id": report["id"], "reviewer": "test-agent", "reviewer_kind": "agent", "labels": labels}
        assert (await client.call_tool("record_review", {"request": review})).structured_content["verdict"] == "passed"
        recipe = (await client.call_tool("emit_grpo_config", {"request": request})).structured_content
        started = await client.call_tool("run_grpo", {"request": {"recipe": recipe, "run_id": "mcp-tiny"}})
        assert not started.is_error, started.content
        status = started.structured_content
        notes: list[tuple[float, float | None, str | None]] = []

        async def progressed(done: float, total: float | None, message: str | None) -> None:
            notes.append((done, total, message))

        # one call follows the run to its first step: the client is told where it stands while it waits
        first = await client.call_tool(
            "run_status", {"run_id": "mcp-tiny", "wait_seconds": 300, "until_step": 1}, progress_callback=progressed
        )
        status = first.structured_content
        assert status["step"] >= 1 or status["state"] not in ("starting", "running"), status
        assert notes and all(message and message.startswith("step ") for _, _, message in notes), notes
        for _ in range(40):
            if status["state"] not in ("starting", "running"):
                break
            status = (
                await client.call_tool("run_status", {"run_id": "mcp-tiny", "wait_seconds": 5})
            ).structured_content
        resource = json.loads((await client.read_resource("grpo://runs/mcp-tiny/status")).contents[0].text)
        metrics = json.loads((await client.read_resource("grpo://runs/mcp-tiny/metrics")).contents[0].text)
        logs = (await client.call_tool("run_logs", {"run_id": "mcp-tiny", "lines": 20})).structured_content
        runs = (await client.call_tool("list_runs", {})).structured_content
        again = await client.call_tool("run_grpo", {"request": {"recipe": recipe, "run_id": "mcp-tiny"}})
        return status, resource, metrics, logs, runs, again

    status, resource, metrics, logs, runs, again = session(work)
    assert status["state"] == "succeeded", status
    assert resource["run_id"] == "mcp-tiny" and resource["state"] == "succeeded"
    assert metrics and any("step" in point for point in metrics)
    assert logs["lines"] and [run["run_id"] for run in runs["runs"]] == ["mcp-tiny"]
    assert re.search(r"^run_grpo: Run 'mcp-tiny' exists\.", again.content[0].text)
