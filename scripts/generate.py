"""Generated artefacts: ``schemas/*.json`` from the Pydantic contracts, and the generated blocks of
``references/*.md`` from the code that owns their content.

``python -m generate --write`` (``make generate``) rewrites them; a test fails when the
committed files drift from what this module renders.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

REPOSITORY = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"(<!-- BEGIN GENERATED: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- END GENERATED -->)", re.DOTALL)


def _schema_models() -> dict[str, tuple[type[BaseModel], str]]:
    from skill.hardware.specs import HardwareSpec
    from skill.memory.estimate import MemoryEstimate, MemoryRequest
    from skill.recipe.deciding.variants import Variant
    from skill.recipe.emit import RecipeRequest
    from skill.recipe.schema import GRPORecipe
    from skill.rewards.spec import RewardSpec

    return {
        "recipe_request.json": (RecipeRequest, "validation"),
        "grpo_recipe.json": (GRPORecipe, "serialization"),
        "reward_spec.json": (RewardSpec, "validation"),
        "hardware_spec.json": (HardwareSpec, "validation"),
        "variant.json": (Variant, "serialization"),
        "memory_request.json": (MemoryRequest, "validation"),
        "memory_estimate.json": (MemoryEstimate, "serialization"),
    }


def _without_doctests(node: Any) -> Any:
    """Class docstrings become schema descriptions; their doctest examples are for the test suite, not clients."""
    if isinstance(node, dict):
        cleaned = {key: _without_doctests(value) for key, value in node.items()}
        if isinstance(cleaned.get("description"), str):
            cleaned["description"] = cleaned["description"].split("\n>>>", 1)[0].strip()
        return cleaned
    if isinstance(node, list):
        return [_without_doctests(item) for item in node]
    return node


def render_schemas() -> dict[str, str]:
    """File name -> JSON Schema text for every contract."""
    rendered = {}
    for name, (model, mode) in _schema_models().items():
        schema = _without_doctests(model.model_json_schema(mode=mode))
        schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
        rendered[name] = json.dumps(schema, indent=2, sort_keys=True) + "\n"
    return rendered


def _variants_table() -> str:
    from skill.recipe.deciding.variants import VARIANTS

    lines = ["| symptom | variant | config delta | other changes |", "|---|---|---|---|"]
    for variant in VARIANTS:
        deltas = "<br>".join(f"`{delta.describe()}`" for delta in variant.config)
        other = "<br>".join(f"{item.kind}: {item.description}" for item in variant.other) or "-"
        for symptom in variant.symptoms:
            lines.append(f"| `{symptom}` | {variant.name} | {deltas} | {other} |")
    return "\n".join(lines) + "\n"


def _variants_detail() -> str:
    from skill.recipe.deciding.variants import VARIANTS

    parts = []
    for variant in sorted(VARIANTS, key=lambda item: -item.precedence):
        parts.append(
            f"### {variant.name}: {variant.title}\n\n{variant.why}\n\n"
            f"- precedence: {variant.precedence}\n- symptoms: {', '.join(f'`{s}`' for s in variant.symptoms)}\n"
            f"- source: {variant.source}\n"
        )
    return "\n".join(parts)


def _reward_params_table(params: dict[str, Any]) -> str:
    """The params of one reward, from its builder's annotated signature (``skill.rewards.params``)."""
    from skill.markdown import table_cell

    if not params:
        return "No params.\n"
    lines = ["| param | type | default | meaning |", "|---|---|---|---|"]
    for param in params.values():
        default = "required" if param.required else f"`{param.default_text()}`"
        cells = (f"`{param.name}`", f"`{param.type}`", default, param.description)
        lines.append("| " + " | ".join(table_cell(cell) for cell in cells) + " |")
    return "\n".join(lines) + "\n"


def _reward_doc_body(doc: str) -> list[str]:
    """A builder's docstring after its summary: prose paragraphs as they are, ``Resists:`` in bold, and the
    doctest examples (input -> score) in a code block."""
    parts = []
    for paragraph in doc.split("\n\n")[1:]:
        if paragraph.startswith(">>>"):
            parts.append(f"````python\n{paragraph}\n````")
        elif paragraph.startswith("Resists:"):
            parts.append("**Resists:**" + paragraph.removeprefix("Resists:"))
        else:
            parts.append(paragraph)
    return parts


def _reward_catalogue() -> str:
    """Each registered reward by behaviour: summary, roles, a link to its code, params, details, examples."""
    import inspect

    from skill.rewards.registry import load_library

    entries = []
    for name, entry in sorted(load_library().items()):
        source = Path(inspect.getsourcefile(entry.build) or "").resolve().relative_to(REPOSITORY)
        head = [
            f"### `{name}`",
            entry.summary,
            f"Roles: {', '.join(entry.roles)}. Code: [`{entry.build.__name__}` in `{source}`](../{source}).",
            _reward_params_table(entry.params).rstrip(),
        ]
        entries.append("\n\n".join(head + _reward_doc_body(inspect.getdoc(entry.build) or "")) + "\n")
    return "\n".join(entries)


def _seed_table() -> str:
    from skill.recipe.deciding.field_rules import seed_values

    lines = ["| GRPOConfig field | value | why |", "|---|---|---|"]
    lines.extend(f"| `{field}` | `{value!r}` | {reason} |" for field, (value, reason) in seed_values().items())
    return "\n".join(lines) + "\n"


def _cross_field_checks() -> dict[str, list[str]]:
    """Field -> the cross-field checks of skill/recipe/checking/compatibility.py that read it (each rule's
    ``v.<field>``)."""
    import ast
    import inspect

    from skill.recipe.checking.compatibility import RULES

    readers: dict[str, list[str]] = {}
    for rule in RULES:
        tree = ast.parse(inspect.getsource(rule))
        for field in sorted({node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}):
            readers.setdefault(field, []).append(rule.__name__.strip("_").replace("_", " "))
    return readers


def _field_reference() -> str:
    from skill.grpo_fields import FIELD_RENAMES, grpo_config_defaults
    from skill.markdown import table_cell
    from skill.recipe.checking.trl_contract import supported_choices
    from skill.recipe.deciding.field_rules import field_rules

    defaults, choices, checks = grpo_config_defaults(), supported_choices(), _cross_field_checks()
    lines = [
        "| field | decision | value | why | where else | CPU short run | allowed | cross-field checks |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, rule in field_rules().items():
        default = f"TRL's default `{defaults.get(name)!r}`"
        value = {"seed": f"`{rule.value!r}`", "set": f"decided per recipe ({default})", "left": default}[rule.decision]
        where = rule.set_by or rule.changed_by or ""
        cpu = f"`{rule.cpu[0]!r}`: {table_cell(rule.cpu[1])}" if rule.cpu else ""
        allowed = ", ".join(f"`{choice}`" for choice in choices[name]) if rule.enumerated else ""
        if rule.bounds is not None:
            allowed = rule.bounds.words()
        cells = [f"`{name}`", rule.decision, value, table_cell(rule.reason), table_cell(where), cpu, allowed]
        lines.append("| " + " | ".join([*cells, ", ".join(checks.get(name, []))]) + " |")
    newer_names = {rename.new for rename in FIELD_RENAMES}  # the rules name a renamed field as the target reads it
    others = sorted(set(defaults) - set(field_rules()) - newer_names)
    lines += ["", f"Left at their defaults, as TrainingArguments fields that do not change a GRPO run ({len(others)}):"]
    lines.append(", ".join(f"`{name}`" for name in others) + ".")
    return "\n".join(lines) + "\n"


def _memory_block(name: str) -> Callable[[], str]:
    def render() -> str:
        import memory_tables

        return getattr(memory_tables, name)()

    return render


def _step_time_table() -> str:
    from skill.timing.validation import validation_table

    return validation_table()


GENERATED_BLOCKS: dict[str, Callable[[], str]] = {
    "step-time-published": _step_time_table,
    "memory-colocated": _memory_block("colocated_table"),
    "memory-server": _memory_block("server_table"),
    "memory-published": _memory_block("published_comparison"),
    "memory-gpus": _memory_block("gpu_capacity_table"),
    "reward-catalogue": _reward_catalogue,
    "variants-table": _variants_table,
    "variants-detail": _variants_detail,
    "seed-recipe": _seed_table,
    "grpo-fields": _field_reference,
}


def render_grpo_config_defaults() -> str:
    """The target GRPOConfig's defaults (skill/grpo_fields.py reads them; both environments check them)."""
    from skill.grpo_fields import installed_defaults
    from skill.recipe.checking.stack import lowest_allowed

    return json.dumps(installed_defaults(lowest_allowed("transformers")), indent=1) + "\n"


def render_reference(text: str) -> str:
    """Replace every generated block in a reference file's text with freshly rendered content."""

    def replace(match: re.Match[str]) -> str:
        name = match.group("name")
        if name not in GENERATED_BLOCKS:
            raise KeyError(f"unknown generated block {name!r}; known: {sorted(GENERATED_BLOCKS)}")
        return match.group(1) + GENERATED_BLOCKS[name]() + match.group(4)

    return BLOCK.sub(replace, text)


def expected_files(root: Path = REPOSITORY) -> dict[Path, str]:
    """Every generated file (or file with generated blocks) and the text it should have."""
    files = {root / "schemas" / name: text for name, text in render_schemas().items()}
    files[root / "skill" / "grpo_config_defaults.json"] = render_grpo_config_defaults()
    for reference in sorted((root / "references").glob("*.md")):
        current = reference.read_text()
        if BLOCK.search(current):
            files[reference] = render_reference(current)
    return files


def stale_files(root: Path = REPOSITORY) -> list[Path]:
    """Generated files whose committed text differs from what the code renders."""
    return [path for path, text in expected_files(root).items() if not path.is_file() or path.read_text() != text]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true", help="rewrite stale files (default: only list them)")
    args = parser.parse_args(argv)
    stale = stale_files()
    if args.write:
        for path, text in expected_files().items():
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.is_file() or path.read_text() != text:
                path.write_text(text)
                print(f"wrote {path.relative_to(REPOSITORY)}")
        return 0
    for path in stale:
        print(f"stale: {path.relative_to(REPOSITORY)}")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
