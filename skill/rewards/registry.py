"""Build reward functions from RewardSpecs.

A spec names either a reward registered here (the project's library) or a user function
``"module:function"``. Every function must follow TRL's reward contract
``f(prompts, completions, completion_ids=None, **kwargs) -> list[float | None]``: TRL passes every
dataset column plus ``trainer_state``, ``log_extra`` and ``log_metric`` as keywords, so a function
without ``**kwargs`` would raise inside the trainer; it is refused here instead.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any

from skill.errors import SkillError
from skill.rewards.spec import RewardSpec

RewardFunction = Callable[..., list[float | None]]

# name -> builder(params) -> reward function. The project's reward library registers here.
REGISTRY: dict[str, Callable[..., RewardFunction]] = {}


def check_reward_signature(function: Callable[..., Any], label: str) -> None:
    """Refuse a function TRL could not call with its keyword arguments.

    >>> def good(prompts, completions, **kwargs): return [0.0 for _ in completions]
    >>> check_reward_signature(good, "good")
    >>> def bad(prompts, completions): return [0.0]
    >>> check_reward_signature(bad, "bad")
    Traceback (most recent call last):
    ...
    skill.errors.SkillError: Reward 'bad' does not accept **kwargs; ...
    """
    parameters = inspect.signature(function).parameters.values()
    if not any(parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in parameters):
        raise SkillError(
            f"Reward {label!r} does not accept **kwargs; TRL passes dataset columns, trainer_state, log_extra and "
            "log_metric as keywords, so it would fail inside the trainer.",
            "Define it as f(prompts, completions, completion_ids=None, **kwargs).",
        )


def _load_user_function(name: str) -> RewardFunction:
    module_name, function_name = name.split(":", 1)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise SkillError(f"Cannot import reward module {module_name!r}: {exc}.", "Check the module path.") from None
    function = getattr(module, function_name, None)
    if not callable(function):
        raise SkillError(f"{module_name!r} has no function {function_name!r}.", "Send 'module:function'.")
    return function


def build_reward_function(spec: RewardSpec) -> RewardFunction:
    """The callable for one spec, with a ``__name__`` unique to it (TRL logs ``rewards/<__name__>/mean``)."""
    if ":" in spec.name:
        function = _load_user_function(spec.name)
    elif spec.name in REGISTRY:
        function = REGISTRY[spec.name](**spec.params)
    else:
        available = ", ".join(sorted(REGISTRY)) or "none yet"
        raise SkillError(
            f"Reward {spec.name!r} is not in the registry (available: {available}).",
            "Send a registered name or a user function 'module:function'.",
        )
    check_reward_signature(function, spec.name)
    return function


def build_reward_functions(specs: list[RewardSpec]) -> list[RewardFunction]:
    """The callables for a recipe's reward specs, in order."""
    return [build_reward_function(spec) for spec in specs]
