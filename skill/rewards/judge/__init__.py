"""Judge rewards: ``rubric_judge`` (yes/no criteria scored by token probabilities) and its backends.

Owns: ``verdict`` (turning top log-probs into a score), ``reward`` (the reward function),
``backends`` (local transformers and OpenAI-compatible judges) and ``server`` (a loopback judge
server). May import: ``skill.rewards`` (base, registry), ``skill.models``, ``skill.errors``.
"""
