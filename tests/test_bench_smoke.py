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


@pytest.mark.slow
def test_gpu_memory_check_script_runs_its_flow_on_cpu(tmp_path):
    import json
    import subprocess
    import sys

    from skill.models.sources import embedded_tokenizer_dir

    script = BENCH.parent / "scripts" / "gpu_memory_check.py"
    output = tmp_path / "result.json"
    command = [
        sys.executable,
        str(script),
        "--device",
        "cpu",
        "--tiny",
        "--tokenizer",
        str(embedded_tokenizer_dir()),
        "--work",
        str(tmp_path / "work"),
        "--output",
        str(output),
        "--only",
        "full-ckpt-b4",
        "lora-ckpt-b8",
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=BENCH.parent)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = json.loads(output.read_text())["rows"]
    assert [row["configuration"]["name"] for row in rows] == ["full-ckpt-b4", "lora-ckpt-b8"]
    assert all(row["estimated"]["peak_without_overhead_bytes"] > 0 for row in rows)


def test_inspection_benchmark_runs_at_a_tiny_size():
    result = load("inspection_speed").measure(count=50, repeats=1)
    assert result["median_s"] > 0 and result["samples"] == 50


@pytest.mark.slow
def test_completion_budget_benchmark_reads_its_budget_on_fresh_completions():
    result = load("completion_budget").measure(quick=True)
    [case] = result["cases"]
    assert case["budget"] >= 16 and case["completions"] == 16 and 0 <= case["sized"]["cut"] <= 1
    assert case["old_cpu"]["cut"] >= case["sized"]["cut"]  # a shorter budget never cuts fewer of the same samples
    assert load("completion_budget").markdown(result)[2].startswith("| addition (exact_match) |")


@pytest.mark.slow
def test_runner_overhead_benchmark_runs_at_a_tiny_size():
    result = load("runner_overhead").measure(steps=3, rounds=1)
    assert result["bare_s_per_step"] > 0 and result["runner_s_per_step"] > 0


def test_results_page_renders_measured_and_missing_figures():
    run_all = load("run_all")
    results = {
        "startup": {
            "ok": True,
            "result": {
                "serve_to_tools_list_median_s": 0.6,
                "serve_to_tools_list_spread_s": 0.1,
                "import_mcp_median_s": 0.65,
                "ratio": 0.92,
            },
        },
        "runner_overhead": {"ok": False, "error": "RuntimeError: boom"},
    }
    text = run_all.render({"date": "today", "cores": "2"}, results)
    assert "| server cold start to first tools/list | 0.600 s |" in text and "| yes |" in text
    assert "runner overhead | not measured" in text and "RuntimeError: boom" in text
    assert "GPU" in text
