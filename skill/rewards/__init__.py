"""Reward functions and the spec that names them.

Owns: ``spec`` (RewardSpec), ``registry`` (names to builders; user functions from an allowlist), ``params``
(each builder parameter described once, on its signature), ``base`` (what every reward shares),
``composite`` (the format + correctness weight rule), ``fingerprint`` (what decides a reward's scores, hashed
without importing it: the gate's and a route's binding), ``trl_inputs`` (what TRL passes a reward besides its
completions), ``answers`` (the number a completion commits to, and equal answers), ``math_workers``
(math-verify in warm workers with a time limit), ``reading`` (the share of completions a reward finds an answer
in) and the library: ``text``, ``structured``, ``length``,
``code/`` (unit tests in a sandbox) and ``judge/`` (rubric judge). May import: ``skill.errors``,
``skill.models`` (the judge's model).
"""

from skill.rewards.spec import RewardRole, RewardSpec

__all__ = ["RewardRole", "RewardSpec"]
