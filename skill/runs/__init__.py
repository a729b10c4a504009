"""Training runs: preflight checks, the worker process, the job store, health diagnostics."""
