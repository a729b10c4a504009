"""Build reward functions from RewardSpecs: the project's registry, or allowed user functions.

A spec names a registered reward (the project's library) or a user function ``"module:function"``.
User functions load only from an allowlist: the project's own reward modules plus the modules and
directories the user configures (``GRPO_RLVR_REWARD_MODULES``: comma-separated module prefixes;
``GRPO_RLVR_REWARD_PATHS``: directories whose files may define rewards, put on the import path as they
load). A user function is written as TRL's docs write rewards, e.g. ``def accuracy(completions, solution,
**kwargs)``, sync or ``async``, a function, a callable instance or a ``functools.partial``. TRL calls it
by keyword with ``prompts``, ``completions``, ``completion_ids``, every dataset column, ``trainer_state``,
``log_extra`` and ``log_metric``; a function TRL could not call that way is refused when it is loaded
(:func:`check_reward_signature`), not found out inside the trainer.

Every registered reward pickles as its spec (TRL forwards rewards to rollout workers in other processes):
the receiving process rebuilds it from the registry (:func:`rebuild_reward`).

A registered builder documents itself once: its docstring's first paragraph is the reward's summary,
and each parameter's type, default and meaning live on its signature (``skill.rewards.params``).

May import: ``skill.rewards`` (base, params, spec), ``skill.errors``.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skill.absolute_paths import REWARD_PATHS_ENV
from skill.errors import SkillError
from skill.rewards.base import (
    AsyncGuardedUserReward,
    GuardedUserReward,
    RewardFunction,
    is_async_reward,
)
from skill.rewards.params import RewardParam, builder_params, param_problems
from skill.rewards.spec import RewardRole, RewardSpec
from skill.rewards.trl_inputs import TRL_ALWAYS_PASSES, TRL_WITHHELD_COLUMNS, check_column_names

ALLOWED_MODULES_ENV = "GRPO_RLVR_REWARD_MODULES"
ALLOWED_PATHS_ENV = REWARD_PATHS_ENV  # declared where child processes get it absolute
PROJECT_REWARD_PACKAGE = "skill.rewards"
# Where a caller reads every library reward, its params, the columns it reads and an example (scripts/generate.py).
CATALOGUE = "references/reward-functions.md, served as grpo://references/reward-functions.md"


@dataclass(frozen=True)
class RegisteredReward:
    """A reward of the project's library: how to build it, what it is for, what it takes, and the facts other
    parts read about it, declared once at registration (``register``)."""

    name: str
    build: Callable[..., RewardFunction]
    roles: tuple[RewardRole, ...]
    summary: str
    params: dict[str, RewardParam] = field(default_factory=dict)
    reads: str | None = None  # the dataset column it compares against when no *_column param names one
    reasoning: str | None = None  # why its completions need room to work before answering (a long budget)
    runs_code: bool = False  # it executes model-written code (the code probes apply)
    wraps: str | None = None  # the param holding another reward's spec, which the fingerprint follows

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


def register(
    name: str,
    *,
    roles: tuple[RewardRole, ...],
    reads: str | None = None,
    reasoning: str | None = None,
    runs_code: bool = False,
    wraps: str | None = None,
):
    """Decorator: add a reward builder ``build(**params) -> RewardFunction`` to the registry, with the facts the
    rest of the project reads about the reward (``RegisteredReward``): nothing else keeps a list of reward names.

    The summary and the params come from the builder itself (docstring and annotated signature).
    """

    def decorate(build: Callable[..., RewardFunction]) -> Callable[..., RewardFunction]:
        summary, params = summary_of(build), builder_params(build)
        REGISTRY[name] = RegisteredReward(name, build, roles, summary, params, reads, reasoning, runs_code, wraps)
        return build

    return decorate


def library_entry(name: str) -> RegisteredReward | None:
    """The library's entry for a reward name; None for a user function (``module:function``) or an unknown name."""
    return None if ":" in name else load_library().get(name)


def load_library() -> dict[str, RegisteredReward]:
    """Import every library module (each registers its rewards) and return the registry."""
    for module in LIBRARY_MODULES:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:  # a real missing dependency, not a module not written yet
                raise
    return REGISTRY


def signature_problems(function: Callable[..., Any], columns: Collection[str] | None = None) -> list[str]:
    """Why TRL could not call ``function`` by keyword; empty when it can. ``columns``: the dataset's columns
    when known (a required parameter must then be one of them or something TRL passes).

    >>> def accuracy(completions, solution, **kwargs): ...
    >>> signature_problems(accuracy), signature_problems(accuracy, columns=["answer"])
    ([], ["it requires 'solution', which is not a dataset column (columns: answer)"])
    >>> def singular(prompt, completion, **kwargs): ...
    >>> signature_problems(singular)[0]
    "it requires 'prompt', which TRL never passes (it passes prompts=, completions=, plural)"
    """
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):  # a builtin without a signature: the guard reports a failing call
        return []
    problems = []
    if not any(parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in parameters):
        problems.append(
            "it does not accept **kwargs, and TRL passes every dataset column, trainer_state, log_extra and "
            "log_metric as keywords"
        )
    required = [parameter for parameter in parameters if parameter.default is inspect.Parameter.empty]
    for parameter in required:
        name = parameter.name
        if parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
            problems.append(f"it takes {name!r} positionally only, and TRL passes everything by keyword")
        elif parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        elif name in TRL_WITHHELD_COLUMNS - TRL_ALWAYS_PASSES:
            problems.append(f"it requires {name!r}, which TRL never passes (it passes prompts=, completions=, plural)")
        elif name == "environments":
            problems.append("it requires 'environments', which TRL passes only with environment factories (none here)")
        elif columns is not None and name not in TRL_ALWAYS_PASSES and name not in columns:
            problems.append(
                f"it requires {name!r}, which is not a dataset column (columns: {', '.join(sorted(columns)) or 'none'})"
            )
    return problems


def check_reward_signature(function: Callable[..., Any], label: str, columns: Collection[str] | None = None) -> None:
    """Refuse, with one message, a function TRL could not call with its keyword arguments.

    >>> def good(completions, **kwargs): return [0.0 for _ in completions]
    >>> check_reward_signature(good, "good")
    >>> def bad(prompts, completions): return [0.0]
    >>> check_reward_signature(bad, "bad")
    Traceback (most recent call last):
    ...
    skill.errors.SkillError: Reward 'bad' cannot be called as TRL calls rewards: it does not accept **kwargs, ...
    """
    problems = signature_problems(function, columns)
    if problems:
        raise SkillError(
            f"Reward {label!r} cannot be called as TRL calls rewards: {'; '.join(problems)}.",
            "Define it as TRL's docs do, naming only what it reads and ending with **kwargs: "
            "def accuracy(completions, solution, **kwargs) -> list[float | None], where solution is a dataset "
            "column (TRL passes prompts, completions, completion_ids, every column, trainer_state, log_extra and "
            "log_metric by keyword).",
        )


def reward_paths() -> list[Path]:
    """The directories of GRPO_RLVR_REWARD_PATHS, in order."""
    return [Path(item).resolve() for item in os.environ.get(ALLOWED_PATHS_ENV, "").split(os.pathsep) if item]


def reward_directory(module_name: str) -> Path | None:
    """The GRPO_RLVR_REWARD_PATHS directory holding the module's file (``name.py`` or ``name/__init__.py``).

    >>> reward_directory("no_such_reward_module") is None
    True
    """
    top = module_name.split(".")[0]
    for directory in reward_paths():
        if (directory / f"{top}.py").is_file() or (directory / top / "__init__.py").is_file():
            return directory
    return None


def _allowed(module_name: str) -> bool:
    prefixes = [PROJECT_REWARD_PACKAGE]
    prefixes += [item.strip() for item in os.environ.get(ALLOWED_MODULES_ENV, "").split(",") if item.strip()]
    if any(module_name == prefix or module_name.startswith(prefix + ".") for prefix in prefixes):
        return True
    if reward_directory(module_name) is not None:
        return True
    # An importable module (PYTHONPATH, installed) whose file lies inside a listed directory.
    top = module_name.split(".")[0]
    spec = importlib.util.find_spec(top) if top else None  # a top-level lookup imports nothing
    if spec is None or spec.origin is None:
        return False
    origin = Path(spec.origin).resolve()
    return any(origin.is_relative_to(directory) for directory in reward_paths())


def require_allowed(module_name: str) -> None:
    """Refuse a user reward module that is not on the allowlist, before anything of it is imported or read: its
    prefix in GRPO_RLVR_REWARD_MODULES (an installed module), or its file in a GRPO_RLVR_REWARD_PATHS directory
    (which is enough: the directory is put on the import path when the reward loads).

    >>> require_allowed("skill.rewards.text")
    >>> require_allowed("os")
    Traceback (most recent call last):
    ...
    skill.errors.SkillError: Reward module 'os' is not on the allowlist: ...
    """
    try:
        if _allowed(module_name):
            return
    except (ImportError, ValueError):
        pass
    top = module_name.split(".")[0]
    searched = ", ".join(str(path) for path in reward_paths()) or "not set"
    raise SkillError(
        f"Reward module {module_name!r} is not on the allowlist: no directory of {ALLOWED_PATHS_ENV} "
        f"({searched}) holds {top}.py or {top}/__init__.py, and no prefix of {ALLOWED_MODULES_ENV} names it.",
        f"Add the directory holding {top}.py to {ALLOWED_PATHS_ENV} (that alone is enough), or, for an installed "
        f"package, its name to {ALLOWED_MODULES_ENV}.",
    )


def allow_user_module(module_name: str) -> None:
    """The allowlist check, then the module's reward directory onto the import path (last, so it shadows nothing
    installed), refusing a file whose name an installed module already takes. Nothing of the module is imported."""
    require_allowed(module_name)
    directory = reward_directory(module_name)
    if directory is None:
        return
    if str(directory) not in sys.path:
        sys.path.append(str(directory))
    top = module_name.split(".")[0]
    spec = importlib.util.find_spec(top)
    origin = Path(spec.origin).resolve() if spec is not None and spec.origin else None
    if origin is not None and not origin.is_relative_to(directory):
        raise SkillError(
            f"Reward module {top!r} in {directory} has the name of an installed module ({origin}).",
            f"Rename {top}.py (and the reward's 'module:function' name) to something no installed package uses.",
        )


def _load_user_function(name: str) -> Callable[..., Any]:
    module_name, function_name = name.split(":", 1)
    allow_user_module(module_name)
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
            f"Send one of: {', '.join(sorted(registry))} (each with its params, the columns it reads and an example: "
            f"{CATALOGUE}); or a user function 'module:function'.",
        )
    entry = registry[spec.name]
    if spec.role not in entry.roles:
        raise SkillError(
            f"Reward {spec.name!r} cannot play role {spec.role!r}.",
            f"Send role {' or '.join(repr(role) for role in entry.roles)}.",
        )
    return entry


def rebuild_reward(spec: dict[str, Any]) -> Callable[..., list[float | None]]:
    """A registered reward built again from its spec: what a pickled reward becomes in another process.

    >>> import pickle
    >>> reward = build_reward_function(RewardSpec(name="format", role="format", params={"pattern": "number"}))
    >>> pickle.loads(pickle.dumps(reward))(["", ""], ["12", "twelve"])
    [1.0, 0.0]
    """
    return build_reward_function(RewardSpec.model_validate(spec))


def build_reward_function(
    spec: RewardSpec, columns: Collection[str] | None = None
) -> Callable[..., list[float | None]]:
    """The callable for one spec. Registry rewards are named after the spec; user functions keep theirs.

    ``columns``, when known, are the dataset's columns: a user function requiring another one is refused.
    """
    if ":" in spec.name:
        function = _load_user_function(spec.name)
        check_reward_signature(function, spec.name, columns)
        return AsyncGuardedUserReward(function) if is_async_reward(function) else GuardedUserReward(function)
    entry = registered_reward(spec)
    problems = param_problems(entry.params, spec.params)
    try:
        if problems:
            raise TypeError("; ".join(problems))
        function = entry.build(**spec.params)
    except TypeError as exc:
        raise SkillError(
            f"Bad params for reward {spec.name!r}: {exc}.",
            f"Its params: {entry.describe_params()} (with examples: {CATALOGUE}).",
        ) from None
    function.__name__ = function.__qualname__ = spec.name
    function.rebuild = (rebuild_reward, (spec.model_dump(),))
    return function


def build_reward_functions(
    specs: list[RewardSpec], columns: Collection[str] | None = None
) -> list[Callable[..., list[float | None]]]:
    """The callables for a recipe's reward specs, in order, each with a unique ``__name__``
    (TRL logs ``rewards/<__name__>/mean``; two specs of one reward get ``name``, ``name_2``, ...)."""
    if columns is not None:
        check_column_names(columns)  # a column TRL cannot pass would fail the first batch, or reach no reward
    functions = []
    seen: dict[str, int] = {}
    for spec in specs:
        function = build_reward_function(spec, columns)
        base = getattr(function, "__name__", spec.name)
        seen[base] = seen.get(base, 0) + 1
        if seen[base] > 1:
            function.__name__ = f"{base}_{seen[base]}"
        functions.append(function)
    return functions
