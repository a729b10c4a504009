"""Build reward functions from RewardSpecs: the project's registry, or allowed user functions.

A spec names a registered reward (the project's library) or a user function ``"module:function"``.
User functions load only from an allowlist: the project's own reward modules plus the modules and
directories the user configures (``GRPO_RLVR_REWARD_MODULES``: comma-separated module prefixes;
``GRPO_RLVR_REWARD_PATHS``: directories whose files may define rewards). Every function must
follow TRL's contract ``f(prompts, completions, completion_ids=None, **kwargs)``: TRL passes every
dataset column plus ``trainer_state``, ``log_extra`` and ``log_metric`` as keywords, so a function
without ``**kwargs`` would raise inside the trainer; it is refused here instead.

A registered builder documents itself once: its docstring's first paragraph is the reward's summary,
and each parameter's type, default and meaning live on its signature (``skill.rewards.params``).

May import: ``skill.rewards`` (base, params, spec), ``skill.errors``.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skill.errors import SkillError
from skill.rewards.base import GuardedUserReward, RewardFunction
from skill.rewards.params import RewardParam, builder_params, param_problems
from skill.rewards.spec import RewardRole, RewardSpec

ALLOWED_MODULES_ENV = "GRPO_RLVR_REWARD_MODULES"
ALLOWED_PATHS_ENV = "GRPO_RLVR_REWARD_PATHS"
PROJECT_REWARD_PACKAGE = "skill.rewards"


@dataclass(frozen=True)
class RegisteredReward:
    """A reward of the project's library: how to build it, what it is for and what it takes."""

    name: str
    build: Callable[..., RewardFunction]
    roles: tuple[RewardRole, ...]
    summary: str
    params: dict[str, RewardParam] = field(default_factory=dict)

    def describe_params(self) -> str:
        """The params for an error message: each with its meaning and default."""
        return "; ".join(param.describe() for param in self.params.values()) or "none"


REGISTRY: dict[str, RegisteredReward] = {}
# Modules that register rewards when imported; imported on first use so the server starts fast.
LIBRARY_MODULES = (
    "skill.rewards.text",
    "skill.rewards.structured",
    "skill.rewards.length",
    "skill.rewards.code.unit_tests",
    "skill.rewards.judge.reward",
)


def summary_of(build: Callable[..., Any]) -> str:
    """A builder's summary: the first paragraph of its docstring, on one line.

    >>> def build(): ...
    >>> build.__doc__ = "Score structure\\n    only.\\n\\n    More detail."
    >>> summary_of(build)
    'Score structure only.'
    """
    return " ".join((inspect.getdoc(build) or "").split("\n\n", 1)[0].split())


def register(name: str, *, roles: tuple[RewardRole, ...]):
    """Decorator: add a reward builder ``build(**params) -> RewardFunction`` to the registry.

    The summary and the params come from the builder itself (docstring and annotated signature).
    """

    def decorate(build: Callable[..., RewardFunction]) -> Callable[..., RewardFunction]:
        REGISTRY[name] = RegisteredReward(name, build, roles, summary_of(build), builder_params(build))
        return build

    return decorate


def load_library() -> dict[str, RegisteredReward]:
    """Import every library module (each registers its rewards) and return the registry."""
    for module in LIBRARY_MODULES:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:  # a real missing dependency, not a module not written yet
                raise
    return REGISTRY


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


def _allowed(module_name: str) -> bool:
    prefixes = [PROJECT_REWARD_PACKAGE]
    prefixes += [item.strip() for item in os.environ.get(ALLOWED_MODULES_ENV, "").split(",") if item.strip()]
    if any(module_name == prefix or module_name.startswith(prefix + ".") for prefix in prefixes):
        return True
    top = module_name.split(".")[0]
    spec = importlib.util.find_spec(top) if top else None  # a top-level lookup imports nothing
    if spec is None or spec.origin is None:
        return False
    origin = Path(spec.origin).resolve()
    directories = [Path(item).resolve() for item in os.environ.get(ALLOWED_PATHS_ENV, "").split(os.pathsep) if item]
    return any(origin.is_relative_to(directory) for directory in directories)


def require_allowed(module_name: str) -> None:
    """Refuse a user reward module that is not on the allowlist, before anything of it is imported or read.

    Only a top-level lookup is made (``importlib.util.find_spec`` of the first name part), which imports
    nothing.

    >>> require_allowed("skill.rewards.text")
    >>> require_allowed("os")
    Traceback (most recent call last):
    ...
    skill.errors.SkillError: Reward module 'os' is not on the allowlist. ...
    """
    try:
        allowed = _allowed(module_name)
    except (ImportError, ValueError):
        allowed = False
    if not allowed:
        raise SkillError(
            f"Reward module {module_name!r} is not on the allowlist.",
            f"Add it to {ALLOWED_MODULES_ENV} (module prefixes) or its directory to {ALLOWED_PATHS_ENV}.",
        )


def _load_user_function(name: str) -> Callable[..., Any]:
    module_name, function_name = name.split(":", 1)
    require_allowed(module_name)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise SkillError(f"Cannot import reward module {module_name!r}: {exc}.", "Check the module path.") from None
    function = getattr(module, function_name, None)
    if not callable(function):
        raise SkillError(f"{module_name!r} has no function {function_name!r}.", "Send 'module:function'.")
    return function


def registered_reward(spec: RewardSpec) -> RegisteredReward:
    """The registry entry a spec names, refusing an unknown name or a role the reward cannot play."""
    registry = load_library()
    if spec.name not in registry:
        raise SkillError(
            f"Reward {spec.name!r} is not in the registry.",
            f"Send one of: {', '.join(sorted(registry))}; or a user function 'module:function'.",
        )
    entry = registry[spec.name]
    if spec.role not in entry.roles:
        raise SkillError(
            f"Reward {spec.name!r} cannot play role {spec.role!r}.",
            f"Send role {' or '.join(repr(role) for role in entry.roles)}.",
        )
    return entry


def build_reward_function(spec: RewardSpec) -> Callable[..., list[float | None]]:
    """The callable for one spec. Registry rewards are named after the spec; user functions keep theirs."""
    if ":" in spec.name:
        function = _load_user_function(spec.name)
        check_reward_signature(function, spec.name)
        return GuardedUserReward(function)
    entry = registered_reward(spec)
    problems = param_problems(entry.params, spec.params)
    try:
        if problems:
            raise TypeError("; ".join(problems))
        function = entry.build(**spec.params)
    except TypeError as exc:
        raise SkillError(
            f"Bad params for reward {spec.name!r}: {exc}.", f"Its params: {entry.describe_params()}."
        ) from None
    function.__name__ = function.__qualname__ = spec.name
    return function


def build_reward_functions(specs: list[RewardSpec]) -> list[Callable[..., list[float | None]]]:
    """The callables for a recipe's reward specs, in order, each with a unique ``__name__``
    (TRL logs ``rewards/<__name__>/mean``; two specs of one reward get ``name``, ``name_2``, ...)."""
    functions = []
    seen: dict[str, int] = {}
    for spec in specs:
        function = build_reward_function(spec)
        base = getattr(function, "__name__", spec.name)
        seen[base] = seen.get(base, 0) + 1
        if seen[base] > 1:
            function.__name__ = f"{base}_{seen[base]}"
        functions.append(function)
    return functions
