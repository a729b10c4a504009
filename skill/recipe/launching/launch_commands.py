"""The command lines that launch a recipe, by role and node: the one source for the rendered script's docstring,
the launch files, emit's result (``GRPORecipe.launch.commands``) and what the runner starts.

One process (one GPU, or a CPU) runs ``python``; several run ``accelerate launch --config_file`` on the plan's
accelerate config, with the vLLM server (``trl vllm-serve``) on GPUs of its own when the recipe generates with one.
``launch_node.sh`` (``skill.recipe.launching.launch``) runs these lines on a node, in this order. The trainer is the
rendered script (``train_grpo.py``) for a person launching by hand, or the project's worker
(``-m skill.runs.worker RUN_DIR``) when ``run_grpo`` launches.

May import: ``hardware``, ``models`` (``recipe.schema`` for types only). Nothing here decides the layout: it reads it.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from skill.grpo_fields import grpo_config_defaults
from skill.hardware.layout import gpu_list, node_layouts
from skill.models.sources import is_embedded

if TYPE_CHECKING:  # annotations only: the commands are read from a recipe, never built into one
    from skill.recipe.schema import GRPORecipe

CONFIG_FILE = "accelerate_config.yaml"
SCRIPT_FILE = "train_grpo.py"
NODE_SCRIPT = "launch_node.sh"
SLURM_SCRIPT = "slurm.sbatch"
SCRIPT_TRAINER = f"{SCRIPT_FILE} --output-dir grpo-output"
# The defaults a hand launch uses (accelerate's, and TRL's vllm_server_port); run_grpo picks free ports per run and
# records them in run.json.
MAIN_PROCESS_PORT = 29500
VLLM_PORT = int(grpo_config_defaults()["vllm_server_port"])
VLLM_GROUP_PORT = int(grpo_config_defaults()["vllm_group_port"])
# Where a launcher says which port it started the vLLM server on, and which the trainer's weight-sync group with it
# takes (launch_node.sh, slurm.sbatch, run_grpo's engines); the trainer reads both: the rendered script and the
# worker alike. Names of the project's own: vLLM reads VLLM_PORT itself, for its internal ports, and warns of any
# other VLLM_* name it does not know.
VLLM_PORT_ENV = "GRPO_RLVR_VLLM_PORT"
VLLM_GROUP_PORT_ENV = "GRPO_RLVR_VLLM_GROUP_PORT"
# The variable each port a run_grpo engine picks is handed over in, by its role in run.json's ports.
PORT_ENVIRONMENT = {
    "master": "MASTER_PORT",
    "main_process": "MAIN_PROCESS_PORT",
    "vllm": VLLM_PORT_ENV,
    "vllm_group": VLLM_GROUP_PORT_ENV,
}


def uses_vllm_server(recipe: GRPORecipe) -> bool:
    """True when the recipe generates with a separate ``trl vllm-serve`` process."""
    return bool(recipe.grpo.use_vllm) and recipe.grpo.vllm_mode == "server"


def starts_vllm_server(recipe: GRPORecipe) -> bool:
    """True when the launch plan starts that server: on GPUs of its own, or on a CPU target beside the trainers
    (there, TRL's weight sync into it stops the trainer: ``runs.checks.check_target``). A server the recipe names
    by ``vllm_server_base_url`` runs elsewhere: the plan starts none and gives it no GPU."""
    on_cpu = recipe.hardware.accelerator == "cpu"
    remote = bool(recipe.grpo.vllm_server_base_url)
    return uses_vllm_server(recipe) and not remote and (on_cpu or recipe.launch.vllm_server_gpus > 0)


def server_devices(recipe: GRPORecipe) -> str:
    """The server's device prefix: its GPUs on node 0, nothing on a CPU target."""
    if recipe.hardware.accelerator == "cpu":
        return ""
    return f"CUDA_VISIBLE_DEVICES={gpu_list(node_layouts(recipe.hardware, recipe.launch)[0].vllm_gpus)} "


def model_argument(recipe: GRPORecipe) -> str:
    """The model as a shell word; the embedded model resolves on the node the same way a run does."""
    name = recipe.model.name
    if is_embedded(name):
        code = f"from skill.models.sources import resolve_model_path; print(resolve_model_path({name!r}))"
        return f'"$(python -c {shlex.quote(code)})"'
    return shlex.quote(name)


def vllm_command(recipe: GRPORecipe, port: str | int | None = None) -> str:
    """``trl vllm-serve`` for the recipe's server GPUs (without CUDA_VISIBLE_DEVICES), context sized to the budget.
    On a CPU target its KV cache is the recipe's share of host RAM (``vllm_gpu_memory_utilization``), not the 0.9
    that suits GPUs of its own; a GPU recipe passes a share only when it states one (a rehearsal on CPU does)."""
    trl, launch = recipe.grpo, recipe.launch
    parallel = launch.vllm_tensor_parallel_size
    parts = ["trl vllm-serve --model", model_argument(recipe), f"--tensor-parallel-size {parallel}"]
    if launch.vllm_server_gpus // parallel > 1:
        parts.append(f"--data-parallel-size {launch.vllm_server_gpus // parallel}")
    parts.append(f"--port {port if port is not None else trl.vllm_server_port}")
    if trl.vllm_max_model_length:
        parts.append(f"--max-model-len {trl.vllm_max_model_length}")
    stated = trl.is_set("vllm_gpu_memory_utilization") and trl.vllm_gpu_memory_utilization is not None
    if recipe.hardware.accelerator == "cpu" or stated:
        # a CPU server's share of host RAM; a GPU server recipe that states a share passes it on
        parts.append(f"--gpu-memory-utilization {trl.vllm_gpu_memory_utilization}")
    return " ".join(parts)


def accelerate_command(
    local: int, nodes: int, rank: str, trainer: str = SCRIPT_TRAINER, port: str | int = MAIN_PROCESS_PORT
) -> str:
    """``accelerate launch`` on one node: accelerate starts num_processes // num_machines trainers there, so a node
    passes its own count times the number of machines.

    >>> accelerate_command(2, 1, "0")
    'accelerate launch --config_file accelerate_config.yaml --num_processes 2 --main_process_port 29500 train_grpo.py \
--output-dir grpo-output'
    """
    machine = f" --num_machines {nodes} --machine_rank {rank} --main_process_ip $MAIN_PROCESS_IP" if nodes > 1 else ""
    return (
        f"accelerate launch --config_file {CONFIG_FILE} --num_processes {local * nodes}{machine} "
        f"--main_process_port {port} {trainer}"
    )


def launch_commands(recipe: GRPORecipe) -> dict[str, str]:
    """The command lines by role and node: the vLLM server, the first two nodes' trainers, the cluster script.

    >>> from skill.hardware.layout import LaunchPlan
    >>> from skill.hardware.specs import HardwareSpec
    >>> from skill.recipe.schema import GRPORecipe, ModelSpec
    >>> recipe = GRPORecipe.model_construct(trl={"use_vllm": True, "vllm_mode": "server"}, hardware=HardwareSpec(
    ...     gpu_model="H100", gpus_per_node=4), launch=LaunchPlan(training_processes=3, vllm_server_gpus=1,
    ...     launcher="accelerate"), model=ModelSpec(name="Qwen/Qwen2.5-7B-Instruct"))
    >>> commands = launch_commands(recipe)
    >>> commands["vllm (node 0)"]
    'CUDA_VISIBLE_DEVICES=0 trl vllm-serve --model Qwen/Qwen2.5-7B-Instruct --tensor-parallel-size 1 --port 8000'
    >>> commands["train (node 0)"].split(" accelerate")[0]
    'CUDA_VISIBLE_DEVICES=1,2,3'
    """
    if recipe.launch.launcher == "python":
        return {"train": f"python {SCRIPT_TRAINER}"}
    nodes = node_layouts(recipe.hardware, recipe.launch)
    commands: dict[str, str] = {}
    if starts_vllm_server(recipe):
        commands["vllm (node 0)"] = server_devices(recipe) + vllm_command(recipe)
    count = len(nodes)
    for node in nodes[:2]:  # nodes after the first are alike: one command with $NODE_RANK
        rank = "0" if node.node_rank == 0 else "$NODE_RANK"
        label = "node 0" if node.node_rank == 0 else "node 1" if count == 2 else f"node NODE_RANK = 1..{count - 1}"
        devices = f"CUDA_VISIBLE_DEVICES={gpu_list(node.trainer_gpus)} " if recipe.hardware.accelerator == "gpu" else ""
        commands[f"train ({label})"] = devices + accelerate_command(node.trainer_processes, count, rank)
    commands["every node, in order (server, health wait, trainers)"] = f"bash {NODE_SCRIPT}"
    if count > 1:
        commands["all nodes, under SLURM"] = f"sbatch {SLURM_SCRIPT}"
    return commands
