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
    """A 2-layer Llama with random weights and the embedded SmolLM2 tokenizer, saved to disk.

    Saved (not passed as an object) because with beta > 0 and no PEFT TRL rebuilds the reference
    model from the policy's name_or_path.
    """
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from skill.models import embedded_tokenizer_dir

    tokenizer = AutoTokenizer.from_pretrained(embedded_tokenizer_dir())
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    directory = tmp_path_factory.mktemp("tiny-model")
    LlamaForCausalLM(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory
