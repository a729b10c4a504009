"""The MCP server: each tool is a few lines over one ``skill`` function.

Only pydantic models are imported at start; torch, transformers and trl load inside the tools
that need them, so the first ``tools/list`` answers about as fast as ``import mcp.server``.

Besides the tools it serves the skill's documents (SKILL.md, references, JSON Schemas), a run's
status and metrics, and an inspection report as resources, and the whole flow as one prompt.
Every tool error has one shape (see ``server.tool_errors``): ``"<tool>: <what was wrong and what to
send>"``, including arguments the SDK rejects before an adapter runs.
"""

from __future__ import annotations

import copy
import logging
import re
import sys
from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult
from pydantic import ValidationError

from server.heavy_imports import ensure_loaded, needs_heavy_imports
from server.http_transport import check_binding, configured_token, run_http
from server.mcp_resources import register_documents, register_prompts, register_state_resources, register_tool_schemas
from server.mcp_tools import TOOL_SPECS, strip_doctests, tool_description
from server.stdio_transport import serve_stdio as serve_lines
from server.tool_errors import ToolContract, invalid_arguments, shown, tool_message
from server.tool_schemas import publish_compact_schemas

logger = logging.getLogger("grpo_rlvr.server")

SERVER_NAME = "grpo-rlvr-training"

INSTRUCTIONS = (
    "GRPO with verifiable rewards on Hugging Face TRL. Flow: route_check (is RL the right tool?) -> "
    "inspect_rewards (the mandatory reward read) -> record_review (your labels; the gate) -> emit_grpo_config "
    "(validated recipe) -> estimate_memory (compare options) -> run_grpo -> run_status / run_logs. "
    "The prompt 'finetune' walks the flow; the resource grpo://skill/SKILL.md is the method, "
    "grpo://references/* the details, grpo://schemas/* the contracts. Every tool error starts with the tool's "
    "name and says what to send instead."
)


class GrpoServer(MCPServer):
    """An MCPServer whose tool errors all take the project's shape.

    The SDK validates arguments before an adapter runs and answers a mismatch with pydantic's raw text; its
    tool errors also carry an "Error executing tool ..." prefix. ``call_tool`` is the one place every call passes
    (in memory, stdio and HTTP alike), so the rewriting happens here.
    """

    def __init__(self, tools: list[Tool], contracts: dict[str, ToolContract], **kwargs: Any) -> None:
        super().__init__(tools=tools, **kwargs)
        self.contracts = contracts
        self._validators = {tool.name: tool.fn_metadata for tool in tools}

    def argument_errors(self, name: str, arguments: dict[str, Any]) -> list[Any]:
        """Pydantic's errors for these arguments against the tool's input model; empty when they fit."""
        try:
            self._validators[name].validate_arguments(arguments)
        except ValidationError as exc:
            return list(exc.errors())
        return []

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | Any:
        contract = self.contracts.get(name)
        if contract is None:
            label = name if re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", name) else "tools/call"
            raise ToolError(f"{label}: unknown tool {shown(name)}. Send one of: {', '.join(self.contracts)}.")
        if any(key not in contract.accepted for key in arguments):
            known = {key: value for key, value in arguments.items() if key in contract.accepted}
            raise ToolError(invalid_arguments(contract, self.argument_errors(name, known), arguments))
        if needs_heavy_imports(name):  # once, in one thread: concurrent lazy imports race (server.heavy_imports)
            await self.load_libraries(name)
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError as exc:
            logger.error("Tool %r crashed", name, exc_info=exc.__cause__ or exc)
            message = "internal error (a bug in grpo-rlvr, not in the request); the server's log has the traceback."
            raise ToolError(tool_message(name, message)) from None
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):  # the SDK's argument validation
                raise ToolError(invalid_arguments(contract, cause.errors(), arguments)) from cause
            text = str(cause) if isinstance(cause, ToolError) else str(exc)
            raise ToolError(tool_message(name, text.removeprefix(f"Error executing tool {name}: "))) from None

    @staticmethod
    async def load_libraries(name: str) -> None:
        """The training libraries, imported once before the first tool that needs them (the others wait)."""
        import anyio.to_thread

        try:
            await anyio.to_thread.run_sync(ensure_loaded)
        except ImportError as exc:
            message = f"the training libraries failed to import ({exc}); reinstall grpo-rlvr's dependencies."
            raise ToolError(tool_message(name, message)) from None


def _build_tools() -> tuple[list[Tool], dict[str, ToolContract]]:
    tools, contracts = [], {}
    for spec in TOOL_SPECS:
        tool = Tool.from_function(
            spec.function,
            name=spec.name,
            title=spec.title,
            description=tool_description(spec.function.__doc__ or ""),
            annotations=spec.annotations,
        )
        strip_doctests(tool.parameters)
        strip_doctests(tool.output_schema)
        tools.append(tool)
        # Argument errors are explained from the full schema; tools/list publishes the compact one.
        contracts[spec.name] = ToolContract.of(spec.name, copy.deepcopy(tool.parameters), spec.example, spec.hint)
    publish_compact_schemas(tools)
    return tools, contracts


def build_server() -> GrpoServer:
    """The MCP server with every tool, resource and prompt registered."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        server_version = version("grpo-rlvr")
    except PackageNotFoundError:  # run from a checkout without installing
        server_version = "0"
    tools, contracts = _build_tools()
    server = GrpoServer(
        tools,
        contracts,
        name=SERVER_NAME,
        title="GRPO with verifiable rewards (TRL)",
        version=server_version,
        instructions=INSTRUCTIONS,
    )
    register_documents(server)
    register_tool_schemas(server, {name: contract.schema for name, contract in contracts.items()})
    register_state_resources(server)
    register_prompts(server)
    return server


def _log_to_stderr() -> None:
    """Logs go to stderr: on stdio, stdout is the protocol stream and one stray line breaks the client."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s")


def serve_stdio() -> None:
    """Serve over stdio (the default transport); a line that is no JSON-RPC message gets a JSON-RPC error."""
    import anyio

    _log_to_stderr()
    anyio.run(serve_lines, build_server())


def serve_http(host: str, port: int) -> None:
    """Serve over streamable HTTP at http://HOST:PORT/mcp; ``server.http_transport`` has the binding rules."""

    check_binding(host, configured_token())  # refuse before building anything
    _log_to_stderr()
    run_http(build_server(), host, port)
