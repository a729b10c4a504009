"""One rule per GRPOConfig field: its decision (a seed value, set by a decision of its own, or left to TRL's
default), the one reason for it, a CPU short run's value, the range a value must lie in, and whether TRL's
trainer enumerates its values. The rules live in ``field_rules.toml`` beside this module, one table a field.

Everything else derives from them: the seed recipe emit starts from (``seed_values``), a CPU target's short-run
values (``cpu_short_run_values``), the range checks (``ranges``, for ``field_values``), the enumerations read from
TRL's source (``enumerated_fields``, for ``trl_contract``), the decisions test (``undecided_fields``: a new TRL
release that adds a field fails it until its rule is written) and the generated field reference
(references/grpo-fields.md). Adding a field is one table in the TOML file.

A rule's keys:

- ``reason`` (required): why the field has its value; never shared by two fields (``shared_reasons``).
- ``value``: the seed recipe's value (the field is then stated in every recipe); ``changed_by``: where another
  decision changes it (a variant, the method, the task).
- ``set_by``: for a field the seed leaves out, the decision that sets it (a module, or run_grpo).
- neither: the field is left to TRL's default (``skill/grpo_config_defaults.json``), for the reason given.
- ``cpu`` and ``cpu_reason``: a CPU target's short-run value, which replaces the seed's.
- ``bounds``: an interval a number must lie in, e.g. ``"(0, inf)"`` or ``"[0, 1]"``.
- ``enumerated``: the trainer compares the field against string literals; the values it handles are read from
  TRL's source.

Imports nothing from the project.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import tomllib
from pathlib import Path
from typing import Any, Literal, NamedTuple

RULES_FILE = Path(__file__).with_name("field_rules.toml")
RULE_KEYS = {"reason", "value", "changed_by", "set_by", "cpu", "cpu_reason", "bounds", "enumerated"}
_INTERVAL = re.compile(r"^([\[(])\s*(-?inf|[-+0-9.e]+)\s*,\s*(inf|[-+0-9.e]+)\s*([\])])$")


class Bounds(NamedTuple):
    """A closed or open interval; None leaves that side free."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    @classmethod
    def parse(cls, text: str) -> Bounds:
        """
        >>> Bounds.parse("(0, inf)")
        Bounds(low=0.0, high=None, low_open=True, high_open=False)
        >>> Bounds.parse("[0, 1)").words()
        'a number >= 0 and < 1'
        """
        match = _INTERVAL.match(text.strip())
        if match is None:
            raise ValueError(f"bounds {text!r} is not an interval such as '(0, inf)' or '[0, 1]'")
        opening, low, high, closing = match.groups()
        return cls(
            None if "inf" in low else float(low),
            None if high == "inf" else float(high),
            low_open=opening == "(" and "inf" not in low,
            high_open=closing == ")" and high != "inf",
        )

    def holds(self, value: float) -> bool:
        """
        >>> Bounds(0, None, low_open=True).holds(0.0), Bounds(0, 1).holds(1.0)
        (False, True)
        """
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return not (self.high is not None and (value >= self.high if self.high_open else value > self.high))

    def words(self) -> str:
        """
        >>> Bounds(0, 1, low_open=True).words()
        'a number > 0 and <= 1'
        """
        parts = []
        if self.low is not None:
            parts.append(f"{'>' if self.low_open else '>='} {self.low:g}")
        if self.high is not None:
            parts.append(f"{'<' if self.high_open else '<='} {self.high:g}")
        return "a number " + " and ".join(parts)


@dataclasses.dataclass(frozen=True)
class FieldRule:
    """What is decided about one GRPOConfig field (see the module docstring for each key)."""

    name: str
    reason: str
    value: Any = None
    seeded: bool = False
    changed_by: str | None = None
    set_by: str | None = None
    cpu: tuple[Any, str] | None = None
    bounds: Bounds | None = None
    enumerated: bool = False

    @property
    def decision(self) -> Literal["seed", "set", "left"]:
        """'seed' (stated by every recipe), 'set' (by the decision in ``set_by``) or 'left' (TRL's default)."""
        return "seed" if self.seeded else "set" if self.set_by else "left"


def rule_from_table(name: str, table: dict[str, Any]) -> FieldRule:
    """One rule from its TOML table, refused with what a rule may say when malformed."""
    unknown = set(table) - RULE_KEYS
    if unknown or "reason" not in table:
        keys = f"needs 'reason', may have {sorted(RULE_KEYS)}; got {sorted(table)}"
        raise ValueError(f"{RULES_FILE.name} [{name}]: {keys}")
    if ("cpu" in table) != ("cpu_reason" in table):
        raise ValueError(f"{RULES_FILE.name} [{name}]: 'cpu' and 'cpu_reason' go together")
    if "value" in table and "set_by" in table:
        raise ValueError(f"{RULES_FILE.name} [{name}]: a seed value is set by the seed; 'set_by' is for the others")
    value = table.get("value")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{RULES_FILE.name} [{name}]: value {value} is not finite")
    return FieldRule(
        name=name,
        reason=table["reason"],
        value=value,
        seeded="value" in table,
        changed_by=table.get("changed_by"),
        set_by=table.get("set_by"),
        cpu=(table["cpu"], table["cpu_reason"]) if "cpu" in table else None,
        bounds=Bounds.parse(table["bounds"]) if "bounds" in table else None,
        enumerated=bool(table.get("enumerated", False)),
    )


@functools.cache
def field_rules() -> dict[str, FieldRule]:
    """Every rule, by field name, in the file's order (the seed's order is the order a recipe lists its fields).

    >>> rules = field_rules()
    >>> rules["learning_rate"].decision, rules["model_init_kwargs"].decision, rules["top_k"].decision
    ('seed', 'set', 'left')
    """
    with RULES_FILE.open("rb") as handle:
        return {name: rule_from_table(name, table) for name, table in tomllib.load(handle).items()}


def seed_values() -> dict[str, tuple[Any, str]]:
    """The seed recipe: field -> (value, reason), in the order a recipe lists them.

    >>> seed_values()["num_generations"][0], seed_values()["beta"][0]
    (8, 0.01)
    """
    return {name: (rule.value, rule.reason) for name, rule in field_rules().items() if rule.seeded}


def cpu_short_run_values() -> dict[str, tuple[Any, str]]:
    """A CPU target's short-run values, which replace the seed's: field -> (value, reason).

    >>> sorted(cpu_short_run_values())
    ['beta', 'gradient_accumulation_steps', 'learning_rate', 'logging_steps', 'warmup_steps']
    """
    return {name: rule.cpu for name, rule in field_rules().items() if rule.cpu is not None}


def ranges() -> dict[str, Bounds]:
    """The range each bounded field's value must lie in."""
    return {name: rule.bounds for name, rule in field_rules().items() if rule.bounds is not None}


def enumerated_fields() -> tuple[str, ...]:
    """The fields whose values TRL's trainer enumerates (read from its source by ``trl_contract``)."""
    return tuple(name for name, rule in field_rules().items() if rule.enumerated)


def grpo_added_fields() -> set[str]:
    """The fields the installed ``GRPOConfig`` adds over the installed ``TrainingArguments`` (imports trl)."""
    from transformers import TrainingArguments
    from trl import GRPOConfig

    base = {field.name for field in dataclasses.fields(TrainingArguments)}
    return {field.name for field in dataclasses.fields(GRPOConfig)} - base


def undecided_fields() -> list[str]:
    """GRPOConfig's additions over TrainingArguments that have no rule (a new TRL release's fields).

    >>> undecided_fields()
    []
    """
    return sorted(grpo_added_fields() - set(field_rules()))


def shared_reasons() -> list[str]:
    """Reasons (and CPU reasons) given to more than one field: each decision is argued on its own.

    >>> shared_reasons()
    []
    """
    reasons = [rule.reason for rule in field_rules().values()]
    reasons += [rule.cpu[1] for rule in field_rules().values() if rule.cpu is not None]
    return sorted({reason for reason in reasons if reasons.count(reason) > 1})
