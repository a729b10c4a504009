"""The shell a launch plan runs on every node: ``launch_node.sh`` (``slurm.sbatch`` starts one per node).

``launch_node.sh [TRAINER ...]`` checks the packages the plan needs, starts the vLLM server on node 0 when the plan
has one (its output in ``vllm_server.log``), waits for its ``/health`` on every node, then runs ``accelerate
launch`` with the plan's config and the trainer it was given (the rendered script by default; run_grpo passes the
worker). While both run, whichever ends first ends the node: a server that dies stops the trainers and exits with
``SERVER_DIED_EXIT`` after printing its last lines. The ports come from ``MAIN_PROCESS_PORT`` and the
``launch_commands.PORT_ENVIRONMENT`` names when
set (run_grpo picks free ones per run).

May import: ``recipe.schema`` (types), ``recipe.launching.launch_commands``, ``recipe.checking.plan_checks``,
``hardware``.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from skill.hardware.layout import NodeLayout, Sharding, gpu_list
from skill.recipe.launching.launch_commands import (
    CONFIG_FILE,
    MAIN_PROCESS_PORT,
    SCRIPT_TRAINER,
    VLLM_GROUP_PORT_ENV,
    VLLM_PORT_ENV,
    starts_vllm_server,
    vllm_command,
)

if TYPE_CHECKING:
    from skill.recipe.schema import GRPORecipe

VLLM_LOG = "vllm_server.log"
VLLM_WAIT_S = 1800  # a large model can take many minutes to load; torchrun's static rendezvous waits 600 s
SERVER_DIED_EXIT = 3  # launch_node.sh's exit status when the vLLM server ends before the trainers


def _needs_check(needs: dict[str, str]) -> list[str]:
    """Shell lines that stop a node at once, naming what to install, when a package the plan needs is missing."""
    if not needs:
        return []
    pairs = " ".join(shlex.quote(f"{module}={requirement}") for module, requirement in needs.items())
    return [
        "# The packages this plan needs beyond the core install (module=requirement), checked before anything starts.",
        f"python - {pairs} <<'CHECK'",
        "import importlib.util, sys",
        'needs = dict(pair.split("=", 1) for pair in sys.argv[1:])',
        "missing = [module for module in needs if importlib.util.find_spec(module) is None]",
        "if missing:",
        '    installs = " ".join(sorted({repr(needs[module]) for module in missing}))',
        "    sys.exit(f\"this recipe needs {', '.join(missing)}: pip install {installs}\")",
        "CHECK",
    ]


def _device_lines() -> list[str]:
    """``given_devices``: the plan numbers a node's GPUs 0..N-1; a shell that inherits CUDA_VISIBLE_DEVICES (Slurm's
    allocation, a shared machine) was given those devices only, so plan index i is the i-th of them."""
    return [
        "# The plan numbers this node's GPUs 0..N-1; an inherited CUDA_VISIBLE_DEVICES lists the ones this job was",
        "# given (a scheduler's allocation, a shared machine), so plan index i is its i-th entry.",
        "GIVEN_DEVICES=${CUDA_VISIBLE_DEVICES:-}",
        "given_devices() {",
        '  if [ -z "$GIVEN_DEVICES" ] || [ -z "$1" ]; then echo "$1"; return; fi',
        '  python - "$GIVEN_DEVICES" "$1" <<\'DEVICES\'',
        "import sys",
        'given = sys.argv[1].split(",")',
        'wanted = [int(index) for index in sys.argv[2].split(",")]',
        "if max(wanted) >= len(given):",
        '    sys.exit(f"the plan uses {max(wanted) + 1} GPU(s) on this node; CUDA_VISIBLE_DEVICES gives {len(given)}: '
        '{sys.argv[1]}")',
        'print(",".join(given[index] for index in wanted))',
        "DEVICES",
        "}",
    ]


def _server_lines(recipe: GRPORecipe, devices: str) -> list[str]:
    """Node 0 starts the vLLM server (its output in vllm_server.log); every node waits for its /health."""
    return [
        'if [ "$NODE_RANK" -eq 0 ]; then',
        f"  {devices}{vllm_command(recipe, '$' + VLLM_PORT_ENV)} > {VLLM_LOG} 2>&1 &",
        "  VLLM_PID=$!",
        "  trap 'kill \"$VLLM_PID\" 2>/dev/null || true' EXIT",
        "fi",
        "# Every node waits for the server: rank 0 (node 0) syncs weights with it before the first step, and",
        "# a slow model load must not outlast torchrun's rendezvous.",
        f"HEALTH=http://$MAIN_PROCESS_IP:${VLLM_PORT_ENV}/health",
        "WAITED=0",
        "until python -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=5)' \"$HEALTH\" "
        "2>/dev/null; do",
        '  if [ -n "${VLLM_PID:-}" ] && ! kill -0 "$VLLM_PID" 2>/dev/null; then',
        f'    echo "vLLM server exited before it was healthy; last lines of {VLLM_LOG}:" >&2',
        f"    tail -n 20 {VLLM_LOG} >&2",
        f"    exit {SERVER_DIED_EXIT}",
        "  fi",
        f'  if [ "$WAITED" -ge "${{VLLM_WAIT_S:-{VLLM_WAIT_S}}}" ]; then echo "no vLLM server at $HEALTH" >&2;'
        " exit 1; fi",
        "  sleep 2; WAITED=$((WAITED + 2))",
        "done",
        'echo "vLLM server healthy at $HEALTH after ${WAITED} s"',
    ]


def _trainer_lines(server: bool, on_cpu: bool) -> list[str]:
    """accelerate launch with the trainer given as arguments; with a server on this node, whichever ends first ends
    the node: a dead server stops the trainers and says why (exit status SERVER_DIED_EXIT)."""
    devices = "" if on_cpu else "CUDA_VISIBLE_DEVICES=$TRAINER_GPUS "
    launch = [
        "# accelerate starts num_processes // num_machines trainers here: pass this node's count x machines.",
        f"{devices}accelerate launch --config_file {CONFIG_FILE} \\",
        '  --num_processes $((LOCAL_TRAINERS * NUM_MACHINES)) --num_machines "$NUM_MACHINES" \\',
        '  --machine_rank "$NODE_RANK" --main_process_ip "$MAIN_PROCESS_IP" \\',
        '  --main_process_port "$MAIN_PROCESS_PORT" \\',
        '  "${TRAINER[@]}"',
    ]
    if not server:
        return launch
    return [
        'if [ -z "${VLLM_PID:-}" ]; then',
        *("  " + line for line in launch),
        "  exit $?",
        "fi",
        *launch[:-1],
        '  "${TRAINER[@]}" &',
        "TRAIN_PID=$!",
        'while kill -0 "$TRAIN_PID" 2>/dev/null && kill -0 "$VLLM_PID" 2>/dev/null; do sleep 2; done',
        'if kill -0 "$TRAIN_PID" 2>/dev/null; then',
        f'  echo "vLLM server exited during training; last lines of {VLLM_LOG}:" >&2; tail -n 20 {VLLM_LOG} >&2',
        '  kill "$TRAIN_PID" 2>/dev/null || true; wait "$TRAIN_PID" || true',
        f"  exit {SERVER_DIED_EXIT}",
        "fi",
        'wait "$TRAIN_PID"',
    ]


def _header(recipe: GRPORecipe, sharding: Sharding, server: str) -> list[str]:
    """What the script is, how to call it, and its settings (environment first, then defaults)."""
    on_cpu = " on CPU" if recipe.hardware.accelerator == "cpu" else ""
    port, group = recipe.grpo.vllm_server_port, recipe.grpo.vllm_group_port
    return [
        "#!/usr/bin/env bash",
        f"# {recipe.model.name} ({recipe.method}), {sharding}: {recipe.launch.training_processes} trainer(s)"
        f"{on_cpu}{server}. Written by grpo-rlvr.",
        "# On every node: NODE_RANK=<rank> MAIN_PROCESS_IP=<node 0 address> bash launch_node.sh [TRAINER ...]",
        f"# TRAINER defaults to `{SCRIPT_TRAINER}`; run_grpo passes `-m skill.runs.worker RUN_DIR`.",
        f"# MAIN_PROCESS_PORT, {VLLM_PORT_ENV} and {VLLM_GROUP_PORT_ENV} may be set to free ports (run_grpo picks them",
        "# per run).",
        "set -euo pipefail",
        'cd "$(dirname "$0")"',
        "# Slurm's checkpoint request (sbatch --signal=USR1) is for the trainers (the worker saves one): this shell,",
        "# accelerate's launcher and the vLLM server inherit 'ignore' and live on; the worker catches it.",
        "trap '' USR1",
        "NODE_RANK=${NODE_RANK:-${SLURM_NODEID:-0}}",
        "MAIN_PROCESS_IP=${MAIN_PROCESS_IP:-127.0.0.1}",
        f"MAIN_PROCESS_PORT=${{MAIN_PROCESS_PORT:-{MAIN_PROCESS_PORT}}}",
        f"{VLLM_PORT_ENV}=${{{VLLM_PORT_ENV}:-{port}}}",
        f"{VLLM_GROUP_PORT_ENV}=${{{VLLM_GROUP_PORT_ENV}:-{group}}}",
        f"export {VLLM_PORT_ENV} {VLLM_GROUP_PORT_ENV}  # the trainer reads the ports the server was started with",
        f'if [ $# -gt 0 ]; then TRAINER=("$@"); else TRAINER=({SCRIPT_TRAINER}); fi',
    ]


def _devices(indices: list[int], on_cpu: bool) -> str:
    """The shell word for a node's GPUs by plan index: mapped through what the node was given (``given_devices``)."""
    return gpu_list(indices) if on_cpu else f'"$(given_devices {gpu_list(indices)})"'


def node_script(recipe: GRPORecipe, nodes: list[NodeLayout], sharding: Sharding, needs: dict[str, str]) -> str:
    first, rest = nodes[0], nodes[1:]
    server = starts_vllm_server(recipe)
    on_cpu = recipe.hardware.accelerator == "cpu"
    where = "the CPU" if on_cpu else f"{len(first.vllm_gpus)} GPU(s)"
    server_prefix = "" if on_cpu else f"CUDA_VISIBLE_DEVICES={_devices(first.vllm_gpus, on_cpu)} "
    lines = [
        *_header(recipe, sharding, f", vLLM on {where} of node 0" if server else ""),
        f"NUM_MACHINES={len(nodes)}",
        *_needs_check(needs),
        *([] if on_cpu else _device_lines()),
        'if [ "$NODE_RANK" -eq 0 ]; then',
        f"  TRAINER_GPUS={_devices(first.trainer_gpus, on_cpu)}",
        f"  LOCAL_TRAINERS={first.trainer_processes}",
        "else",
        f"  TRAINER_GPUS={_devices(rest[0].trainer_gpus, on_cpu) if rest else ''}",
        f"  LOCAL_TRAINERS={rest[0].trainer_processes if rest else 0}",
        "fi",
        *(_server_lines(recipe, server_prefix) if server else []),
        *_trainer_lines(server, on_cpu),
        "",
    ]
    return "\n".join(lines)
