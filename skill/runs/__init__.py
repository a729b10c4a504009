"""Training runs: the runner's jobs and what they need.

Owns: ``jobs`` (run_grpo, run_status, run_logs, cancel_run, list_runs), ``checks`` (the preflight: gate,
route, memory, data), ``processes`` (local torchrun command lines), ``worker`` (the training process),
``store`` (run directories and records), ``health`` and ``series`` (warnings from live metrics),
``evaluation`` (held-out pass@1) and ``plots``. May import the capabilities (``inspection``, ``routing``,
``recipe``) and every building block below them; never ``demo``.
"""
