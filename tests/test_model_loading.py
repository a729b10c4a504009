"""Models load as users load them: a hub id through huggingface_hub (the Hub when the network allows, the user's
cache under HF_HUB_OFFLINE), a local directory, the embedded model; every sampling result names the engine and
the revision it sampled. No test here needs a network.

The libraries read HF_HUB_OFFLINE, HF_HUB_CACHE and HF_ENDPOINT once, at import: each case runs in a fresh
process with the environment a user's shell would give it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
REVISION = "0123456789abcdef0123456789abcdef01234567"
PROBE = """
import json
from skill.rewards.spec import RewardSpec
from skill.routing.probe import ProbeSpec
from skill.routing.route import RouteRequest, route_check
from skill.state import state_dir
try:
    decision = route_check(RouteRequest(
        signal="exact_answer",
        verifier=RewardSpec(name="exact_match", role="correctness", params={"extract": "whole"}),
        probe=ProbeSpec(model="acme/tiny-llama", dataset={"name": %r, "prompt_template": "{question}",
                        "answer_column": "answer", "answer_extractor": "gsm8k"}, num_prompts=5, n=10,
                        max_new_tokens=4),
    ))
    print(json.dumps({"sampled_with": decision.evidence.sampled_with.model_dump()}))
except Exception as exc:
    print(json.dumps({"error": type(exc).__name__, "message": str(exc),
                      "routes": sorted(p.name for p in state_dir("routes").iterdir())}))
"""


def hub_cache_with(model_dir: Path, cache: Path) -> None:
    """The layout huggingface_hub keeps a downloaded repository in: refs/main names the snapshot's commit."""
    repository = cache / "models--acme--tiny-llama"
    (repository / "refs").mkdir(parents=True)
    (repository / "refs" / "main").write_text(REVISION)
    shutil.copytree(model_dir, repository / "snapshots" / REVISION)


def run_probe(tmp_path: Path, **environment: str) -> dict:
    env = {
        **os.environ,
        "GRPO_RLVR_HOME": str(tmp_path / "state"),
        "HF_HOME": str(tmp_path / "hf"),
        **environment,
    }
    for setting in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):  # the suite's own (tests/conftest.py) unless given
        if setting not in environment:
            env.pop(setting, None)
    dataset = str(REPOSITORY / "tests" / "data" / "gsm8k_sample.jsonl")
    done = subprocess.run(
        [sys.executable, "-c", PROBE % dataset], env=env, cwd=REPOSITORY, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_hub_id_loads_from_the_users_cache_under_hf_hub_offline_and_records_its_revision(tiny_model_dir, tmp_path):
    hub_cache_with(tiny_model_dir, tmp_path / "hub-cache")
    answer = run_probe(tmp_path, HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(tmp_path / "hub-cache"))
    used = answer["sampled_with"]
    assert used["engine"] == "transformers" and used["device"] == "cpu" and used["model"] == "acme/tiny-llama"
    assert used["model_revision"] == REVISION and used["seed"] == 3407 and used["version"]


def test_an_unreachable_hub_says_so_and_leaves_nothing_behind(tmp_path):
    # ".invalid" never resolves (RFC 6761): the Hub cannot be reached, whatever network the machine has.
    answer = run_probe(tmp_path, HF_ENDPOINT="http://hub.invalid")
    assert answer["error"] == "SkillError", answer
    assert (
        "Cannot reach the Hugging Face Hub (http://hub.invalid) to fetch model 'acme/tiny-llama'" in answer["message"]
    )
    assert "hf download acme/tiny-llama" in answer["message"] and "local directory" in answer["message"]
    assert answer["routes"] == []  # no decision written
    snapshots = list((tmp_path / "hf" / "hub").glob("models--acme--tiny-llama/snapshots/*/*"))
    assert snapshots == []  # no half-downloaded model


def test_offline_without_a_cached_copy_says_which_setting_and_where_it_looked(tmp_path):
    answer = run_probe(tmp_path, HF_HUB_OFFLINE="1")
    assert answer["error"] == "SkillError"
    assert answer["message"].startswith("HF_HUB_OFFLINE is set and model 'acme/tiny-llama' is not in the Hub cache")
    assert str(tmp_path / "hf" / "hub") in answer["message"] and "Unset HF_HUB_OFFLINE" in answer["message"]


def test_a_gated_model_says_to_accept_its_licence_and_set_hf_token():
    from types import SimpleNamespace

    from huggingface_hub.errors import GatedRepoError

    from skill.hub_errors import hub_failure

    # the response as the Hub's HTTP client hands it over (httpx in one huggingface_hub release, httpx2 in another)
    response = SimpleNamespace(status_code=401, headers={}, request=None)
    gated = GatedRepoError("401 Client Error: access to model meta-llama/Llama-3.1-8B is restricted", response=response)
    wrapped = OSError("You are trying to access a gated repo.")
    wrapped.__cause__ = gated  # as transformers raises it: its OSError from huggingface_hub's error
    failure = hub_failure("meta-llama/Llama-3.1-8B", wrapped)
    assert "is gated" in failure.problem
    assert "https://huggingface.co/meta-llama/Llama-3.1-8B" in failure.fix and "HF_TOKEN" in failure.fix


def test_the_transformers_engine_names_itself_and_a_local_directory_has_no_revision(tiny_model_dir):
    from skill.sampling.engines import sample_completions
    from skill.sampling.schema import SamplingEngine, SamplingSettings

    sampled = sample_completions(
        str(tiny_model_dir), ["a"], SamplingSettings(n=2, max_new_tokens=3), engine=SamplingEngine(kind="auto")
    )
    used = sampled.sampled_with
    assert (used.engine, used.device, used.dtype, used.model_revision) == ("transformers", "cpu", "float32", None)
    assert len(sampled.groups[0].completions) == 2


def test_an_unreachable_model_fails_before_any_time_is_announced(tmp_path):
    """The issue: a probe of a Hub model with no network said "expected to take about 10306 s" and then failed to
    fetch the model. The model is fetched first; the failure comes alone."""
    script = """
import json
from skill.rewards.spec import RewardSpec
from skill.routing.probe import ProbeSpec
from skill.routing.route import RouteRequest, route_check
said = []
try:
    route_check(RouteRequest(signal="exact_answer", verifier=RewardSpec(name="exact_match", role="correctness"),
                             probe=ProbeSpec(model="Qwen/Qwen2.5-1.5B-Instruct", dataset={"name": "embedded:addition"},
                                             num_prompts=32, n=8, max_new_tokens=256)),
                progress=lambda done, total, message: said.append(message))
except Exception as exc:
    print(json.dumps({"error": str(exc), "said": said}))
"""
    env = {**os.environ, "GRPO_RLVR_HOME": str(tmp_path / "state"), "HF_HOME": str(tmp_path / "hf")}
    env.update(HF_ENDPOINT="http://hub.invalid")
    env.pop("HF_HUB_OFFLINE", None)
    done = subprocess.run([sys.executable, "-c", script], env=env, cwd=REPOSITORY, capture_output=True, text=True)
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert "Cannot reach the Hugging Face Hub" in answer["error"]
    assert not any("expected to take" in message for message in answer["said"]), answer["said"]
