"""The MCP server: each tool is a few lines over one ``skill`` function.

Only pydantic models are imported at start; torch, transformers and trl load inside the tools
that need them, so the first ``tools/list`` answers about as fast as ``import mcp.server``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

from skill.emit import RecipeRequest, emit_grpo_config
from skill.errors import SkillError, pydantic_error_message
from skill.inspection_models import InspectionReport, InspectionRequest, ReviewRequest
from skill.memory import MemoryEstimate, MemoryRequest, estimate_memory
from skill.recipe import GRPORecipe
from skill.routing import RouteDecision, RouteRequest, route_check
from skill.runs.jobs import RunList, RunLogs, RunRequest, RunStatus

logger = logging.getLogger("grpo_rlvr.server")
T = TypeVar("T")

INSTRUCTIONS = (
    "GRPO with verifiable rewards on Hugging Face TRL. Flow: route_check (is RL the right tool?) -> "
    "inspect_rewards (mandatory reward read) -> emit_grpo_config (validated recipe) -> estimate_memory -> "
    "run_grpo. Read the resource SKILL.md for the method."
)


def _as_tool_errors(function: Callable[..., T]) -> Callable[..., T]:
    """Turn a caller's mistake into a ToolError so the client sees the project's message, not a bare failure."""

    @wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        try:
            return function(*args, **kwargs)
        except SkillError as exc:
            raise ToolError(str(exc)) from None
        except ValueError as exc:  # pydantic ValidationError from nested models built inside the tool
            raise ToolError(pydantic_error_message(exc, "request")) from None

    return wrapper


def _progress_reporter(ctx: Context) -> Callable[[float, float, str], None]:
    """Progress from skill code running in the tool's worker thread, sent on the server's event loop."""
    import anyio.from_thread

    def report(done: float, total: float, message: str) -> None:
        try:
            anyio.from_thread.run(ctx.report_progress, done, total, message)
        except Exception:  # progress is best effort: a client without a progress token must not fail the tool
            logger.debug("progress not delivered", exc_info=True)

    return report


def build_server() -> MCPServer:
    """The MCP server with every tool registered."""
    server = MCPServer(name="grpo-rlvr-training", instructions=INSTRUCTIONS)

    @server.tool(
        name="emit_grpo_config",
        title="Emit a validated GRPO config",
        annotations=ToolAnnotations(
            read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
        ),
    )
    @_as_tool_errors
    def emit_grpo_config_tool(request: RecipeRequest) -> GRPORecipe:
        """Emit a GRPO training recipe (TRL GRPOConfig kwargs plus model, data, rewards, launch plan) that the
        installed TRL accepts, with a reason for every value. Call it after route_check decided 'grpo' and the
        rewards passed inspection. Send the model (HF id, local path or the embedded default), the target hardware
        (GPU model and count, or cpu), the method (full | lora | qlora), reward specs (name, role, weight) and the
        dataset; optionally a variant name or observed symptoms (e.g. 'length_growth_without_accuracy') and explicit
        GRPOConfig overrides. Returns the recipe; run it with run_grpo or render it as a script with the CLI."""
        return emit_grpo_config(request)

    @server.tool(
        name="estimate_memory",
        title="Estimate GRPO memory per GPU",
        annotations=ToolAnnotations(
            read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
        ),
    )
    @_as_tool_errors
    def estimate_memory_tool(request: MemoryRequest) -> MemoryEstimate:
        """Estimate the per-GPU (or CPU RAM) memory of a whole GRPO setup before renting hardware: weights,
        gradients, optimizer states, reference model, activations, the log-prob computation, colocated vLLM and
        overhead; the peak in the training step and in generation; whether it fits; and remedies ranked by cost
        (checkpointing, vLLM sleep mode or share, smaller micro-batch, 8-bit Adam, LoRA, QLoRA, ZeRO-3, more GPUs),
        each with the peak it would give. Send the model (hub id, local directory with config.json, or explicit
        shape numbers), the hardware and the training settings. emit_grpo_config already attaches this estimate to
        a recipe; call this tool to compare options."""
        return estimate_memory(request)

    @server.tool(
        name="route_check",
        title="Check whether GRPO is the right tool",
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
        ),
    )
    @_as_tool_errors
    def route_check_tool(request: RouteRequest, ctx: Context) -> RouteDecision:
        """Decide whether a fine-tuning task should use GRPO — call it first, before any config. Send the kind of
        feedback the task has (unit_tests, parser_schema, tool_call_schema, math_answer, exact_answer,
        preference_pairs, demonstrations, human_judgment) and, to measure instead of guess, a verifier (RewardSpec)
        plus a probe (model and prompts or a dataset): the base model is sampled n times per prompt (progress is
        reported) and scored. Returns the route (grpo | lora-qlora-recipes | preference-optimization |
        eval-harness-first | not-worth-rl), reasons, evidence (pass@1, pass@k, per-prompt successes, learnable
        fraction) and the next step. The samples are saved under the decision id for inspect_rewards to reuse."""
        return route_check(request, progress=_progress_reporter(ctx))

    @server.tool(
        name="inspect_rewards",
        title="Inspect the reward functions (the mandatory read)",
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
        ),
    )
    @_as_tool_errors
    def inspect_rewards_tool(request: InspectionRequest, ctx: Context) -> InspectionReport:
        """Run the recipe's reward functions on 50-100 sampled outputs before any training: per-reward scores,
        weighted totals, extracted answers, failures, statistics, flags (constant reward, failures, composite rule,
        length correlation, saturation, scale imbalance, zero-variance groups) and known-hack probes (empty answer
        tags, candidate lists, echoing the prompt, sys.exit(0), AlwaysEqual, judge master keys...). Samples come
        from `samples`, a route_check decision id (no second sampling), or `generate` (progress is reported).
        Returns the report with verdict 'pending'; next, read every sample (report.paths has Markdown and HTML)
        and call record_review with your labels. Training refuses rewards without a passed inspection."""
        from skill.inspection import inspect_rewards

        return inspect_rewards(request, progress=_progress_reporter(ctx))

    @server.tool(
        name="record_review",
        title="Record a reader's review of an inspection",
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
        ),
    )
    @_as_tool_errors
    def record_review_tool(request: ReviewRequest) -> InspectionReport:
        """Record whether the reader agrees with the rewards' judgment of each sample of an inspection report
        (labels: sample id -> true/false; say who read: reviewer and reviewer_kind human|agent). The gate passes
        with at least 50 labelled samples, zero disagreements, no blocking flag, and every attention check caught
        (a few samples are shown with a deliberately wrong score). A non-interactive accept-all is recorded and
        does not pass. Returns the report with verdict passed|failed and what to fix."""
        from skill.inspection_gate import record_review

        return record_review(request)

    _register_run_tools(server)
    return server


def _register_run_tools(server: MCPServer) -> None:
    from skill.runs import jobs

    def annotations(read_only: bool, destructive: bool, idempotent: bool) -> ToolAnnotations:
        return ToolAnnotations(
            read_only_hint=read_only, destructive_hint=destructive, idempotent_hint=idempotent, open_world_hint=False
        )

    @server.tool(name="run_grpo", title="Start a GRPO training run", annotations=annotations(False, False, False))
    @_as_tool_errors
    def run_grpo_tool(request: RunRequest) -> RunStatus:
        """Start a real GRPO run of a recipe (from emit_grpo_config) on this machine, in its own process; returns
        at once with the run id. Refuses, with the reason, rewards without a passed inspection (never overridable),
        a route decision that is not grpo, a recipe that does not fit memory (force + force_reason overrides these
        two), a target this machine is not (GPU recipe without a GPU, vLLM not installed), data missing the columns
        the rewards read. Send resume_run_id to continue a stopped run from its last checkpoint. Next: run_status
        (with wait_seconds to follow it), run_logs, cancel_run."""
        return jobs.run_grpo(request)

    @server.tool(name="run_status", title="Status of a run", annotations=annotations(True, False, True))
    @_as_tool_errors
    def run_status_tool(run_id: str, ctx: Context, wait_seconds: float = 0.0) -> RunStatus:
        """State (starting|running|succeeded|failed|cancelled), step and ETA, the last metric points (rewards per
        function, kl, entropy, lengths...), health warnings with the variant or re-weighting to apply, and the
        run's files. wait_seconds (up to 600) blocks while the run moves, reporting progress meanwhile."""
        return jobs.run_status(run_id, min(max(wait_seconds, 0.0), 600.0), progress=_progress_reporter(ctx))

    @server.tool(name="run_logs", title="Tail a run's log", annotations=annotations(True, False, True))
    @_as_tool_errors
    def run_logs_tool(run_id: str, lines: int = 100) -> RunLogs:
        """The last lines of a run's train.log (progress lines, warnings, a traceback if it failed)."""
        return jobs.run_logs(run_id, lines)

    @server.tool(name="cancel_run", title="Cancel a run", annotations=annotations(False, True, True))
    @_as_tool_errors
    def cancel_run_tool(run_id: str) -> RunStatus:
        """Stop a running run (SIGTERM to its process group, then SIGKILL); its checkpoints stay, so it can be
        resumed with run_grpo(resume_run_id=...)."""
        return jobs.cancel_run(run_id)

    @server.tool(name="list_runs", title="List runs", annotations=annotations(True, False, True))
    @_as_tool_errors
    def list_runs_tool() -> RunList:
        """Every run under the state root, newest first, with state and step."""
        return jobs.list_runs()

    @server.resource("grpo://runs/{run_id}/metrics", mime_type="application/json")
    def run_metrics(run_id: str) -> str:
        """A run's logged metric points (metrics.jsonl as a JSON array)."""
        import json

        from skill.runs.store import read_jsonl, run_dir

        return json.dumps(read_jsonl(run_dir(run_id) / "metrics.jsonl"))


def serve_stdio() -> None:
    """Serve over stdio; logs go to stderr so stdout stays a clean protocol stream."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    build_server().run("stdio")
