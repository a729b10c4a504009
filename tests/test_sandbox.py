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

from skill.rewards.code import sandbox
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
        "import os, sys\ndef solve(n):\n    g = sys._getframe(1).f_globals\n"
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
    monkeypatch.setenv(sandbox.ISOLATION_ENV, level)
    sandbox.sandbox_isolation.cache_clear()
    try:
        assert sandbox_isolation() == level
        assert "not bubblewrap" in caplog.text
    finally:
        sandbox.sandbox_isolation.cache_clear()  # recomputed after monkeypatch restores the environment
