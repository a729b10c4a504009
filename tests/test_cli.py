"""The command line: JSON in and out, a readable summary, exit status 2 with a message on bad input."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def grpo_rlvr(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "server.cli", *args], input=stdin, capture_output=True, text=True, timeout=120
    )


def test_config_prints_json_a_recipe_can_be_read_from():
    result = grpo_rlvr(
        "config",
        "--model",
        "Qwen/Qwen2.5-0.5B-Instruct",
        "--gpu",
        "L4",
        "--method",
        "full",
        "--reward",
        "format,format,0.2",
        "--reward",
        "exact_match,correctness,1",
        "--dataset",
        "openai/gsm8k",
        "--column",
        "answer",
        "--set",
        "temperature=0.9",
        "--report-to",
        "wandb",
        "--output",
        "json",
    )
    assert result.returncode == 0, result.stderr
    recipe = json.loads(result.stdout)
    assert recipe["trl"]["temperature"] == 0.9
    assert recipe["trl"]["vllm_mode"] == "colocate"
    assert recipe["trl"]["reward_weights"] == [0.2, 1.0]
    assert recipe["trl"]["report_to"] == "wandb" and "trackio_space_id" not in recipe["trl"]


def test_config_takes_the_plans_sharding():
    base = ["config", "--model", "Qwen/Qwen2.5-7B-Instruct", "--gpu", "H100", "--gpus-per-node", "8", "--method"]
    args = [*base, "full", "--reward", "exact_match,correctness", "--dataset", "openai/gsm8k", "--column", "answer"]
    result = grpo_rlvr(*args, "--sharding", "zero2", "--output", "json")
    assert result.returncode == 0, result.stderr
    launch = json.loads(result.stdout)["launch"]
    assert (launch["sharding"], launch["sharding_reason"]) == ("zero2", "zero2: chosen by the caller.")
    refused = grpo_rlvr(*args, "--sharding", "zero4")
    assert refused.returncode == 2 and "invalid choice: 'zero4'" in refused.stderr


def test_config_reads_a_request_from_stdin_and_summarises():
    request = {
        "hardware": {"accelerator": "cpu"},
        "method": "full",
        "rewards": [{"name": "exact_match", "role": "correctness"}],
        "dataset": {"name": "embedded:addition", "columns": ["answer"]},
    }
    result = grpo_rlvr("config", "--request", "-", stdin=json.dumps(request))
    assert result.returncode == 0, result.stderr
    assert "GRPO recipe: embedded:SmolLM2-135M-Instruct (full) on CPU" in result.stdout
    assert "use_vllm=False" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gpu", "H100", "--method", "full", "--set", "num_generations=4"], "below the floor of 8"),
        (["--gpu", "H100", "--nodes", "0", "--method", "full"], "nodes=0 is impossible"),
        (["--gpu", "H100", "--method", "full", "--model", "./no-model"], "Or send model.parameters_billions"),
        (["--gpu", "H100", "--method", "full", "--reward", "oops"], "is not NAME,ROLE[,WEIGHT]"),
    ],
)
def test_bad_input_exits_2_with_a_message_and_no_traceback(args, message):
    base = ["config", "--reward", "exact_match,correctness", "--dataset", "openai/gsm8k"]
    result = grpo_rlvr(*base, *args)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_state_root_flag_is_honoured(tmp_path, monkeypatch, capsys):
    from server.cli import main
    from skill.state import STATE_ROOT_ENV, state_root

    monkeypatch.setenv(STATE_ROOT_ENV, str(tmp_path / "elsewhere"))
    assert main(["--state-root", str(tmp_path / "state"), "demo", "--recipe-only", "--output", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["model"]["name"] == "embedded:SmolLM2-135M-Instruct"
    assert state_root() == tmp_path / "state"


def test_a_recipe_file_that_is_missing_or_not_a_recipe_is_refused_with_what_is_wrong(tmp_path):
    missing = grpo_rlvr("run", str(tmp_path / "recipe.json"))
    assert missing.returncode == 2 and "Cannot read the recipe" in missing.stderr, missing.stderr
    assert "grpo-rlvr config --output json > recipe.json" in missing.stderr
    foreign = tmp_path / "foreign.json"
    foreign.write_text(json.dumps({"model": {"name": "x"}, "method": "full"}))
    refused = grpo_rlvr("run", str(foreign))
    assert refused.returncode == 2 and "is not a recipe this version reads" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr
