"""Security suite for the sandbox and the ``unit_tests`` reward: adversarial programs.

Each attack, had it worked, would print or return the expected answer; so a score of 0 means it failed.
Every case must also finish within its timeout + 1 s and leave no process of the sandbox uids behind
(this module uses its own uid range per test worker, so parallel workers do not see each other's runs).
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import time
from pathlib import Path

import pytest

from skill.rewards.code import cgroup, sandbox
from skill.rewards.code.isolation import SLOTS, UID_BASE_ENV, system_tool
from skill.rewards.code.sandbox import run_python, sandbox_isolation
from skill.rewards.code.unit_tests import build_unit_tests

TIMEOUT_S = 1.0  # per test
TOTAL_TIMEOUT_S = 2.0  # per completion: the limit a program that ignores the per-test alarm meets
CALL = [{"call": "solve(2)", "expected": 4}]
STDIO = [{"input": "2\n", "output": "4"}]
UID_BASE = 63000 + SLOTS * int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
DROPS_UID = sandbox_isolation() != "rlimits"
needs_uid = pytest.mark.skipif(not DROPS_UID, reason="rlimits-only sandbox: the program runs as this user")
needs_netns = pytest.mark.skipif(sandbox_isolation() in ("setpriv", "rlimits"), reason="no network namespace here")


def live_sandbox_processes() -> list[str]:
    """Live (not zombie) processes whose real uid is in this module's sandbox range."""
    found = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            status = Path(f"/proc/{name}/status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        uid = int(fields.get("Uid", "-1").split()[0])
        if UID_BASE <= uid < UID_BASE + SLOTS and not fields.get("State", "").strip().startswith("Z"):
            found.append(f"{name}: {fields.get('Name', '').strip()}")
    return found


@pytest.fixture(autouse=True)
def own_uid_range_and_no_leftovers(monkeypatch):
    monkeypatch.setenv(UID_BASE_ENV, str(UID_BASE))
    yield
    deadline = time.monotonic() + 1.0  # SIGKILLed processes take a moment to leave /proc
    while (left := live_sandbox_processes()) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not left, f"processes left behind: {left}"


def score(code: str, tests: list[dict]) -> tuple[float | None, float]:
    """The reward's score for one program, and its wall time, asserted within the completion's timeout + 1 s."""
    reward = build_unit_tests(timeout_s=TIMEOUT_S, total_timeout_s=TOTAL_TIMEOUT_S)
    start = time.monotonic()
    (value,) = reward(["p"], [code], tests=[tests])
    elapsed = time.monotonic() - start
    assert elapsed <= TOTAL_TIMEOUT_S + 1.0, f"took {elapsed:.2f} s"
    assert reward.failures == 0, reward.last_errors
    return value, elapsed


def test_isolation_level_is_the_strongest_available():
    if os.environ.get(sandbox.ISOLATION_ENV):
        assert sandbox_isolation() == os.environ[sandbox.ISOLATION_ENV]
    elif os.geteuid() == 0 and all(map(system_tool, ("bwrap", "setpriv"))):
        assert sandbox_isolation() == "bubblewrap"
    else:
        assert sandbox_isolation() in sandbox.LEVELS


def test_correct_programs_score_one():
    assert score("def solve(n):\n    return n * n", CALL)[0] == 1.0
    assert score("print(int(input()) ** 2)", STDIO)[0] == 1.0


ATTACKS = {
    "sys_exit": ("import sys\nsys.exit(0)", CALL),
    "sys_exit_stdio": ("import sys\nsys.exit(0)", STDIO),
    "os_exit": ("import os\nos._exit(0)", CALL),
    "os_exit_in_call": ("import os\ndef solve(n):\n    os._exit(0)", CALL),
    "always_equal": ("class A:\n    __eq__ = lambda s, o: True\n    __hash__ = None\nsolve = lambda n: A()", CALL),
    "int_subclass": ("class I(int):\n    __eq__ = lambda s, o: True\nsolve = lambda n: I(5)", CALL),
    "true_for_an_int": ("solve = lambda n: True", [{"call": "solve(2)", "expected": 1}]),
    "patch_builtins": (
        "import builtins, json\nbuiltins.print = lambda *a, **k: None\nbuiltins.isinstance = lambda *a: True\n"
        "builtins.type = lambda *a: int\njson.dumps = lambda *a, **k: '4'\nsolve = lambda n: None",
        CALL,
    ),
    "print_fake_results": ("print('4')\nprint('{\"i\": 0, \"value\": 4}')\nsolve = lambda n: print('PASS')", CALL),
    "forge_harness_report": (  # finds the marker and result channel in the harness's frame, reports 999
        "import os, sys\ndef solve(n):\n    g = sys._getframe(2).f_globals\n"
        "    os.write(g['_OUT'], (g['_P']['marker'] + '{\"i\": 0, \"value\": 999}\\n').encode())\n    os._exit(0)",
        CALL,
    ),
    "cpu_loop": ("def solve(n):\n    while True:\n        pass", CALL),
    "cpu_loop_stdio": ("while True:\n    pass", STDIO),
    "sleep_past_timeout": ("import time\ntime.sleep(60)\nprint(4)", STDIO),
    "ignore_alarm": ("import signal, time\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
                     "def solve(n):\n    time.sleep(60)\n    return 4", CALL),
    "memory_bomb": ("x = bytearray(8 << 30)\nprint(4)", STDIO),
    "memory_creep": ("a = []\ntry:\n    while True:\n        a.append(bytearray(50 << 20))\nexcept MemoryError:\n"
                     "    pass\nprint(4 if len(a) * 50 > 1024 else 0)", STDIO),
    "huge_stdout": ("import sys\nwhile True:\n    sys.stdout.write('4\\n' * 100000)", STDIO),
    "huge_stderr": ("import sys\nwhile True:\n    sys.stderr.write('x' * 100000)", STDIO),
    "daemonise": ("import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
                  "        time.sleep(60)\n    os._exit(0)\nprint(5)", STDIO),
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("name", list(ATTACKS))
def test_attack_scores_zero(name):
    code, tests = ATTACKS[name]
    assert score(code, tests)[0] == 0.0


@needs_netns
def test_network_is_unreachable():
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    code = (
        "import socket\nok = False\n"
        f"for address in [('1.1.1.1', 53), ('127.0.0.1', {port})]:\n"
        "    try:\n        socket.create_connection(address, timeout=0.5).close()\n        ok = True\n"
        "    except OSError:\n        pass\nprint(4 if ok else 0)"
    )
    try:
        assert score(code, STDIO)[0] == 0.0
        listener.settimeout(0)
        with pytest.raises(BlockingIOError):
            listener.accept()
    finally:
        listener.close()


@needs_uid
def test_cannot_write_outside_its_directory(tmp_path):
    token = secrets.token_hex(8)
    repo = Path(__file__).resolve().parent.parent
    targets = [f"/etc/{token}", f"/root/{token}", f"/usr/{token}", str(repo / token), str(tmp_path / token)]
    code = (
        f"ok = 0\nfor path in {targets!r}:\n    try:\n        open(path, 'w').write('x')\n        ok = 1\n"
        f"    except OSError:\n        pass\nopen('/tmp/{token}', 'w').write('x')\nprint(4 if ok else 0)"
    )
    assert score(code, STDIO)[0] == 0.0
    assert not [path for path in targets if os.path.exists(path)]
    if sandbox_isolation() == "bubblewrap":  # its /tmp is private too
        assert not os.path.exists(f"/tmp/{token}")


def test_cannot_read_environment_secrets(monkeypatch):
    secret = secrets.token_hex(16)
    monkeypatch.setenv("GRPO_RLVR_TEST_SECRET", secret)
    code = (
        "import os, glob\nfound = os.environ.get('GRPO_RLVR_TEST_SECRET', '')\n"
        "for path in glob.glob('/proc/*/environ'):\n    try:\n        data = open(path, 'rb').read()\n"
        "    except OSError:\n        continue\n"
        "    for item in data.split(b'\\0'):\n        if item.startswith(b'GRPO_RLVR_TEST_SECRET='):\n"
        "            found = item.split(b'=', 1)[1].decode()\nprint(found)"
    )
    assert score(code, [{"input": "", "output": secret}])[0] == 0.0


@needs_uid
def test_cannot_read_tests_or_expected_values(tmp_path):
    expected = secrets.token_hex(16)
    dataset = tmp_path / "dataset.json"
    dataset.write_text(f'{{"tests": [{{"call": "solve()", "expected": "{expected}"}}]}}')
    code = (
        "import re, os\ndef solve():\n"
        f"    for path in [{str(dataset)!r}, {__file__!r}, '/proc/1/cmdline', '/proc/1/environ']:\n"
        "        try:\n            text = open(path).read()\n        except OSError:\n            continue\n"
        "        found = re.findall(r'expected.: .([0-9a-f]{32})', text)\n        if found:\n"
        "            return found[0]\n    return ''"
    )
    assert score(code, [{"call": "solve()", "expected": expected}])[0] == 0.0


@needs_uid
def test_cannot_kill_its_parent_or_other_processes():
    canary = subprocess.Popen(["sleep", "30"])
    code = (
        "import os, signal\nfor pid in (os.getppid(), 1, -1):\n    try:\n        os.kill(pid, signal.SIGKILL)\n"
        "    except OSError:\n        pass\nprint(5)"
    )
    try:
        assert score(code, STDIO)[0] == 0.0
        assert canary.poll() is None, "a process outside the sandbox was killed"
    finally:
        canary.kill()
        canary.wait()


FORK_LOOP = (
    "import os, time\nforked = 0\nfor _ in range(200):\n    try:\n        pid = os.fork()\n    except OSError:\n"
    "        break\n    if pid == 0:\n        time.sleep(30)\n        os._exit(0)\n    forked += 1\nprint(forked)"
)


@pytest.fixture(scope="module")
def forks_allowed() -> int:
    """How many of 200 harmless forks a program with max_processes=16 gets."""
    return int(run_python(FORK_LOOP, timeout_s=10, max_processes=16).stdout or 0)


@needs_uid
def test_process_limit_refuses_a_fork_loop(forks_allowed):
    assert 0 < forks_allowed < 16


@pytest.mark.slow
def test_fork_bomb_is_contained(forks_allowed):
    if not (DROPS_UID and forks_allowed < 16):
        pytest.skip(f"process limit not in force here ({forks_allowed} of 200 forks succeeded): no fork bomb")
    code = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    assert score(code, STDIO)[0] == 0.0
    assert score("print(int(input()) ** 2)", STDIO)[0] == 1.0  # the slots still work


def test_run_python_limits_time_and_output():
    start = time.monotonic()
    result = run_python("while True:\n    pass", timeout_s=TIMEOUT_S)
    assert result.timed_out and not result.ok and time.monotonic() - start <= TIMEOUT_S + 1.0
    result = run_python("while True:\n    print('x' * 1000)", max_output_bytes=10_000)
    assert result.output_truncated and len(result.stdout) <= 10_000
    result = run_python("import os\nprint(sorted(os.environ))")
    assert result.ok and "GRPO" not in result.stdout and "PATH" not in result.stdout


@pytest.mark.parametrize("level", sandbox.LEVELS[1:])
def test_fallback_levels_run_and_keep_their_promises(level, caplog, monkeypatch):
    if level != "rlimits" and not (os.geteuid() == 0 and system_tool("setpriv")):
        pytest.skip("needs root and setpriv")
    network = "import socket\ntry:\n    socket.create_connection(('1.1.1.1', 53), timeout=0.5)\n    print('net')\n"
    network += "except OSError:\n    print('nonet')\nimport os\nprint(os.getuid())"
    result = run_python(network, isolation=level, timeout_s=5)
    assert result.ok, result.stderr
    if level == "setpriv-unshare":
        assert result.stdout.split()[0] == "nonet"
    if level == "setpriv":
        assert UID_BASE <= int(result.stdout.split()[1]) < UID_BASE + SLOTS
    if level != "rlimits":  # a file in a shared temporary directory does not outlive the run
        name = f"grpo-rlvr-leftover-{secrets.token_hex(4)}"
        paths = [f"{root}/{name}" for root in ("/tmp", "/dev/shm", "/var/tmp")] + [f"/tmp/{name}-dir/inner"]
        leave = f"import os\nos.mkdir('/tmp/{name}-dir')\nfor path in {paths!r}:\n"
        leave += "    with open(path, 'wb') as f:\n        f.write(b'x' * (8 << 20))\n    print(path)"
        result = run_python(leave, isolation=level, timeout_s=5)
        assert result.ok and len(result.stdout.split()) == 4, result.stderr
        assert not [path for path in [*paths, f"/tmp/{name}-dir"] if os.path.exists(path)]
    monkeypatch.setenv(sandbox.ISOLATION_ENV, level)
    sandbox.sandbox_isolation.cache_clear()
    try:
        assert sandbox_isolation() == level
        assert "not bubblewrap" in caplog.text
    finally:
        sandbox.sandbox_isolation.cache_clear()  # recomputed after monkeypatch restores the environment


def test_a_bubblewrap_without_size_warns_and_says_so(caplog, monkeypatch):
    if sandbox_isolation() != "bubblewrap":
        pytest.skip("bubblewrap only")
    monkeypatch.setattr(sandbox, "bwrap_sizes_mounts", lambda: False)
    sandbox.sandbox_isolation.cache_clear()
    try:
        status = sandbox.isolation_status()
        assert "no --size" in caplog.text
        assert status["tmpfs_sized"] is False and any("0.8.0" in caveat for caveat in status["caveats"])
    finally:
        sandbox.sandbox_isolation.cache_clear()
    monkeypatch.undo()
    assert sandbox.isolation_status()["tmpfs_sized"] is True  # bubblewrap 0.8.0 here


# --- The tests' own namespace: a candidate cannot shadow or patch what the tests use ---

VOLUME_TEST = "assert math.isclose(volume_sphere(10), 4188.79, rel_tol=0.001)"
VOLUME_IN_CHILD = "assert math.isclose(volume_sphere(10), 4 / 3 * math.pi * 10 ** 3, rel_tol=0.001)"  # no literal
FAKE_MATH = "class math:\n    isclose = staticmethod(lambda *a, **k: True)\n"
RIGHT_VOLUME = "def volume_sphere(r):\n    return 4 / 3 * 3.141592653589793 * r ** 3\n"  # no import math
WRONG_VOLUME = "def volume_sphere(r):\n    return 1.0\n"
HELPER = "def is_close(a, b):\n    return abs(a - b) < 1e-6"
AREA_TESTS = [HELPER, "assert is_close(area(1), 3.141592653589793)", "assert is_close(area(2), 12.566370614359172)"]


def score_row(code: str, tests, **columns) -> float | None:
    reward = build_unit_tests(timeout_s=TIMEOUT_S, total_timeout_s=TOTAL_TIMEOUT_S)
    (value,) = reward(["p"], [code], tests=[tests], **{key: [value] for key, value in columns.items()})
    assert reward.failures == 0, reward.last_errors
    return value


@pytest.mark.parametrize("test", [VOLUME_TEST, VOLUME_IN_CHILD])
def test_a_candidate_class_named_math_does_not_replace_the_tests_math(test):
    assert score_row(FAKE_MATH + WRONG_VOLUME, [test]) == 0.0
    assert score_row("import math\n" + FAKE_MATH + WRONG_VOLUME, ["import math", test]) == 0.0
    assert score_row(FAKE_MATH + RIGHT_VOLUME, [test]) == 1.0  # the tests' math is the real one either way


@pytest.mark.parametrize("test", [VOLUME_TEST, VOLUME_IN_CHILD])
def test_a_right_solution_without_import_math_passes_tests_that_import_it(test):
    assert score_row(RIGHT_VOLUME, ["import math\n" + test]) == 1.0  # the import in the test source
    assert score_row(RIGHT_VOLUME, [test], test_imports=["import math"]) == 1.0  # MBPP (sanitized) test_imports
    assert score_row(RIGHT_VOLUME, [test]) == 1.0  # MBPP (full): the tests use math without importing it


RIGHT_AREA = "def area(r):\n    return 3.141592653589793 * r * r\n"
HELPER_ATTACKS = {
    "redefine_helper": "def is_close(*a, **k):\n    return True\narea = lambda r: 0\n",
    "patch_builtins_abs": "import builtins\nbuiltins.abs = lambda x: 0\narea = lambda r: 0\n",
    "patch_abs_at_call_time": "import builtins\ndef area(r):\n    builtins.abs = lambda x: 0\n    return 0\n",
    "rebind_the_tests_helper_by_frame": (
        "import sys\ndef area(r):\n    sys._getframe(1).f_globals['is_close'] = lambda *a: True\n    return 0\n"
    ),
    "patch_the_real_math_module": "import math\nmath.isclose = lambda *a, **k: True\narea = lambda r: 0\n",
}


def test_a_helper_defined_by_the_tests_is_the_tests_own():
    assert score_row(RIGHT_AREA, AREA_TESTS) == 1.0
    tests = ["import math\ndef near(a, b):\n    return math.isclose(a, b)", "assert near(area(1), math.pi)"]
    assert score_row(RIGHT_AREA, tests) == 1.0


@pytest.mark.parametrize("name", list(HELPER_ATTACKS))
def test_helper_attacks_score_zero(name):
    tests = [*AREA_TESTS, "import math\nassert math.isclose(area(1) + 1, math.pi + 1)"]
    assert score_row(HELPER_ATTACKS[name], tests) == 0.0


def test_mbpp_test_setup_code_runs_in_the_tests_namespace():
    setup = "class Pair:\n    def __init__(self, a, b):\n        self.a, self.b = a, b"
    tests = ["assert longest([Pair(5, 24), Pair(15, 25), Pair(27, 40), Pair(50, 60)]) == 3"]
    right = (
        "def longest(pairs):\n    pairs = sorted(pairs, key=lambda p: p.b)\n    count, end = 0, float('-inf')\n"
        "    for p in pairs:\n        if p.a > end:\n            count, end = count + 1, p.b\n    return count"
    )
    assert score_row(right, tests, test_setup_code=setup) == 1.0
    cheat = "class Pair:\n    def __init__(self, *a):\n        pass\ndef longest(pairs):\n    return 3 if False else 0"
    assert score_row(cheat, tests, test_setup_code=setup) == 0.0
    reward = build_unit_tests()
    assert reward(["p"], [right], tests=[tests], test_setup_code=["import numpy_that_is_not_here"]) == [None]
    assert "setup failed" in reward.last_errors[0]


def test_humaneval_check_uses_its_own_imports_and_the_entry_point():
    test = "import math\n\n\ndef check(candidate):\n    assert math.isclose(candidate(2), math.sqrt(2) ** 4)\n"
    reward = build_unit_tests(tests_column="test")
    right, fake = "def square(x):\n    return x * x", FAKE_MATH + "def square(x):\n    return 0"
    assert reward(["p", "p"], [right, fake], test=[test] * 2, entry_point=["square"] * 2) == [1.0, 0.0]


# --- Parent-side grading is bounded: crafted reports cost little and fail only their own test ---

FORGE = (  # finds the harness's frame, writes a report of its choosing on the result channel, then exits
    "import os, sys\ndef solve(n):\n    f = sys._getframe(1)\n    while '_OUT' not in f.f_globals:\n"
    "        f = f.f_back\n    g = f.f_globals\n    report = '{\"i\": 0, \"values\": [' + VALUE + ']}'\n"
    "    os.write(g['_OUT'], (g['_P']['marker'] + report + '\\n').encode())\n    os._exit(0)\n"
)


@pytest.mark.parametrize(
    ("report", "expected"),
    [
        ('\'{"set": [\' + ", ".join(str(k * (2**61 - 1)) for k in range(80000)) + "]}"', "{1, 2}"),
        ('\'{"dict": [\' + ", ".join(f"[{k * (2**61 - 1)}, 0]" for k in range(60000)) + "]}"', "{1: 0}"),
        ("'{\"tuple\": [' * 400 + '1' + ']}' * 400", "(1,)"),
        ("'[' * 100000 + ']' * 100000", "[]"),
        ("'9' * 100000", "1"),
    ],
    ids=["hash_colliding_set", "hash_colliding_dict", "deep_tuples", "nesting_past_json", "huge_int"],
)
def test_crafted_reports_fail_fast(report, expected):
    code = f"VALUE = {report}\n{FORGE}"
    value, elapsed = score(code, [{"call": "solve(2)", "expected": 4}])
    assert value == 0.0
    tests = [f"assert solve(1) == {expected}", "assert other() == 4"]
    assert score_row(code + "\ndef other():\n    return 4", tests) == 0.0  # solve exits before other runs


def test_an_exception_in_grading_fails_that_test_only():
    code = "def f():\n    return 10 ** 400\ndef g():\n    return 0.5"
    assert score_row(code, ["assert abs(f() - 0.5) < 1e-6", "assert abs(g() - 0.5) < 1e-6"]) == 0.5
    assert score_row(code, ["assert math.isclose(f(), 0.5)", "assert math.isclose(g(), 0.5)"]) == 0.5


# --- Nothing the tests define runs beside the candidate: forged reports claim values, never verdicts ---

FORGE_EVERY_REPORT = (  # reaches the harness through __main__, writes a passing report per test, exits
    "import __main__, os\nfor k in range(8):\n    __main__._emit(RECORD(k))\nos._exit(0)\n"
)
PREDICATE_TESTS = [
    HELPER,
    "assert is_prime(7) == True",
    "assert is_prime(11)",
    "assert is_close(area(1), 3.141592653589793)",
    "assert is_close(area(2), 12.566370614359172)",
]


@pytest.mark.parametrize(
    "record",
    ["lambda k: {'i': k, 'value': True}", "lambda k: {'i': k, 'values': [True]}"],
    ids=["verdicts", "values"],
)
def test_a_candidate_cannot_write_its_own_passing_reports(record):
    # A forged value is worth what returning it is: True for is_prime, which the constant True also earns;
    # the helper predicate runs in the candidate-free checker, on the forged True, and fails.
    tamper = "__main__.__dict__.setdefault('_T', {})['is_close'] = lambda *a: True\n"
    code = f"RECORD = {record}\n" + FORGE_EVERY_REPORT.replace("os._exit", tamper + "os._exit")
    constant = "is_prime = lambda n: True\narea = lambda r: 0.0"
    assert score_row(code, PREDICATE_TESTS) <= score_row(constant, PREDICATE_TESTS) == 0.5
    assert score_row("is_prime = lambda n: n in (7, 11)\n" + RIGHT_AREA, PREDICATE_TESTS) == 1.0


def test_a_forged_setup_error_scores_zero_not_none():
    code = (
        "import __main__, os\n__main__._emit({'setup': 'ImportError: forged'})\n"
        "__main__._emit({'i': 0, 'setup_error': 'forged'})\nos._exit(0)\n"
    )
    assert score_row(code, ["import math\nassert math.isclose(area(1), math.pi)"]) == 0.0


@pytest.mark.parametrize(
    "test",
    ["assert near(area(1), math.pi)", "assert abs(area(1) - math.pi) < 1e-9", "assert area(1) == math.pi"],
)
def test_patching_a_module_constant_changes_nothing_the_tests_use(test):
    tests = ["import math\ndef near(a, b):\n    return abs(a - b) < 1e-9", test]
    assert score_row("import math\nmath.pi = 0.0\narea = lambda r: 0.0", tests) == 0.0
    assert score_row(RIGHT_AREA, tests) == 1.0


HUMANEVAL_53 = (  # HumanEval/53's test, with its constant assert
    "METADATA = {}\n\n\ndef check(candidate):\n    import random\n\n"
    "    assert candidate(0, 1) == 1\n    assert candidate(1, 0) == 1\n    assert candidate(2, 3) == 5\n"
    '    assert True, "This prints if this assert fails 1 (good for debugging!)"\n'
)
MBPP_2 = [  # MBPP task 2
    "assert set(similar_elements((3, 4, 5, 6),(5, 7, 4, 10))) == set((4, 5))",
    "assert set(similar_elements((1, 2, 3, 4),(5, 4, 3, 7))) == set((3, 4))",
    "assert set(similar_elements((11, 12, 14, 13),(17, 15, 14, 13))) == set((13, 14))",
]


def test_real_humaneval_and_mbpp_rows_are_graded():
    reward = build_unit_tests(tests_column="test")
    right, wrong = "def add(x, y):\n    return x + y", "def add(x, y):\n    return x - y"
    assert reward(["p", "p"], [right, wrong], test=[HUMANEVAL_53] * 2, entry_point=["add"] * 2) == [1.0, 1 / 3]
    right = "def similar_elements(a, b):\n    return tuple(set(a) & set(b))"
    assert score_row(right, MBPP_2) == 1.0
    assert score_row("def similar_elements(a, b):\n    return (4, 5)", MBPP_2) == pytest.approx(1 / 3)
    loop = "def check(candidate):\n    for x in range(3):\n        assert candidate(x, 0) == x\n"
    assert reward(["p"], [right], test=[loop], entry_point=["add"]) == [None]
    assert "Unroll it into asserts" in reward.last_errors[0]  # explained: a loop would run beside the candidate


# --- Memory: every writable mount is sized, the root is read-only, and the whole run has one cap ---

WRITE_EVERYWHERE = (  # several files per mount: RLIMIT_FSIZE (16 MiB per file) alone cannot keep it small
    "import os\ntotal = 0\nfor mount in ['/', '/dev', '/dev/shm', '/tmp', '.']:\n    for k in range(8):\n"
    "        try:\n            with open(os.path.join(mount, f'big{k}'), 'wb') as f:\n"
    "                for _ in range(8):\n                    f.write(b'x' * (1 << 20))\n"
    "                    f.flush()\n                    total += 1 << 20\n"
    "        except OSError:\n            pass\nprint(total >> 20)"
)


@pytest.mark.skipif(sandbox_isolation() != "bubblewrap", reason="only bubblewrap has a private filesystem")
def test_no_mount_takes_more_than_its_size():
    result = run_python(WRITE_EVERYWHERE, timeout_s=10)
    assert result.ok, result.stderr
    assert int(result.stdout) <= 3 * 16  # /dev/shm, /tmp and the work dir, 16 MiB each; / and /dev read-only


@pytest.mark.slow
def test_the_whole_run_has_one_memory_cap():
    if cgroup.memory_cgroup_root() is None:
        pytest.skip("no memory cgroup here: the cap is max_processes x memory_mb (documented)")
    holders = (  # six processes of 300 MiB each under memory_mb=512: 1.8 GiB, over the 1 GiB total
        "import os, time\nfor _ in range(6):\n    if os.fork() == 0:\n        block = bytearray(300 << 20)\n"
        "        for i in range(0, len(block), 4096):\n            block[i] = 1\n"
        "        time.sleep(3)\n        os._exit(0)\n"
        "print(sum(os.wait()[1] == 0 for _ in range(6)))"
    )
    result = run_python(holders, timeout_s=20, memory_mb=512)
    assert result.ok, result.stderr
    assert int(result.stdout) <= 3  # at most 1 GiB of them held at once; the rest were killed
    memfd = (  # files in memory count too: 40 x 16 MiB of memfd against a 256 MiB total
        "import os\nfds, total = [], 0\nfor _ in range(40):\n    fd = os.memfd_create('x')\n    fds.append(fd)\n"
        "    os.write(fd, b'x' * (16 << 20))\n    total += 16\n    print(total, flush=True)"
    )
    result = run_python(memfd, timeout_s=20, memory_mb=128)
    held = [int(line) for line in result.stdout.split()]
    assert result.started and held, result.stderr  # it ran and held some: the cap, not a crash, stopped it
    assert max(held) <= 256


def test_a_slot_keeps_its_memory_cap_when_the_parent_cgroup_was_removed():
    root = cgroup.memory_cgroup_root()
    if root is None:
        pytest.skip("no memory cgroup here")
    parent, limit_file = root
    assert parent.name.endswith(f"-{os.getpid()}")  # a parent of this process's own: no other exit removes it
    for group in [*parent.glob("slot-*"), parent]:  # as another process's exit used to
        group.rmdir()
    with cgroup.slot_cgroup(UID_BASE, 96 << 20) as group:
        assert group is not None
        assert int((group / limit_file).read_text().split()[0]) == 96 << 20
