"""The MCP tools: one adapter a tool, a few lines over one ``skill`` function, with its title, hints and example.

Adapters are declared once at module level (``TOOL_SPECS``) and registered by
``server.mcp_server.build_server``. A ``SkillError`` becomes a tool error in the project's shape
(``server.tool_calls``). Results are compact: what an agent reads now, with the rest a call or a
resource away (a page of samples, the whole inspection report, the full metrics).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from mcp.server.mcpserver import Context
from mcp.types import ToolAnnotations
from pydantic import ConfigDict, Field

from server.tool_calls import as_tool_errors, progress_reporter, until_cancelled
from skill.inspection.agreement import GATE_FINAL, GATE_RULE
from skill.inspection.digest import inspection_digest, review_outcome, sample_page
from skill.inspection.gate import record_review
from skill.inspection.reports import load_report
from skill.inspection.run import inspect_rewards
from skill.inspection.schema import InspectionDigest, InspectionRequest, ReviewOutcome, ReviewRequest, SamplePage
from skill.memory.estimate import MemoryEstimate, MemoryRequest, estimate_memory
from skill.recipe.emit import RecipeRequest, emit_grpo_config
from skill.recipe.schema import GRPORecipe
from skill.routing.route import RouteDecision, RouteRequest, route_check
from skill.runs import jobs
from skill.runs.jobs import RunList, RunLogs, RunRequest, RunStatus

T = TypeVar("T")


@dataclass(frozen=True)
class ToolSpec:
    function: Callable[..., Any]
    name: str
    title: str
    annotations: ToolAnnotations
    example: Mapping[str, Any]
    hint: str = ""


TOOL_SPECS: list[ToolSpec] = []


def _hints(*, read_only: bool, destructive: bool, idempotent: bool, open_world: bool) -> ToolAnnotations:
    """All four hints, always explicit: a client must not fall back to the spec's pessimistic defaults."""
    return ToolAnnotations(
        read_only_hint=read_only, destructive_hint=destructive, idempotent_hint=idempotent, open_world_hint=open_world
    )


def _tool(
    name: str, title: str, annotations: ToolAnnotations, example: Mapping[str, Any], hint: str = ""
) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Declare an adapter as a tool, with the valid example its argument errors quote."""

    def register(function: Callable[..., T]) -> Callable[..., T]:
        TOOL_SPECS.append(ToolSpec(as_tool_errors(function), name, title, annotations, example, hint))
        return function

    return register


def _quoting_the_gate_rule(function: Callable[..., T]) -> Callable[..., T]:
    """The gate's rule, stated once (skill.inspection.agreement.GATE_RULE), where the reader meets it."""
    function.__doc__ = (function.__doc__ or "").replace("{rule}", GATE_RULE).replace("{final}", GATE_FINAL)
    return function


def tool_description(text: str) -> str:
    """A docstring as a model reads it: no code indentation, paragraphs joined into lines."""
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(" ".join(line.strip() for line in paragraph.splitlines()) for paragraph in paragraphs)


_DOCTEST = re.compile(r"\n*^>>> .*", re.MULTILINE | re.DOTALL)


def strip_doctests(schema: Any) -> None:
    """Drop doctest examples that pydantic copies from model docstrings into schema descriptions."""
    if isinstance(schema, dict):
        description = schema.get("description")
        if isinstance(description, str) and ">>> " in description:
            schema["description"] = _DOCTEST.sub("", description).strip()
        for value in schema.values():
            strip_doctests(value)
    elif isinstance(schema, list):
        for value in schema:
            strip_doctests(value)


DEFAULT_WAIT_SECONDS = 50.0
"""run_status's default wait: under the 60 s after which common MCP clients give up on a call."""
MAX_WAIT_SECONDS = 600.0
"""run_status's longest wait, for a client that resets its timeout on progress (sent every few seconds)."""


class RunToolRequest(RunRequest):
    """Start (or resume) a GRPO run of a recipe on this machine."""

    model_config = ConfigDict(title="RunRequest")  # the contract's name, in schemas and argument errors

    # Typed as GRPORecipe, the recipe's whole schema (13k characters) would be published in tools/list
    # for a value the agent only passes on; it is validated on arrival instead (run_grpo_tool).
    recipe: dict[str, Any] | None = Field(  # type: ignore[assignment]
        default=None,
        description="emit_grpo_config's result, passed on unchanged (its schema: grpo://schemas/grpo_recipe.json).",
    )


RunId = Annotated[str, Field(description="A run id, as run_grpo or list_runs returned it.")]

EXAMPLE_RECIPE_REQUEST: dict[str, Any] = {
    "model": {"name": "Qwen/Qwen2.5-1.5B-Instruct"},
    "hardware": {"gpu_model": "H100", "gpus_per_node": 1},
    "method": "lora",
    "rewards": [  # the format's <answer> tag is the one exact_match reads: one completion can earn both
        {"name": "format", "role": "format", "weight": 0.2, "params": {"pattern": "answer_tag"}},
        {"name": "exact_match", "role": "correctness"},
    ],
    "dataset": {"name": "openai/gsm8k", "columns": ["answer"]},
}


@_tool(
    "route_check",
    "Check whether GRPO is the right tool",
    _hints(read_only=False, destructive=False, idempotent=False, open_world=True),
    {"request": {"signal": "math_answer"}},
    hint='To measure instead of guess, add a verifier and a probe, e.g. "verifier": {"name": "exact_match", '
    '"role": "correctness"}, "probe": {"dataset": "embedded:addition", "num_prompts": 8}.',
)
async def route_check_tool(request: RouteRequest, ctx: Context) -> RouteDecision:
    """Decide whether a task should use GRPO at all. Call it first.

    Send `signal`; to measure, a `verifier` and a `probe` of 50+ samples (prompts x n). It decides when 95%
    intervals clear the boundaries, else `sample-more`. A verifier reading answers in under 20% of samples decides
    nothing; the error names a mode that reads.

    Returns route, reasons, evidence and `id`.

    Next: grpo: inspect_rewards, emit_grpo_config with route_decision_id=<id>; else next_step / next_skill.
    """
    progress = progress_reporter(ctx)
    return await until_cancelled(lambda should_stop: route_check(request, progress=progress, should_stop=should_stop))


@_tool(
    "inspect_rewards",
    "Inspect the reward functions (the mandatory read)",
    _hints(read_only=False, destructive=False, idempotent=False, open_world=True),
    {
        "request": {
            "rewards": [{"name": "exact_match", "role": "correctness"}],
            "samples": [{"prompt": "What is 2 + 3?", "completion": "<answer>5</answer>", "columns": {"answer": "5"}}],
        }
    },
    hint="Send exactly one sample source: samples, route_decision_id (from route_check), samples_of or generate.",
)
async def inspect_rewards_tool(request: InspectionRequest, ctx: Context) -> InspectionDigest:
    """Score the rewards on the samples in a fresh process and draw 50-60 for a blind read, the gate of run_grpo.

    Samples: route_decision_id or `generate` (progress, cancellable; resampled where reads revealed too many),
    your `samples`, or `samples_of` (after a reward fix: your labels re-scored).

    Returns flags (blocking ones say what to change), hacked probes and the first page of samples, blind: scores
    and statistics stay sealed until your labels. Report: grpo://inspections/{id}.

    Next: read every sample (inspection_samples from next_offset), label it with record_review.
    """

    progress = progress_reporter(ctx)
    report = await until_cancelled(
        lambda should_stop: inspect_rewards(request, progress=progress, should_stop=should_stop)
    )
    return inspection_digest(report)


@_tool(
    "inspection_samples",
    "Read the next samples of an inspection",
    _hints(read_only=True, destructive=False, idempotent=True, open_world=False),
    {"report_id": "insp-20250101-120000-abc123", "offset": 12},
)
def inspection_samples_tool(
    report_id: Annotated[str, Field(description="The inspection's id, as inspect_rewards returned it.")],
    offset: Annotated[int, Field(ge=0, description="The page's first sample: next_offset of the page before.")] = 0,
) -> SamplePage:
    """An inspection's samples from `offset` on, as many as fit one result (about 10,000 characters); blind (no
    score) until labelled.

    Call it with each page's next_offset until it is null: record_review needs every sample read and labelled.
    """
    return sample_page(load_report(report_id), offset)


@_tool(
    "record_review",
    "Record a reader's review of an inspection",
    _hints(read_only=False, destructive=True, idempotent=False, open_world=False),
    {
        "request": {
            "report_id": "insp-20250101-120000-abc123",
            "reviewer": "claude",
            "reviewer_kind": "agent",
            "labels": {"0": {"correctness": "pass"}, "1": {"correctness": "fail"}, "2": {"correctness": "unsure"}},
        }
    },
)
@_quoting_the_gate_rule
def record_review_tool(request: ReviewRequest) -> ReviewOutcome:
    """Record your blind labels (your own judgment), then amendments of misreads; decides the gate.

    {rule} {final}

    Returns the verdict, each disagreement and each reward's agreement. accept_unread
    with a reason opens the gate as 'reward not reviewed' instead.

    Next: emit_grpo_config once it passed.
    """

    return review_outcome(record_review(request))


@_tool(
    "emit_grpo_config",
    "Emit a validated GRPO config",
    _hints(read_only=True, destructive=False, idempotent=True, open_world=False),
    {"request": EXAMPLE_RECIPE_REQUEST},
)
def emit_grpo_config_tool(request: RecipeRequest) -> GRPORecipe:
    """Emit a GRPO recipe the installed TRL accepts, with a reason for every value.

    Send model, hardware, method, rewards, dataset, route_check's route_decision_id; to change a run, its
    base_config with symptoms or a variant. A budget cutting most probe completions is refused; a recipe too big
    for its GPUs is fixed keeping method and hardware, or refused with the remedies.

    Returns GRPOConfig kwargs, launch plan, memory estimate, provenance (changes_from_base with base_config).

    Next: run_grpo({"request": {"recipe": <this result>}}).
    """
    return emit_grpo_config(request)


@_tool(
    "estimate_memory",
    "Estimate GRPO memory per GPU",
    _hints(read_only=True, destructive=False, idempotent=True, open_world=False),
    {"request": {"model": "Qwen/Qwen2.5-7B-Instruct", "hardware": {"gpu_model": "A100-40GB"}, "method": "lora"}},
)
def estimate_memory_tool(request: MemoryRequest) -> MemoryEstimate:
    """Estimate the per-GPU (or CPU RAM) memory of a GRPO setup before renting hardware.

    Returns each component, the peaks, whether it fits, and remedies ranked by cost with the peak each gives.

    Next: apply the cheapest remedy that fits through emit_grpo_config.
    """
    return estimate_memory(request)


@_tool(
    "run_grpo",
    "Start a GRPO training run",
    _hints(read_only=False, destructive=False, idempotent=False, open_world=True),
    {"request": {"resume_run_id": "gsm8k-lora-1"}},
    hint='To start a new run send {"request": {"recipe": <the result of emit_grpo_config>, "run_id": "gsm8k-lora-1"}}.',
)
def run_grpo_tool(request: RunToolRequest) -> RunStatus:
    """Start a GRPO run of a recipe on the server's machine, in its own process; returns at once.

    Refuses rewards without an inspection that opened the gate (never overridable), a route that is not grpo or
    a recipe that does not fit (force + force_reason), a target this machine is not. resume_run_id continues a
    stopped run. Returns its status.

    Next: run_status with wait_seconds; run_logs; cancel_run.
    """
    return jobs.run_grpo(RunRequest.model_validate(request.model_dump(exclude_unset=True)))


@_tool(
    "run_status",
    "Status of a run",
    _hints(read_only=True, destructive=False, idempotent=True, open_world=False),
    {"run_id": "gsm8k-lora-1", "wait_seconds": 50, "until_step": 10},
)
def run_status_tool(
    run_id: RunId,
    ctx: Context,
    wait_seconds: Annotated[
        float,
        Field(
            ge=0,
            le=MAX_WAIT_SECONDS,
            description=f"Wait up to this long for the run to end or reach until_step, with progress every 5 s; "
            f"over {DEFAULT_WAIT_SECONDS:g} s only if your client resets its timeout on progress.",
        ),
    ] = DEFAULT_WAIT_SECONDS,
    until_step: Annotated[
        int | None, Field(ge=0, description="Answer as soon as the run reaches this step (or ends).")
    ] = None,
) -> RunStatus:
    """Where a run stands. Returns state, step, ETA, last metrics, held-out pass@1 with its 95% interval (on prompts
    never trained on), health warnings with the variant to apply.

    Next: on a health warning, re-emit with symptoms=[...]; on failure, run_logs. All metrics: resource
    grpo://runs/{run_id}/metrics.
    """
    return jobs.run_status(run_id, wait_seconds, progress=progress_reporter(ctx), until_step=until_step)


@_tool(
    "run_logs",
    "Tail a run's log",
    _hints(read_only=True, destructive=False, idempotent=True, open_world=False),
    {"run_id": "gsm8k-lora-1", "lines": 50},
)
def run_logs_tool(
    run_id: RunId, lines: Annotated[int, Field(ge=1, le=5000, description="How many of the last lines.")] = 100
) -> RunLogs:
    """The last lines of a run's train.log: progress lines, warnings, and the traceback if it failed.

    Call it on a failure or something odd. Returns the lines, oldest first.
    """
    return jobs.run_logs(run_id, lines)


@_tool(
    "cancel_run",
    "Cancel a run",
    _hints(read_only=False, destructive=True, idempotent=True, open_world=False),
    {"run_id": "gsm8k-lora-1"},
)
def cancel_run_tool(run_id: RunId) -> RunStatus:
    """Stop a running run (SIGTERM, then SIGKILL); the steps since its last checkpoint are lost (all, before one).

    Resume from that checkpoint with run_grpo({"request": {"resume_run_id": ...}}). Returns the run's status.
    """
    return jobs.cancel_run(run_id)


@_tool(
    "list_runs",
    "List runs",
    _hints(read_only=True, destructive=False, idempotent=True, open_world=False),
    {},
)
def list_runs_tool() -> RunList:
    """Every run under the server's state root, newest first, with its state and step.

    Call it to find a run id. Next: run_status or run_logs on one of them.
    """
    return jobs.list_runs()
