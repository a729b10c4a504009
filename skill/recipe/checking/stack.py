"""The target stack: the library versions a GPU recipe is written for, read from ``target_stack.txt``.

A GPU user installs TRL with vLLM, and vLLM bounds transformers and torch; a recipe must build under
those versions, not only under the ones installed where it was emitted. The bounds and the reason for
each live in one file beside this module (also read by pyproject's extras check, the Makefile's
target environment and the tests). Imports nothing from the project.

>>> TARGET_STACK["vllm"].specifier.contains("0.31.0"), TARGET_STACK["vllm"].specifier.contains("0.32.0")
(True, False)
>>> lowest_allowed("transformers")
'5.17'
"""

from __future__ import annotations

import functools
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

STACK_FILE = Path(__file__).with_name("target_stack.txt")


@functools.cache
def _read_stack() -> tuple[dict[str, Requirement], dict[str, str]]:
    requirements: dict[str, Requirement] = {}
    reasons: dict[str, str] = {}
    for raw in STACK_FILE.read_text().splitlines():
        line, _, reason = raw.partition("#")
        if not line.strip():
            continue
        requirement = Requirement(line.strip())
        requirements[requirement.name] = requirement
        reasons[requirement.name] = reason.strip()
    return requirements, reasons


TARGET_STACK: dict[str, Requirement] = _read_stack()[0]
TARGET_REASONS: dict[str, str] = _read_stack()[1]


def lowest_allowed(package: str) -> str:
    """The lowest version the target admits for ``package`` (its ``>=``/``==`` bound)."""
    bounds = [spec.version for spec in TARGET_STACK[package].specifier if spec.operator in (">=", "==")]
    if not bounds:
        raise KeyError(f"{package} has no lower bound in {STACK_FILE.name}")
    return str(max(bounds, key=Version))


def highest_allowed(package: str) -> str | None:
    """The highest version named by an upper bound (``<=``/``==``), or None when only ``<`` bounds it."""
    bounds = [spec.version for spec in TARGET_STACK[package].specifier if spec.operator in ("<=", "==")]
    return str(min(bounds, key=Version)) if bounds else None
