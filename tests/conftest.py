"""Shared fixtures: an isolated state root and a tiny random model with the SmolLM2 tokenizer."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from skill.data import addition_rows
from skill.state import STATE_ROOT_ENV

TARGET_TESTS_ENV = "GRPO_RLVR_TARGET_TESTS"
# tests/target/ runs in the target environment (.venv-target: transformers 5.17, vLLM's CPU build), started
# by `make test` with its own interpreter; the main run leaves it out.
# tests/golden/ holds what emit writes (rendered scripts among it): data compared byte for byte, never collected.
collect_ignore = ["golden"] + ([] if os.environ.get(TARGET_TESTS_ENV) else ["target"])

# Our machines reach no model hub (docs/architecture.md §7): the tests run as a user without a network would, with
# huggingface_hub's and datasets' own offline switches set before either library is imported. Without them a hub
# id the tests name only to see it refused costs datasets' five retries (about 45 s) per load. The tests of the
# Hub paths themselves (tests/test_model_loading.py) start fresh processes with the environment they need.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

# Under xdist each worker (and every training or sampling process it starts, which inherit the setting) gets its
# share of the cores. Left alone, every torch process takes all of them, and two workers' processes side by side
# oversubscribe the OpenMP pool: measured on 2 cores, the learning test and the demo smoke took 1,000 s and 736 s
# side by side, and 227 s and 131 s with one thread each. Set here, before anything imports torch.
if os.environ.get("PYTEST_XDIST_WORKER") and not os.environ.get(TARGET_TESTS_ENV):
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // workers)))


@pytest.fixture(scope="session", autouse=True)
def isolated_state_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Under xdist each worker's base temp sits in the session's directory: share that one, so the embedded
    # model is built once per session; without xdist the base temp is the session's own directory.
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "grpo-rlvr-state"
    root.mkdir(exist_ok=True)
    os.environ[STATE_ROOT_ENV] = str(root)
    # Recipes report to trackio by default: trainers the tests start outside the runner (rendered scripts, in-process
    # trainers) write where runs do, not into the user's HF_HOME (trackio reads TRACKIO_DIR when first imported).
    os.environ.setdefault("TRACKIO_DIR", str(root / "trackio"))
    os.environ.setdefault("GRPO_RLVR_REWARD_MODULES", "rewards_for_tests,flawed_rewards")
    # Test workers start runs side by side; the cap itself is tested with an explicit limit.
    os.environ.setdefault("GRPO_RLVR_MAX_RUNS", "16")
    return root


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer Llama with random weights and the embedded SmolLM2 tokenizer, saved to disk."""
    from skill.models.sources import save_tiny_random_model

    return save_tiny_random_model(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture(scope="session")
def digit_model_dir(tiny_model_dir, tmp_path_factory):
    """The tiny random model, nudged to write digits and spaces: about 60% of its completions are a bare
    number, so the format reward differs within a group and GRPO has a gradient (a model that never
    earns a reward never moves, and its ranks agree for free)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    favoured = [tokenizer.convert_tokens_to_ids(token) for token in [*"0123456789", "Ġ"]]
    with torch.no_grad():
        embedding = model.get_input_embeddings().weight  # tied to the output head
        embedding[:, 0] += 1.0
        embedding[favoured, 0] += 3.0
    directory = tmp_path_factory.mktemp("digit-model")
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="session")
def addition_data(tmp_path_factory):
    path = tmp_path_factory.mktemp("engine-data") / "addition.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in addition_rows(64)))
    return path
