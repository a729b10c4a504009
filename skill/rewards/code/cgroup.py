"""A memory cgroup per sandbox slot: one cap on everything a run holds, where the host lets root create one.

Per-process limits do not add up to a total: ``RLIMIT_AS`` binds each process, ``RLIMIT_NPROC`` counts
them, so 16 processes x ``memory_mb`` each was measured at 2.1 GB for one completion, and files in tmpfs
or memfd count against neither. A memory cgroup counts all of it (anonymous memory, tmpfs, memfd, page
cache) for every process of the run. cgroup v2 is used when this process's cgroup can delegate the
memory controller to a child; else cgroup v1's memory hierarchy; else none (``memory_cgroup_root()`` is
None, and the sandbox falls back to its per-process limits).

The run joins its slot's cgroup through ``join_command``: a root shell writes its own pid into
``cgroup.procs`` and then execs the confining command, so nothing of the run ever runs outside it. A
slot's cgroup is reused by its next run; all of them are removed when this process exits. Each process
has a parent cgroup of its own (``grpo-rlvr-sandbox-<euid>-<pid>``: another process's exit cannot remove
it), and a parent found missing is made and delegated again before a slot is made under it: on cgroup
v2 a parent recreated without ``+memory`` in its ``cgroup.subtree_control`` would leave its slots with
no ``memory.max`` at all. A slot whose limit cannot be set logs a warning and runs without the cap.

May import: ``skill.rewards.code.isolation``.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import os
from pathlib import Path

from skill.rewards.code.isolation import system_tool

CGROUP_ENV = "GRPO_RLVR_SANDBOX_CGROUP"  # "0": do not use a cgroup (tests of the fallback)
_V1 = Path("/sys/fs/cgroup/memory")
_V2_MOUNTS = (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified"))
_log = logging.getLogger(__name__)


def _own_path(controller: str) -> str | None:
    """This process's cgroup path for a v1 controller (``memory``), or for v2 (``""``)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if controllers.split(",") == [controller] or (controller == "" and controllers == ""):
                return path.lstrip("/")
    return None


def _writable_parent(base: Path, limit_file: str) -> Path | None:
    """``base/grpo-rlvr-sandbox-<euid>-<pid>`` if root can create it and a child of it takes a memory limit."""
    parent = base / f"grpo-rlvr-sandbox-{os.geteuid()}-{os.getpid()}"
    probe = parent / "probe"
    try:
        _delegate(parent)
        probe.mkdir(exist_ok=True)
        (probe / limit_file).write_text(str(64 << 20))
        if int((probe / limit_file).read_text().split()[0]) != 64 << 20:
            return None
        atexit.register(_remove, parent)  # leave the host's cgroup tree as it was found
        return parent
    except (OSError, ValueError, IndexError):
        return None
    finally:
        with contextlib.suppress(OSError):
            probe.rmdir()


def _delegate(parent: Path) -> None:
    """Make ``parent`` (again) and, on cgroup v2, hand the memory controller down to its children."""
    parent.mkdir(exist_ok=True)
    if (parent.parent / "cgroup.subtree_control").exists():
        (parent / "cgroup.subtree_control").write_text("+memory")


def _remove(parent: Path) -> None:
    for group in [*parent.glob("slot-*"), parent]:
        with contextlib.suppress(OSError):
            group.rmdir()


@functools.cache
def memory_cgroup_root() -> tuple[Path, str] | None:
    """Where slot cgroups are made and which file limits them (``memory.max`` or v1's
    ``memory.limit_in_bytes``), or None: not root, no writable memory controller, or ``GRPO_RLVR_SANDBOX_CGROUP=0``.
    """
    if os.environ.get(CGROUP_ENV) == "0" or os.geteuid() != 0 or not system_tool("sh"):
        return None
    own_v2 = _own_path("")
    for mount in _V2_MOUNTS:
        controllers = mount / (own_v2 or "") / "cgroup.controllers"
        if own_v2 is not None and controllers.exists() and "memory" in controllers.read_text().split():
            parent = _writable_parent(mount / own_v2, "memory.max")
            if parent is not None:
                return parent, "memory.max"
    own_v1 = _own_path("memory")
    if own_v1 is not None and (_V1 / own_v1 / "memory.limit_in_bytes").exists():
        parent = _writable_parent(_V1 / own_v1, "memory.limit_in_bytes")
        if parent is not None:
            return parent, "memory.limit_in_bytes"
    return None


@contextlib.contextmanager
def slot_cgroup(uid: int, limit_bytes: int):
    """The cgroup of the slot whose uid is ``uid``, capped at ``limit_bytes`` (swap included where the host
    accounts it); yields its directory, or None when no cgroup is available."""
    root = memory_cgroup_root()
    if root is None:
        yield None
        return
    parent, limit_file = root
    group = parent / f"slot-{uid}"
    try:
        if not parent.exists():  # removed under us (e.g. by hand, or by a forked copy's exit): delegate again
            _delegate(parent)
        group.mkdir(exist_ok=True)
        swap = group / ("memory.swap.max" if limit_file == "memory.max" else "memory.memsw.limit_in_bytes")
        if limit_file != "memory.max" and swap.exists():
            swap.write_text("-1")  # v1: the memory+swap limit may never sit below the memory limit
        (group / limit_file).write_text(str(limit_bytes))
        if swap.exists():
            swap.write_text("0" if limit_file == "memory.max" else str(limit_bytes))
        if int((group / limit_file).read_text().split()[0]) != limit_bytes:
            raise OSError(f"{group / limit_file} did not take {limit_bytes}")
    except (OSError, ValueError, IndexError) as exc:
        _log.warning("No memory cgroup for this sandbox run (%s): only the per-process limits bind.", exc)
        yield None
        return
    yield group  # kept for the slot's next run (making a memory cgroup costs milliseconds); removed at exit


def join_command(group: Path | None) -> list[str]:
    """The prefix that puts the rest of a command into ``group`` before it runs (nothing without a group).

    >>> join_command(None)
    []
    """
    if group is None:
        return []
    return [system_tool("sh") or "/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(group / "cgroup.procs")]
