"""Reward fingerprints: everything that decides what a reward set scores, hashed without importing it.

One part per reward: its spec with the weight TRL will use (``reward_weights``, or 1.0 each when
unset), the source of every file its code imports from outside the standard library and
site-packages (followed transitively through ``import`` statements read with ``ast``; parent
packages' ``__init__`` files included, since importing a submodule runs them), the versions of the
distributions it imports from site-packages, and the versions of Python and TRL. Modules are located
the way a fresh interpreter would find them (``sys.meta_path`` finders, never ``sys.modules``), so
the fingerprint is of the files on disk, not of what this process happened to import earlier.

A user reward's module is checked against the allowlist before anything about it is read; nothing
here imports user code, so read-only tools may call it. The project's own library rewards are located
through the registry (the project's code, imported as usual).

Owns: ``reward_fingerprint``, ``verifier_fingerprint``, ``effective_rewards``, ``source_closure``,
``find_module``. May import: ``rewards`` (registry, spec), ``errors``.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.metadata
import json
import platform
import sys
import sysconfig
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path

from skill.errors import SkillError
from skill.python_source import parse
from skill.rewards.registry import allow_user_module, library_entry, registered_reward
from skill.rewards.spec import RewardSpec

ALWAYS_VERSIONED = ("trl",)  # how TRL sums the rewards is part of what training optimises


def effective_rewards(rewards: list[RewardSpec], reward_weights: Sequence[float] | None) -> list[RewardSpec]:
    """The specs with the weights TRL will use: ``reward_weights`` when set, else 1.0 each (TRL's default).

    >>> specs = [RewardSpec(name="format", role="format", weight=0.2), RewardSpec(name="math", role="correctness")]
    >>> [s.weight for s in effective_rewards(specs, [1.0, 0.0])], [s.weight for s in effective_rewards(specs, None)]
    ([1.0, 0.0], [1.0, 1.0])
    """
    weights = [1.0] * len(rewards) if reward_weights is None else [float(weight) for weight in reward_weights]
    if len(weights) != len(rewards):
        raise SkillError(
            f"reward_weights has {len(weights)} entries for {len(rewards)} rewards.",
            "Send one weight per reward spec (or set the weights on the specs).",
        )
    return [spec.model_copy(update={"weight": weight}) for spec, weight in zip(rewards, weights, strict=True)]


def find_module(name: str) -> ModuleSpec | None:
    """Where a fresh interpreter would find module ``name``, found without importing it or its parents.

    >>> find_module("skill.rewards.fingerprint").origin.endswith("fingerprint.py")
    True
    >>> find_module("skill.no_such_module") is None
    True
    """
    search: list[str] | None = None
    spec = None
    parts = name.split(".")
    for index in range(len(parts)):
        if index and search is None:  # the parent is a module, not a package
            return None
        spec = _find(".".join(parts[: index + 1]), search)
        if spec is None:
            return None
        search = list(spec.submodule_search_locations) if spec.submodule_search_locations is not None else None
    return spec


def _find(full_name: str, search: list[str] | None) -> ModuleSpec | None:
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        if find is None:
            continue
        try:
            spec = find(full_name, search)
        except (ImportError, ValueError, TypeError):
            spec = None
        if spec is not None:
            return spec
    return None


@functools.cache
def _library_roots() -> tuple[Path, ...]:
    paths = sysconfig.get_paths()
    keys = ("stdlib", "platstdlib", "purelib", "platlib")
    return tuple(Path(paths[key]).resolve() for key in keys if paths.get(key))


def _is_local(path: Path) -> bool:
    """A file of the user's or the project's own, not of the standard library or an installed distribution."""
    resolved = path.resolve()
    if {"site-packages", "dist-packages"} & set(resolved.parts):
        return False
    return not any(resolved.is_relative_to(root) for root in _library_roots())


def _imported_names(path: Path, module: str, is_package: bool) -> set[str]:
    """Every module name an ``import`` in the file may load (functions and conditional blocks included)."""
    try:
        tree = parse(path.read_bytes())
    except (SyntaxError, ValueError):
        return set()
    package = module if is_package else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".") if package else []
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            if base:
                names.add(base)
                names.update(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
    return names


def source_closure(modules: list[str]) -> tuple[dict[str, str], set[str]]:
    """SHA-256 of every local file the modules import, transitively; and the top-level names of the
    installed distributions they import (for their versions).

    >>> hashes, installed = source_closure(["skill.rewards.text"])
    >>> {"skill.rewards.text", "skill.rewards.base", "skill.rewards", "skill"} <= set(hashes)
    True
    """
    hashes: dict[str, str] = {}
    installed: set[str] = set()
    pending = list(modules)
    seen: set[str] = set()
    while pending:
        name = pending.pop()
        parents = [".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)]
        for candidate in [name, *parents]:
            if candidate in seen:
                continue
            seen.add(candidate)
            spec = find_module(candidate)
            if spec is None or not spec.has_location or not spec.origin:
                continue
            origin = Path(spec.origin)
            if not origin.is_file():
                continue
            if not _is_local(origin):
                if candidate.split(".")[0] not in sys.stdlib_module_names:
                    installed.add(candidate.split(".")[0])
                continue
            hashes[candidate] = hashlib.sha256(origin.read_bytes()).hexdigest()
            is_package = spec.submodule_search_locations is not None
            pending.extend(_imported_names(origin, candidate, is_package) - seen)
    return hashes, installed


@functools.cache
def _distributions() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()


def _versions(installed: set[str]) -> dict[str, str]:
    versions = {"python": platform.python_version()}
    names = {dist for top in installed for dist in _distributions().get(top, [])} | set(ALWAYS_VERSIONED)
    for dist in sorted(names):
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            versions[dist] = "absent"
    return versions


def _start_modules(spec: RewardSpec) -> list[str]:
    """The modules a reward's code starts from: a user function's module (allowlist checked first), or the
    module of a library reward's builder."""
    if ":" in spec.name:
        module = spec.name.split(":", 1)[0]
        allow_user_module(module)
        if find_module(module) is None:
            raise SkillError(
                f"Reward module {module!r} is on the allowlist (GRPO_RLVR_REWARD_MODULES) but cannot be found.",
                "Check the module name; a module of your own is found through the directory holding it, listed in "
                "GRPO_RLVR_REWARD_PATHS.",
            )
        return [module]
    return [registered_reward(spec).build.__module__]


def _part(spec: RewardSpec) -> str:
    hashes, installed = source_closure(_start_modules(spec))
    entry = library_entry(spec.name)
    wrapped = spec.params.get(entry.wraps) if entry is not None and entry.wraps else None
    if isinstance(wrapped, dict):
        hashes["wrapped"] = _part(RewardSpec.model_validate({"role": "correctness", **wrapped}))
    payload = {"spec": spec.model_dump(mode="json"), "sources": hashes, "versions": _versions(installed)}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def verifier_fingerprint(spec: RewardSpec) -> str:
    """What one reward judges, whatever weight it is given (its part at weight 1.0): a route measured with a
    verifier matches the same reward in a recipe or an inspection.

    >>> a = RewardSpec(name="format", role="format")
    >>> b, c = a.model_copy(update={"weight": 0.2}), a.model_copy(update={"params": {"pattern": "x"}})
    >>> verifier_fingerprint(a) == verifier_fingerprint(b) != verifier_fingerprint(c)
    True
    """
    return _part(spec.model_copy(update={"weight": 1.0}))


def reward_fingerprint(specs: list[RewardSpec]) -> tuple[str, dict[str, str]]:
    """The fingerprint of a reward set (weights as given), and its per-reward parts (to say which changed).

    >>> fingerprint, parts = reward_fingerprint([RewardSpec(name="format", role="format")])
    >>> len(fingerprint), list(parts)
    (64, ['0:format'])
    """
    parts = {f"{position}:{spec.name}": _part(spec) for position, spec in enumerate(specs)}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest(), parts
