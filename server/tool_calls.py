"""How one tool call runs: a caller's mistake as a tool error, a model result as compact JSON, progress sent
from the worker thread, and the client's cancellation reaching the skill code.

``server.mcp_tools`` wraps every adapter with ``as_tool_errors``; the adapters of long calls
(route_check's probe, inspect_rewards with ``generate``) run their skill function through
``until_cancelled``.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import threading
from collections.abc import Callable, Iterator
from functools import wraps
from typing import Any, TypeVar

import anyio
import anyio.to_thread
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, ValidationError

from server.tool_errors import field_lines, os_error_message
from skill.errors import SkillError

logger = logging.getLogger("grpo_rlvr.server")
T = TypeVar("T")


@contextlib.contextmanager
def caller_mistakes() -> Iterator[None]:
    """Turn a caller's mistake into a ToolError so the client sees the project's message, not a bare failure."""
    try:
        yield
    except SkillError as exc:
        raise ToolError(str(exc)) from None
    except ValidationError as exc:  # a nested model built inside the tool from the caller's data
        raise ToolError("the request was refused:\n" + "\n".join(field_lines(exc.errors()))) from None
    except ValueError as exc:
        raise ToolError(str(exc)) from None
    except OSError as exc:  # a missing path, a full disk...: the message names which (os_error_message)
        raise ToolError(os_error_message(exc)) from None


def compact_result(result: Any) -> Any:
    """A model result as compact JSON text beside the same structured content.

    The SDK's default text indents the result by two spaces a level, which makes a nested result
    (a recipe, a page of samples) a fifth longer in the agent's context than the structured content.

    >>> from skill.runs.jobs import RunLogs
    >>> compact_result(RunLogs(run_id="r", lines=["a"])).content[0].text
    '{"run_id":"r","lines":["a"]}'
    """
    if not isinstance(result, BaseModel):
        return result
    return CallToolResult(
        content=[TextContent(type="text", text=result.model_dump_json(by_alias=True))],
        structured_content=result.model_dump(mode="json", by_alias=True),
    )


def as_tool_errors(function: Callable[..., Any]) -> Callable[..., Any]:
    """The adapter as the SDK calls it: the caller's mistakes as tool errors, model results compact."""
    if inspect.iscoroutinefunction(function):

        @wraps(function)
        async def awaiting(*args: Any, **kwargs: Any) -> Any:
            with caller_mistakes():
                return compact_result(await function(*args, **kwargs))

        return awaiting

    @wraps(function)
    def calling(*args: Any, **kwargs: Any) -> Any:
        with caller_mistakes():
            return compact_result(function(*args, **kwargs))

    return calling


async def until_cancelled(work: Callable[[Callable[[], bool]], T]) -> T:
    """Run blocking skill code in a worker thread, handing it ``should_stop``, true once the client cancels.

    The SDK cancels the request's scope on ``notifications/cancelled`` (or when the connection drops).
    A worker thread cannot be interrupted, so the scope lets go of it at once and the event tells the
    skill code to stop at its next check (between sampling batches): nothing keeps computing for a
    client that gave up.
    """
    stop = threading.Event()
    try:
        return await anyio.to_thread.run_sync(work, stop.is_set, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        stop.set()
        logger.info("request cancelled by the client: its work stops at the next check")
        raise


def progress_reporter(ctx: Context) -> Callable[[float, float, str], None]:
    """Progress from skill code running in the tool's worker thread, sent on the server's event loop."""
    import anyio.from_thread

    def report(done: float, total: float, message: str) -> None:
        try:
            anyio.from_thread.run(ctx.report_progress, done, total, message)
        except Exception:  # progress is best effort: a client without a progress token must not fail the tool
            logger.debug("progress not delivered", exc_info=True)

    return report
