"""Shared fixtures: an isolated state root and a tiny random model with the SmolLM2 tokenizer."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from skill.state import STATE_ROOT_ENV


@pytest.fixture(scope="session", autouse=True)
def isolated_state_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # The base temp's parent is shared by xdist workers, so the tokenizer cache is built once per run.
    root = tmp_path_factory.getbasetemp().parent / "grpo-rlvr-state"
    root.mkdir(exist_ok=True)
    os.environ[STATE_ROOT_ENV] = str(root)
    os.environ.setdefault("GRPO_RLVR_REWARD_MODULES", "rewards_for_tests,flawed_rewards")
    return root


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer Llama with random weights and the embedded SmolLM2 tokenizer, saved to disk."""
    from skill.models import save_tiny_random_model

    return save_tiny_random_model(tmp_path_factory.mktemp("tiny-model"))
