"""The values a recipe's GRPOConfig fields may take: the type the installed ``GRPOConfig`` declares, a finite
number, and the range the trainer can use (each field's ``bounds`` in ``field_rules.toml``).

``GRPOConfig`` stores ``learning_rate="fast"``, NaN or -1 without a word; training then fails (or silently
does nothing) minutes later in another process. Emit and run_grpo both check every value here first, so a
hand-edited recipe is refused with the field, the value and what to send.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

from skill.errors import SkillError
from skill.recipe.deciding.field_rules import ranges


@functools.cache
def declared_types() -> dict[str, str]:
    """Each GRPOConfig field's kind as the installed TRL declares it: 'int', 'float', 'bool', 'floats' (a list of
    floats) or 'other' (strings, dicts, unions the trainer parses itself)."""
    from trl import GRPOConfig

    kinds = {}
    for field in dataclasses.fields(GRPOConfig):
        declared = field.type if isinstance(field.type, str) else getattr(field.type, "__name__", str(field.type))
        declared = declared.replace(" | None", "").replace("None | ", "")
        kinds[field.name] = (
            declared if declared in ("int", "float", "bool") else ("floats" if declared == "list[float]" else "other")
        )
    return kinds


def _refuse(name: str, value: Any, problem: str, send: str) -> SkillError:
    shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:60] + "…"
    return SkillError(f"trl.{name}={shown} {problem}.", f"Send {send}, or leave it out.")


def _check_number(name: str, value: Any, kind: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        expected = "an integer" if kind == "int" else "a number"
        raise _refuse(name, value, f"is not {expected}", expected)
    if not math.isfinite(value):
        raise _refuse(name, value, "is not a finite number", "a finite number")
    if kind == "int" and not float(value).is_integer():
        raise _refuse(name, value, "is not a whole number", "an integer")
    bounds = ranges().get(name)
    if bounds is not None and not bounds.holds(value):
        raise _refuse(name, value, "is out of range", bounds.words())


def check_field_values(trl: dict[str, Any]) -> None:
    """Refuse a value of the wrong type, a NaN or infinity, or one out of the trainer's range, naming the field.

    >>> check_field_values({"learning_rate": 1e-6, "num_generations": 8, "bf16": False, "loss_type": "dapo"})
    >>> check_field_values({"learning_rate": float("nan")})
    Traceback (most recent call last):
    ...
    skill.errors.SkillError: trl.learning_rate=nan is not a finite number. Send a finite number, or leave it out.
    >>> check_field_values({"learning_rate": -1})
    Traceback (most recent call last):
    ...
    skill.errors.SkillError: trl.learning_rate=-1 is out of range. Send a number > 0, or leave it out.
    """
    kinds = declared_types()
    for name, value in trl.items():
        kind = kinds.get(name, "other")  # unknown names are check_field_names' to refuse
        if value is None:
            continue
        if kind in ("int", "float"):
            _check_number(name, value, kind)
        elif kind == "bool" and not isinstance(value, bool):
            raise _refuse(name, value, "is not true or false", "true or false")
        elif kind == "floats":
            if not isinstance(value, list):
                raise _refuse(name, value, "is not a list of numbers", "a list of finite numbers")
            for index, item in enumerate(value):
                _check_number(f"{name}[{index}]", item, "float")
        elif isinstance(value, float) and not math.isfinite(value):
            raise _refuse(name, value, "is not a finite number", "a finite number")
