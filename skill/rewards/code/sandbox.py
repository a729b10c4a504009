"""Run model-written Python in isolation, without Docker: bubblewrap namespaces, a dropped uid, rlimits.

Layers, strongest first; ``sandbox_isolation()`` says which one this machine gives:

- ``bubblewrap``: ``setpriv`` drops to a per-slot uid (61000 + slot), then ``bwrap`` unshares every
  namespace: no network, a private pid space (the program is pid 1, so it can see or signal no other
  process), a read-only ``/usr``, a size-capped private ``/tmp`` and work dir, an empty environment.
  ``setpriv`` comes first because root's rlimits do not bind: the kernel never enforces
  RLIMIT_NPROC on uid 0, so a fork bomb is only contained once the uid is dropped (the reverse order,
  setpriv inside bwrap, fails with EINVAL: the uid is not mapped in bwrap's user namespace).
- ``setpriv-unshare``: no bubblewrap: dropped uid plus ``unshare -rn`` (no network). The filesystem
  is *not* private: the program can read whatever that uid can read.
- ``setpriv``: dropped uid only (no user namespaces).
- ``rlimits``: not root or no setpriv: resource limits only.

Every layer sets rlimits through ``prlimit`` before exec (CPU seconds, address space, file size,
open files, processes) and a wall-clock timeout kills the process group; under a dropped uid every
process of that uid is killed afterwards too, since the slot's uid belongs to this run alone (slots
are taken with a file lock, so parallel test workers never share one). Code travels in an in-memory
file on an inherited descriptor that the bootstrap reads and closes before running it.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import logging
import math
import os
import re
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from skill.errors import SkillError

LEVELS = ("bubblewrap", "setpriv-unshare", "setpriv", "rlimits")
ISOLATION_ENV = "GRPO_RLVR_SANDBOX"  # force a weaker level (tests of the fallbacks)
PYTHON_ENV = "GRPO_RLVR_SANDBOX_PYTHON"
UID_BASE_ENV = "GRPO_RLVR_SANDBOX_UID_BASE"
SLOTS = 64
WORKDIR = "/work"  # inside bubblewrap: a private tmpfs
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
    import sys

    return os.path.realpath(getattr(sys, "_base_executable", sys.executable))


def default_workers() -> int:
    """Parallel runs: one per core this process may use.

    >>> default_workers() >= 1
    True
    """
    return max(1, len(os.sched_getaffinity(0)))


def _tool(name: str) -> str | None:
    return shutil.which(name, path="/usr/bin:/bin:/usr/sbin:/sbin")


@functools.cache
def _bwrap_flags() -> frozenset[str]:
    """The options this bwrap knows (``--size`` and ``--disable-userns`` came in 0.8.0)."""
    try:
        text = subprocess.run([_tool("bwrap") or "bwrap", "--help"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    return frozenset(re.findall(r"--[a-z][a-z0-9-]*", text))


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
    return [
        *args,
        *["--proc", "/proc", "--dev", "/dev"],
        *sized,
        "--tmpfs",
        "/tmp",
        *sized,
        "--tmpfs",
        WORKDIR,
        "--chdir",
        WORKDIR,
    ]


def _command(level: str, uid: int | None, limits: dict[str, int], fd: int) -> list[str]:
    command = [_tool("prlimit") or "prlimit", *(f"--{name}={value}" for name, value in limits.items()), "--"]
    if uid is not None:
        command += [
            _tool("setpriv") or "setpriv",
            f"--reuid={uid}",
            f"--regid={uid}",
            "--clear-groups",
            "--no-new-privs",
        ]
    if level == "bubblewrap":
        command += [_tool("bwrap") or "bwrap", *_bwrap_args(str(limits["fsize"]))]
    elif level == "setpriv-unshare":
        command += [_tool("unshare") or "unshare", "-rn"]
    return command + [sandbox_python(), "-I", "-S", "-c", _BOOTSTRAP.format(fd=fd)]


@contextlib.contextmanager
def _slot_uid() -> Iterator[int]:
    """A uid for this run alone: slot N (uid base + N) is held by an flock on its file, which excludes other
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


def _pids_of(uid: int) -> list[int]:
    """Live processes whose real uid is ``uid`` (zombies are skipped: they hold nothing)."""
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


def _kill_uid(uid: int) -> None:
    for _ in range(100):  # until none is left: a process may fork while its siblings die
        if not (pids := _pids_of(uid)):
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.005)


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
        "bubblewrap": root and bool(_tool("setpriv") and _tool("bwrap")),
        "setpriv-unshare": root and bool(_tool("setpriv") and _tool("unshare")),
        "setpriv": root and bool(_tool("setpriv")),
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
    return level


def _collect(process: subprocess.Popen, deadline: float, cap: int, on_exit: Callable[[], None]) -> tuple:
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


def _run(
    code: str, stdin: str, level: str, *, timeout_s: float, memory_mb: int, max_output_bytes: int, max_processes: int
) -> SandboxResult:
    limits = {
        "cpu": math.ceil(timeout_s) + 1,
        "as": memory_mb << 20,
        "fsize": 16 << 20,
        "nofile": 64,
        "nproc": max_processes,
        "core": 0,
    }
    if level == "rlimits" and os.geteuid() != 0:  # the count is per user: leave room for the user's own processes
        limits["nproc"] += len(_pids_of(os.getuid()))
    private = level == "bubblewrap"  # a private tmpfs work dir, and a pid namespace that dies with its pid 1
    with _slot_uid() if level != "rlimits" else contextlib.nullcontext(None) as uid:
        workdir = WORKDIR if private else tempfile.mkdtemp(prefix="grpo-rlvr-run-")
        code_fd, stdin_fd = os.memfd_create("code"), os.memfd_create("stdin")
        try:
            for fd, text in ((code_fd, code), (stdin_fd, stdin)):
                os.write(fd, text.encode())
                os.lseek(fd, 0, os.SEEK_SET)
            if uid is not None and not private:
                os.chown(workdir, uid, uid)
            start = time.monotonic()
            with subprocess.Popen(
                _command(level, uid, limits, code_fd),
                stdin=stdin_fd,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(code_fd,),
                env={},
                start_new_session=True,
                cwd=None if private else workdir,
            ) as process:

                def kill_the_rest() -> None:  # the process group; under a dropped uid, every process of that uid
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(process.pid, signal.SIGKILL)
                    if uid is not None and not private:  # a daemonised child escapes the group, not the uid
                        _kill_uid(uid)

                try:
                    out, err, timed_out, truncated = _collect(
                        process, start + timeout_s, max_output_bytes, kill_the_rest
                    )
                finally:
                    kill_the_rest()
                    process.wait()
                    if uid is not None and private and (timed_out or truncated):
                        _kill_uid(uid)  # the pid namespace dies with its pid 1; this is only insurance
            duration = time.monotonic() - start
        finally:
            os.close(code_fd)
            os.close(stdin_fd)
            if not private:
                shutil.rmtree(workdir, ignore_errors=True)
    started, status = err.startswith(_STARTED), process.returncode
    return SandboxResult(
        exit_code=status if status >= 0 else None,
        signal=-status if status < 0 else None,
        stdout=out.decode(errors="replace"),
        stderr=err[len(_STARTED) if started else 0 :].decode(errors="replace"),
        timed_out=timed_out,
        output_truncated=truncated,
        duration_s=duration,
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
) -> SandboxResult:
    """Run ``code`` as a program (``/usr/bin/python3.11 -I -S``, standard library only) in the sandbox.

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
