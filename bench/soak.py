"""Soak: 3 servers (one over stdio, two over streamable HTTP on 127.0.0.1) x 4 concurrent clients, for a set time.

The servers share one state root. Each client loops (bounded by the deadline) over every tool the server lists:
reads (list_runs, run_status, run_logs), the stateless tools (emit_grpo_config, estimate_memory, route_check),
inspect_rewards and record_review now and then, run_grpo against the cap, and calls with bad arguments. Two live
tiny runs train meanwhile (GRPO_RLVR_MAX_RUNS=2); once the first has a checkpoint its worker is SIGKILLed and
resumed through a client, and one HTTP server (the one that started a run) is SIGKILLed and restarted.

Pass: no internal error and no transport failure outside the killed server's window, every run.json and every
JSONL line parses (no torn file), no *.tmp left but a SIGKILLed writer's (its pid is in the name), and each
run's metrics hold steps 1..N exactly once.
Figures: calls, tool errors (refusals in the project's shape), internal errors, p50 / p99 latency.
Run: python bench/soak.py [--seconds 300]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPOSITORY = Path(__file__).resolve().parent.parent
CLIENTS_PER_SERVER = 4
KILLABLE = 1  # the index of the HTTP server that is SIGKILLed and restarted
REWARDS = [
    {"name": "format", "role": "format", "weight": 0.2, "params": {"pattern": "number"}},
    {"name": "exact_match", "role": "correctness", "params": {"extract": "last_number"}},
]
EMIT = {
    "model": {"name": "Qwen/Qwen2.5-1.5B-Instruct"},
    "hardware": {"gpu_model": "H100"},
    "method": "lora",
    "rewards": REWARDS,
    "dataset": {"name": "openai/gsm8k", "columns": ["answer"]},
}
MEMORY = {"model": "Qwen/Qwen2.5-7B-Instruct", "hardware": {"gpu_model": "A100-40GB"}, "method": "lora"}


class Tally:
    """Every call's outcome and latency, by tool."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.calls: dict[str, int] = {}
        self.tool_errors = 0
        self.internal_errors: list[str] = []
        self.transport_errors: list[str] = []
        self.excused = 0  # failed calls to the server while it was being killed and restarted
        self.after_restart = 0  # calls the killed server answered after its restart

    def record(self, tool: str, seconds: float, result: Any) -> None:
        self.latencies.append(seconds)
        self.calls[tool] = self.calls.get(tool, 0) + 1
        if result.is_error:
            text = result.content[0].text if result.content else ""
            if "internal error" in text or not text.startswith(f"{tool}: ") and tool != "unknown":
                self.internal_errors.append(text[:300])
            else:
                self.tool_errors += 1

    def figures(self) -> dict[str, Any]:
        ordered = sorted(self.latencies)
        pick = (lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000) if ordered else (lambda q: 0.0)
        return {
            "calls": len(self.latencies),
            "calls_by_tool": dict(sorted(self.calls.items())),
            "tool_errors": self.tool_errors,
            "internal_errors": len(self.internal_errors),
            "internal_error_samples": self.internal_errors[:5],
            "transport_errors": len(self.transport_errors),
            "transport_error_samples": self.transport_errors[:5],
            "excused_during_server_kill": self.excused,
            "calls_answered_by_the_restarted_server": self.after_restart,
            "p50_ms": round(statistics.median(ordered) * 1000, 1) if ordered else 0.0,
            "p99_ms": round(pick(0.99), 1),
        }


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _start_http(env: dict[str, str], port: int, log: Path) -> subprocess.Popen:
    command = [sys.executable, "-m", "server.cli", "serve", "--http", "--port", str(port)]
    process = subprocess.Popen(command, env=env, cwd=REPOSITORY, stdout=subprocess.DEVNULL, stderr=log.open("ab"))
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"the HTTP server on port {port} did not start; see {log}")


def _prepare(root: Path) -> dict[str, Any]:
    """The tiny model, a dataset, an opened gate (accepted unread, stamped so) and a CPU recipe for it."""
    from skill.data import addition_rows
    from skill.inspection.gate import record_review
    from skill.inspection.run import inspect_rewards
    from skill.inspection.schema import InspectionRequest, ReviewRequest, SuppliedSample
    from skill.models.sources import save_tiny_random_model

    model = save_tiny_random_model(root / "tiny-model")
    dataset = root / "addition.jsonl"
    dataset.write_text("".join(json.dumps(row) + "\n" for row in addition_rows(64)))
    rows = addition_rows(60)
    samples = [
        SuppliedSample(prompt=r["prompt"], completion=r["answer"] if i % 3 else "no idea", columns=r, group=i // 6)
        for i, r in enumerate(rows)
    ]
    report = inspect_rewards(InspectionRequest(rewards=REWARDS, samples=samples))
    reason = "soak test of the server: the rewards are the library's own, read in tests/test_rewards.py"
    record_review(ReviewRequest(report_id=report.id, reviewer="soak", accept_unread=True, accept_unread_reason=reason))
    return {"model": str(model), "dataset": str(dataset), "report_id": report.id, "samples": samples[:8]}


def _recipe(prepared: dict[str, Any], steps: int) -> dict[str, Any]:
    from skill.recipe.emit import RecipeRequest, emit_grpo_config

    overrides = {
        "per_device_train_batch_size": 8,
        "gradient_accumulation_steps": 1,
        "max_completion_length": 8,
        "logging_steps": 1,
        "learning_rate": 1e-5,
        "beta": 0.0,
        "save_steps": 2,
    }
    request = RecipeRequest.model_validate(
        {
            "model": {"name": prepared["model"]},
            "hardware": {"accelerator": "cpu"},
            "method": "full",
            "rewards": REWARDS,
            "dataset": {"name": prepared["dataset"], "columns": ["answer"]},
            "overrides": overrides,
            "max_steps": steps,
        }
    )
    return emit_grpo_config(request).model_dump(mode="json")


def _one_call(rng: random.Random, tools: list[str], run_ids: list[str], prepared: dict[str, Any], turn: int) -> tuple:
    """A tool and its arguments: each client calls every tool once first, then draws (the slow ones rarely)."""
    weights = {"inspect_rewards": 0.2, "route_check": 1.0, "run_grpo": 0.5, "record_review": 0.5}
    if turn < len(tools):
        tool = tools[turn]
    else:
        tool = rng.choices(tools, weights=[weights.get(name, 1.0) for name in tools])[0]
    run_id = rng.choice(run_ids) if run_ids and rng.random() < 0.8 else "no-such-run"
    if rng.random() < 0.1:
        return tool, {"request": {"bogus": [1, {"x": None}]}, "extra": "y" * 100}  # bad arguments
    arguments: dict[str, Any] = {
        "list_runs": {},
        "run_status": {"run_id": run_id},
        "run_logs": {"run_id": run_id, "lines": rng.randint(1, 50)},
        "cancel_run": {"run_id": "no-such-run"},  # never the live runs: they are the soak's own
        "emit_grpo_config": {"request": EMIT},
        "estimate_memory": {"request": MEMORY},
        "route_check": {"request": {"signal": rng.choice(["math_answer", "unit_tests", "preference_pairs"])}},
        "run_grpo": {  # refused: a hand-edited recipe (num_generations=1), or a run that does not exist
            "request": {"recipe": prepared["bad_recipe"]} if rng.random() < 0.5 else {"resume_run_id": "no-such-run"}
        },
        # another report's id: a review replaces the earlier one, and the runs train on the soak's accepted report
        "record_review": {"request": {"report_id": "insp-20260101-000000-000000", "reviewer": "soak", "labels": {}}},
        "inspect_rewards": {  # other rewards than the runs': a new inspection of theirs would supersede the gate's
            "request": {
                "rewards": REWARDS[1:],
                "samples": [sample.model_dump(mode="json") for sample in prepared["samples"]],
            }
        },
    }.get(tool, {})
    return tool, arguments


RECONNECT_GRACE_S = 120.0  # on a loaded machine the restarted server may come up near the deadline


def _keep_calling(deadline: float, state: dict[str, Any], seed: int) -> bool:
    """Until the deadline; a client of the killed server goes on (bounded) until its restarted server answered."""
    if time.time() < deadline:
        return True
    waiting = seed // CLIENTS_PER_SERVER == KILLABLE + 1 and not state.get("answered_after_restart")
    return waiting and time.time() < deadline + RECONNECT_GRACE_S


async def _client_loop(open_client, deadline: float, tally: Tally, state: dict[str, Any], seed: int) -> None:
    """One client: calls until the deadline; reconnects when its server was killed (those failures are excused)."""
    rng = random.Random(seed)
    while _keep_calling(deadline, state, seed):
        try:
            async with open_client() as client:
                tools = [tool.name for tool in (await client.list_tools()).tools]
                rng.shuffle(tools)
                turn = 0
                while _keep_calling(deadline, state, seed):
                    tool, arguments = _one_call(rng, tools, state["run_ids"], state["prepared"], turn)
                    turn += 1
                    started = time.perf_counter()
                    result = await client.call_tool(tool, arguments)
                    tally.record(tool, time.perf_counter() - started, result)
                    if state.get("restarted") and seed // CLIENTS_PER_SERVER == KILLABLE + 1:
                        tally.after_restart += 1
                        state["answered_after_restart"] = True
        except Exception as exc:  # a transport failure: excused only while the killable server is down
            if state.get("killing") and seed // CLIENTS_PER_SERVER == KILLABLE + 1:
                tally.excused += 1
                await asyncio.sleep(0.5)
            else:
                tally.transport_errors.append(f"{type(exc).__name__}: {str(exc)[:200]}")
                await asyncio.sleep(1)


def _http_opener(url: str):
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    @contextlib.asynccontextmanager
    async def open_client():
        async with (
            httpx2.AsyncClient(timeout=600) as http,
            Client(streamable_http_client(url, http_client=http), read_timeout_seconds=300) as client,
        ):
            yield client

    return open_client


def _shared_opener(client: Any):
    """The stdio server's one session, shared by its 4 concurrent clients (stdio carries one connection)."""

    @contextlib.asynccontextmanager
    async def open_client():
        yield client

    return open_client


async def _wait_for(predicate, timeout: float, every: float = 0.5) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        await asyncio.sleep(every)
    return predicate()


async def _chaos(state: dict[str, Any], open_killable, open_stdio, servers: dict[str, Any]) -> None:
    """Two live runs started through the HTTP server that is later killed; then, side by side, the first run's
    worker SIGKILLed after its first checkpoint and resumed, and that server SIGKILLed and restarted mid-soak."""
    async with open_killable() as client:
        for run_id in state["planned"]:
            result = await client.call_tool("run_grpo", {"request": {"recipe": state["recipe"], "run_id": run_id}})
            assert not result.is_error, result.content[0].text
            state["run_ids"].append(run_id)
    await asyncio.gather(_kill_and_resume_worker(state, open_stdio), _kill_and_restart_server(state, servers))


async def _kill_and_resume_worker(state: dict[str, Any], open_stdio) -> None:
    from skill.runs.store import read_record, run_dir

    first = run_dir(state["planned"][0])
    checkpointed = await _wait_for(lambda: any(first.glob("checkpoints/checkpoint-*/trainer_state.json")), 600)
    state["events"].append(f"first checkpoint of {first.name}: {checkpointed}")
    worker = read_record(first).pid
    state["killed_pids"].append(worker)
    os.killpg(worker, signal.SIGKILL)
    state["events"].append(f"SIGKILLed the worker of {first.name}")
    async with open_stdio() as client:
        for _ in range(120):  # a status call reaps it (failed, SIGKILL); then resume it
            status = await client.call_tool("run_status", {"run_id": first.name})
            if status.structured_content and status.structured_content["state"] == "failed":
                break
            await asyncio.sleep(1)
        resumed = await client.call_tool("run_grpo", {"request": {"resume_run_id": first.name}})
        outcome = f"refused: {resumed.content[0].text[:300]}" if resumed.is_error else "started"
        state["events"].append(f"resume of {first.name}: {outcome}")


async def _kill_and_restart_server(state: dict[str, Any], servers: dict[str, Any]) -> None:
    await asyncio.sleep(max(0.0, (state["deadline"] - time.time()) / 3))  # a third in: time left to reconnect
    state["killing"] = True
    state["killed_pids"].append(servers["killable"].pid)
    servers["killable"].send_signal(signal.SIGKILL)
    servers["killable"].wait()
    state["events"].append("SIGKILLed HTTP server 2")
    servers["killable"] = await asyncio.to_thread(
        _start_http, servers["env"], servers["killable_port"], servers["logs"] / "http-2.log"
    )
    state["events"].append("restarted HTTP server 2")
    state["restarted"] = True
    await asyncio.sleep(3)
    state["killing"] = False


def staging_left(root: Path, killed_pids: list[int]) -> tuple[list[Path], list[Path]]:
    """Staging files still on disk: (those of a SIGKILLed writer, which nothing can clean up; every other one, a
    leak). Readers never see either: the file they name is replaced whole or not at all."""
    from skill.state import STAGING_SUFFIX, staging_writer

    left = sorted(root.rglob(f"*{STAGING_SUFFIX}"))
    killed = [path for path in left if staging_writer(path) in killed_pids]
    return killed, [path for path in left if path not in killed]


def check_state(root: Path, steps: int, run_ids: list[str]) -> list[str]:
    """Every way a run's state on disk could be damaged: a torn file, a lost or repeated step (staging files are
    staging_left's)."""
    from skill.runs.store import RunRecord
    from skill.runs.worker import COMPLETIONS_PER_STEP

    problems: list[str] = []
    for directory in sorted((root / "runs").iterdir()):
        if not (directory / "run.json").is_file():
            continue
        record = RunRecord.model_validate_json((directory / "run.json").read_text())
        for name in ("metrics.jsonl", "completions.jsonl"):
            path = directory / name
            lines = path.read_text().splitlines() if path.is_file() else []
            for number, line in enumerate(lines, 1):
                try:
                    json.loads(line)
                except json.JSONDecodeError:
                    problems.append(f"{directory.name}/{name} line {number} is torn")
        rows = [json.loads(line) for line in (directory / "metrics.jsonl").read_text().splitlines()]
        metric_steps = [row["step"] for row in rows if "loss" in row]  # training steps (held-out evaluations aside)
        if directory.name in run_ids and record.state == "succeeded" and metric_steps != list(range(1, steps + 1)):
            problems.append(f"{directory.name}: metrics steps {metric_steps}, expected 1..{steps} once each")
        if directory.name in run_ids and record.state != "succeeded":
            problems.append(f"{directory.name} ended {record.state}: {record.reason}")
        completions = [json.loads(line)["step"] for line in (directory / "completions.jsonl").read_text().splitlines()]
        if completions != sorted(completions) or any(completions.count(s) > COMPLETIONS_PER_STEP for s in completions):
            problems.append(f"{directory.name}: completions steps repeat or go back: {completions}")
    return problems


async def _soak(root: Path, seconds: int, env: dict[str, str], state: dict[str, Any]) -> Tally:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    logs = root / "logs"
    logs.mkdir()
    ports = [_free_port(), _free_port()]
    http = [_start_http(env, port, logs / f"http-{index + 1}.log") for index, port in enumerate(ports)]
    servers = {"env": env, "killable": http[KILLABLE], "killable_port": ports[KILLABLE], "logs": logs}
    tally = Tally()
    stdio = StdioServerParameters(command=sys.executable, args=["-m", "server.cli", "serve"], env=env, cwd=REPOSITORY)
    try:
        with (logs / "stdio.log").open("w") as stdio_log:
            async with Client(stdio_client(stdio, errlog=stdio_log)) as client:
                stdio_session = client
                openers = [_shared_opener(stdio_session)] + [
                    _http_opener(f"http://127.0.0.1:{port}/mcp") for port in ports
                ]
                deadline = state["deadline"] = time.time() + seconds
                loops = [
                    _client_loop(openers[index // CLIENTS_PER_SERVER], deadline, tally, state, index)
                    for index in range(len(openers) * CLIENTS_PER_SERVER)
                ]
                chaos = _chaos(state, openers[KILLABLE + 1], openers[0], servers)
                outcome = await asyncio.gather(chaos, *loops, return_exceptions=True)
                if isinstance(outcome[0], BaseException):
                    state["events"].append("chaos failed: " + _leaves(outcome[0]))
    finally:
        for process in [http[1 - KILLABLE], servers["killable"]]:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
    return tally


def _leaves(error: BaseException) -> str:
    """The innermost errors of an exception group, in one line."""
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(_leaves(inner) for inner in error.exceptions)
    return f"{type(error).__name__}: {str(error)[:500]}"


def _finish_runs(run_ids: list[str], timeout: float) -> None:
    """Wait for the soak's runs to end (a resumed run trains on); cancel what is still going at the timeout."""
    from skill.runs.jobs import cancel_run, run_status

    deadline = time.time() + timeout
    for run_id in run_ids:
        status = run_status(run_id)
        while status.state in ("starting", "running") and time.time() < deadline:
            status = run_status(run_id, wait_seconds=2)
        if status.state in ("starting", "running"):
            cancel_run(run_id)


def run(seconds: int = 300) -> dict[str, Any]:
    """Soak the servers for ``seconds``; returns the figures and every problem found (empty when it passed)."""
    from skill.state import STATE_ROOT_ENV

    saved = {key: os.environ.get(key) for key in (STATE_ROOT_ENV, "GRPO_RLVR_MAX_RUNS")}
    root = Path(tempfile.mkdtemp(prefix="grpo-soak-"))
    steps = max(8, seconds // 10)
    try:
        os.environ[STATE_ROOT_ENV], os.environ["GRPO_RLVR_MAX_RUNS"] = str(root / "state"), "2"
        prepared = _prepare(root)
        recipe = _recipe(prepared, steps)
        bad = {**recipe, "trl": {**recipe["trl"], "num_generations": 1}}
        prepared["bad_recipe"] = bad
        state: dict[str, Any] = {
            "prepared": prepared,
            "recipe": recipe,
            "planned": ["soak-a", "soak-b"],
            "run_ids": [],
            "events": [],
            "killed_pids": [],
        }
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        started = time.perf_counter()
        tally = asyncio.run(_soak(root, seconds, env, state))
        soak_seconds = time.perf_counter() - started
        _finish_runs(state["run_ids"], timeout=900)
        killed_writes, leaked = staging_left(root / "state", state["killed_pids"])
        state["events"] += [f"staging file of a SIGKILLed writer: {path.name}" for path in killed_writes]
        problems = [f"leftover temporary file {path}" for path in leaked]
        problems += check_state(root / "state", steps, state["run_ids"])
        crashed = [line for log in (root / "logs").glob("*.log") for line in log.read_text().splitlines()]
        crashed = [line for line in crashed if "crashed" in line or "Traceback" in line]
        figures = tally.figures()
        problems += [f"internal error: {text}" for text in figures["internal_error_samples"]]
        problems += [f"transport error: {text}" for text in figures["transport_error_samples"]]
        problems += [f"server log: {line}" for line in crashed[:5]]
        if len(state["run_ids"]) != 2:
            problems.append(f"the two runs did not both start: {state['events']}")
        return {
            **figures,
            "seconds": round(soak_seconds, 1),
            "servers": "1 stdio + 2 streamable HTTP on 127.0.0.1",
            "clients": 3 * CLIENTS_PER_SERVER,
            "run_steps": steps,
            "events": state["events"],
            "problems": problems,
            "state_root": str(root),
        }
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=int, default=300)
    result = run(parser.parse_args().seconds)
    print(json.dumps(result, indent=1))
    sys.exit(1 if result["problems"] else 0)


if __name__ == "__main__":
    main()
