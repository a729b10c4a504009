"""A recipe's GRPOConfig keywords read as TRL reads them: a field the recipe leaves out has the target
``GRPOConfig``'s own default, read from ``grpo_config_defaults.json`` and never restated in code.

``grpo_config_defaults.json`` is generated from the installed ``trl.GRPOConfig`` (``make generate``) with the
field names of the transformers the recipe targets (``target_stack.txt``); a drift test checks it in both
environments: ``.venv`` (newest transformers) and ``.venv-target`` (the target's). The two differ only by the
renames of ``FIELD_RENAMES``, the one table of field names that depend on the transformers version.

Every read of ``recipe.trl`` goes through ``GRPOFields`` (tests/test_architecture.py refuses another), so a
default a field takes when left out is stated in exactly one place: TRL's. Imports nothing from the project.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

DEFAULTS_FILE = Path(__file__).with_name("grpo_config_defaults.json")


class Rename(NamedTuple):
    """A GRPOConfig field renamed by transformers: ``new`` exists from ``since``; ``old`` is what earlier
    versions read and stays a deprecated alias afterwards (transformers >= 5.23 mirrors it onto ``new`` when
    the arguments are built; "will be removed in v6")."""

    old: str
    new: str
    since: str


# The one table of field names that depend on the transformers version (read in training_args.py of 5.17,
# 5.22, 5.23 and 5.24). Every other GRPOConfig field of TRL 1.16 is the same on all of them.
FIELD_RENAMES = (
    Rename("gradient_checkpointing", "activation_checkpointing", "5.23"),
    Rename("gradient_checkpointing_kwargs", "activation_checkpointing_kwargs", "5.23"),
)


@functools.cache
def grpo_config_defaults() -> dict[str, Any]:
    """Every field of the target's ``GRPOConfig`` and the value it takes when left out.

    >>> defaults = grpo_config_defaults()
    >>> defaults["beta"], defaults["loss_type"], defaults["max_completion_length"]
    (0.0, 'dapo', 512)
    """
    return json.loads(DEFAULTS_FILE.read_text())


def installed_defaults(transformers_version: str) -> dict[str, Any]:
    """The installed ``trl.GRPOConfig``'s defaults under the field names ``transformers_version`` reads: what
    ``make generate`` writes to ``grpo_config_defaults.json`` for the target's version (imports trl)."""
    import dataclasses
    import enum

    from packaging.version import Version
    from trl import GRPOConfig

    defaults: dict[str, Any] = {}
    for field in dataclasses.fields(GRPOConfig):
        if not field.init:
            continue
        value = field.default_factory() if field.default is dataclasses.MISSING else field.default  # type: ignore[misc]
        defaults[field.name] = value.value if isinstance(value, enum.Enum) else value
    for rename in FIELD_RENAMES:
        if Version(transformers_version) < Version(rename.since):
            defaults.pop(rename.new, None)
    return dict(sorted(defaults.items()))


def _renamed(name: str) -> Rename | None:
    return next((rename for rename in FIELD_RENAMES if name in (rename.old, rename.new)), None)


class GRPOFields:
    """A read-only view of GRPOConfig keywords: ``view.beta`` is the recipe's value, or TRL's default when the
    recipe leaves it out. Either name of a renamed field reads whichever name the recipe wrote.

    >>> view = GRPOFields({"beta": 0.01, "gradient_checkpointing": True})
    >>> view.beta, view.loss_type, view.activation_checkpointing
    (0.01, 'dapo', True)
    >>> view.is_set("beta"), view.is_set("loss_type")
    (True, False)
    >>> view.learning_rat
    Traceback (most recent call last):
    ...
    AttributeError: 'learning_rat' is not a GRPOConfig field
    """

    # The fields the project reads, with the type it relies on (tests/test_grpo_fields.py checks each against
    # GRPOConfig's declaration); any other field reads the same way, untyped.
    beta: float
    bf16: bool | None
    ds3_gather_for_generation: bool
    epsilon: float
    epsilon_high: float | None
    eval_steps: float | None
    fp16: bool
    generation_batch_size: int | None
    gradient_accumulation_steps: int
    gradient_checkpointing: bool
    activation_checkpointing: bool
    importance_sampling_level: str
    learning_rate: float
    logging_steps: float
    loss_type: str
    mask_truncated_completions: bool
    max_completion_length: int | None
    max_steps: int
    model_init_kwargs: dict[str, Any] | None
    multi_objective_aggregation: str
    num_generations: int | None
    num_generations_eval: int | None
    num_iterations: int
    num_train_epochs: float
    optim: str
    per_device_eval_batch_size: int
    per_device_train_batch_size: int
    report_to: str | list[str] | None
    reward_weights: list[float] | None
    scale_rewards: str | bool
    save_steps: float
    save_strategy: str
    seed: int
    steps_per_generation: int | None
    temperature: float
    trackio_space_id: str | None
    use_cpu: bool
    use_vllm: bool
    vllm_enable_sleep_mode: bool
    vllm_gpu_memory_utilization: float
    vllm_group_port: int
    vllm_importance_sampling_correction: bool
    vllm_importance_sampling_mode: str
    vllm_max_model_length: int | None
    vllm_mode: str
    vllm_server_base_url: str | None
    vllm_server_host: str
    vllm_server_port: int
    vllm_server_timeout: float
    vllm_tensor_parallel_size: int

    __slots__ = ("_kwargs",)

    def __init__(self, kwargs: Mapping[str, Any]) -> None:
        object.__setattr__(self, "_kwargs", kwargs)

    def __getattr__(self, name: str) -> Any:
        kwargs, defaults = self._kwargs, grpo_config_defaults()
        rename = _renamed(name)
        names = (rename.new, rename.old) if rename else (name,)
        for written in names:
            if written in kwargs:
                return kwargs[written]
        for known in reversed(names):  # the target's name first: it is the one the defaults file holds
            if known in defaults:
                return defaults[known]
        raise AttributeError(f"{name!r} is not a GRPOConfig field")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("GRPOFields is read-only: write the recipe's trl dict where the recipe is built")

    def is_set(self, name: str) -> bool:
        """Whether the recipe states the field (under either name of a rename)."""
        rename = _renamed(name)
        return any(written in self._kwargs for written in ((rename.new, rename.old) if rename else (name,)))

    def stated(self) -> dict[str, Any]:
        """The keywords as the recipe states them (a copy), for a real ``GRPOConfig`` or a rendered script."""
        return dict(self._kwargs)
