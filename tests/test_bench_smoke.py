"""Each benchmark script runs at a tiny size (the numbers themselves live in bench/, not in tests)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_startup_benchmark_measures_both_sides():
    result = load("startup").measure(repeats=1)
    assert result["import_mcp_median_s"] > 0 and result["serve_to_tools_list_median_s"] > 0
    assert result["ratio"] == pytest.approx(result["serve_to_tools_list_median_s"] / result["import_mcp_median_s"])


def test_tool_latency_benchmark_reports_percentiles():
    result = load("tool_latency").measure(repeats=3)
    for figures in result.values():
        assert 0 < figures["p50_ms"] <= figures["p95_ms"]
