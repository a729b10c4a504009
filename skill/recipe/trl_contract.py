"""What the installed TRL accepts: GRPOConfig fields, the enumerated values its trainer handles,
and a real ``GRPOConfig`` built from a recipe's kwargs.

``GRPOConfig`` itself accepts ``loss_type="nonsense"`` and fails only inside training, so the
enumerations are read from the installed trainer's source: every string literal that
``grpo_trainer.py`` / ``grpo_config.py`` compare a field against is a value it supports.
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

from skill.errors import SkillError

ENUMERATED_FIELDS = (
    "loss_type",
    "scale_rewards",
    "importance_sampling_level",
    "vllm_mode",
    "multi_objective_aggregation",
    "vllm_importance_sampling_mode",
)

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
    found: dict[str, set[str]] = {name: set() for name in ENUMERATED_FIELDS}
    for module in ("trl.trainer.grpo_trainer", "trl.trainer.grpo_config"):
        tree = ast.parse(_trl_source(module).read_text())
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


def check_field_names(kwargs: dict[str, Any]) -> None:
    """Refuse any kwarg that is not a field of the installed GRPOConfig, naming close matches.

    >>> check_field_names({"learning_rate": 1e-6})
    >>> check_field_names({"max_prompt_length": 512})
    Traceback (most recent call last):
    ...
    skill.errors.SkillError: 'max_prompt_length' is not a GRPOConfig field in the installed TRL ...
    """
    fields = grpo_config_fields()
    unknown = [name for name in kwargs if name not in fields]
    if not unknown:
        return
    problems = []
    for name in unknown:
        close = difflib.get_close_matches(name, fields, n=3, cutoff=0.6)
        hint = f" Close matches: {', '.join(close)}." if close else ""
        note = f" {REMOVED_FIELDS[name]}" if name in REMOVED_FIELDS else ""
        problems.append(
            f"{name!r} is not a GRPOConfig field in the installed TRL {installed_versions()['trl']}.{note}{hint}"
        )
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
    kwargs: dict[str, Any], output_dir: str, *, on_target: bool, target_world_size: int = 1
) -> tuple[Any, list[str]]:
    """Construct a real ``trl.GRPOConfig``; returns it and notes on anything neutralised.

    ``on_target=False`` means this machine is not the recipe's target (e.g. validating an H100
    recipe on a laptop): transformers refuses bf16/fp16 without a GPU, so only those device-bound
    fields are switched to their CPU values for the construction, and the notes say so.

    GRPOConfig derives the generation batch from the current process's world size; when that is
    not the target's, the target's generation batch is passed explicitly so TRL checks the same
    arithmetic the target will.
    """
    from trl import GRPOConfig

    check_field_names(kwargs)
    check_choices(kwargs)
    built = dict(kwargs)
    notes: list[str] = []
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
    if target_world_size != current_world_size and built.get("generation_batch_size") is None:
        per_device = built.get("per_device_train_batch_size", 8)
        steps = built.pop("steps_per_generation", None) or built.get("gradient_accumulation_steps", 1)
        built["generation_batch_size"] = per_device * target_world_size * steps
        notes.append(
            f"Built as {current_world_size} process(es) with generation_batch_size={built['generation_batch_size']}, "
            f"the target's generation batch for {target_world_size} training processes."
        )
    try:
        config = GRPOConfig(output_dir=output_dir, **built)
    except (ValueError, TypeError) as exc:
        raise SkillError(f"The installed TRL rejected the config: {exc}", "Change the field it names.") from None
    return config, notes
