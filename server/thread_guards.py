"""Process-wide guards for what the server's worker threads share: ``ast.parse`` serialised.

The server runs each tool call in a worker thread, and several tools parse Python source (the reward
fingerprint reads every module a reward imports; the TRL contract reads the trainer's source). CPython
3.11 keeps the AST constructor's recursion depth in per-interpreter state, so two threads building ASTs
at once can fail with ``SystemError: AST constructor recursion depth mismatch`` (CPython issue
gh-106905; seen here in the soak, bench/soak.py, as internal errors of emit_grpo_config and
inspect_rewards). Parsing is fast next to everything else a tool does: one lock costs nothing.
"""

from __future__ import annotations

import ast
import functools
import threading
from typing import Any

_PARSE_LOCK = threading.RLock()


def serialise_ast_parse() -> None:
    """Wrap ``ast.parse`` (once) so that one thread at a time builds an AST.

    >>> serialise_ast_parse(); serialise_ast_parse()
    >>> getattr(ast.parse, "serialised", False), ast.parse("x = 1").body[0].targets[0].id
    (True, 'x')
    """
    if getattr(ast.parse, "serialised", False):
        return
    original = ast.parse

    @functools.wraps(original)
    def parse(*args: Any, **kwargs: Any) -> Any:
        with _PARSE_LOCK:
            return original(*args, **kwargs)

    parse.serialised = True  # type: ignore[attr-defined]
    ast.parse = parse  # type: ignore[assignment]
