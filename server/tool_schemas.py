"""The tool schemas as ``tools/list`` publishes them: each definition documented once, output schemas one level deep.

Pydantic's schemas are written for validation and documentation of one model at a time: every
property carries a title, every optional one ``"default": null``, and a definition used by several
tools (``RewardSpec``, ``HardwareSpec``...) is copied, with all its descriptions, into each tool's
schema. An agent reads ``tools/list`` whole before its first call, so these copies cost context on
every session (78k characters before this module). Published here:

- input schemas without titles or null defaults; a definition another tool already documents keeps
  its structure (types, enums, bounds, required) and points at that tool instead of repeating its
  descriptions; options with a default keep their type, bounds and default, and their descriptions
  are in the tool's whole input schema, a resource (``full_input_schema_uri``); a definition used
  once is written where it is used;
- output schemas as an object with the fields it always has (``required``) and a pointer to the
  whole contract (``grpo://schemas/...``) where there is one. What the tools return still validates
  against them: the shallow schema accepts everything the full one does. A result is self-describing
  JSON the agent reads anyway, and each tool's description says what it returns; the input schemas,
  which the agent must fill in, keep their descriptions.

Argument errors are still explained from the full schemas (``server.tool_errors`` reads its own copy).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

TOOLS_LIST_CHARACTERS = 25_000
"""What tools/list may take, as compact JSON: an agent reads it whole before its first call. 78,243 before the
schemas were published this way; 24,988 on 2026-12-03; 29,386 once the dataset contract, a sampling engine, the
blind labels, sharding, rehearsal, a mixture of experts' shape and host RAM had joined (2026-12-06); 24,848 once
rarely sent options collapsed to pointers (``COLLAPSED_DEFINITIONS``) and copies of a definition named only its
required fields (2026-12-06, with the symptom and variant enums); 24,988 with gradient_accumulation_steps for
FSDP2's memory and shorter default notes (2026-12-07); 24,992 once inspect_rewards said when it samples afresh
(2026-12-08)."""
FULL_CONTRACTS = {
    "GRPORecipe": "grpo://schemas/grpo_recipe.json",
    "MemoryEstimate": "grpo://schemas/memory_estimate.json",
}
"""Output models whose whole schema, with every field's description, is also a resource (scripts/generate.py)."""


class PublishedTool(Protocol):
    """What this module needs of an SDK tool: its name and the two schemas it publishes."""

    name: str
    parameters: dict[str, Any]

    @property
    def output_schema(self) -> dict[str, Any] | None: ...


NULL = {"type": "null"}


def without_noise(schema: Any) -> Any:
    """A schema without titles, ``"default": null``, the ``null`` branch of optional fields and pydantic's
    ``discriminator`` (an OpenAPI keyword JSON Schema ignores, whose mapping names ``$defs`` that inlining removes:
    each branch's ``const`` kind says the same).

    An optional field is left out to leave it unset, which its absence from ``required`` already says;
    an explicit null is still accepted. A model's description keeps its first paragraph.

    >>> without_noise({"title": "A", "description": "One.\\n\\nTwo.", "properties": {"title": {"title": "Title",
    ...     "anyOf": [{"type": "string"}, {"type": "null"}], "default": None}}})
    {'description': 'One.', 'properties': {'title': {'type': 'string'}}}
    """
    if isinstance(schema, list):
        return [without_noise(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    kept: dict[str, Any] = {}
    for key, value in schema.items():
        if (key == "title" and isinstance(value, str)) or (key == "default" and value is None):
            continue
        if key == "discriminator" and isinstance(value, dict):
            continue
        if key == "default" and "const" in schema and value == schema["const"]:
            continue  # a constant's default is the constant
        if key == "additionalProperties" and isinstance(value, bool):
            continue  # true is JSON Schema's default; on false the server still refuses unknown fields, by name
        if key == "properties" and isinstance(value, dict):  # property names are data, never keywords
            kept[key] = {name: without_noise(node) for name, node in value.items()}
        elif key == "description" and isinstance(value, str):
            kept[key] = value.split("\n\n")[0].strip()
        else:
            kept[key] = without_noise(value)
    options = kept.get("anyOf")
    if isinstance(options, list) and len(options) == 2 and NULL in options:
        kept.pop("anyOf")
        kept = {**options[1 - options.index(NULL)], **kept}
    return kept


def _without_descriptions(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_without_descriptions(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    return {
        key: (
            {name: _without_descriptions(node) for name, node in value.items()}
            if key == "properties" and isinstance(value, dict)
            else _without_descriptions(value)
        )
        for key, value in schema.items()
        if key != "description"
    }


def shallow_output(schema: dict[str, Any]) -> dict[str, Any]:
    """An output schema as an object with the fields it always has and, where there is one, the whole contract.

    The tool's description already says what it returns; the result itself is self-describing JSON.

    >>> full = {"title": "GRPORecipe", "type": "object", "required": ["trl"], "description": "A recipe.",
    ...         "properties": {"trl": {"type": "object"}, "b": {"type": "integer"}}}
    >>> shallow_output(full)
    {'type': 'object', 'required': ['trl'], 'description': 'Whole schema: grpo://schemas/grpo_recipe.json'}
    """
    published: dict[str, Any] = {"type": "object"}
    if schema.get("required"):
        published["required"] = schema["required"]
    contract = FULL_CONTRACTS.get(str(schema.get("title", "")))
    if contract:
        published["description"] = f"Whole schema: {contract}"
    return published


COLLAPSED_DEFINITIONS = frozenset(
    {"ModelShape", "SlurmSettings", "SamplingEngine", "EvaluationPlan", "DeclaredEvidence"}
)
"""Options few requests fill in, published as their kind and required fields with a pointer to the tool's whole
input schema: a model's shape (its config.json gives it), a Slurm cluster's settings, the sampling engine (auto
picks one), the held-out evaluation plan (chosen from the run's length) and a pass rate declared instead of
measured."""


def _pointer(definition: dict[str, Any], description: str, kind: bool) -> dict[str, Any]:
    """A definition as an object with its required fields named, its ``kind`` (with ``kind``) and a description
    that says where the rest is."""
    pointer: dict[str, Any] = {"type": "object", "description": description}
    if kind and isinstance(definition.get("properties", {}).get("kind"), dict):
        pointer["properties"] = {"kind": _without_descriptions(definition["properties"]["kind"])}
    if definition.get("required"):
        pointer["required"] = definition["required"]
    return pointer


def _share_definitions(tools: Iterable[PublishedTool]) -> None:
    """Keep each input definition whole in the first tool that uses it; later copies point there ("As in
    route_check."), naming only their required fields. A collapsed definition points at its tool's whole schema."""
    documented: dict[str, str] = {}
    for tool in tools:
        definitions = tool.parameters.get("$defs", {})
        for name, definition in definitions.items():
            if name in COLLAPSED_DEFINITIONS:
                summary = str(definition.get("description", "")).rstrip(".")
                described = f"{summary}; its fields: {full_input_schema_uri(tool.name)}"
                definitions[name] = _pointer(definition, described, kind=True)
            elif name not in documented:
                documented[name] = tool.name
            else:
                definitions[name] = _pointer(definition, f"As in {documented[name]}.", kind=False)


def _references(node: Any, counts: dict[str, int]) -> None:
    if isinstance(node, dict):
        reference = node.get("$ref")
        if isinstance(reference, str) and reference.startswith("#/$defs/"):
            counts[reference.removeprefix("#/$defs/")] = counts.get(reference.removeprefix("#/$defs/"), 0) + 1
        for value in node.values():
            _references(value, counts)
    elif isinstance(node, list):
        for value in node:
            _references(value, counts)


def _inlined(node: Any, once: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_inlined(value, once) for value in node]
    if not isinstance(node, dict):
        return node
    name = str(node.get("$ref", "")).removeprefix("#/$defs/")
    if name in once:  # the place's own keys (its description) win over the definition's
        siblings = {key: value for key, value in node.items() if key != "$ref"}
        return _inlined({**once[name], **siblings}, once)
    return {key: _inlined(value, once) for key, value in node.items()}


def inline_single_use(schema: dict[str, Any]) -> dict[str, Any]:
    """A schema with every definition used once written where it is used (recursive ones stay).

    A client that flattens ``$ref`` gets the same schema; one that does not, and a model reading it, no
    longer has to jump to ``$defs`` for the request itself.

    >>> inline_single_use({"properties": {"request": {"$ref": "#/$defs/R"}}, "$defs": {"R": {"type": "object"}}})
    {'properties': {'request': {'type': 'object'}}}
    """
    definitions = schema.get("$defs", {})
    counts: dict[str, int] = {}
    _references(schema, counts)
    recursive = set()
    for name, definition in definitions.items():
        inner: dict[str, int] = {}
        _references(definition, inner)
        if name in inner:
            recursive.add(name)
    once = {name: definitions[name] for name, count in counts.items() if count == 1 and name in definitions}
    once = {name: definition for name, definition in once.items() if name not in recursive}
    inlined = _inlined({key: value for key, value in schema.items() if key != "$defs"}, once)
    # a definition used once inside another used once is now written out; what is left still referenced stays
    kept = {name: _inlined(definition, once) for name, definition in definitions.items() if name not in once}
    if kept:
        inlined["$defs"] = kept
    return inlined


def full_input_schema_uri(tool_name: str) -> str:
    """Where a tool's whole input schema, with every option described, is served as a resource."""
    return f"grpo://tools/{tool_name}/input-schema"


def _options_described_elsewhere(tool: PublishedTool) -> None:
    """Leave out the descriptions of a request's options that have a default; the full schema keeps them.

    What an agent must decide (required fields, optional ones without a default) stays described; an
    option with a default still shows its type, enum, bounds and default here.
    """
    dropped = False
    for definition in tool.parameters.get("$defs", {}).values():
        for node in definition.get("properties", {}).values():
            if "default" in node and "description" in node:
                del node["description"]
                dropped = True
    if dropped:
        tool.parameters["description"] = f"All options described: {full_input_schema_uri(tool.name)}"


def publish_compact_schemas(tools: list[PublishedTool]) -> None:
    """Rewrite the tools' published schemas in place (see the module's docstring); validation is unchanged."""
    for tool in tools:
        compact = without_noise(tool.parameters)
        tool.parameters.clear()
        tool.parameters.update(compact)
    _share_definitions(tools)
    for tool in tools:
        _options_described_elsewhere(tool)
        compact = inline_single_use(tool.parameters)
        tool.parameters.clear()
        tool.parameters.update(compact)
    for tool in tools:
        output = tool.output_schema
        if output is not None:
            shallow = shallow_output(output)
            output.clear()
            output.update(shallow)
