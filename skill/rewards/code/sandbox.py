"""Run model-written Python in isolation, without Docker: bubblewrap namespaces, a dropped uid, rlimits.

``sandbox_isolation()`` probes, once, the strongest layer that works here (the layers are described in
``skill.rewards.code.isolation``); ``run_python`` runs one program under it. A wall-clock timeout kills the
process group, and under a dropped uid every process of that uid is killed afterwards too. Code travels
in an in-memory file on an inherited descriptor that the bootstrap reads and closes before running it.

May import: ``skill.rewards.code`` (isolation, cgroup), ``skill.errors``.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

from skill.errors import SkillError
from skill.rewards.code.cgroup import join_command, memory_cgroup_root, slot_cgroup
from skill.rewards.code.isolation import (
    LEVELS,
    bwrap_sizes_mounts,
    confinement_command,
    kill_uid,
    pids_of_uid,
    remove_files_of_uid,
    slot_uid,
    system_tool,
)

ISOLATION_ENV = "GRPO_RLVR_SANDBOX"  # force a weaker level (tests of the fallbacks)
PYTHON_ENV = "GRPO_RLVR_SANDBOX_PYTHON"
_STARTED = b"\x01"  # written to stderr by the bootstrap before any candidate code runs
_BOOTSTRAP = (
    "import os;os.write(2,b'\\x01');f=open({fd},'rb');s=f.read();f.close();del f;c=compile(s,'main.py','exec');"
    "del s;exec(c)"
)
_log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class SandboxResult:
    """What one run did. ``started`` is False when the sandbox itself failed before Python ran (not the
    program's fault; the program cannot fake it). Under bubblewrap a death by signal N shows as exit 128+N.

    >>> SandboxResult(0, None, "hi\\n", "", False, False, 0.02, True, "bubblewrap").ok
    True
    """

    exit_code: int | None
    signal: int | None
    stdout: str
    stderr: str
    timed_out: bool
    output_truncated: bool
    duration_s: float
    started: bool
    isolation: str

    @property
    def ok(self) -> bool:
        return self.started and self.exit_code == 0 and not self.timed_out and not self.output_truncated


def sandbox_python() -> str:
    """The interpreter the sandbox runs: a system Python under /usr, readable by an unprivileged uid
    (a virtualenv under root's home, mode 700, is not), standard library only.

    >>> sandbox_python().startswith("/")
    True
    """
    for candidate in (os.environ.get(PYTHON_ENV, ""), "/usr/bin/python3.11", "/usr/bin/python3"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return os.path.realpath(getattr(sys, "_base_executable", sys.executable))


def default_workers() -> int:
    """Parallel runs: one per core this process may use.

    >>> default_workers() >= 1
    True
    """
    return max(1, len(os.sched_getaffinity(0)))


@functools.cache
def _working(level: str) -> bool:
    try:
        result = _run("print(6 * 7)", "", level, timeout_s=10.0, memory_mb=256, max_output_bytes=4096, max_processes=16)
    except OSError:
        return False
    return result.ok and result.stdout.strip() == "42"


@functools.cache
def sandbox_isolation() -> str:
    """The strongest isolation that works here (probed once by running a program at each level).
    ``GRPO_RLVR_SANDBOX`` may force a weaker one. Anything below bubblewrap logs a warning, once.

    >>> sandbox_isolation() in LEVELS
    True
    """
    forced = os.environ.get(ISOLATION_ENV, "")
    if forced and forced not in LEVELS:
        raise SkillError(f"{ISOLATION_ENV}={forced!r} is not an isolation level.", f"Send one of: {', '.join(LEVELS)}.")
    root = os.geteuid() == 0
    wanted = {
        "bubblewrap": root and bool(system_tool("setpriv") and system_tool("bwrap")),
        "setpriv-unshare": root and bool(system_tool("setpriv") and system_tool("unshare")),
        "setpriv": root and bool(system_tool("setpriv")),
        "rlimits": True,
    }
    for level in LEVELS[LEVELS.index(forced) if forced else 0 :]:
        if wanted[level] and (level == "rlimits" or _working(level)):
            break
    if level != "bubblewrap":
        missing = {
            "setpriv-unshare": "the filesystem is NOT private (the program reads what its uid can read)",
            "setpriv": "the filesystem is NOT private and the network is open",
            "rlimits": "only resource limits apply: the program runs as this user, with its files and the network",
        }
        _log.warning(
            "Sandbox isolation is %r, not bubblewrap: %s. Install bubblewrap (apt-get install -y bubblewrap) and "
            "run as root for a private filesystem, pid space and network.",
            level,
            missing[level],
        )
    elif not bwrap_sizes_mounts():
        _log.warning(_UNSIZED)
    return level


_UNSIZED = (
    "This bubblewrap (< 0.8.0) has no --size: the sandbox's /tmp, /dev/shm and work dir are unsized tmpfs, "
    "bounded only by a memory cgroup where there is one. Install bubblewrap >= 0.8.0."
)


def isolation_status() -> dict[str, object]:
    """The sandbox's isolation level and what weakens it here, for a status report.

    >>> sorted(isolation_status())
    ['caveats', 'level', 'memory_cgroup', 'tmpfs_sized']
    """
    level = sandbox_isolation()
    sized = level == "bubblewrap" and bwrap_sizes_mounts()
    caveats = [_UNSIZED] if level == "bubblewrap" and not sized else []
    if level != "bubblewrap":
        caveats.append(f"isolation is {level!r}, not bubblewrap: no private filesystem")
    cgroup = memory_cgroup_root() is not None
    if not cgroup:
        caveats.append("no memory cgroup: the run's total memory is bounded by processes x memory_mb")
    return {"level": level, "tmpfs_sized": sized, "memory_cgroup": cgroup, "caveats": caveats}


def _collect_output(process: subprocess.Popen, deadline: float, cap: int, on_exit: Callable[[], None]) -> tuple:
    """Read both pipes until EOF and exit, the deadline, or ``cap`` bytes in either (the run is then killed).
    When the program exits (seen on a pidfd, without reaping it) ``on_exit`` kills what it left behind,
    so a lingering child holding the pipes does not keep the run alive until the deadline."""
    buffers = {process.stdout.fileno(): bytearray(), process.stderr.fileno(): bytearray()}
    timed_out = truncated = False
    pidfd = os.pidfd_open(process.pid)
    with selectors.DefaultSelector() as selector:
        for fd in (*buffers, pidfd):
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map() and not truncated and not timed_out:
            events = selector.select(max(0.0, deadline - time.monotonic()))
            timed_out = not events and time.monotonic() >= deadline
            for key, _ in events:
                if key.fd == pidfd:
                    selector.unregister(pidfd)
                    on_exit()
                    continue
                chunk = os.read(key.fd, 65536)
                buffers[key.fd] += chunk
                truncated = truncated or len(buffers[key.fd]) > cap
                if not chunk:
                    selector.unregister(key.fd)
    os.close(pidfd)
    out, err = (bytes(buffer[:cap]) for buffer in buffers.values())
    return out, err, timed_out, truncated


class _Exit(NamedTuple):
    stdout: bytes
    stderr: bytes
    timed_out: bool
    truncated: bool
    status: int
    duration_s: float


def _rlimits(level: str, timeout_s: float, memory_mb: int, max_processes: int) -> dict[str, int]:
    limits = {
        "cpu": math.ceil(timeout_s) + 1,
        "as": memory_mb << 20,
        "fsize": 16 << 20,
        "nofile": 64,
        "nproc": max_processes,
        "core": 0,
    }
    if level == "rlimits" and os.geteuid() != 0:  # the count is per user: leave room for the user's own processes
        limits["nproc"] += len(pids_of_uid(os.getuid()))
    return limits


@contextlib.contextmanager
def _memory_file(name: str, text: str) -> Iterator[int]:
    fd = os.memfd_create(name)
    try:
        os.write(fd, text.encode())
        os.lseek(fd, 0, os.SEEK_SET)
        yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def _work_dir(private: bool, uid: int | None) -> Iterator[str | None]:
    """The program's working directory: None under bubblewrap (its own private tmpfs), else a fresh one."""
    if private:
        yield None
        return
    workdir = tempfile.mkdtemp(prefix="grpo-rlvr-run-")
    try:
        if uid is not None:
            os.chown(workdir, uid, uid)
        yield workdir
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _execute(
    command: list[str], fds: tuple[int, int], cwd: str | None, uid: int | None, timeout_s: float, cap: int
) -> _Exit:
    """Start the confined program (code on ``fds[0]``, stdin from ``fds[1]``), collect its output, leave nothing."""
    private = cwd is None  # no work dir of ours: bubblewrap's private one, in a pid namespace of its own
    timed_out = truncated = False
    start = time.monotonic()
    with subprocess.Popen(
        command,
        stdin=fds[1],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        pass_fds=(fds[0],),
        env={},
        start_new_session=True,
        cwd=cwd,
    ) as process:

        def kill_the_rest() -> None:  # the process group; under a dropped uid, every process of that uid
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            if uid is not None and not private:  # a daemonised child escapes the group, not the uid
                kill_uid(uid)

        try:
            out, err, timed_out, truncated = _collect_output(process, start + timeout_s, cap, kill_the_rest)
        finally:
            kill_the_rest()
            process.wait()
            if uid is not None and private and (timed_out or truncated):
                kill_uid(uid)  # the pid namespace dies with its pid 1; this is only insurance
    return _Exit(out, err, timed_out, truncated, process.returncode, time.monotonic() - start)


def _run(
    code: str,
    stdin: str,
    level: str,
    *,
    timeout_s: float,
    memory_mb: int,
    max_output_bytes: int,
    max_processes: int,
    total_memory_mb: int | None = None,
) -> SandboxResult:
    limits = _rlimits(level, timeout_s, memory_mb, max_processes)
    private = level == "bubblewrap"  # a private tmpfs work dir, and a pid namespace that dies with its pid 1
    with contextlib.ExitStack() as stack:
        uid = stack.enter_context(slot_uid()) if level != "rlimits" else None
        if uid is not None and not private:  # at the end, once its processes are gone: no file outlives the run
            stack.callback(remove_files_of_uid, uid)
        total = (total_memory_mb or 2 * memory_mb) << 20
        group = stack.enter_context(slot_cgroup(uid, total)) if uid is not None else None
        cwd = stack.enter_context(_work_dir(private, uid))
        code_fd = stack.enter_context(_memory_file("code", code))
        stdin_fd = stack.enter_context(_memory_file("stdin", stdin))
        bootstrap = [sandbox_python(), "-I", "-S", "-c", _BOOTSTRAP.format(fd=code_fd)]
        command = [*join_command(group), *confinement_command(level, uid, limits), *bootstrap]
        run = _execute(command, (code_fd, stdin_fd), cwd, uid, timeout_s, max_output_bytes)
    started = run.stderr.startswith(_STARTED)
    return SandboxResult(
        exit_code=run.status if run.status >= 0 else None,
        signal=-run.status if run.status < 0 else None,
        stdout=run.stdout.decode(errors="replace"),
        stderr=run.stderr[len(_STARTED) if started else 0 :].decode(errors="replace"),
        timed_out=run.timed_out,
        output_truncated=run.truncated,
        duration_s=run.duration_s,
        started=started,
        isolation=level,
    )


def run_python(
    code: str,
    stdin: str = "",
    *,
    timeout_s: float = 5.0,
    memory_mb: int = 512,
    max_output_bytes: int = 1 << 20,
    max_processes: int = 16,
    isolation: str | None = None,
    total_memory_mb: int | None = None,
) -> SandboxResult:
    """Run ``code`` as a program (``/usr/bin/python3.11 -I -S``, standard library only) in the sandbox.

    Memory: ``memory_mb`` of address space per process, and ``total_memory_mb`` (default twice
    ``memory_mb``) for the whole run, its processes and its tmpfs/memfd files together, through a memory
    cgroup where root can create one (``skill.rewards.code.cgroup.memory_cgroup_root``). Without a cgroup
    the total is bounded only by ``max_processes`` x ``memory_mb`` plus the tmpfs mounts (3 x 16 MiB under
    bubblewrap) and ``nofile`` x ``fsize`` of memfd per process.
    ``max_processes`` counts every process and thread of the run's uid, the sandbox's own one included.
    Output past ``max_output_bytes`` on either stream kills the run (``output_truncated``). ``isolation``
    picks a level other than ``sandbox_isolation()`` (tests of the fallbacks); the caller checks it works.

    >>> result = run_python("print(input()[::-1])", stdin="abc")
    >>> result.stdout, result.exit_code, result.timed_out
    ('cba\\n', 0, False)
    """
    if isolation is not None and isolation not in LEVELS:
        raise SkillError(f"Unknown sandbox isolation {isolation!r}.", f"Send one of: {', '.join(LEVELS)}.")
    return _run(
        code,
        stdin,
        isolation or sandbox_isolation(),
        timeout_s=timeout_s,
        memory_mb=memory_mb,
        max_output_bytes=max_output_bytes,
        max_processes=max_processes,
        total_memory_mb=total_memory_mb,
    )


def run_parallel(tasks: Sequence[Callable[[], T]], workers: int | None = None) -> list[T | Exception]:
    """Call each task on a pool of threads (each sandbox run is a subprocess, so threads suffice);
    an exception is returned in its place, not raised.

    >>> run_parallel([lambda: 1, lambda: 1 / 0])
    [1, ZeroDivisionError('division by zero')]
    """

    def safe(task: Callable[[], T]) -> T | Exception:
        try:
            return task()
        except Exception as exc:
            return exc

    if len(tasks) <= 1:
        return [safe(task) for task in tasks]
    with ThreadPoolExecutor(max_workers=min(workers or default_workers(), len(tasks))) as pool:
        return list(pool.map(safe, tasks))


def run_python_batch(
    programs: Sequence[tuple[str, str]], *, workers: int | None = None, **limits: float
) -> list[SandboxResult | Exception]:
    """Run (code, stdin) pairs in parallel, up to one per core, each in its own slot (own uid).

    >>> [r.stdout for r in run_python_batch([("print(1)", ""), ("print(input())", "2")])]
    ['1\\n', '2\\n']
    """
    return run_parallel([functools.partial(run_python, code, stdin, **limits) for code, stdin in programs], workers)
