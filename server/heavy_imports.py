"""The training libraries, imported once under a lock before the first tool that needs them runs.

The server runs each tool call in a worker thread. transformers resolves its names lazily, on first
attribute access, and two threads importing it (or TRL, or datasets) at the same moment can see a
half-initialised module: two ``emit_grpo_config`` calls in one ``asyncio.gather`` on a fresh server
failed with an internal error, or "Cannot load dataset … no attribute 'PreTrainedTokenizerBase'".
``ensure_loaded`` imports every module and name the tools reach, in one thread, while the others
wait; afterwards it returns at once. Start-up stays light: nothing is imported until a tool needs it.
"""

from __future__ import annotations

import importlib
import logging
import threading
import time

logger = logging.getLogger("grpo_rlvr.server")

# (module, names read from it): what the tools import from a worker thread (skill/ greps for these).
PRELOAD: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("torch", ("nn", "Tensor")),
    (
        "transformers",
        (
            "AutoConfig",
            "AutoTokenizer",
            "AutoModelForCausalLM",
            "PreTrainedTokenizerBase",
            "PreTrainedTokenizerFast",
            "GenerationConfig",
            "TrainerCallback",
            "LlamaConfig",
            "LlamaForCausalLM",
        ),
    ),
    ("datasets", ("Dataset", "load_dataset")),
    ("datasets.naming", ("camelcase_to_snakecase",)),
    ("trl", ("GRPOConfig",)),
)

# Tools that only read the state root: they never wait for the libraries.
LIGHT_TOOLS = frozenset({"run_status", "run_logs", "cancel_run", "list_runs"})

_LOCK = threading.Lock()
_LOADED = threading.Event()


def needs_heavy_imports(tool: str) -> bool:
    """
    >>> needs_heavy_imports("emit_grpo_config"), needs_heavy_imports("run_status")
    (True, False)
    """
    return tool not in LIGHT_TOOLS


def ensure_loaded() -> float:
    """Import the training libraries once (other callers wait on the lock); returns the seconds this call spent.

    >>> ensure_loaded() >= 0 and is_loaded()
    True
    """
    if _LOADED.is_set():
        return 0.0
    started = time.perf_counter()
    with _LOCK:
        if not _LOADED.is_set():
            for module_name, names in PRELOAD:
                module = importlib.import_module(module_name)
                for name in names:
                    getattr(module, name)  # resolves transformers' lazy names now, in this thread only
            _LOADED.set()
            logger.info("training libraries imported in %.1f s", time.perf_counter() - started)
    return time.perf_counter() - started


def is_loaded() -> bool:
    return _LOADED.is_set()
