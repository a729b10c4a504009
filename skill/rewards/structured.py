"""Rewards for structured output: ``json_schema`` (a JSON document) and ``tool_call`` (a function call).

The JSON is taken from the whole completion or from exactly one fenced block; two JSON blocks are
ambiguous and earn nothing. Validation is real JSON Schema (``jsonschema``, the schema's own draft).
"""

from __future__ import annotations

import json
import re
from typing import Any

from skill.errors import SkillError
from skill.rewards.base import RewardFunction
from skill.rewards.registry import register

_FENCED = re.compile(r"```(?:json)?[ \t]*\n(.*?)\n?```", re.DOTALL)
_TOOL_TAG = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


def extract_json(text: str) -> Any:
    """The JSON value of a completion: the whole text, or its single fenced block. Raises ValueError otherwise.

    >>> extract_json('{"a": 1}'), extract_json('Here:\\n```json\\n[1, 2]\\n```')
    ({'a': 1}, [1, 2])
    """
    stripped = text.strip()
    blocks = _FENCED.findall(stripped)
    if len(blocks) > 1:
        raise ValueError("several fenced blocks: ambiguous")
    candidate = blocks[0] if blocks else stripped
    return json.loads(candidate)


def _validator(schema: Any) -> Any:
    import jsonschema

    if not isinstance(schema, dict):
        raise SkillError("The JSON schema must be an object.", "Send params.schema as a JSON Schema object.")
    cls = jsonschema.validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise SkillError(f"The JSON schema is invalid: {exc.message}.", "Fix the schema.") from None
    return cls(schema)


def _schema_from_row(row: dict[str, Any], column: str) -> Any:
    value = row[column]
    return json.loads(value) if isinstance(value, str) else value


@register(
    "json_schema",
    roles=("format", "correctness"),
    summary="1.0 when the completion's JSON validates against the schema; optional partial credit.",
    params={
        "schema": "a JSON Schema object (or use schema_column)",
        "schema_column": "dataset column holding a schema per row",
        "parse_credit": "score for JSON that parses but fails the schema (default 0.0)",
        "mode": "binary (default) | required_fraction: share of required properties present and valid",
    },
)
def build_json_schema(
    schema: dict[str, Any] | None = None,
    schema_column: str | None = None,
    parse_credit: float = 0.0,
    mode: str = "binary",
) -> RewardFunction:
    """Score JSON output: 1.0 valid against the schema; ``parse_credit`` for parseable but invalid JSON;
    0.0 for no JSON. ``mode="required_fraction"`` gives the share of required properties that are present
    and valid against their subschemas (never 1.0 unless the whole document validates).

    >>> reward = build_json_schema({"type": "object", "required": ["age"], "properties": {"age": {"type": "integer"}}})
    >>> reward(["", "", ""], ['{"age": 3}', '{"age": "three"}', 'three'])
    [1.0, 0.0, 0.0]
    """
    if (schema is None) == (schema_column is None):
        raise SkillError("json_schema needs exactly one of schema / schema_column.", "Send one of them.")
    if mode not in ("binary", "required_fraction"):
        raise SkillError(f"Unknown mode {mode!r}.", "Send 'binary' or 'required_fraction'.")
    fixed = _validator(schema) if schema is not None else None

    def score(text: str, row: dict[str, Any]) -> float:
        validator = fixed or _validator(_schema_from_row(row, schema_column or ""))
        try:
            document = extract_json(text)
        except ValueError:
            return 0.0
        if validator.is_valid(document):
            return 1.0
        if mode == "required_fraction" and isinstance(document, dict):
            required = validator.schema.get("required", [])
            properties = validator.schema.get("properties", {})
            good = sum(
                1
                for name in required
                if name in document and type(validator)(properties.get(name, {})).is_valid(document[name])
            )
            return min(good / len(required), 0.99) if required else parse_credit
        return parse_credit

    return RewardFunction("json_schema", score=score, doc=build_json_schema.__doc__ or "")


def extract_tool_call(text: str) -> dict[str, Any]:
    """The one tool call in a completion: a ``<tool_call>`` tag (Hermes/Qwen style), a fenced block or bare JSON.

    >>> extract_tool_call('<tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call>')["name"]
    'add'
    """
    tagged = _TOOL_TAG.findall(text)
    if len(tagged) > 1:
        raise ValueError("several tool calls")
    call = json.loads(tagged[0]) if tagged else extract_json(text)
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        raise ValueError("not a tool call object with a name")
    arguments = call.get("arguments", call.get("parameters", {}))
    if isinstance(arguments, str):
        arguments = json.loads(arguments)
    return {"name": call["name"], "arguments": arguments}


@register(
    "tool_call",
    roles=("format", "correctness"),
    summary="1.0 when the completion calls a known tool with arguments valid for its schema (and, given an "
    "expected call, the same name and arguments).",
    params={
        "tools": "list of {name, parameters} tool schemas (or tools_column)",
        "tools_column": "dataset column with the tools per row",
        "expected_column": "optional column with the expected {name, arguments}",
    },
)
def build_tool_call(
    tools: list[dict[str, Any]] | None = None, tools_column: str | None = None, expected_column: str | None = None
) -> RewardFunction:
    """Score a tool call: 1.0 for a call to a listed tool whose arguments validate against its parameters schema
    (and equal the expected call when ``expected_column`` is given); 0.0 otherwise.

    >>> tools = [{"name": "add", "parameters": {"type": "object", "required": ["a", "b"],
    ...           "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}}]
    >>> build_tool_call(tools)(["", ""], ['{"name": "add", "arguments": {"a": 1, "b": 2}}',
    ...                                   '{"name": "add", "arguments": {"a": 1}}'])
    [1.0, 0.0]
    """
    if (tools is None) == (tools_column is None):
        raise SkillError("tool_call needs exactly one of tools / tools_column.", "Send one of them.")

    def by_name(listed: list[dict[str, Any]]) -> dict[str, Any]:
        return {tool.get("function", tool)["name"]: tool.get("function", tool) for tool in listed}

    fixed = by_name(tools) if tools is not None else None

    def score(text: str, row: dict[str, Any]) -> float:
        known = fixed or by_name(_schema_from_row(row, tools_column or ""))
        try:
            call = extract_tool_call(text)
        except ValueError:
            return 0.0
        tool = known.get(call["name"])
        if tool is None or not _validator(tool.get("parameters", {"type": "object"})).is_valid(call["arguments"]):
            return 0.0
        if expected_column is not None:
            expected = _schema_from_row(row, expected_column)
            if call["name"] != expected.get("name") or call["arguments"] != expected.get("arguments", {}):
                return 0.0
        return 1.0

    return RewardFunction("tool_call", score=score, doc=build_tool_call.__doc__ or "")
