"""Timing: how long a GRPO step and run take, and what they cost, before they start.

Owns: ``schema`` (StepTimeRequest, StepTimeEstimate), ``generation`` and ``training`` (the two parts' models),
``estimate`` (estimate_step_time), ``constants`` (cited), ``validation`` (against published step times).
May import: ``hardware``, ``models``, ``errors``.
"""
