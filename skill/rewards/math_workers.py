"""math-verify in warm worker processes, with a time limit on the verification alone.

math-verify's own timeouts use ``signal.alarm``, which fails off the main thread (the MCP server runs tools
in threads; TRL may call rewards from threads), and a pathological expression can hang sympy. So each
comparison runs in a worker process that the parent can kill.

- A worker starts once (interpreter, math-verify and sympy imported, one warm-up comparison) and is reused.
  Its start is bounded separately (``START_TIMEOUT_S``) and never counted in a comparison's limit, so a busy
  machine slows the first item down instead of failing it.
- A worker's address space is capped (``WORKER_MEMORY_MB``).
- A comparison past its limit kills that one worker; the others keep running, and a fresh one starts the
  next time one is needed.
- Safe from several threads (each comparison holds one worker alone; up to ``MAX_WORKERS`` run at once)
  and across ``fork``: a forked child leaves its parent's workers alone and starts its own.
- A worker is a plain ``python`` subprocess speaking JSON lines over its stdin/stdout, started from this
  file by path with only the standard library on top of math-verify: no ``multiprocessing`` bootstrapping,
  so a trainer script without an ``if __name__ == "__main__"`` guard, or a daemonic process, can use it.
  A worker exits when its parent's end of the pipe closes. POSIX only (``select`` on pipes).

Imports only the standard library.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import subprocess
import sys
import threading
import time
from typing import Any

START_TIMEOUT_S = 120.0  # interpreter + sympy on a saturated machine; a start past this fails that item
# Address space of a worker: sympy on a crafted power (9^(9^9)) would otherwise take host memory until the
# timeout; past this it raises MemoryError inside the worker, which answers with an error (the item: None).
WORKER_MEMORY_MB = 2048
MAX_WORKERS = max(1, min(4, os.cpu_count() or 1))
_RUN_THIS_FILE = "import runpy, sys; runpy.run_path(sys.argv[1], run_name='__main__')"


class WorkerFailed(RuntimeError):
    """The worker could not start, died, or answered something that is not a verdict."""


class MathWorker:
    """One warm math-verify process, used by one caller at a time."""

    def __init__(self, start_timeout_s: float = START_TIMEOUT_S) -> None:
        self.process = subprocess.Popen(  # -P: the caller's working directory must not shadow a module
            [sys.executable, "-P", "-c", _RUN_THIS_FILE, os.path.abspath(__file__)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self._buffer = b""
        try:
            reply = self._reply(start_timeout_s, "start")
        except BaseException:
            self.kill()
            raise
        if not reply.get("ready"):
            self.kill()
            raise WorkerFailed(f"math-verify worker did not start: {reply.get('error', reply)}")

    def compare(self, gold: str, answer: str, timeout_s: float) -> bool:
        """math-verify's verdict on ``answer`` against ``gold``; TimeoutError past ``timeout_s``."""
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(json.dumps({"gold": gold, "answer": answer}).encode() + b"\n")
            self.process.stdin.flush()
        except OSError as exc:
            raise WorkerFailed(f"math-verify worker is gone ({exc})") from None
        reply = self._reply(timeout_s, "comparison")
        if "equal" not in reply:
            raise WorkerFailed(f"math-verify failed: {reply.get('error', reply)}")
        return bool(reply["equal"])

    def _reply(self, timeout_s: float, what: str) -> dict[str, Any]:
        assert self.process.stdout is not None
        descriptor, deadline = self.process.stdout.fileno(), time.monotonic() + timeout_s
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"math-verify {what} took longer than {timeout_s:g} s")
            readable, _, _ = select.select([descriptor], [], [], remaining)
            if readable:
                chunk = os.read(descriptor, 65536)
                if not chunk:
                    raise WorkerFailed(f"math-verify worker exited (code {self.process.poll()})")
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()


class MathVerifyPool:
    """Warm workers shared by every thread of this process (see the module docstring)."""

    def __init__(self, max_workers: int = MAX_WORKERS, start_timeout_s: float = START_TIMEOUT_S) -> None:
        self.max_workers = max_workers
        self.start_timeout_s = start_timeout_s
        self.owner_pid = os.getpid()
        self._idle: list[MathWorker] = []
        self._busy: set[MathWorker] = set()
        self._starting = 0
        self._changed = threading.Condition()
        self.started = 0  # workers started over the pool's life: a timeout costs one more, never all

    def equal(self, gold: str, answer: str, timeout_s: float) -> bool:
        """math-verify's verdict; TimeoutError (that worker is killed) past ``timeout_s`` of verification."""
        worker = self._acquire()
        healthy = False
        try:
            verdict = worker.compare(gold, answer, timeout_s)
            healthy = True
            return verdict
        except WorkerFailed as exc:
            healthy = worker.process.poll() is None and "math-verify failed" in str(exc)
            raise
        finally:
            self._release(worker, healthy)

    def _acquire(self) -> MathWorker:
        with self._changed:
            while not self._idle and len(self._busy) + self._starting >= self.max_workers:
                self._changed.wait()
            if self._idle:
                worker = self._idle.pop()
                self._busy.add(worker)
                return worker
            self._starting += 1
        try:  # outside the lock: other threads keep comparing on the warm workers meanwhile
            worker = MathWorker(self.start_timeout_s)
        except BaseException:
            with self._changed:
                self._starting -= 1
                self._changed.notify()
            raise
        with self._changed:  # one step, so no other thread counts this worker twice or not at all
            self._starting -= 1
            self.started += 1
            self._busy.add(worker)
        return worker

    def _release(self, worker: MathWorker, healthy: bool) -> None:
        if not healthy:
            worker.kill()
        with self._changed:
            self._busy.discard(worker)
            if healthy:
                self._idle.append(worker)
            self._changed.notify()

    def warm(self, count: int = 1) -> None:
        """Start workers until ``count`` (at most ``max_workers``) are live, so no caller waits for a start."""
        held = []
        try:
            for _ in range(min(count, self.max_workers)):
                held.append(self._acquire())
        finally:
            for worker in held:
                self._release(worker, True)

    def worker_pids(self) -> set[int]:
        """The process ids of the live workers."""
        with self._changed:
            return {worker.process.pid for worker in [*self._idle, *self._busy]}

    def close(self) -> None:
        """Stop every worker (only from the process that started them)."""
        if os.getpid() != self.owner_pid:
            return
        with self._changed:
            workers = [*self._idle, *self._busy]
            self._idle.clear()
            self._busy.clear()
        for worker in workers:
            worker.kill()


_POOL: MathVerifyPool | None = None
_POOL_LOCK = threading.Lock()
# A forked child keeps its parent's pool here, untouched: closing its copies of the pipes would be harmless,
# but killing the workers would take them from the parent, and a pool dropped here would be closed by __del__.
_FORGOTTEN: list[MathVerifyPool] = []


def shared_pool() -> MathVerifyPool:
    """This process's pool, started on first use."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL.owner_pid != os.getpid():
            _POOL = MathVerifyPool()
        return _POOL


def _after_fork_in_child() -> None:
    global _POOL, _POOL_LOCK
    _POOL_LOCK = threading.Lock()  # another thread may have held it at the fork
    if _POOL is not None:
        _FORGOTTEN.append(_POOL)
        _POOL = None


def _close_shared_pool() -> None:
    if _POOL is not None:
        _POOL.close()


def math_equal(gold: str, answer: str, timeout_s: float = 5.0) -> bool:
    """math-verify's equivalence (gold first), in a warm worker killed past ``timeout_s`` of verification.

    >>> math_equal("$\\\\frac{1}{2}$", "0.5"), math_equal("$\\\\sqrt{2}/2$", "$\\\\frac{1}{\\\\sqrt{2}}$")
    (True, True)
    """
    return shared_pool().equal(gold, answer, timeout_s)


def _serve() -> None:
    """The worker's side: import math-verify, warm it up, then answer one JSON line per request."""
    channel = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    sys.stdout = sys.stderr  # nothing the libraries print may corrupt the channel
    try:
        import logging
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = WORKER_MEMORY_MB * 2**20
        if soft == resource.RLIM_INFINITY or soft > limit:
            resource.setrlimit(
                resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard)
            )

        from math_verify import parse, verify

        logging.getLogger("math_verify").setLevel(logging.ERROR)  # "timeout is disabled": we time out outside
        verify(parse("$\\frac{1}{2}$", parsing_timeout=None), parse("0.5", parsing_timeout=None), timeout_seconds=None)
    except Exception as exc:
        channel.write(json.dumps({"error": f"{type(exc).__name__}: {exc}"}) + "\n")
        channel.flush()
        return
    channel.write('{"ready": true}\n')
    channel.flush()
    for line in sys.stdin:
        try:
            request = json.loads(line)
            gold = parse(request["gold"], parsing_timeout=None)
            answer = parse(request["answer"], parsing_timeout=None)
            reply: dict[str, Any] = {"equal": bool(verify(gold, answer, timeout_seconds=None))}
        except Exception as exc:
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        channel.write(json.dumps(reply) + "\n")
        channel.flush()


if __name__ == "__main__":
    _serve()
else:
    os.register_at_fork(after_in_child=_after_fork_in_child)
    atexit.register(_close_shared_pool)  # stop the workers before interpreter teardown, not during it
