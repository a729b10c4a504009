"""Where run state lives: one root for runs, inspections, route decisions and caches.

The root comes from the ``GRPO_RLVR_HOME`` environment variable (the CLI's ``--state-root``
sets it), else ``$XDG_DATA_HOME/grpo-rlvr``, else ``~/.local/share/grpo-rlvr`` — outside the
repository, so a checkout never fills with checkpoints.
"""

from __future__ import annotations

import os
from pathlib import Path

STATE_ROOT_ENV = "GRPO_RLVR_HOME"
SUBDIRECTORIES = ("runs", "inspections", "routes", "cache")


def state_root() -> Path:
    """The state root, created on first use.

    >>> import os, tempfile
    >>> os.environ[STATE_ROOT_ENV] = tempfile.mkdtemp()
    >>> state_root() == Path(os.environ[STATE_ROOT_ENV])
    True
    """
    configured = os.environ.get(STATE_ROOT_ENV)
    if configured:
        root = Path(configured).expanduser()
    else:
        data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
        root = Path(data_home) / "grpo-rlvr"
    root.mkdir(parents=True, exist_ok=True)
    return root


def state_dir(kind: str) -> Path:
    """One of the state root's subdirectories (``runs``, ``inspections``, ``routes``, ``cache``).

    >>> state_dir("runs").name
    'runs'
    """
    if kind not in SUBDIRECTORIES:
        raise ValueError(f"unknown state directory {kind!r}; expected one of {SUBDIRECTORIES}")
    path = state_root() / kind
    path.mkdir(parents=True, exist_ok=True)
    return path
