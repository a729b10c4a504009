"""The embedded demo: SmolLM2-135M-Instruct learning to add small numbers with GRPO.

Owns: ``pipeline`` (the demo's recipe request and ``run_demo``, what ``grpo-rlvr demo`` runs) and ``reader``
(the program that reads the demo's samples blind, by its own check of each answer). Its task,
``embedded:addition``, is a built-in dataset of ``skill.data``. May import anything in ``skill``;
nothing in ``skill`` outside this package imports it.
"""
