"""Python source parsed one thread at a time.

The server runs each tool call in a worker thread, and several tools parse Python source: the reward
fingerprint reads every module a reward imports, the TRL contract reads the trainer's source, the unit-test
reward reads its cases. CPython 3.11 keeps the AST constructor's recursion depth in per-interpreter state, so two
threads building ASTs at once can fail with ``SystemError: AST constructor recursion depth mismatch`` (CPython
gh-106905; seen in the soak, ``bench/soak.py``, as internal errors of emit_grpo_config and inspect_rewards).
Every parse of the project goes through ``parse``, under one lock: parsing is fast next to everything else a tool
does, and nothing outside the project is patched. Owns: ``parse``. May import: nothing of the project.
"""

from __future__ import annotations

import ast
import threading

_LOCK = threading.RLock()


def parse(source: str | bytes, filename: str = "<unknown>", mode: str = "exec") -> ast.AST:
    """``ast.parse``, one thread at a time.

    >>> parse("x = 1").body[0].targets[0].id, type(parse("1 + 2", mode="eval")).__name__
    ('x', 'Expression')
    """
    with _LOCK:
        return ast.parse(source, filename, mode)
