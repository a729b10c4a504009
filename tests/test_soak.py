"""The 60-second soak (bench/soak.py; `make bench` runs it for 300 s): 3 servers x 4 concurrent clients over stdio
and HTTP, every tool, two live tiny runs, a SIGKILLed worker resumed and a SIGKILLed server restarted."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


def load_soak():
    spec = importlib.util.spec_from_file_location("soak", BENCH / "soak.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_a_60_second_soak_leaves_no_internal_error_torn_file_or_lost_step():
    result = load_soak().run(60)
    assert result["problems"] == [], result
    assert result["internal_errors"] == 0 and result["transport_errors"] == 0
    assert result["calls"] >= 12 * 10, result  # every client kept calling
    for tool in ("route_check", "inspect_rewards", "record_review", "emit_grpo_config", "estimate_memory"):
        assert result["calls_by_tool"].get(tool, 0) >= 1, (tool, result["calls_by_tool"])
    for tool in ("run_grpo", "run_status", "run_logs", "cancel_run", "list_runs"):
        assert result["calls_by_tool"].get(tool, 0) >= 1, (tool, result["calls_by_tool"])
    events = " | ".join(result["events"])
    assert "SIGKILLed the worker of soak-a" in events and "SIGKILLed HTTP server 2" in events, events
    assert "restarted HTTP server 2" in events
    assert result["calls_answered_by_the_restarted_server"] > 0, result  # its clients came back
