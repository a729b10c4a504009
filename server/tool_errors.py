"""The project's error shape for MCP tool calls, and the renderer for bad arguments.

Every failed ``tools/call`` answers ``isError: true`` with one text block that starts ``"<tool>: "``
and says what was wrong and what to send instead. A call whose arguments do not fit the tool's
input schema gets one line per bad field (its path, the problem, what to send, read from the schema
the client already has) and one small valid example, instead of pydantic's raw text ("1 validation
error for emit_grpo_config_toolArguments ... For further information visit ...") that names an
internal model and no remedy.

Values the caller sent are echoed truncated: a fuzzer's megabyte string must not come back whole.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

SHOWN_CHARS = 60
MAX_MESSAGE_CHARS = 4000
MAX_PROBLEM_CHARS = 300  # one field's problem; validators' messages can quote the caller's value whole
MAX_FIELD_LINES = 12
_BRANCH_TAG = re.compile(r"[\[\](),]|^(str|int|float|bool|none|list|dict|tuple|set)$")

ERROR_SHAPE = re.compile(r"^(?P<tool>[^\s:]{1,80}): \S", re.DOTALL)
"""What every tool error's text matches: the tool name, a colon, then the message."""


@dataclass(frozen=True)
class ToolContract:
    """What the error renderer needs to know about one tool: its input schema and a valid example call."""

    name: str
    schema: Mapping[str, Any]
    example: Mapping[str, Any]
    hint: str = ""
    accepted: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def of(cls, name: str, schema: Mapping[str, Any], example: Mapping[str, Any], hint: str = "") -> ToolContract:
        return cls(name, schema, example, hint, frozenset(schema.get("properties", {})))


def shown(value: Any) -> str:
    """A short rendering of a value the caller sent.

    >>> shown("x" * 100).endswith("…' (100 characters)")
    True
    >>> shown([1, 2, 3])
    'a list of 3 items'
    """
    if isinstance(value, dict):
        return f"an object with {len(value)} field{'s' * (len(value) != 1)}"
    if isinstance(value, list | tuple):
        return f"a list of {len(value)} item{'s' * (len(value) != 1)}"
    if isinstance(value, str) and len(value) > SHOWN_CHARS:
        return repr(value[:SHOWN_CHARS] + "…") + f" ({len(value)} characters)"
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "…"


def clip(message: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """Cap a message's length; the core's messages can quote what the caller sent."""
    if len(message) <= limit:
        return message
    return message[:limit] + f"… [{len(message) - limit} more characters cut]"


def _resolve(node: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    seen = 0
    while isinstance(node, Mapping) and "$ref" in node and seen < 20:
        name = str(node["$ref"]).rsplit("/", 1)[-1]
        node = {**root.get("$defs", {}).get(name, {}), **{k: v for k, v in node.items() if k != "$ref"}}
        seen += 1
    return node


def _branches(node: Mapping[str, Any], root: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    node = _resolve(node, root)
    options = node.get("anyOf") or node.get("oneOf")
    if not options:
        return [node]
    return [_resolve(option, root) for option in options]


def node_at(schema: Mapping[str, Any], loc: Sequence[Any]) -> Mapping[str, Any] | None:
    """The schema node a pydantic error location points at (union tags skipped), or None."""
    node: Mapping[str, Any] = schema
    if "[key]" in loc:  # a bad key of a mapping: what to send is the mapping's key schema, if it states one
        parent = node_at(schema, loc[: max(0, list(loc).index("[key]") - 1)])
        keys = parent.get("propertyNames") if parent is not None else None
        return _resolve(keys, schema) if isinstance(keys, Mapping) else None
    for part in loc:
        if isinstance(part, str) and _BRANCH_TAG.search(part):
            continue
        following = None
        for branch in _branches(node, schema):
            if isinstance(part, int) and isinstance(branch.get("items"), Mapping):
                following = branch["items"]
            elif isinstance(part, str) and part in branch.get("properties", {}):
                following = branch["properties"][part]
            elif isinstance(part, str) and isinstance(branch.get("additionalProperties"), Mapping):
                following = branch["additionalProperties"]
            if following is not None:
                break
        if following is None:
            return None
        node = following
    return _resolve(node, schema)


def _bounds(node: Mapping[str, Any]) -> str:
    parts = []
    for key, sign in (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="), ("exclusiveMaximum", "<")):
        if key in node:
            parts.append(f"{sign} {node[key]}")
    if "minLength" in node:
        parts.append(f"at least {node['minLength']} characters")
    if "maxLength" in node:
        parts.append(f"at most {node['maxLength']} characters")
    if "minItems" in node:
        parts.append(f"at least {node['minItems']} item{'s' * (node['minItems'] != 1)}")
    return f" ({', '.join(parts)})" if parts else ""


def expected(node: Mapping[str, Any], root: Mapping[str, Any], depth: int = 0) -> str:
    """What to send for a schema node, in words.

    >>> expected({"type": "integer", "minimum": 1}, {})
    'an integer (>= 1)'
    >>> expected({"anyOf": [{"type": "string"}, {"type": "null"}]}, {})
    'a string or null'
    >>> expected({"enum": ["full", "lora"]}, {})
    "one of 'full', 'lora'"
    """
    node = _resolve(node, root)
    options = node.get("anyOf") or node.get("oneOf")
    if options and depth < 3:
        return " or ".join(dict.fromkeys(expected(option, root, depth + 1) for option in options))
    if "enum" in node:
        return "one of " + ", ".join(repr(value) for value in node["enum"])
    if "const" in node:
        return repr(node["const"])
    kind = node.get("type")
    if kind == "array":
        items = node.get("items")
        inner = f"; each item {expected(items, root, depth + 1)}" if isinstance(items, Mapping) and depth < 3 else ""
        return f"a list{_bounds(node)}{inner}"
    if kind == "object" or "properties" in node:
        properties = list(node.get("properties", {}))
        title = node.get("title")
        if not properties:
            return "an object" + (" (any keys)" if node.get("additionalProperties") is not False else "")
        required = [name for name in properties if name in node.get("required", ())]
        optional = [name for name in properties if name not in required]
        what = f"a {title} object" if title else "an object"
        fields = []
        if required:
            fields.append("required: " + ", ".join(required))
        if optional:
            fields.append("optional: " + ", ".join(optional))
        return f"{what} ({'; '.join(fields)})"
    names = {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "true or false"}
    if kind in names:
        return names[kind] + _bounds(node)
    if kind == "null":
        return "null"
    return "any JSON value"


def _path(loc: Iterable[Any]) -> str:
    """``request.rewards[0].role``; a mapping's bad key reads ``request.labels (key 'a')``.

    >>> _path(("request", "rewards", 0, "role")), _path(("request", "labels", "a", "[key]"))
    ('request.rewards[0].role', "request.labels (key 'a')")
    """
    loc = list(loc)
    if "[key]" in loc:
        at = loc.index("[key]")
        return f"{_path(loc[: at - 1])} (key {shown(loc[at - 1])})"
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif isinstance(part, str) and not _BRANCH_TAG.search(part):
            text += f".{part}" if text else part
    return text or "(arguments)"


def _problem(error: Mapping[str, Any]) -> str:
    kind = error.get("type", "")
    if kind == "missing":
        return "missing"
    message = clip(str(error.get("msg", "")).removeprefix("Value error, ").rstrip("."), MAX_PROBLEM_CHARS)
    message = message[:1].lower() + message[1:]
    if kind in ("value_error", "assertion_error") or "input" not in error:
        return message
    return f"{message} (got {shown(error['input'])})"


def field_lines(errors: Sequence[Mapping[str, Any]], schema: Mapping[str, Any] | None = None) -> list[str]:
    """One line per bad field: path, problem(s), and what to send when the schema says."""
    grouped: dict[str, tuple[list[str], Mapping[str, Any] | None]] = {}
    for error in errors:
        loc = tuple(error.get("loc", ()))
        key = _path(loc)
        problems, node = grouped.setdefault(key, ([], node_at(schema, loc) if schema is not None else None))
        problem = _problem(error)
        if problem not in problems:
            problems.append(problem)
    lines = []
    for key, (problems, node) in list(grouped.items())[:MAX_FIELD_LINES]:
        text = f"- {key}: {'; '.join(problems[:3])}."
        if node is not None:
            text += f" Send {expected(node, schema or {})}."
            description = str(node.get("description", "")).split("\n\n")[0].strip().rstrip(".")
            if description:
                text += f" {description[:1].upper()}{description[1:]}."
        lines.append(text)
    if len(grouped) > MAX_FIELD_LINES:
        lines.append(f"- … and {len(grouped) - MAX_FIELD_LINES} more fields.")
    return lines


def example_call(contract: ToolContract) -> str:
    return f"{contract.name} {json.dumps(contract.example, ensure_ascii=False)}"


def invalid_arguments(contract: ToolContract, errors: Sequence[Mapping[str, Any]], arguments: Mapping[str, Any]) -> str:
    """The message for a call whose arguments do not fit the tool's input schema."""
    unknown = [name for name in arguments if name not in contract.accepted]
    lines = []
    for name in unknown[:MAX_FIELD_LINES]:
        accepted = ", ".join(sorted(contract.accepted)) or "no arguments"
        lines.append(f"- {shown(name)}: not an argument of {contract.name}. Send only: {accepted}.")
    lines.extend(field_lines(errors, contract.schema))
    count = len(unknown) + len({_path(error.get("loc", ())) for error in errors})
    text = f"{contract.name}: invalid arguments ({count} problem{'s' * (count != 1)}).\n" + "\n".join(lines)
    nested = _flattened_fields(contract, arguments)
    if nested:
        text += f"\nThe fields {', '.join(nested)} belong inside {{'request': {{...}}}}, not beside it."
    text += f"\nExample of a valid call: {example_call(contract)}"
    if contract.hint:
        text += f"\n{contract.hint}"
    text += "\nThe full input schema is this tool's inputSchema in tools/list."
    return clip(text)


def _flattened_fields(contract: ToolContract, arguments: Mapping[str, Any]) -> list[str]:
    """Argument names that are fields of the tool's ``request`` model: the caller forgot to nest them."""
    request = contract.schema.get("properties", {}).get("request")
    if request is None or "request" in arguments:
        return []
    fields = set()
    for branch in _branches(request, contract.schema):
        fields |= set(branch.get("properties", {}))
    return [repr(name) for name in arguments if name in fields][:MAX_FIELD_LINES]


def tool_message(tool: str, message: str) -> str:
    """A tool's own refusal, in the project's shape."""
    return clip(f"{tool}: {message}")


def _free_space(path: str | None) -> str:
    """'12.0 MiB free on /mnt' for the file system holding path (or its nearest existing parent)."""
    probe = os.path.dirname(os.path.abspath(path)) if path else None
    while probe and not os.path.exists(probe):
        probe = os.path.dirname(probe)
    if not probe:
        return ""
    try:
        free = shutil.disk_usage(probe).free
    except OSError:
        return ""
    return f" ({free / 2**20:.1f} MiB free on the file system of {probe})"


def os_error_message(exc: OSError) -> str:
    """An operating-system error in words that name its real cause and the remedy: a full disk says so and where;
    only a missing path asks for a path that exists.

    >>> os_error_message(FileNotFoundError(errno.ENOENT, "No such file or directory", "/nope/x.json"))
    "/nope/x.json does not exist on the server's machine (No such file or directory). Send a path that exists there."
    >>> os_error_message(PermissionError(errno.EACCES, "Permission denied", "/root/x")).startswith("Permission denied")
    True
    """
    where = exc.filename or ""
    reason = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return (
            f"the disk is full: no space left to write {where or 'a file'}{_free_space(where or None)}. "
            "Free space on that disk, or point GRPO_RLVR_HOME (--state-root) at a disk with room, then send the call "
            "again."
        )
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return f"{where} does not exist on the server's machine ({reason}). Send a path that exists there."
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"Permission denied on {where}: the server's user cannot access it. Send a path it can read/write."
    if exc.errno == errno.EROFS:
        return f"{where} is on a read-only file system. Point GRPO_RLVR_HOME (--state-root) at a writable disk."
    if exc.errno == errno.EISDIR:
        return f"{where} is a directory where a file was expected. Send the path of a file."
    return f"{reason}{f' ({where})' if where else ''}: an operating-system error on the server's machine."
