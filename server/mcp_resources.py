"""The MCP resources and prompt: the skill's documents, a run's status and metrics, an inspection report,
and the ``finetune`` prompt that walks the whole flow.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError
from mcp.server.mcpserver.resources import FileResource
from pydantic import Field

from skill.errors import SkillError
from skill.inspection.render import render_markdown
from skill.inspection.reports import load_report
from skill.runs import jobs
from skill.runs.store import read_jsonl, run_dir

REPOSITORY = Path(__file__).resolve().parent.parent


def _first_heading(path: Path) -> str:
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.startswith("# "):
                return line[2:].strip()
    return path.stem


def register_documents(server: MCPServer) -> None:
    """SKILL.md, references/*.md and schemas/*.json, read from the checkout when asked for."""
    skill_md = REPOSITORY / "SKILL.md"
    if skill_md.is_file():
        server.add_resource(
            FileResource(
                uri="grpo://skill/SKILL.md",
                path=skill_md,
                name="SKILL.md",
                title="The GRPO-RLVR skill: the method and the flow",
                description="Read first: when GRPO applies, the reward gate, the recipe, sizing, and what to change "
                "from a run's symptoms.",
                mime_type="text/markdown",
                encoding="utf-8",
            )
        )
    for path in sorted((REPOSITORY / "references").glob("*.md")):
        server.add_resource(
            FileResource(
                uri=f"grpo://references/{path.name}",
                path=path,
                name=f"references/{path.name}",
                title=_first_heading(path),
                description=f"Reference for the skill: {_first_heading(path)}.",
                mime_type="text/markdown",
                encoding="utf-8",
            )
        )
    for path in sorted((REPOSITORY / "schemas").glob("*.json")):
        server.add_resource(
            FileResource(
                uri=f"grpo://schemas/{path.name}",
                path=path,
                name=f"schemas/{path.name}",
                title=f"JSON Schema: {path.stem.replace('_', ' ')}",
                description=f"The JSON Schema (draft 2020-12) of the {path.stem.replace('_', ' ')} contract, "
                "generated from the Pydantic model the tools validate against.",
                mime_type="application/schema+json",
                encoding="utf-8",
            )
        )


def register_tool_schemas(server: MCPServer, schemas: Mapping[str, Mapping[str, Any]]) -> None:
    """Each tool's whole input schema, every option described: tools/list leaves out what has a default."""

    @server.resource(
        "grpo://tools/{tool}/input-schema",
        name="tool-input-schema",
        title="A tool's whole input schema",
        description="The JSON Schema of a tool's arguments with every field described, including the options "
        "with a default that tools/list shows without their description.",
        mime_type="application/schema+json",
    )
    def tool_input_schema(tool: str) -> str:
        if tool not in schemas:
            raise ResourceNotFoundError(f"No tool {tool!r}. Send one of: {', '.join(schemas)}.")
        return json.dumps(schemas[tool], indent=1)


def _not_found(exc: SkillError) -> ResourceNotFoundError:
    return ResourceNotFoundError(str(exc))


def register_state_resources(server: MCPServer) -> None:
    """A run's status and metrics and an inspection report, read from the state root on each request."""

    @server.resource(
        "grpo://runs/{run_id}/status",
        name="run-status",
        title="A run's status",
        description="What run_status returns (state, step, ETA, last metrics, held-out scores, health), as JSON.",
        mime_type="application/json",
    )
    def run_status_resource(run_id: str) -> str:

        try:
            return jobs.run_status(run_id).model_dump_json(indent=1)
        except SkillError as exc:
            raise _not_found(exc) from None

    @server.resource(
        "grpo://runs/{run_id}/metrics",
        name="run-metrics",
        title="A run's metrics",
        description="Every logged metric point of a run (metrics.jsonl as a JSON array), oldest first.",
        mime_type="application/json",
    )
    def run_metrics(run_id: str) -> str:
        try:
            return json.dumps(read_jsonl(run_dir(run_id) / "metrics.jsonl"))
        except SkillError as exc:
            raise _not_found(exc) from None

    @server.resource(
        "grpo://inspections/{report_id}",
        name="inspection-report",
        title="An inspection report",
        description="The Markdown report of an inspect_rewards run: every sample with its scores, the flags, "
        "the hack probes and the verdict. Read it before record_review.",
        mime_type="text/markdown",
    )
    def inspection_report(report_id: str) -> str:

        try:
            return render_markdown(load_report(report_id))
        except SkillError as exc:
            raise _not_found(exc) from None


FINETUNE_PROMPT = """\
Fine-tune a model with GRPO and verifiable rewards (the grpo-rlvr skill), following each step in order.

Task: {task}
Model: {model}
Hardware: {hardware}
Dataset: {dataset}

Read the resource grpo://skill/SKILL.md first; it is the method. Then:

1. Route. Call route_check with the task's signal kind, a verifier (the reward that decides pass/fail) and a \
probe (the model and ~32 prompts, 8 samples each). Continue only if the route is "grpo"; otherwise report the \
route, its evidence and next_skill, and stop.
2. Inspect the rewards. Call inspect_rewards with the rewards you intend to train on and \
route_decision_id=<the decision id>. Read every sample (the result's first page, then inspection_samples from \
next_offset until it is null; no score is shown) and judge it yourself: pass, fail or unsure for each read role.
3. Review. Call record_review with your labels (reviewer_kind "agent"); its answer names every sample where a \
reward disagrees with you. Fix that reward and inspect_rewards with samples_of=<the inspection id> (your labels \
carry over), or amend a label you misread, with the reason. Continue only when the verdict is "passed".
4. Config. Call emit_grpo_config with the model, hardware, method, rewards (correctness weight above format \
weight), dataset and route_decision_id. Never hand-write GRPOConfig values; deviate only through overrides with \
override_reasons.
5. Memory. Read the recipe's memory estimate; if it does not fit, call estimate_memory to compare remedies and \
re-emit with the cheapest one that fits.
6. Run. Call run_grpo with the recipe, then follow it with run_status (wait_seconds) and run_logs. On a health \
warning, name the symptom and re-emit with symptoms=[...] (see grpo://references/grpo-variants.md).

Report at each step what you sent, what came back, and why you continue or stop.
"""


def register_prompts(server: MCPServer) -> None:
    @server.prompt(
        name="finetune",
        title="Fine-tune with GRPO (route, inspect, config, memory, run)",
        description="Walk the /finetune GRPO flow with the tools: route_check, inspect_rewards, record_review, "
        "emit_grpo_config, estimate_memory, run_grpo, run_status.",
    )
    def finetune(
        task: Annotated[str, Field(description="What the model should learn and how success is checked.")],
        model: Annotated[str, Field(description="Base model: hub id, local directory or the embedded one.")] = "",
        hardware: Annotated[str, Field(description="Where it trains, e.g. '1x H100' or 'this CPU'.")] = "",
        dataset: Annotated[str, Field(description="Prompts with the columns the rewards read.")] = "",
    ) -> str:
        """Why a prompt: a client can offer the whole flow as one command, with the gate spelled out."""
        return FINETUNE_PROMPT.format(
            task=task,
            model=model or "(choose one; the embedded SmolLM2-135M-Instruct runs anywhere)",
            hardware=hardware or "(ask, or target this machine)",
            dataset=dataset or "(ask which prompts and answer columns the rewards read)",
        )


# --------------------------------------------------------------------------------------------
# Transports.
