"""The one door an evaluated agent has to the server: an MCP client over streamable HTTP, one call per command.

    python bench/agent_eval/mcp_client.py tools               # tools/list, as a client receives it
    python bench/agent_eval/mcp_client.py resources           # resources and templates
    python bench/agent_eval/mcp_client.py call TOOL 'JSON'    # a tool call: its result text, as a model reads it
    python bench/agent_eval/mcp_client.py read URI            # a resource

The server is the one at $GRPO_AGENT_SERVER (http://127.0.0.1:PORT/mcp). Progress notifications go to stderr, as
a client would show them. Each command appends one line to $GRPO_AGENT_TRANSCRIPT: what was asked, whether it
was an error, how long the result was and how long it took, and the result itself (cut at 4,000 characters).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

RESULT_KEPT = 4_000  # characters of each result kept in the transcript


def _record(entry: dict[str, Any]) -> None:
    path = os.environ.get("GRPO_AGENT_TRANSCRIPT")
    if path:
        with open(path, "a") as out:
            out.write(json.dumps(entry) + "\n")


async def _run(command: str, args: list[str]) -> int:
    from mcp.client.client import Client

    async def progressed(done: float, total: float | None, message: str | None) -> None:
        print(f"[progress {done:g}/{total if total is not None else '?'}] {message or ''}", file=sys.stderr)

    started = time.perf_counter()
    entry: dict[str, Any] = {"command": command, "args": args}
    async with Client(os.environ["GRPO_AGENT_SERVER"], read_timeout_seconds=900) as client:
        if command == "tools":
            listed = await client.list_tools()
            text, error = listed.model_dump_json(by_alias=True, exclude_none=True), False
        elif command == "resources":
            resources = await client.list_resources()
            templates = await client.list_resource_templates()
            text = json.dumps(
                {
                    "resources": [r.model_dump(mode="json", exclude_none=True) for r in resources.resources],
                    "templates": [t.model_dump(mode="json", exclude_none=True) for t in templates.resource_templates],
                }
            )
            error = False
        elif command == "call":
            arguments = json.loads(args[1]) if len(args) > 1 else {}
            result = await client.call_tool(args[0], arguments, progress_callback=progressed)
            text = "\n".join(getattr(block, "text", "") for block in result.content)
            error = bool(result.is_error)
        elif command == "read":
            result = await client.read_resource(args[0])
            text, error = "\n".join(getattr(block, "text", "") for block in result.contents), False
        else:
            print(__doc__, file=sys.stderr)
            return 2
    seconds = round(time.perf_counter() - started, 1)
    entry.update(is_error=error, result_chars=len(text), seconds=seconds, result=text[:RESULT_KEPT])
    _record(entry)
    print(text)
    return 1 if error else 0


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        return asyncio.run(_run(sys.argv[1], sys.argv[2:]))
    except Exception as exc:  # a transport failure is the harness's, said as such
        _record({"command": sys.argv[1], "args": sys.argv[2:], "harness_error": repr(exc)})
        print(f"harness: {exc!r}", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
