"""How a sandboxed program is confined: the command that wraps it, and the uid it runs as.

Layers, strongest first (``skill.rewards.code.sandbox.sandbox_isolation`` says which one this machine gives):

- ``bubblewrap``: ``setpriv`` drops to a per-slot uid (61000 + slot), then ``bwrap`` unshares every
  namespace: no network, a private pid space (the program is pid 1, so it can see or signal no other
  process), a read-only ``/usr``, an empty environment. The only writable mounts are size-capped tmpfs
  (``/tmp``, the work dir and ``/dev/shm``, each ``fsize`` bytes: 16 MiB); bubblewrap's own tmpfs root
  and its ``/dev`` are remounted read-only (unsized, a single completion wrote 1.28 GB to them before).
  ``setpriv`` comes first because root's rlimits do not bind: the kernel never enforces
  RLIMIT_NPROC on uid 0, so a fork bomb is only contained once the uid is dropped (the reverse order,
  setpriv inside bwrap, fails with EINVAL: the uid is not mapped in bwrap's user namespace).
- ``setpriv-unshare``: no bubblewrap: dropped uid plus ``unshare -rn`` (no network). The filesystem
  is *not* private: the program can read whatever that uid can read.
- ``setpriv``: dropped uid only (no user namespaces).

Under both ``setpriv`` levels the files the slot's uid left in ``/tmp``, ``/dev/shm`` and ``/var/tmp`` are
deleted after each run (``remove_files_of_uid``), so none outlives it.
- ``rlimits``: not root or no setpriv: resource limits only.

Every layer sets rlimits through ``prlimit`` before exec (CPU seconds, address space, file size, open
files, processes); ``skill.rewards.code.cgroup`` adds a memory cgroup over the whole run where it can.
Under a dropped uid every process of that uid can be killed afterwards, since the
slot's uid belongs to one run alone (slots are taken with a file lock, so parallel test workers never
share one).

May import: nothing from the project.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator

LEVELS = ("bubblewrap", "setpriv-unshare", "setpriv", "rlimits")
UID_BASE_ENV = "GRPO_RLVR_SANDBOX_UID_BASE"
SLOTS = 64
WORKDIR = "/work"  # inside bubblewrap: a private tmpfs


def system_tool(name: str) -> str | None:
    """The path of a system binary (searched in the system directories only, not the caller's PATH).

    >>> system_tool("sh").startswith("/")
    True
    """
    return shutil.which(name, path="/usr/bin:/bin:/usr/sbin:/sbin")


@functools.cache
def _bwrap_flags() -> frozenset[str]:
    """The options this bwrap knows (``--size`` and ``--disable-userns`` came in 0.8.0)."""
    try:
        help_text = subprocess.run(
            [system_tool("bwrap") or "bwrap", "--help"], capture_output=True, text=True, timeout=10
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    return frozenset(re.findall(r"--[a-z][a-z0-9-]*", help_text))


def bwrap_sizes_mounts() -> bool:
    """Whether this bubblewrap caps its tmpfs mounts (``--size``, bubblewrap >= 0.8.0); without it the
    writable mounts are bounded only by the memory cgroup, or by nothing but the host's memory."""
    return "--size" in _bwrap_flags()


def _bwrap_args(size: str) -> list[str]:
    flags = _bwrap_flags()
    args = ["--unshare-all", "--unshare-user", "--die-with-parent", "--new-session", "--as-pid-1", "--clearenv"]
    args += ["--disable-userns"] if "--disable-userns" in flags else []
    args += ["--ro-bind", "/usr", "/usr"]
    for path in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    sized = ["--size", size] if "--size" in flags else []
    mounts = ["--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev", *sized, "--tmpfs", "/dev/shm"]
    mounts += [*sized, "--tmpfs", "/tmp", *sized, "--tmpfs", WORKDIR, "--remount-ro", "/"]
    return [*args, *mounts, "--chdir", WORKDIR]


def confinement_command(level: str, uid: int | None, limits: dict[str, int]) -> list[str]:
    """The command that confines what follows it: ``prlimit`` with ``limits``, then (given a uid) ``setpriv``
    to that uid, then bwrap or ``unshare -rn`` by level.

    >>> confinement_command("rlimits", None, {"cpu": 3})[1:]
    ['--cpu=3', '--']
    """
    command = [system_tool("prlimit") or "prlimit", *(f"--{name}={value}" for name, value in limits.items()), "--"]
    if uid is not None:
        setpriv = system_tool("setpriv") or "setpriv"
        command += [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs"]
    if level == "bubblewrap":
        command += [system_tool("bwrap") or "bwrap", *_bwrap_args(str(limits["fsize"]))]
    elif level == "setpriv-unshare":
        command += [system_tool("unshare") or "unshare", "-rn"]
    return command


@contextlib.contextmanager
def slot_uid() -> Iterator[int]:
    """A uid for one run alone: slot N (uid base + N) is held by an flock on its file, which excludes other
    threads (each open is its own lock) and other processes, e.g. parallel test workers."""
    directory = os.path.join(tempfile.gettempdir(), f"grpo-rlvr-sandbox-slots-{os.geteuid()}")
    os.makedirs(directory, mode=0o700, exist_ok=True)
    while True:
        for slot in range(SLOTS):
            handle = open(os.path.join(directory, str(slot)), "a")  # noqa: SIM115 (held while the run lasts)
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.close()
                continue
            with handle:
                yield int(os.environ.get(UID_BASE_ENV, "61000")) + slot
            return
        time.sleep(0.01)


def pids_of_uid(uid: int) -> list[int]:
    """Live processes whose real uid is ``uid`` (zombies are skipped: they hold nothing).

    >>> os.getpid() in pids_of_uid(os.getuid())
    True
    """
    needle, found = f"\nUid:\t{uid}\t".encode(), []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{name}/status", "rb") as handle:
                status = handle.read()
        except OSError:
            continue
        if needle in status and b"\nState:\tZ" not in status:
            found.append(int(name))
    return found


SHARED_TEMP_DIRS = ("/tmp", "/dev/shm", "/var/tmp")


def remove_files_of_uid(uid: int, roots: tuple[str, ...] = SHARED_TEMP_DIRS) -> int:
    """Delete what ``uid`` (a slot's, after its run) left in the shared temporary directories, so that no
    file of one run outlives it under the fallback levels (bubblewrap's are private tmpfs). Only directories
    others may write to, or the uid's own, can hold its files: others are not descended. Returns the count.

    >>> remove_files_of_uid(2**31 - 2, roots=(tempfile.gettempdir(),))
    0
    """
    removed = 0
    pending = list(roots)
    while pending:
        try:
            entries = list(os.scandir(pending.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
                if info.st_uid == uid:
                    shutil.rmtree(entry.path) if entry.is_dir(follow_symlinks=False) else os.unlink(entry.path)
                    removed += 1
                elif entry.is_dir(follow_symlinks=False) and info.st_mode & 0o002:
                    pending.append(entry.path)
            except OSError:
                continue
    return removed


def kill_uid(uid: int) -> None:
    """SIGKILL every process of ``uid`` until none is left (a slot's uid: nothing else runs as it)."""
    for _ in range(100):  # until none is left: a process may fork while its siblings die
        if not (pids := pids_of_uid(uid)):
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.005)
