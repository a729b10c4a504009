"""The health check contract: what every check of a run's metrics declares, and the registry that runs them.

A check is a function of the run read so far (``RunView``) that returns what it finds: nothing, one warning or
several. It declares, on ``@health_check``:

- ``codes``: the warning codes it raises, in the order it ranks them;
- ``rank``: where its cause sits among the others, most likely first: a broken reward makes every curve a lie;
  no signal means nothing else can move; a reward the policy games explains flat or falling correctness; a
  sampler that disagrees with the trainer makes the optimiser's curves its consequence; then how the optimiser
  behaves; a plateau is what is left when nothing explains it;
- ``needs``: the metric keys it reads (``{reward}`` stands for any reward's name): a run that logged none of them
  lists the check as not run (``unchecked``), so "healthy" and "not checked" never look alike;
- ``unless``: codes whose finding makes its own moot (a plateau is not reported on top of a likelier cause).

A new check is one decorated function in the module of its kind (``reward_checks``, ``dynamics_checks``,
``loss_checks``) and its test; ``skill.runs.health`` runs the registry. Owns: ``HealthCheck``, ``health_check``,
``registry``, ``unchecked``. May import: ``runs.health_warning``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from skill.runs.health_warning import HealthWarning, RunView

Found = HealthWarning | list[HealthWarning] | None


@dataclass(frozen=True)
class HealthCheck:
    """One check and what it declares (see the module docstring)."""

    name: str
    codes: tuple[str, ...]
    rank: int
    needs: tuple[str, ...]
    unless: tuple[str, ...]
    check: Callable[[RunView], Found]

    def run(self, view: RunView) -> list[HealthWarning]:
        """What the check finds, always as a list."""
        found = self.check(view)
        return [] if found is None else found if isinstance(found, list) else [found]

    def can_run(self, metrics: list[dict[str, Any]]) -> bool:
        """Whether any logged point carries a metric it reads.

        >>> check = HealthCheck("c", ("c",), 1, ("rewards/{reward}/mean",), (), lambda view: None)
        >>> check.can_run([{"rewards/exact_match/mean": 0.5}]), check.can_run([{"loss": 1.0}])
        (True, False)
        """
        patterns = [re.compile(re.escape(need).replace(r"\{reward\}", "[^/]+") + "$") for need in self.needs]
        return any(pattern.match(key) for point in metrics for key in point for pattern in patterns)


_REGISTRY: list[HealthCheck] = []


def health_check(
    *codes: str, rank: int, needs: tuple[str, ...], unless: tuple[str, ...] = ()
) -> Callable[[Callable[[RunView], Found]], Callable[[RunView], Found]]:
    """Register a check (the function is returned unchanged, so it stays callable and testable on its own)."""

    def register(function: Callable[[RunView], Found]) -> Callable[[RunView], Found]:
        taken = {check.rank for check in _REGISTRY} | {code for check in _REGISTRY for code in check.codes}
        if rank in taken or taken & set(codes):
            raise ValueError(f"health check {function.__name__}: rank {rank} or a code of {codes} is taken")
        _REGISTRY.append(HealthCheck(function.__name__, codes, rank, needs, unless, function))
        return function

    return register


def registry() -> list[HealthCheck]:
    """Every registered check, most likely cause first (the checks register when their modules are imported:
    ``skill.runs.health`` imports them)."""
    return sorted(_REGISTRY, key=lambda check: check.rank)


def unchecked(metrics: list[dict[str, Any]]) -> list[str]:
    """The checks this run's metrics cannot feed (none of the keys they read was logged), by name."""
    return [check.name for check in registry() if not check.can_run(metrics)]
