"""The MCP tools: one adapter a tool, a few lines over one ``skill`` function, with its title, hints and example.

Adapters are declared once at module level (``TOOL_SPECS``) and registered by
``server.mcp_server.build_server``. A ``SkillError`` becomes a tool error in the project's shape.
"""

from __future__ import annotations

import inspect
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import wraps
from typing import Annotated, Any, TypeVar

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field, ValidationError

from server.tool_errors import field_lines
from skill.errors import SkillError
from skill.inspection.gate import record_review
from skill.inspection.run import inspect_rewards
from skill.inspection.schema import InspectionReport, InspectionRequest, ReviewRequest
from skill.memory.estimate import MemoryEstimate, MemoryRequest, estimate_memory
from skill.recipe.emit import RecipeRequest, emit_grpo_config
from skill.recipe.schema import GRPORecipe
from skill.routing.route import RouteDecision, RouteRequest, route_check
from skill.runs import jobs
from skill.runs.jobs import RunList, RunLogs, RunRequest, RunStatus

logger = logging.getLogger("grpo_rlvr.server")
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
        TOOL_SPECS.append(ToolSpec(_as_tool_errors(function), name, title, annotations, example, hint))
        return function

    return register


def _as_tool_errors(function: Callable[..., T]) -> Callable[..., T]:
    """Turn a caller's mistake into a ToolError so the client sees the project's message, not a bare failure."""

    @wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        try:
            return function(*args, **kwargs)
        except SkillError as exc:
            raise ToolError(str(exc)) from None
        except ValidationError as exc:  # a nested model built inside the tool from the caller's data
            raise ToolError("the request was refused:\n" + "\n".join(field_lines(exc.errors()))) from None
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        except OSError as exc:  # a path the caller sent that does not exist or cannot be read: theirs to fix
            raise ToolError(f"{exc}. Send a path that exists on the server's machine.") from None

    return wrapper


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


def _progress_reporter(ctx: Context) -> Callable[[float, float, str], None]:
    """Progress from skill code running in the tool's worker thread, sent on the server's event loop."""
    import anyio.from_thread

    def report(done: float, total: float, message: str) -> None:
        try:
            anyio.from_thread.run(ctx.report_progress, done, total, message)
        except Exception:  # progress is best effort: a client without a progress token must not fail the tool
            logger.debug("progress not delivered", exc_info=True)

    return report


RunId = Annotated[str, Field(description="A run id, as run_grpo or list_runs returned it (e.g. 'gsm8k-lora-1').")]

EXAMPLE_RECIPE_REQUEST: dict[str, Any] = {
    "model": {"name": "Qwen/Qwen2.5-1.5B-Instruct"},
    "hardware": {"gpu_model": "H100", "gpus_per_node": 1},
    "method": "lora",
    "rewards": [{"name": "format", "role": "format", "weight": 0.2}, {"name": "exact_match", "role": "correctness"}],
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
def route_check_tool(request: RouteRequest, ctx: Context) -> RouteDecision:
    """Decide whether a fine-tuning task should use GRPO at all. Call it first, before any config.

    Send `signal`, the kind of feedback the task has (unit_tests, parser_schema, tool_call_schema, math_answer,
    exact_answer, preference_pairs, demonstrations, human_judgment). To measure instead of guess, also send a
    `verifier` (a reward spec) and a `probe` (model plus prompts, rows or a dataset file): the base model is sampled
    n times per prompt on the server's machine and scored (minutes on a CPU; progress is reported; a hub model not
    in the local cache may be fetched).

    Returns the route (grpo | lora-qlora-recipes | preference-optimization | eval-harness-first | not-worth-rl),
    reasons, evidence (pass@1, pass@k, learnable fraction), the next step and the decision `id`; the samples are
    saved under that id.

    Next: when the route is grpo, call inspect_rewards with route_decision_id=<id> (it reuses the samples), then
    emit_grpo_config with the same route_decision_id. Otherwise hand over to the skill named in next_skill.
    """
    return route_check(request, progress=_progress_reporter(ctx))


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
    hint="Send exactly one sample source: samples, route_decision_id (from route_check) or generate.",
)
def inspect_rewards_tool(request: InspectionRequest, ctx: Context) -> InspectionReport:
    """Run the rewards on 50-100 sampled outputs before any training: the read that gates run_grpo.

    Call it after route_check (pass its decision id as route_decision_id to reuse its samples), or with your own
    `samples`, or with `generate` to sample the policy here (progress is reported; a hub model not in the local cache
    may be fetched; a judge reward may call its endpoint).

    The rewards run in a fresh process (the code on disk). Returns the report with verdict 'pending': per-reward
    scores, weighted totals, extracted answers, statistics, flags (each blocking one says what to change), hack
    probes judged by each reward's role and on the weighted total (a well-formed wrong answer, candidate lists,
    empty/echoed/nonsense/self-praising output, sys.exit(0), AlwaysEqual, judge master keys...) and `paths` to its
    Markdown and HTML (also the resource grpo://inspections/{id}). A few samples show a deliberately wrong score
    (attention checks, chosen by the server).

    Next: read every sample, decide whether you agree with each judgment, and label every one with record_review.
    run_grpo refuses rewards without an inspection that opens the gate.
    """

    return inspect_rewards(request, progress=_progress_reporter(ctx))


@_tool(
    "record_review",
    "Record a reader's review of an inspection",
    _hints(read_only=False, destructive=True, idempotent=False, open_world=False),
    {
        "request": {
            "report_id": "insp-20250101-120000-abc123",
            "reviewer": "claude",
            "reviewer_kind": "agent",
            "labels": {"0": True, "1": True, "2": False},
        }
    },
)
def record_review_tool(request: ReviewRequest) -> InspectionReport:
    """Record whether the reader agrees with the rewards' judgment of each sample of an inspection; decides the gate.

    Call it after reading the report inspect_rewards returned. Send the report_id, who read (reviewer and
    reviewer_kind human|agent) and labels for every sample: id -> true when you agree with the rewards' judgment
    of it, false when you do not. It replaces any earlier review of the same report.

    Returns the report with verdict passed|failed|accepted_unread and verdict_reasons. It passes when every
    sample is labelled, you disagree with every attention check (a deliberately wrong score) and with no real
    sample, and no flag blocks. A failed review does not say which samples were checks; it adds one and is
    counted (5 at most per report). An accept-all (non_interactive) never passes. To train on the rewards
    without a read, send accept_unread=true with accept_unread_reason instead of labels: the gate opens as
    'reward not reviewed', stamped on the recipe, the run's status, its metrics header and the model card.

    Next: if failed, fix the reward functions (or read again) and inspect again; otherwise emit_grpo_config.
    """

    return record_review(request)


@_tool(
    "emit_grpo_config",
    "Emit a validated GRPO config",
    _hints(read_only=True, destructive=False, idempotent=True, open_world=False),
    {"request": EXAMPLE_RECIPE_REQUEST},
)
def emit_grpo_config_tool(request: RecipeRequest) -> GRPORecipe:
    """Emit a GRPO training recipe that the installed TRL accepts, with a reason for every value.

    Call it after route_check decided 'grpo' (send its route_decision_id) and the rewards passed inspection. Send
    the model (HF id, local path or the embedded default), the target hardware (GPU model and count, or
    accelerator 'cpu'), the method (full | lora | qlora | auto), reward specs (name, role, weight) and the dataset;
    optionally a variant name, observed symptoms (e.g. 'length_growth_without_accuracy') and explicit GRPOConfig
    overrides with override_reasons.

    Returns the recipe: TRL GRPOConfig kwargs, model, method, PEFT, data, rewards, launch plan, the memory estimate
    and reasons, proven against the installed TRL; its provenance names the inspection that opens the gate for
    the rewards at the weights TRL will use (reward_review says 'reward not reviewed' when accepted unread). No
    reward code is imported; a reward module off the allowlist is refused.

    Next: check the attached memory estimate (or compare options with estimate_memory), then start it with
    run_grpo({"request": {"recipe": <this result>}}).
    """
    return emit_grpo_config(request)


@_tool(
    "estimate_memory",
    "Estimate GRPO memory per GPU",
    _hints(read_only=True, destructive=False, idempotent=True, open_world=False),
    {"request": {"model": "Qwen/Qwen2.5-7B-Instruct", "hardware": {"gpu_model": "A100-40GB"}, "method": "lora"}},
)
def estimate_memory_tool(request: MemoryRequest) -> MemoryEstimate:
    """Estimate the per-GPU (or CPU RAM) memory of a whole GRPO setup before renting hardware.

    Call it to size a setup or compare options; emit_grpo_config already attaches an estimate to every recipe.
    Send the model (hub id, local directory with config.json, or explicit `shape` numbers), the hardware and the
    training settings (method, batch, prompt and completion lengths, vLLM, sharding...).

    Returns weights, gradients, optimizer states, reference model, activations, the log-prob computation, colocated
    vLLM and overhead; the peak in the training step and in generation; whether it fits; and remedies ranked by cost
    (checkpointing, vLLM sleep mode or share, smaller micro-batch, 8-bit Adam, LoRA, QLoRA, ZeRO-3, more GPUs), each
    with the peak it would give.

    Next: apply the cheapest remedy that fits through emit_grpo_config (method, overrides) and run_grpo.
    """
    return estimate_memory(request)


@_tool(
    "run_grpo",
    "Start a GRPO training run",
    _hints(read_only=False, destructive=False, idempotent=False, open_world=True),
    {"request": {"resume_run_id": "gsm8k-lora-1"}},
    hint='To start a new run send {"request": {"recipe": <the result of emit_grpo_config>, "run_id": "gsm8k-lora-1"}}.',
)
def run_grpo_tool(request: RunRequest) -> RunStatus:
    """Start a real GRPO run of a recipe on the server's machine, in its own process; returns at once.

    Call it with the recipe emit_grpo_config returned, after the rewards passed inspection. It refuses, with the
    reason: rewards without a passed inspection (never overridable), a route decision that is not grpo, a recipe that
    does not fit memory (force + force_reason override these two), a target this machine is not (a GPU recipe
    without a GPU, vLLM not installed), data missing the columns the rewards read. The gate is checked on the
    reward code as it is now, with the weights TRL will use, for a new run and for resume_run_id (continue a
    stopped run from its last checkpoint), and again in the training process. A hub model or dataset not in the
    local cache is fetched by the run.

    Returns the run's status with its run_id (state 'starting') and reward_review.

    Next: run_status with wait_seconds to follow it, run_logs to read its log, cancel_run to stop it.
    """

    return jobs.run_grpo(request)


@_tool(
    "run_status",
    "Status of a run",
    _hints(read_only=True, destructive=False, idempotent=True, open_world=False),
    {"run_id": "gsm8k-lora-1", "wait_seconds": 30},
)
def run_status_tool(
    run_id: RunId,
    ctx: Context,
    wait_seconds: Annotated[
        float, Field(ge=0, le=600, description="Block up to this long while the run moves (progress is reported).")
    ] = 0.0,
) -> RunStatus:
    """Where a run stands. Call it after run_grpo, repeatedly, to follow a run.

    Returns the state (starting|running|succeeded|failed|cancelled), step and ETA, the last metric points (rewards
    per function, kl, entropy, lengths...), health warnings with the variant or re-weighting to apply, the reason
    when it ended, reward_review ('reward not reviewed: ...' when trained unread), and the run's files. With
    wait_seconds it blocks while the run moves, reporting progress.

    Next: on a health warning, re-emit with emit_grpo_config(symptoms=[...]) and start a new run; on failure read
    run_logs. The full metric history is the resource grpo://runs/{run_id}/metrics.
    """

    return jobs.run_status(run_id, wait_seconds, progress=_progress_reporter(ctx))


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

    Call it when run_status reports a failure or something odd. Returns the lines, oldest first.
    """

    return jobs.run_logs(run_id, lines)


@_tool(
    "cancel_run",
    "Cancel a run",
    _hints(read_only=False, destructive=True, idempotent=True, open_world=False),
    {"run_id": "gsm8k-lora-1"},
)
def cancel_run_tool(run_id: RunId) -> RunStatus:
    """Stop a running run: SIGTERM to its process group, then SIGKILL; the step in flight is lost.

    Its checkpoints stay, so it can be resumed with run_grpo({"request": {"resume_run_id": ...}}). Cancelling a run
    that already ended changes nothing. Returns the run's status.
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
