"""Rewards for structured output: ``json_schema`` (a JSON document) and ``tool_call`` (a function call).

The JSON is taken from the whole completion or from exactly one fenced block; two JSON blocks are
ambiguous and earn nothing. Validation is real JSON Schema (``jsonschema``, the schema's own draft).

May import: ``skill.rewards`` (base, params, registry), ``skill.errors``.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any

from skill.errors import SkillError
from skill.rewards.base import RewardFunction
from skill.rewards.params import Param
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


@register("json_schema", roles=("format", "correctness"))
def build_json_schema(
    schema: Annotated[dict[str, Any] | None, Param("a JSON Schema object (or schema_column)")] = None,
    schema_column: Annotated[str | None, Param("dataset column holding a schema per row")] = None,
    parse_credit: Annotated[float, Param("score for JSON that parses but fails the schema")] = 0.0,
    mode: Annotated[
        str, Param("binary, or required_fraction: the share of required properties present and valid")
    ] = "binary",
) -> RewardFunction:
    """1.0 when the completion's JSON validates against the schema; ``parse_credit`` for JSON that parses but
    does not validate; 0.0 for no JSON.

    The JSON is the whole completion or its one fenced block. ``mode="required_fraction"`` gives partial credit,
    the share of required properties present and valid against their subschemas, never 1.0 unless the whole
    document validates.

    Resists: hedging with several documents. Two fenced blocks are ambiguous and earn nothing. Extra keys pass
    unless the schema sets ``additionalProperties``.

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


@register("tool_call", roles=("format", "correctness"))
def build_tool_call(
    tools: Annotated[
        list[dict[str, Any]] | None, Param("the tool schemas, [{name, parameters}] (or tools_column)")
    ] = None,
    tools_column: Annotated[str | None, Param("dataset column with the tools per row")] = None,
    expected_column: Annotated[str | None, Param("dataset column with the expected call {name, arguments}")] = None,
) -> RewardFunction:
    """1.0 when the completion calls a listed tool with arguments valid for its parameters schema (and, given
    ``expected_column``, the same name and arguments as expected); 0.0 otherwise.

    The call is one ``<tool_call>`` tag (Hermes/Qwen style), one fenced block or bare JSON, with ``arguments``
    (or ``parameters``) as an object or a JSON string.

    Resists: several calls in one completion (ambiguous: 0.0) and calls to tools that were not offered.

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
