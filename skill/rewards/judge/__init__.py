"""Judge rewards: ``rubric_judge`` (yes/no criteria scored by token probabilities) and its backends.

Owns: ``verdict`` (turning top log-probs into a score; the master keys), ``backends`` (local transformers
and OpenAI-compatible judges), ``server`` (a loopback judge server, ``python -m skill.rewards.judge.server``)
and ``reward`` (the reward function). Dependencies point one way: reward -> backends -> verdict, and
server -> backends. May import: ``skill.rewards`` (base, params, registry), ``skill.models``, ``skill.errors``.
"""
