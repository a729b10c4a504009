"""Fuzzing every tool with generated calls: wrong types, missing and extra fields, huge strings, unicode,
nested junk, path-like ids. Every answer must be a valid result or a tool error in the project's shape,
and the server must still answer afterwards.

The bulk runs in memory (fast); a smaller share goes through a real stdio subprocess. The state root is a
temp dir, and valid calls stay cheap: no generated call can carry a probe, a generate source or a recipe
with a passed inspection, so nothing samples a model or starts a run.
"""

from __future__ import annotations

import copy
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client, StdioServerParameters

from server.mcp_server import build_server
from server.mcp_tools import TOOL_SPECS
from server.tool_errors import ERROR_SHAPE, MAX_MESSAGE_CHARS
from skill.state import STATE_ROOT_ENV

TOOLS = {spec.name: spec for spec in TOOL_SPECS}
RAW = ("validation error for", "errors.pydantic.dev", "Error executing tool", "Traceback", "toolArguments")

PATHLIKE = st.sampled_from(
    [
        "../../etc/passwd",
        "/etc/passwd",
        "..",
        ".",
        "a/../../b",
        "..\\..\\windows",
        "C:\\Windows\\system32",
        "~/.ssh/id_rsa",
        "%2e%2e%2f%2e%2e%2f",
        "run\x00id",
        "run\nid",
        " ",
        "",
        "-rf",
        "a" * 81,
        "insp-../../runs/x/run",
        "grpo://runs/x/status",
        "file:///etc/passwd",
    ]
)
HUGE = st.sampled_from(["x" * 200_000, "\u00e9\U0001f600\u202e" * 40_000, "[" * 10_000])
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=2**63, max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30)
    | PATHLIKE
    | HUGE
)
JUNK = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12,
)


def _paths(value: Any, prefix: tuple = ()) -> Iterator[tuple]:
    """Every location in a nested example: containers and leaves."""
    yield prefix
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _paths(child, (*prefix, index))


@st.composite
def mutated(draw: st.DrawFn, example: dict[str, Any]) -> dict[str, Any]:
    """The tool's valid example with one location broken: replaced, deleted, padded with an unknown field."""
    value = copy.deepcopy(example)
    path = draw(st.sampled_from(list(_paths(value))))
    operation = draw(st.sampled_from(["replace", "replace", "delete", "extra", "pathlike", "wrap"]))
    if not path:
        if operation in ("delete", "replace"):
            return draw(st.dictionaries(st.text(max_size=10), JUNK, max_size=3))
        value[f"x_{draw(st.text(max_size=6))}"] = draw(JUNK)
        return value
    parent = value
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    if operation == "delete" and isinstance(parent, dict):
        del parent[last]
    elif operation == "extra" and isinstance(parent[last], dict):
        parent[last][f"x_{draw(st.text(max_size=6))}"] = draw(JUNK)  # never a real field name: stays cheap
    elif operation == "pathlike":
        parent[last] = draw(PATHLIKE | HUGE)
    elif operation == "wrap":
        parent[last] = [parent[last]]
    else:
        parent[last] = draw(JUNK)
    return value


def arguments_for(name: str) -> st.SearchStrategy[dict[str, Any]]:
    example = dict(TOOLS[name].example)
    accepted = sorted(TOOLS[name].function.__annotations__.keys() - {"return", "ctx"}) or ["request"]
    keys = st.sampled_from(accepted) | st.text(max_size=12)
    random_dicts = st.dictionaries(keys, JUNK, max_size=4)
    ids = st.fixed_dictionaries({"run_id": PATHLIKE | st.text(max_size=40)})
    return st.one_of(random_dicts, mutated(example), mutated(example), mutated(example), ids, st.just(example))


CALLS = st.sampled_from(sorted(TOOLS)).flatmap(lambda name: arguments_for(name).map(lambda args: (name, args)))


def check_answer(name: str, result: Any) -> str:
    """'valid' or 'invalid-arguments' or 'refused'; fails on anything outside the project's shapes."""
    if not result.is_error:
        assert isinstance(result.structured_content, dict), (name, result)
        return "valid"
    text = result.content[0].text
    assert ERROR_SHAPE.match(text) and text.startswith(f"{name}: "), (name, text[:500])
    for marker in RAW:
        assert marker not in text, (name, text[:500])
    assert "internal error" not in text, (name, text[:500])
    assert len(text) <= MAX_MESSAGE_CHARS + 100, (name, len(text))
    if text.startswith(f"{name}: invalid arguments ("):
        assert "Example of a valid call: " in text, text[:300]
        return "invalid-arguments"
    return "refused"


@contextmanager
def blocking_client(server: Any) -> Iterator[Callable[..., Any]]:
    """A connected client driven from synchronous code, so hypothesis examples share one session."""
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(Client(server)) as client:

        def run(method: str, *args: Any) -> Any:
            return portal.call(getattr(client, method), *args)

        yield run


def fuzz(run: Callable[..., Any], examples: int) -> Counter:
    outcomes: Counter = Counter()
    tools: Counter = Counter()

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )
    @given(call=CALLS)
    def one(call: tuple[str, dict[str, Any]]) -> None:
        name, arguments = call
        outcomes[check_answer(name, run("call_tool", name, arguments))] += 1
        tools[name] += 1

    one()
    # Alive afterwards: the listing and a valid call still answer.
    assert len(run("list_tools").tools) == len(TOOLS)
    assert check_answer("list_runs", run("call_tool", "list_runs", {})) == "valid"
    assert set(tools) == set(TOOLS) and min(tools.values()) >= examples // (3 * len(TOOLS)), tools
    return outcomes


@pytest.fixture
def state_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(STATE_ROOT_ENV, str(tmp_path / "state"))
    return tmp_path / "state"


@pytest.mark.slow
def test_fuzz_in_memory(state_root: Path) -> None:
    with blocking_client(build_server()) as run:
        outcomes = fuzz(run, examples=1100)
    total = sum(outcomes.values())
    assert total >= 1100 and outcomes["invalid-arguments"] > total / 2, outcomes
    assert outcomes["valid"] and outcomes["refused"], outcomes
    assert not list((state_root / "runs").glob("*/run.json")), "a fuzzed call started a run"


@pytest.mark.slow
def test_fuzz_unknown_tool_names(state_root: Path) -> None:
    with blocking_client(build_server()) as run:

        @settings(max_examples=100, deadline=None, database=None, derandomize=True)
        @given(name=st.text(max_size=200).filter(lambda text: text not in TOOLS), arguments=JUNK)
        def one(name: str, arguments: Any) -> None:
            result = run("call_tool", name, arguments if isinstance(arguments, dict) else {"x": arguments})
            assert result.is_error and ERROR_SHAPE.match(result.content[0].text), result
            assert "unknown tool" in result.content[0].text and len(result.content[0].text) < 1000

        one()
        assert len(run("list_tools").tools) == len(TOOLS)


@pytest.mark.slow
def test_fuzz_over_stdio(state_root: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "server.cli", "serve"],
        env={**os.environ, STATE_ROOT_ENV: str(state_root)},
    )
    with blocking_client(params) as run:
        outcomes = fuzz(run, examples=200)
    assert sum(outcomes.values()) >= 200 and outcomes["invalid-arguments"], outcomes
