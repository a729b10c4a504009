"""Stdio transport that answers every line: a line the SDK cannot read as JSON-RPC gets a JSON-RPC error.

The SDK's stdio reader turns a line it cannot parse (malformed JSON, JSON nested deeper than its
parser's recursion limit, a value that is no JSON-RPC message) into an exception on the read stream,
and its dispatcher drops that exception with a debug log: the client waits for its own timeout.
This module sits between the two, without patching the SDK: valid messages pass through unchanged,
and each unreadable line is answered at once with -32700 (parse error) or -32600 (invalid request),
carrying the request's id when the top level of the line names one (so the waiting call ends), else
``null`` as JSON-RPC 2.0 prescribes.
"""

from __future__ import annotations

import json
import logging
from typing import Any

logger = logging.getLogger("grpo_rlvr.server")

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
SCANNED_CHARS = 100_000  # the id of a huge line is looked for in its head only


def top_level_id(line: str) -> int | str | None:
    """The ``id`` member of a line's top-level JSON object, found without parsing what is nested (it may be too deep
    to parse); None when there is none or the line is no object.

    >>> top_level_id('{"jsonrpc": "2.0", "id": 7, "params": ' + "[" * 300 + "]" * 300 + "}")
    7
    >>> top_level_id('{"params": {"id": 3}, "id": "a\\\\"b"}'), top_level_id("{oops"), top_level_id('{"x": {"id": 1}}')
    ('a"b', None, None)
    """
    depth, index, text = 0, 0, line[:SCANNED_CHARS]
    decoder = json.JSONDecoder()
    while index < len(text):
        char = text[index]
        if char == '"':
            try:
                key, end = decoder.raw_decode(text, index)
            except ValueError:
                return None
            rest = text[end:].lstrip()
            if depth == 1 and key == "id" and rest.startswith(":"):
                start = len(text) - len(rest) + 1
                while start < len(text) and text[start] in " \t\r\n":
                    start += 1
                try:
                    value, _ = decoder.raw_decode(text, start)
                except ValueError:
                    return None
                return value if isinstance(value, int | str) and not isinstance(value, bool) else None
            index = end
            continue
        if char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
        elif depth == 0 and not char.isspace():
            return None
        index += 1
    return None


def error_for(exc: Exception) -> tuple[int | str | None, int, str]:
    """The id, code and message answering a line the SDK could not read (``exc`` is its ValidationError).

    >>> import mcp_types
    >>> try:
    ...     mcp_types.jsonrpc_message_adapter.validate_json("{oops", by_name=False)
    ... except Exception as exc:
    ...     error_for(exc)[:2]
    (None, -32700)
    """
    errors: list[dict[str, Any]] = list(getattr(exc, "errors", lambda: [])())
    first = errors[0] if errors else {}
    given = first.get("input")
    request_id = top_level_id(given) if isinstance(given, str) else None
    for error in errors:  # valid JSON but no valid message: a "missing" error carries the whole object, id and all
        candidate = error.get("input")
        if isinstance(candidate, dict) and isinstance(candidate.get("id"), int | str):
            request_id = None if isinstance(candidate["id"], bool) else candidate["id"]
            break
    detail = str(first.get("msg") or exc)[:200]
    if first.get("type") == "json_invalid" and "recursion limit" in detail:
        return (
            request_id,
            INVALID_REQUEST,
            (
                f"Invalid Request: the message is nested deeper than the server's JSON parser allows ({detail}). "
                "Send JSON nested at most about 200 levels deep."
            ),
        )
    if first.get("type") == "json_invalid":
        return request_id, PARSE_ERROR, f"Parse error: {detail}. Send one JSON-RPC 2.0 message per line."
    return (
        request_id,
        INVALID_REQUEST,
        (
            f"Invalid Request: not a JSON-RPC 2.0 message ({detail}). Send an object with jsonrpc '2.0', method, "
            "and id for a request."
        ),
    )


async def serve_stdio(server: Any) -> None:
    """Serve ``server`` (an MCPServer) over stdin/stdout, answering the lines the SDK cannot read."""
    import anyio
    import mcp_types as types
    from mcp.server.stdio import stdio_server
    from mcp.shared.message import SessionMessage

    lowlevel = server._lowlevel_server  # what MCPServer.run_stdio_async runs; the SDK offers no other handle
    async with stdio_server() as (read_stream, write_stream):
        send, receive = anyio.create_memory_object_stream[Any](0)

        async def forward() -> None:
            async with send:
                async for item in read_stream:
                    if not isinstance(item, Exception):
                        await send.send(item)
                        continue
                    request_id, code, message = error_for(item)
                    logger.warning("unreadable line on stdin answered with %d: %s", code, message[:120])
                    error = types.JSONRPCError(
                        jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message)
                    )
                    await write_stream.send(SessionMessage(message=error))

        async with anyio.create_task_group() as group:
            group.start_soon(forward)
            await lowlevel.run(receive, write_stream, lowlevel.create_initialization_options())
            group.cancel_scope.cancel()
