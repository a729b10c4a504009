"""Where run state lives: one root for runs, inspections, route decisions and caches.

The root comes from the ``GRPO_RLVR_HOME`` environment variable (the CLI's ``--state-root``
sets it), else ``$XDG_DATA_HOME/grpo-rlvr``, else ``~/.local/share/grpo-rlvr`` — outside the
repository, so a checkout never fills with checkpoints.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
from collections.abc import Iterator
from pathlib import Path

from skill.errors import SkillError

STATE_ROOT_ENV = "GRPO_RLVR_HOME"
SUBDIRECTORIES = ("runs", "inspections", "routes", "cache")
STAGING_SUFFIX = ".tmp"  # write_atomically's staging files: .<name>.<writer pid>.<random>.tmp


def state_root() -> Path:
    """The state root, created on first use.

    >>> import os, tempfile
    >>> from unittest import mock
    >>> with mock.patch.dict(os.environ, {STATE_ROOT_ENV: tempfile.mkdtemp()}):
    ...     state_root() == Path(os.environ[STATE_ROOT_ENV])
    True
    """
    configured = os.environ.get(STATE_ROOT_ENV)
    if configured:
        root = Path(configured).expanduser()
    else:
        data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
        root = Path(data_home) / "grpo-rlvr"
    root = Path(os.path.abspath(root))  # a relative root would name another folder in a worker's run directory
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


_IDENTIFIER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,79}")


def validate_identifier(value: str, kind: str) -> str:
    """Refuse an id that could name a file outside its state directory.

    >>> validate_identifier("insp-20261130-1", "inspection")
    'insp-20261130-1'
    >>> validate_identifier("../x", "run")
    Traceback (most recent call last):
    ...
    skill.errors.SkillError: Run id '../x' is not allowed. Send letters, digits, '.', '_' and '-' (no '/' or '..').
    """
    if not _IDENTIFIER.fullmatch(value) or ".." in value:
        shown = value if len(value) <= 60 else value[:60] + "..."
        raise SkillError(
            f"{kind.capitalize()} id {shown!r} is not allowed.",
            "Send letters, digits, '.', '_' and '-' (no '/' or '..').",
        )
    return value


def new_id(prefix: str) -> str:
    """A sortable, unique id for a stored object: prefix, UTC-ish timestamp, random suffix.

    >>> new_id("run").startswith("run-")
    True
    """
    import time
    import uuid

    return f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"


def write_atomically(path: Path, text: str) -> None:
    """Write a sibling file, then rename it over ``path``: readers never see half a file.

    >>> import tempfile
    >>> target = Path(tempfile.mkdtemp()) / "x.json"
    >>> write_atomically(target, "{}"); target.read_text()
    '{}'
    """
    import tempfile

    # A name of its own per writer (two threads replacing the same file must not share one staging file), removed
    # when the write fails (a full disk must not leave an empty *.tmp behind). Only a writer killed outright
    # (SIGKILL, a power cut) leaves one; the pid in its name says whose it was (staging_writer).
    handle, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{os.getpid()}.", suffix=STAGING_SUFFIX)
    staging = Path(name)
    try:
        with os.fdopen(handle, "w") as stream:
            stream.write(text)
        staging.chmod(0o644)
        staging.replace(path)
    except BaseException as exc:
        staging.unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.filename is None:  # a failed write names no file: name the one meant
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise


def staging_writer(path: Path) -> int | None:
    """The pid of the process that was writing a staging file (``write_atomically``), or None for another file.

    >>> staging_writer(Path(".run.json.4242.k3x9q.tmp")), staging_writer(Path("run.json"))
    (4242, None)
    """
    parts = path.name.split(".")
    if not path.name.endswith(STAGING_SUFFIX) or len(parts) < 4 or not parts[-3].isdigit():
        return None
    return int(parts[-3])


@contextlib.contextmanager
def exclusive_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created when missing): one holder at a time, across the threads of
    one process (each ``open()`` is its own lock owner) and across processes sharing the state root.

    >>> import tempfile
    >>> with exclusive_lock(Path(tempfile.mkdtemp()) / ".lock"):
    ...     pass
    """
    with path.open("a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
