"""Training runs: the runner's jobs and what they need.

Owns: ``jobs`` (run_grpo, run_status, run_logs, cancel_run, list_runs), ``checks`` (the preflight: gate,
route, memory, devices, data), ``engines`` (what starts, watches and stops the trainers: local, accelerate),
``worker`` (the training process), ``rank_state`` (what each rank reports about itself) and ``rehearsal`` (a GPU
plan run on this machine's CPUs at its own world size, and its report),
``store`` (run directories and records), ``health`` (warnings from live metrics, most likely cause first) with
its checks ``reward_checks`` and ``dynamics_checks``, ``health_warning`` and ``series`` (noise-aware window
statistics), ``labelled_series`` (the labelled runs that validate the checks), ``evaluation`` (held-out pass@1)
and ``plots``. May import the capabilities (``inspection``, ``routing``,
``recipe``) and every building block below them; never ``demo``.
"""
