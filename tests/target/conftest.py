"""The target environment's tests: recipes under the library versions a GPU user installs, and real vLLM.

They run with ``.venv-target/bin/python`` (``make test`` does it). Anywhere else they fail at once with the
command that builds the environment, instead of testing the wrong versions.
"""

from __future__ import annotations

import importlib.metadata

import pytest
from packaging.version import Version

from skill.recipe.stack import TARGET_STACK


def pytest_configure(config: pytest.Config) -> None:
    installed = Version(importlib.metadata.version("transformers"))
    if not TARGET_STACK["transformers"].specifier.contains(installed):
        raise pytest.UsageError(
            f"tests/target needs the target stack (transformers {TARGET_STACK['transformers'].specifier}); this "
            f"interpreter has transformers {installed}. Build it with `make target-env` and run "
            "`GRPO_RLVR_TARGET_TESTS=1 .venv-target/bin/python -m pytest tests/target`."
        )


@pytest.fixture(scope="session")
def vllm_model_dir(tmp_path_factory: pytest.TempPathFactory):
    """The tiny random Llama with head size 32 (vLLM's CPU attention takes 32, 64, 80, ... only)."""
    from skill.models.sources import save_tiny_random_model

    return save_tiny_random_model(tmp_path_factory.mktemp("tiny-vllm-model"), head_dim=32)
