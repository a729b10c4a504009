"""The target environment's tests: recipes under the library versions a GPU user installs, and real vLLM.

They run with ``.venv-target/bin/python`` (``make test`` does it). Anywhere else they fail at once with the
command that builds the environment, instead of testing the wrong versions.

Host memory: a test that holds several GiB (eight trainer processes, a vLLM engine) says how many with
``@pytest.mark.host_memory(GiB)``, its peak measured alone on this machine. The two xdist workers start such a
test only while the sum of the running ones' claims fits ``HOST_MEMORY_SHARE`` of the machine's RAM; the rest
stays for the test processes themselves. Without it, an 8-rank rehearsal beside a vLLM test ran a 24 GiB machine
out of memory (a rank aborted in CI).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import time
from pathlib import Path

import pytest
from packaging.version import Version

from skill.recipe.checking.stack import TARGET_STACK
from skill.state import exclusive_lock

HOST_MEMORY_SHARE = 0.65  # of MemTotal; three pytest processes with torch and vLLM imported hold about 2 GiB each


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "host_memory(gib): the test's peak host memory, measured alone (GiB)")
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


def _total_gib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) / 2**20
    raise RuntimeError("/proc/meminfo has no MemTotal")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@pytest.fixture(autouse=True)
def host_memory(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """Wait until this test's declared host memory fits beside the tests running in the other workers."""
    marker = request.node.get_closest_marker("host_memory")
    if marker is None:
        yield
        return
    need, budget = float(marker.args[0]), HOST_MEMORY_SHARE * _total_gib()
    ledger = tmp_path_factory.getbasetemp().parent / "host-memory"  # shared by the workers of one run
    ledger.mkdir(exist_ok=True)
    claim = ledger / str(os.getpid())
    while True:
        with exclusive_lock(ledger / ".lock"):
            held = 0.0
            for other in ledger.glob("[0-9]*"):
                if _alive(int(other.name)):
                    held += float(other.read_text() or 0)
                else:  # a worker that died mid-test
                    other.unlink(missing_ok=True)
            if held == 0 or held + need <= budget:
                claim.write_text(str(need))
                break
        time.sleep(2)
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            claim.unlink()
