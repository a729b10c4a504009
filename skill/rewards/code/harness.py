"""The harness programs that run inside the sandbox for the ``unit_tests`` reward (standard library only).

The parent prepends PAYLOAD (code, inputs, marker, limits). Results go, one marked JSON line each, to a
copy of stdout taken before any candidate code runs; the candidate's own stdout goes to a pipe per case
(stdio) or to /dev/null (calls). Kept as text: executed by the sandbox's interpreter, never imported.

Two programs, so that nothing the tests define ever runs beside the candidate:

- ``HARNESS`` runs the candidate. For call tests it evaluates only the candidate's parts of each test
  (``f(x)``, not ``near(f(x), 2.0)``; see ``cases.candidate_parts``) and reports their plain values. A
  candidate that forges these reports can only claim values, which is no better than returning them.
  Its first record, written before any candidate code runs, says whether the tests' setup ran.
- ``CHECKER`` never sees candidate code: it runs the tests' setup (imports, helpers, constants) and
  evaluates the rest of each test on those plain values, rebuilt from JSON.
"""

SETUP = r"""
import builtins, json, os, selectors, signal, sys, time, traceback
_dumps, _write, _P = json.dumps, os.write, json.loads(PAYLOAD)
del PAYLOAD
_OUT, _NULL = os.dup(1), os.open(os.devnull, os.O_RDWR)
os.dup2(_NULL, 1)

class _Timeout(BaseException):
    pass

def _alarm(signum, frame):
    raise _Timeout()

def _emit(record):
    data = (_P["marker"] + _dumps(record, ensure_ascii=False) + "\n").encode()
    while data:
        data = data[_write(_OUT, data):]

def _timed(fn):
    signal.setitimer(signal.ITIMER_REAL, _P["timeout"])
    try:
        return fn()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)

def _enc(v, depth=0):  # exact plain types only; containers tagged so the parent rebuilds them
    t, sub = type(v), (lambda x: _enc(x, depth + 1)) if depth < 200 else None
    if v is None or t in (bool, int, float, str):
        return v
    if t is list:
        return [sub(x) for x in v]
    if t in (tuple, set, frozenset):
        return {"tuple" if t is tuple else "set": [sub(x) for x in v]}
    if t is dict:
        return {"dict": [[sub(k), sub(x)] for k, x in v.items()]}
    if t is bytes:
        return {"bytes": v.hex()}
    raise TypeError(f"a {t.__name__} is not a plain value")

signal.signal(signal.SIGALRM, _alarm)
# The tests' own namespace: a copy of the builtins, the standard modules they use, their own imports,
# helpers and constants. The first record says whether that setup ran (written before any candidate code).
_T, _setup_error = {"__name__": "tests", "__builtins__": dict(vars(builtins))}, None
if "setup" in _P:
    for _m in _P["modules"]:
        try:
            _T[_m] = __import__(_m)
        except BaseException:
            pass
    try:
        _timed(lambda: exec(compile(_P["setup"], "<tests>", "exec"), _T))
    except BaseException as e:
        _setup_error = f"{type(e).__name__}: {e}"[:300]
_emit({"setup": _setup_error})
"""
"""Shared by both programs: the output channel, the time limit, plain-value encoding, and the tests' own
namespace with its setup (the first record says whether it ran; written before any candidate code)."""

HARNESS = (
    SETUP
    + r"""if _setup_error is not None:
    os._exit(0)
def _program(code, text, pipe):  # in a forked child: the candidate as __main__, text on stdin, stdout to pipe
    os.dup2(pipe, 1)
    os.close(pipe), os.close(_OUT), signal.signal(signal.SIGALRM, signal.SIG_DFL)
    if not _P["sweep"]:
        os.setsid()
    stdin, data = os.memfd_create("stdin"), text.encode()
    while data:
        data = data[os.write(stdin, data):]
    os.lseek(stdin, 0, 0), os.dup2(stdin, 0)
    sys.stdin, sys.stdout, status = open(0, closefd=False), open(1, "w", closefd=False), 0
    try:
        exec(code, {"__name__": "__main__", "__builtins__": __builtins__, "__file__": "main.py"})
    except SystemExit as e:
        status = e.code if type(e.code) is int else int(e.code is not None)
    except BaseException:
        traceback.print_exc()
        status = 1
    try:
        sys.stdout.flush()
    except BaseException:
        status = status or 1
    os._exit(status & 255)

def _case(code, i, text):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r), _program(code, text, w)
        finally:
            os._exit(1)
    os.close(w)
    out, deadline, timed_out = bytearray(), time.monotonic() + _P["timeout"], False
    with selectors.DefaultSelector() as selector:
        selector.register(r, selectors.EVENT_READ)
        while len(out) <= _P["cap"]:
            left = deadline - time.monotonic()
            if left <= 0 or not selector.select(left):
                timed_out = True
                break
            chunk = os.read(r, 65536)
            if not chunk:
                break
            out += chunk
    os.close(r)
    if timed_out or len(out) > _P["cap"]:
        _quiet(os.kill, pid, 9)
    status = os.waitpid(pid, 0)[1]
    # Nothing a case started outlives it: as pid 1 (or alone on the slot's uid) kill all else, then reap.
    _quiet(os.kill, -1, 9) if _P["sweep"] else _quiet(os.killpg, pid, 9)
    while _quiet(os.waitpid, -1, 0 if _P["sweep"] else os.WNOHANG) not in (None, (0, 0)):
        pass
    _emit({"i": i, "exit": os.waitstatus_to_exitcode(status), "timed_out": timed_out,
           "truncated": len(out) > _P["cap"], "stdout": out.decode(errors="replace")})

def _quiet(fn, *args):
    try:
        return fn(*args)
    except OSError:
        return None

_G = {"__name__": "solution", "__builtins__": builtins}
try:
    _code = _timed(lambda: compile(_P["code"], "main.py", "exec"))
    if "inputs" not in _P:
        _timed(lambda: exec(_code, _G))
except BaseException as e:
    _code = None
    traceback.print_exception(e)
for _n in _P.get("names", ()):
    if _n in _G:
        _T[_n] = _G[_n]
for _i, _t in enumerate(_P.get("inputs") or _P["tests"]):
    try:
        if "inputs" in _P:
            _case(_code, _i, _t) if _code is not None else _emit({"i": _i, "exit": 1, "stdout": ""})
        elif "stmt" in _t:  # allow_unconverted_asserts: the test runs here and grades itself (hackable)
            _emit({"i": _i, "value": _timed(lambda: exec(compile(_t["stmt"], "<test>", "exec"), _T)) or True})
        else:
            _parts = [compile(p, "<test>", "eval") for p in _t["parts"]]
            _emit({"i": _i, "values": _timed(lambda: [_enc(eval(p, _T)) for p in _parts])})
    except BaseException as e:
        _emit({"i": _i, "error": type(e).__name__})
os._exit(0)
"""
)

CHECKER = (
    SETUP
    + r"""if _setup_error is not None:
    os._exit(0)
def _dec(v, hashable=False):  # a reported plain value rebuilt: set elements and dict keys hashable
    if type(v) is list:
        if hashable:
            raise TypeError("a list is not hashable")
        return [_dec(x) for x in v]
    if type(v) is not dict:
        return v
    ((tag, inner),) = v.items()
    if tag == "tuple":
        return tuple(_dec(x, hashable) for x in inner)
    if tag == "set":
        return (frozenset if hashable else set)(_dec(x, True) for x in inner)
    if tag == "dict" and not hashable:
        return {_dec(k, True): _dec(x) for k, x in inner}
    if tag == "bytes":
        return bytes.fromhex(inner)
    raise TypeError(f"cannot rebuild {tag}")

for _i, _t in enumerate(_P["checks"]):
    try:
        _T["__values__"] = _timed(lambda: [_dec(v) for v in _t["values"]])
        _emit({"i": _i, "value": _timed(lambda: _enc(eval(compile(_t["expr"], "<test>", "eval"), _T)))})
    except BaseException as e:
        _emit({"i": _i, "error": type(e).__name__})
os._exit(0)
"""
)
