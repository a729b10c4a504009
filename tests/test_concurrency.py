"""The runner and server under concurrency, faults and bad input: one regression test per failure a new user met.

Concurrent calls on a fresh server, the run cap across threads and processes, a hand-edited recipe, every
numeric field's NaN / infinity / range, a full disk, caches under the state root, empty ids, blank tokens,
and unreadable lines over stdio.
"""

from __future__ import annotations

import asyncio
import errno
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mcp import Client
from pydantic import ValidationError
from test_runs import REWARDS, pass_inspection, recipe, wait

from server.http_transport import TOKEN_ENV, check_binding
from server.mcp_server import build_server
from server.tool_errors import ERROR_SHAPE
from skill.data import addition_rows
from skill.errors import SkillError
from skill.memory.schema import MemoryRequest
from skill.recipe.emit import RecipeRequest, emit_grpo_config
from skill.runs.held_out import training_rows
from skill.runs.jobs import RunRequest, cancel_run, run_grpo, run_logs
from skill.runs.store import is_alive, read_jsonl, read_record, run_dir, runs_root
from skill.runs.worker import COMPLETIONS_PER_STEP
from skill.state import STAGING_SUFFIX, STATE_ROOT_ENV, staging_writer, write_atomically

REPOSITORY = Path(__file__).resolve().parent.parent
CPU_REQUEST = {
    "hardware": {"accelerator": "cpu"},
    "method": "full",
    "rewards": [{"name": "exact_match", "role": "correctness"}],
    "dataset": {"name": "embedded:addition"},
    "max_steps": 2,
}


def python(script: str, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess:
    """A fresh interpreter (nothing imported yet: the state a newly started server is in)."""
    return subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=REPOSITORY, capture_output=True, text=True, timeout=timeout
    )


# ---- 1. resume is exact -------------------------------------------------------------------------------------------


def steps_of(directory: Path, name: str) -> list[int]:
    """The steps of a run's JSONL rows (of metrics.jsonl: training rows, held-out evaluations aside)."""
    rows = read_jsonl(directory / name)
    return [row["step"] for row in (training_rows(rows) if name == "metrics.jsonl" else rows)]


@pytest.mark.slow
def test_resume_before_the_first_checkpoint_starts_over_and_says_so(tiny_model_dir, dataset):
    pass_inspection(REWARDS)
    # save_steps beyond max_steps: no checkpoint before the end, so the kill lands before any.
    first = run_grpo(RunRequest(recipe=recipe(tiny_model_dir, dataset, steps=4, save_steps=100), run_id="resume-none"))
    # said from the start (agents cancelled at step 2 of 8 and learned only then that a resume starts over)
    assert first.resume == "no checkpoint yet (the first comes at step 100): a resume now would start over from step 0"
    directory = run_dir("resume-none")
    deadline = time.time() + 240
    while time.time() < deadline and not steps_of(directory, "metrics.jsonl"):
        time.sleep(0.2)
    os.killpg(read_record(directory).pid, signal.SIGKILL)
    assert wait("resume-none", timeout=30).state == "failed"
    assert steps_of(directory, "metrics.jsonl")  # the killed attempt wrote steps
    started = run_grpo(RunRequest(resume_run_id="resume-none"))
    # said at once, before the worker runs (an agent read the old step and no resume note, and thought it resumed)
    assert started.resume.startswith("resuming: no checkpoint was saved, so it starts over from step 0")
    assert started.step == 0  # not the killed attempt's last step, still logged until the worker drops it
    status = wait("resume-none")
    assert status.state == "succeeded", run_logs("resume-none").lines[-20:]
    assert steps_of(directory, "metrics.jsonl") == [1, 2, 3, 4]
    completions = steps_of(directory, "completions.jsonl")
    assert sorted(set(completions)) == [1, 2, 3, 4]
    assert all(completions.count(step) <= COMPLETIONS_PER_STEP for step in range(1, 5))
    assert status.resume.startswith("no checkpoint: started over from step 0")
    assert any("resume: no checkpoint" in line for line in run_logs("resume-none", 5000).lines)
    assert read_record(directory).resumed_from_step == 0


@pytest.mark.slow
def test_resume_from_a_checkpoint_trims_completions_too(tiny_model_dir, dataset):
    pass_inspection(REWARDS)
    run_grpo(RunRequest(recipe=recipe(tiny_model_dir, dataset, steps=6, save_steps=2), run_id="resume-ckpt"))
    directory = run_dir("resume-ckpt")
    deadline = time.time() + 240
    while time.time() < deadline and not list((directory / "checkpoints").glob("checkpoint-*/trainer_state.json")):
        time.sleep(0.2)
    while time.time() < deadline and max(steps_of(directory, "metrics.jsonl"), default=0) < 3:
        time.sleep(0.2)  # a step past the checkpoint: the resumed run trains it again
    killed = read_record(directory)
    os.killpg(killed.pid, signal.SIGKILL)
    while is_alive(killed):
        time.sleep(0.1)
    # Resumed by another server process before this one (the killed worker's parent) has reaped its child: reaping
    # it later must not mark the resumed attempt failed.
    script = "from skill.runs.jobs import RunRequest, run_grpo; run_grpo(RunRequest(resume_run_id='resume-ckpt'))"
    resumed = python(script, dict(os.environ))
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert read_record(directory).pid != killed.pid
    status = wait("resume-ckpt")
    assert status.state == "succeeded", run_logs("resume-ckpt").lines[-20:]
    assert steps_of(directory, "metrics.jsonl") == list(range(1, 7))
    completions = steps_of(directory, "completions.jsonl")
    assert completions == sorted(completions) and all(completions.count(s) <= COMPLETIONS_PER_STEP for s in range(7))
    assert status.resume.startswith("resumed from checkpoint-")


# ---- 2 and 3. a fresh server under concurrent calls; the run cap across threads and processes -----------------------

GATHER = """
import asyncio, json, sys
from mcp import Client
from server.mcp_server import build_server
recipe = json.loads(open(sys.argv[1]).read()) if len(sys.argv) > 1 else None
emit = {"request": %r}
async def go():
    async with Client(build_server()) as client:
        calls = [client.call_tool("emit_grpo_config", emit) for _ in range(2)]
        if recipe is not None:
            calls += [client.call_tool("run_grpo", {"request": {"recipe": recipe}}) for _ in range(2)]
        results = await asyncio.gather(*calls)
        print(json.dumps([[r.is_error, r.content[0].text[:300] if r.is_error else ""] for r in results]))
        for r in results[2:]:
            if not r.is_error:
                await client.call_tool("cancel_run", {"run_id": r.structured_content["run_id"]})
asyncio.run(go())
"""


def test_two_concurrent_emits_on_a_fresh_server_both_succeed(tmp_path):
    env = {**os.environ, STATE_ROOT_ENV: str(tmp_path / "state")}
    done = python(GATHER % CPU_REQUEST, env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1]) == [[False, ""], [False, ""]]


@pytest.mark.slow
def test_concurrent_run_grpo_on_a_fresh_server_respects_the_cap(tiny_model_dir, dataset, tmp_path, monkeypatch):
    monkeypatch.setenv(STATE_ROOT_ENV, str(tmp_path / "state"))
    pass_inspection(REWARDS)
    (tmp_path / "recipe.json").write_text(recipe(tiny_model_dir, dataset, steps=200).model_dump_json())
    env = {**os.environ, "GRPO_RLVR_MAX_RUNS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", GATHER % CPU_REQUEST, str(tmp_path / "recipe.json")],
        env=env,
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (emit_a, _), (emit_b, _), first, second = json.loads(done.stdout.splitlines()[-1])
    assert not emit_a and not emit_b
    outcomes = sorted([first, second])
    assert outcomes[0] == [False, ""], outcomes  # exactly one started
    assert outcomes[1][0] and "already running" in outcomes[1][1] and "the limit is 1" in outcomes[1][1]
    assert "internal error" not in done.stdout


START = """
import sys
from skill.errors import SkillError
from skill.recipe.schema import GRPORecipe
from skill.runs.jobs import RunRequest, run_grpo
recipe = GRPORecipe.model_validate_json(open(sys.argv[1]).read())
print("ready", flush=True)
sys.stdin.readline()  # both processes start their run at the same moment
try:
    print("started", run_grpo(RunRequest(recipe=recipe)).run_id, flush=True)
except SkillError as exc:
    print("refused", exc, flush=True)
"""


@pytest.mark.slow
def test_the_run_cap_holds_across_two_server_processes(tiny_model_dir, dataset, tmp_path, monkeypatch):
    monkeypatch.setenv(STATE_ROOT_ENV, str(tmp_path / "state"))
    pass_inspection(REWARDS)
    (tmp_path / "recipe.json").write_text(recipe(tiny_model_dir, dataset, steps=200).model_dump_json())
    env = {**os.environ, "GRPO_RLVR_MAX_RUNS": "1"}
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", START, str(tmp_path / "recipe.json")],
            env=env,
            cwd=REPOSITORY,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    for process in processes:
        assert process.stdout.readline().strip() == "ready"
    for process in processes:
        process.stdin.write("go\n")
        process.stdin.flush()
    answers = sorted(process.communicate(timeout=300)[0].strip().splitlines()[-1] for process in processes)
    started = [line.split()[1] for line in answers if line.startswith("started")]
    try:
        assert len(started) == 1, answers
        assert answers[0].startswith("refused") and f"({started[0]})" in answers[0] and "limit is 1" in answers[0]
    finally:
        for run_id in started:
            cancel_run(run_id)


# ---- 4. run_grpo validates the recipe as strictly as emit; numbers are finite and in range -------------------------


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "addition.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in addition_rows(64)))
    return path


@pytest.fixture(scope="module")
def good_recipe(tiny_model_dir, dataset):
    return recipe(tiny_model_dir, dataset)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"num_generations": 1}, "num_generations=1 is below the floor of 8"),
        ({"loss_type": "bogus"}, "loss_type='bogus' is not handled by the installed GRPOTrainer"),
        ({"learning_rate": "fast"}, "trl.learning_rate='fast' is not a number"),
        ({"learning_rate": math.nan}, "trl.learning_rate=nan is not a finite number"),
        ({"learning_rate": -1}, "trl.learning_rate=-1 is out of range. Send a number > 0"),
        ({"temperature": math.inf}, "trl.temperature=inf is not a finite number"),
        ({"beta": -0.5}, "trl.beta=-0.5 is out of range"),
        ({"max_completion_length": 2.5}, "trl.max_completion_length=2.5 is not a whole number"),
        ({"bf16": "yes"}, "trl.bf16='yes' is not true or false"),
        ({"reward_weights": [0.2, math.nan]}, "trl.reward_weights[1]=nan is not a finite number"),
        ({"reward_weights": [1.0]}, "reward_weights has 1 entries for 2 rewards"),
        # The cross-field refusals, half-precision master weights and the server URL: emit's, skipped here before.
        ({"loss_type": "cispo", "epsilon_high": 0.5}, "loss_type='cispo' caps each token"),
        ({"model_init_kwargs": {"dtype": "bfloat16"}}, "A full fine-tune with bfloat16 weights"),
        ({"vllm_server_base_url": "http://h:8000"}, "vllm_server_base_url='http://h:8000' is set but"),
    ],
)
def test_run_grpo_refuses_a_hand_edited_recipe_as_emit_would(good_recipe, change, message):
    good = good_recipe
    edited = good.model_copy(update={"trl": {**good.trl, **change}})
    with pytest.raises(SkillError, match=message.replace("(", r"\(").replace("[", r"\[")):
        run_grpo(RunRequest(recipe=edited, run_id="hand-edited"))
    assert not (runs_root() / "hand-edited").exists()  # nothing was started


def test_emit_refuses_what_run_grpo_refuses():
    for change, message in (
        ({"learning_rate": "fast"}, "is not a number"),
        ({"learning_rate": math.nan}, "is not a finite number"),
        ({"learning_rate": -1}, "is out of range"),
        ({"beta": -0.5}, "is out of range"),
    ):
        with pytest.raises(SkillError, match=message):
            emit_grpo_config(RecipeRequest.model_validate({**CPU_REQUEST, "overrides": change}))


@pytest.mark.parametrize(
    ("model", "payload"),
    [
        (RecipeRequest, {**CPU_REQUEST, "model": {"parameters_billions": math.nan}}),
        (RecipeRequest, {**CPU_REQUEST, "model": {"parameters_billions": math.inf}}),
        (RecipeRequest, {**CPU_REQUEST, "hardware": {"gpu_model": "H100", "memory_gib_per_gpu": math.inf}}),
        (RecipeRequest, {**CPU_REQUEST, "hardware": {"accelerator": "cpu", "memory_gib_per_gpu": -4}}),
        (
            RecipeRequest,
            {**CPU_REQUEST, "rewards": [{"name": "exact_match", "role": "correctness", "weight": math.nan}]},
        ),
        (RecipeRequest, {**CPU_REQUEST, "dataset": {"name": "embedded:addition", "max_prompt_tokens": math.inf}}),
        (RunRequest, {"resume_run_id": "x", "held_out_fraction": math.nan}),
        (MemoryRequest, {"model": "Qwen/Qwen2.5-7B-Instruct", "hardware": {"gpu_model": "H100"}, "beta": math.nan}),
        (MemoryRequest, {"model": "Qwen/Qwen2.5-7B-Instruct", "hardware": {"gpu_model": "H100"}, "beta": math.inf}),
    ],
)
def test_numeric_request_fields_refuse_nan_infinity_and_out_of_range(model, payload):
    with pytest.raises(ValidationError):
        model.model_validate(payload)


def test_nan_over_mcp_is_a_tool_error_naming_the_field():
    async def go():
        async with Client(build_server()) as client:
            return await client.call_tool(
                "emit_grpo_config", {"request": {**CPU_REQUEST, "overrides": {"learning_rate": "fast"}}}
            )

    result = asyncio.run(go())
    assert result.is_error and ERROR_SHAPE.match(result.content[0].text)
    assert "trl.learning_rate='fast' is not a number" in result.content[0].text


# ---- 5. a full disk says so; no temporary file stays behind -------------------------------------------------------


@pytest.fixture
def full_disk(tmp_path):
    """A 1 MiB tmpfs filled to the last byte (needs mount rights: skipped without them)."""
    mountpoint = tmp_path / "small-disk"
    mountpoint.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mountpoint)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        (mountpoint / "state" / "routes").mkdir(parents=True)
        try:
            with (mountpoint / "filler").open("wb") as filler:
                while True:
                    filler.write(b"\0" * 65536)
                    filler.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
        try:  # the last partial block
            with (mountpoint / "filler2").open("wb") as filler:
                while True:
                    filler.write(b"\0")
                    filler.flush()
        except OSError:
            pass
        yield mountpoint
    finally:
        subprocess.run(["umount", "-l", str(mountpoint)], check=False)


def test_atomic_write_on_a_full_disk_leaves_no_temporary_file(full_disk):
    with pytest.raises(OSError) as raised:
        write_atomically(full_disk / "state" / "x.json", "{" + "x" * 100_000 + "}")
    assert raised.value.errno == errno.ENOSPC
    assert [path.name for path in full_disk.rglob("*.tmp")] == []
    assert not (full_disk / "state" / "x.json").exists()


def test_a_writer_killed_before_its_rename_leaves_the_old_file_and_a_staging_file_that_names_it(tmp_path):
    target = tmp_path / "run.json"
    target.write_text('{"old": true}')
    # SIGKILL between the staging write and the rename: nothing can clean up after it.
    script = (
        "import os, signal, sys\nfrom pathlib import Path\nfrom skill.state import write_atomically\n"
        "Path.replace = lambda self, target: os.kill(os.getpid(), signal.SIGKILL)\n"
        "write_atomically(Path(sys.argv[1]), '{\"new\": true}')\n"
    )
    writer = subprocess.Popen([sys.executable, "-c", script, str(target)], cwd=REPOSITORY)
    assert writer.wait(timeout=60) == -signal.SIGKILL
    assert target.read_text() == '{"old": true}'  # readers still see the whole old file
    [staging] = tmp_path.glob(f".run.json.*{STAGING_SUFFIX}")
    assert staging.read_text() == '{"new": true}'
    assert staging_writer(staging) == writer.pid and staging_writer(target) is None


def test_a_tool_on_a_full_disk_names_the_disk_not_a_missing_path(full_disk, monkeypatch):
    monkeypatch.setenv(STATE_ROOT_ENV, str(full_disk / "state"))

    async def go():
        async with Client(build_server()) as client:
            return await client.call_tool("route_check", {"request": {"signal": "math_answer"}})

    result = asyncio.run(go())
    text = result.content[0].text
    assert result.is_error and text.startswith("route_check: the disk is full"), text
    assert str(full_disk) in text and "MiB free" in text and "Send a path that exists" not in text
    assert [path.name for path in full_disk.rglob("*.tmp")] == []


def test_the_cli_names_a_full_disk_too(full_disk, capsys, monkeypatch):
    from server.cli import main

    monkeypatch.setenv(STATE_ROOT_ENV, os.environ[STATE_ROOT_ENV])  # --state-root sets it: restored after the test
    code = main(["--state-root", str(full_disk / "state"), "route", "--signal", "math_answer"])
    assert code == 2
    assert "the disk is full" in capsys.readouterr().err
    assert [path.name for path in full_disk.rglob("*.tmp")] == []


# ---- 6. caches under the state root; empty ids and blank tokens refused ------------------------------------------


def test_the_datasets_cache_of_a_local_file_lives_under_the_state_root(tmp_path):
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"prompt": "What is 1 + 2?", "answer": "3"}\n')
    home = tmp_path / "home"
    home.mkdir()
    env = {key: value for key, value in os.environ.items() if not key.startswith(("HF_", "XDG_CACHE"))}
    env.update(HOME=str(home), **{STATE_ROOT_ENV: str(tmp_path / "state")})
    script = f"from skill.data import DatasetSpec, load_rows; print(load_rows(DatasetSpec(name={str(rows)!r})))"
    done = python(script, env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "'answer': '3'" in done.stdout
    assert list(home.rglob("*")) == []  # nothing under $HOME/.cache
    assert list((tmp_path / "state" / "cache" / "datasets").rglob("*.arrow"))


@pytest.mark.parametrize("empty", ["", "   "])
def test_an_empty_route_decision_id_is_refused(empty):
    with pytest.raises(ValidationError, match="route_decision_id is empty"):
        RecipeRequest.model_validate({**CPU_REQUEST, "route_decision_id": empty})


@pytest.mark.parametrize("token", [" " * 20, "\t" * 16, "a-valid-looking token-with-a-space"])
def test_a_blank_or_spaced_http_token_is_refused_at_start(token, tmp_path):
    with pytest.raises(SkillError, match="blank or holds whitespace"):
        check_binding("127.0.0.1", token)
    env = {**os.environ, TOKEN_ENV: token, STATE_ROOT_ENV: str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "server.cli", "serve", "--http", "--port", "1"],
        env=env,
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "blank or holds whitespace" in done.stderr


# ---- 7. unreadable lines over stdio get a JSON-RPC error; the server stays up -------------------------------------


def test_unreadable_stdio_lines_are_answered_and_the_server_keeps_serving(tmp_path):
    env = {**os.environ, STATE_ROOT_ENV: str(tmp_path)}
    server = subprocess.Popen(
        [sys.executable, "-m", "server.cli", "serve"],
        env=env,
        cwd=REPOSITORY,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )

    def send(line: str) -> dict:
        server.stdin.write(line + "\n")
        server.stdin.flush()
        return json.loads(server.stdout.readline())

    try:
        hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        assert "result" in send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}))
        server.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
        deep = '{"a":' * 250 + "1" + "}" * 250
        call = '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"list_runs","arguments":' + deep + "}}"
        answers = [send("{not json"), send(call), send("[1, 2]"), send('{"jsonrpc": "2.0", "id": 9, "method": 5}')]
        assert [(a["id"], a["error"]["code"]) for a in answers] == [
            (None, -32700),
            (7, -32600),
            (None, -32600),
            (9, -32600),
        ]
        assert "nested deeper" in answers[1]["error"]["message"]
        listed = send(json.dumps({"jsonrpc": "2.0", "id": 10, "method": "tools/list"}))
        assert listed["id"] == 10 and "run_grpo" in [tool["name"] for tool in listed["result"]["tools"]]
    finally:
        server.stdin.close()
        assert server.wait(timeout=30) == 0


# ---- 7. datasets loaded by concurrent calls -----------------------------------------------------------------------

LOADS = """
import asyncio, json, sys
from mcp import Client
from server.mcp_server import build_server
from skill.data import DatasetSpec, load_rows

files = json.loads(sys.argv[1])
for path in files[:4]:  # half of them loaded before: their Arrow cache exists
    load_rows(DatasetSpec(name=path))

def request(path):
    return {"request": {**%r, "dataset": {"name": path}}}

async def go():
    async with Client(build_server()) as client:
        results = await asyncio.gather(*[client.call_tool("emit_grpo_config", request(path)) for path in files])
        answers = []
        for result in results:
            reasons = {} if result.is_error else {
                r["field"]: r["reason"] for r in result.structured_content["reasons"]}
            answers.append([result.is_error, reasons.get("dataset.max_prompt_tokens", result.content[0].text)])
        print(json.dumps(answers))
asyncio.run(go())
"""


def test_eight_concurrent_calls_each_load_their_own_dataset_cached_or_not(tmp_path):
    files = []
    for index in range(8):  # file i has i + 3 rows: the measured count says whose rows a call read
        path = tmp_path / f"rows-{index}.jsonl"
        rows = [{"prompt": f"What is {index} + {row}?", "answer": str(index + row)} for row in range(index + 3)]
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
        files.append(str(path))
    env = {**os.environ, STATE_ROOT_ENV: str(tmp_path / "state")}
    done = subprocess.run(
        [sys.executable, "-c", LOADS % CPU_REQUEST, json.dumps(files)],
        env=env,
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    answers = json.loads(done.stdout.splitlines()[-1])
    assert [is_error for is_error, _ in answers] == [False] * 8, answers
    for index, (_, reason) in enumerate(answers):
        assert reason.startswith(f"measured on {index + 3} prompts"), (index, reason)
