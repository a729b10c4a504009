"""What TRL accepts: GRPOConfig fields (installed, and under the transformers a recipe targets), the
enumerated values its trainer handles, and a real ``GRPOConfig`` built from a recipe's kwargs.

``GRPOConfig`` itself accepts ``loss_type="nonsense"`` and fails only inside training, so the
enumerations are read from the installed trainer's source: every string literal that
``grpo_trainer.py`` / ``grpo_config.py`` compare a field against is a value it supports.

A GPU recipe targets the stack of ``target_stack.txt`` (transformers 5.17 with vLLM 0.31), whatever is
installed where it is emitted. GRPOConfig's fields under TRL 1.16 differ between the supported
transformers versions only by the renames in ``FIELD_RENAMES`` (compared on the real classes of 5.17 and
5.24: tests/target/test_recipe_matrix.py), so the fields under any supported version are the installed
ones with that table applied, and a recipe names each renamed field as its target knows it.
"""

from __future__ import annotations

import ast
import difflib
import functools
import importlib.metadata
import importlib.util
import os
from pathlib import Path
from typing import Any

from packaging.version import Version

from skill.errors import SkillError
from skill.grpo_fields import FIELD_RENAMES, GRPOFields
from skill.python_source import parse
from skill.recipe.checking.stack import STACK_FILE, lowest_allowed
from skill.recipe.deciding.field_rules import enumerated_fields
from skill.recipe.schema import GRPORecipe, target_is_this_machine

# Fields that older recipes and tutorials still use; each note says what replaced it.
REMOVED_FIELDS = {
    "max_prompt_length": "TRL 1.16 no longer truncates prompts; filter or shorten over-long prompts in the dataset.",
    "warmup_ratio": "transformers 5 folds it into warmup_steps: a float below 1 is read as a ratio.",
    "use_vllm_server": "use vllm_mode='server' with use_vllm=True.",
    "vllm_device": "the vLLM server runs as its own process (`trl vllm-serve`); set vllm_server_host/port.",
}


def installed_versions() -> dict[str, str]:
    """Versions of the libraries a recipe depends on, read without importing them.

    >>> sorted(installed_versions())
    ['peft', 'torch', 'transformers', 'trl']
    """
    versions = {}
    for package in ("trl", "transformers", "torch", "peft"):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = "not installed"
    return versions


@functools.cache
def grpo_config_fields() -> frozenset[str]:
    """Every keyword the installed ``trl.GRPOConfig`` takes (imports trl; cached)."""
    import dataclasses

    from trl import GRPOConfig

    return frozenset(field.name for field in dataclasses.fields(GRPOConfig) if field.init)


def installed_transformers() -> str:
    """The installed transformers version, read without importing it."""
    return importlib.metadata.version("transformers")


def recipe_transformers(accelerator: str) -> str:
    """The transformers a recipe is written for: a GPU recipe, the lowest of the target stack (what vLLM admits,
    ``target_stack.txt``); a CPU recipe, the installed one (it runs here)."""
    return lowest_allowed("transformers") if accelerator == "gpu" else installed_transformers()


def fields_under(transformers_version: str) -> frozenset[str]:
    """The fields of ``trl.GRPOConfig`` under a transformers version: the installed fields with each rename of
    ``FIELD_RENAMES`` applied on the version's side of it.

    >>> "activation_checkpointing" in fields_under("5.17"), "gradient_checkpointing" in fields_under("5.17")
    (False, True)
    >>> {"activation_checkpointing", "gradient_checkpointing"} <= fields_under("5.24")
    True
    """
    fields = set(grpo_config_fields())
    for rename in FIELD_RENAMES:
        fields.add(rename.old)
        if Version(transformers_version) < Version(rename.since):
            fields.discard(rename.new)
        else:
            fields.add(rename.new)
    return frozenset(fields)


def field_name(field: str, transformers_version: str) -> str:
    """The name under which a transformers version reads ``field`` (either name of a rename).

    >>> field_name("activation_checkpointing", "5.17"), field_name("activation_checkpointing", "5.24")
    ('gradient_checkpointing', 'activation_checkpointing')
    >>> field_name("learning_rate", "5.17")
    'learning_rate'
    """
    for rename in FIELD_RENAMES:
        if field in (rename.old, rename.new):
            return rename.old if Version(transformers_version) < Version(rename.since) else rename.new
    return field


def _rename_note(name: str, transformers_version: str) -> str:
    for rename in FIELD_RENAMES:
        if name == rename.new and Version(transformers_version) < Version(rename.since):
            return (
                f" {name!r} exists from transformers {rename.since}; transformers {transformers_version} reads "
                f"{rename.old!r} (every supported version does)."
            )
    return ""


def _trl_source(module: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise SkillError(f"TRL module {module} is not installed.", "Install the project's dependencies (make test).")
    return Path(spec.origin)


@functools.cache
def supported_choices() -> dict[str, tuple[str, ...]]:
    """The values the installed GRPO trainer handles for each enumerated field, from its source.

    >>> "dr_grpo" in supported_choices()["loss_type"], supported_choices()["vllm_mode"]
    (True, ('colocate', 'server'))
    """
    found: dict[str, set[str]] = {name: set() for name in enumerated_fields()}
    for module in ("trl.trainer.grpo_trainer", "trl.trainer.grpo_config"):
        tree = parse(_trl_source(module).read_text())
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Compare) and isinstance(node.left, ast.Attribute)):
                continue
            if node.left.attr not in found:
                continue
            for comparator in node.comparators:
                items = [comparator] if isinstance(comparator, ast.Constant) else getattr(comparator, "elts", [])
                for item in items:
                    if isinstance(item, ast.Constant) and isinstance(item.value, str):
                        found[node.left.attr].add(item.value)
    return {name: tuple(sorted(values)) for name, values in found.items()}


def check_field_names(kwargs: dict[str, Any], transformers_version: str | None = None) -> None:
    """Refuse any kwarg that is not a GRPOConfig field in the installed TRL, or (given a version) under the
    transformers the recipe targets, naming close matches and renames.

    >>> check_field_names({"learning_rate": 1e-6})
    >>> check_field_names({"max_prompt_length": 512})
    Traceback (most recent call last):
    ...
    skill.errors.SkillError: 'max_prompt_length' is not a GRPOConfig field in the installed TRL ...
    >>> check_field_names({"activation_checkpointing": True}, transformers_version="5.17")
    Traceback (most recent call last):
    ...
    skill.errors.SkillError: 'activation_checkpointing' is not a GRPOConfig field ... reads 'gradient_checkpointing' ...
    """
    installed = installed_transformers()
    trl = installed_versions()["trl"]
    checks = [(grpo_config_fields(), f"in the installed TRL {trl} (transformers {installed})", installed)]
    if transformers_version is not None and Version(transformers_version) != Version(installed):
        where = f"under transformers {transformers_version}, the recipe's target ({STACK_FILE.name})"
        checks.append((fields_under(transformers_version), where, transformers_version))
    for fields, where, version in checks:
        problems = []
        for name in (name for name in kwargs if name not in fields):
            close = difflib.get_close_matches(name, fields, n=3, cutoff=0.6)
            hint = f" Close matches: {', '.join(close)}." if close else ""
            note = f" {REMOVED_FIELDS[name]}" if name in REMOVED_FIELDS else _rename_note(name, version)
            problems.append(f"{name!r} is not a GRPOConfig field {where}.{note}{hint}")
        if problems:
            raise SkillError(" ".join(problems), "Send only GRPOConfig fields (see schemas/ or TRL's GRPOConfig docs).")


def check_choices(kwargs: dict[str, Any]) -> None:
    """Refuse an enumerated value the installed trainer does not handle.

    >>> check_choices({"loss_type": "nonsense"})
    Traceback (most recent call last):
    ...
    skill.errors.SkillError: loss_type='nonsense' is not handled by the installed GRPOTrainer. Send one of: ...
    """
    for name, choices in supported_choices().items():
        if name not in kwargs or kwargs[name] is None:
            continue
        value = kwargs[name]
        if name == "scale_rewards" and isinstance(value, bool):
            continue  # GRPOConfig maps True/False to "group"/"none" itself
        if value not in choices:
            raise SkillError(
                f"{name}={value!r} is not handled by the installed GRPOTrainer.",
                f"Send one of: {', '.join(choices)}.",
            )


def build_grpo_config(
    kwargs: dict[str, Any],
    output_dir: str,
    *,
    on_target: bool,
    target_world_size: int = 1,
    transformers_version: str | None = None,
) -> tuple[Any, list[str]]:
    """Construct a real ``trl.GRPOConfig``; returns it and notes on anything neutralised.

    ``transformers_version``: the transformers the recipe targets (``recipe_transformers``); the field
    names are checked under it as well as under the installed one.

    ``on_target=False`` means this machine is not the recipe's target (e.g. validating an H100
    recipe on a laptop): transformers refuses bf16/fp16 without a GPU, so only those device-bound
    fields are switched to their CPU values for the construction, and the notes say so.

    GRPOConfig derives the generation batch from the current process's world size; when that is
    not the target's, the target's generation batch is passed explicitly so TRL checks the same
    arithmetic the target will.
    """
    from trl import GRPOConfig

    check_field_names(kwargs, transformers_version)
    check_choices(kwargs)
    built = dict(kwargs)
    notes: list[str] = []
    if transformers_version is not None and Version(transformers_version) != Version(installed_transformers()):
        notes.append(
            f"Field names checked under transformers {transformers_version} (the target, {STACK_FILE.name}) as well "
            f"as the installed {installed_transformers()}."
        )
    if not on_target:
        neutral = {"bf16": False, "fp16": False, "tf32": None, "use_cpu": True}
        changed = {key: value for key, value in neutral.items() if built.get(key) != value and key in built}
        if changed or not built.get("use_cpu"):
            built.update(neutral)
            notes.append(
                "Validated on a machine without the target's GPU: built a real GRPOConfig with "
                + ", ".join(f"{key}={value}" for key, value in neutral.items())
                + "; every other field as emitted."
            )
    current_world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if target_world_size != current_world_size and GRPOFields(kwargs).generation_batch_size is None:
        fields = GRPOFields(kwargs)
        steps = fields.steps_per_generation or fields.gradient_accumulation_steps
        built.pop("steps_per_generation", None)
        built["generation_batch_size"] = fields.per_device_train_batch_size * target_world_size * steps
        notes.append(
            f"Built as {current_world_size} process(es) with generation_batch_size={built['generation_batch_size']}, "
            f"the target's generation batch for {target_world_size} training processes."
        )
    try:
        config = GRPOConfig(output_dir=output_dir, **built)
    except (ValueError, TypeError) as exc:
        raise SkillError(f"The installed TRL rejected the config: {exc}", "Change the field it names.") from None
    return config, notes


def recipe_grpo_config(recipe: GRPORecipe, output_dir: str = "grpo-output") -> Any:
    """A real ``trl.GRPOConfig`` of a recipe; on a machine that is not the target, device fields are neutralised."""
    config, _notes = build_grpo_config(
        recipe.trl,
        output_dir,
        on_target=target_is_this_machine(recipe.hardware),
        target_world_size=recipe.launch.training_processes,
    )
    return config
