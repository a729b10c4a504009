"""Reward parameters, each described once: on its builder's signature.

A reward builder declares every parameter as ``name: Annotated[type, Param("what it means")] = default``.
:func:`builder_params` reads the type, the default and the description back from the signature, so the
registry, the error a caller gets for a bad parameter and the generated ``references/reward-functions.md``
all say the same thing without anyone writing it twice.

May import: nothing from the project.
"""

from __future__ import annotations

import inspect
import json
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

REQUIRED = inspect.Parameter.empty  # the default of a parameter the caller must send


@dataclass(frozen=True)
class Param:
    """The description of one builder parameter, carried in its annotation: ``Annotated[int, Param("...")]``."""

    description: str


@dataclass(frozen=True)
class RewardParam:
    """One parameter of a registered reward, as its builder declares it.

    >>> RewardParam("timeout_s", "float", 2.0, "seconds per test").describe()
    'timeout_s (seconds per test; default 2.0)'
    >>> RewardParam("criteria", "list", REQUIRED, "the rubric").default_text()
    'required'
    """

    name: str
    type: str
    default: Any  # REQUIRED when the caller must send it
    description: str

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def default_text(self) -> str:
        """The default as a caller would send it in JSON params, or ``required``."""
        if self.required:
            return "required"
        try:
            return json.dumps(self.default)
        except TypeError:
            return repr(self.default)

    def describe(self) -> str:
        """One line for an error message: name, meaning and default."""
        return f"{self.name} ({self.description}; default {self.default_text()})"


def type_text(annotation: Any) -> str:
    """A type as a reader writes it.

    >>> type_text(int), type_text(str | None), type_text(list[dict[str, Any]])
    ('int', 'str | None', 'list[dict[str, Any]]')
    """
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return annotation.__name__
    return re.sub(r"\b(?:typing|builtins)\.", "", str(annotation))


def builder_params(build: Callable[..., Any]) -> dict[str, RewardParam]:
    """Every parameter of a reward builder, from its signature; a parameter without ``Param`` is a bug here.

    >>> def build(tests_column: typing.Annotated[str, Param("column holding the tests")] = "tests"): ...
    >>> builder_params(build)["tests_column"]
    RewardParam(name='tests_column', type='str', default='tests', description='column holding the tests')
    """
    hints = typing.get_type_hints(build, include_extras=True)
    params = {}
    for name, parameter in inspect.signature(build).parameters.items():
        hint = hints.get(name)
        markers = [item for item in getattr(hint, "__metadata__", ()) if isinstance(item, Param)]
        if len(markers) != 1:
            raise TypeError(f"{build.__qualname__}: annotate {name!r} as Annotated[<type>, Param('<meaning>')]")
        params[name] = RewardParam(name, type_text(typing.get_args(hint)[0]), parameter.default, markers[0].description)
    return params


def param_problems(params: dict[str, RewardParam], given: dict[str, Any]) -> list[str]:
    """What is wrong with the names of ``given`` params: unknown ones, missing required ones.

    >>> known = {"pattern": RewardParam("pattern", "str", "number", "a named pattern")}
    >>> param_problems(known, {"patern": "number"})
    ["unknown param 'patern'"]
    """
    problems = [f"unknown param {name!r}" for name in given if name not in params]
    problems += [f"missing param {name!r}" for name, param in params.items() if param.required and name not in given]
    return problems
