"""Training runs: the runner's jobs and what they need.

Owns: ``jobs`` (run_grpo, run_status, run_logs, cancel_run, list_runs), ``checks`` (the preflight: gate, route,
memory, devices, data), ``engines`` (what starts, watches and stops the trainers: local, accelerate),
``engine_choice`` (which engine runs a run), ``slurm`` (the Slurm engine), ``worker`` (the training process),
``rank_state`` (what each rank reports about itself), ``rehearsal`` (a GPU plan run on this machine's CPUs at its
own world size, and its report), ``checkpoint_request`` (a checkpoint on SIGUSR1), ``vllm_cpu`` (colocated vLLM's
weight sync on a CPU), ``vllm_server_check`` (is the server the one this run needs), ``store`` (run directories and
records), ``health`` (warnings from live metrics, most likely cause first) with the contract every check declares
itself under (``health_check``), its checks ``reward_checks``, ``dynamics_checks`` and ``loss_checks``,
``health_warning`` and ``series`` (noise-aware window statistics), ``labelled_series`` (the labelled runs that
validate the checks), ``held_out`` (held-out pass@1 with its interval), ``time_estimate`` (the ETA from the estimate
and the measurement), ``tracking`` (the tracker's alerts), ``model_card`` (the exported model's README) and
``plots``. May import the capabilities (``inspection``, ``routing``, ``recipe``) and every building block below
them; never ``demo``.
"""
