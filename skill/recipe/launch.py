"""Launch files: what runs a GPU recipe on its nodes with existing engines, as data.

Nothing here trains: ``accelerate launch`` runs the recipe's own script (``recipe.to_script()``) under
DDP, DeepSpeed ZeRO-2/3 or FSDP2; ``trl vllm-serve`` serves generation on GPUs of its own in server
mode; ``sbatch`` starts one launcher per node. The plan is data (YAML text, shell text, a layout of
GPUs per node), so tests check it without a GPU. The layout is ``hardware.layout``'s: the vLLM server
takes GPUs 0..K-1 of node 0, trainers take every other GPU. accelerate starts ``num_processes //
num_machines`` trainers per node, so a node passes its own count times the number of machines;
torchrun then numbers the ranks from each node's real count, node 0 first (measured here with two
localhost "nodes" of 1 and 2 processes: world size 3, rank 0 on node 0). Rank 0, the only trainer
that talks to the vLLM server, is thus on node 0.

It renders a recipe, as ``script`` does, and sits in ``recipe`` for that reason: it reads the recipe,
the memory estimate (to pick the sharding) and ``hardware.layout`` (the one process layout), all of
which lie below it. May import: ``recipe.schema``, ``hardware``, ``memory``, ``models``, ``errors``.
"""

from __future__ import annotations

import shlex
import stat
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from skill.errors import SkillError
from skill.hardware.layout import NodeLayout, gpu_list, node_layouts
from skill.memory.estimate import estimate_memory
from skill.models.sources import is_embedded
from skill.recipe.plan_checks import (
    Sharding,
    refuse_unlaunchable,
    refuse_whole_model_gather,
    sharded_request,
    uses_vllm_server,
    with_reentrant_checkpointing,
)
from skill.recipe.schema import GRPORecipe
from skill.recipe.script import INSTALL_HINTS, needed_packages

CONFIG_FILE = "accelerate_config.yaml"
SCRIPT_FILE = "train_grpo.py"
NODE_SCRIPT = "launch_node.sh"
SLURM_SCRIPT = "slurm.sbatch"
MAIN_PROCESS_PORT = 29500
VLLM_WAIT_S = 1800  # a large model can take many minutes to load; torchrun's static rendezvous waits 600 s


class LaunchFiles(BaseModel):
    """Everything needed to launch a recipe on its GPUs: layout, commands, and files by name."""

    sharding: Sharding
    sharding_reason: str
    training_processes: int
    vllm_tensor_parallel_size: int | None = Field(default=None, description="None: no vLLM server.")
    nodes: list[NodeLayout]
    commands: dict[str, str] = Field(description="Shell command lines, by role and node.")
    files: dict[str, str] = Field(description="File name -> text; write them with write_launch_files.")
    needs: dict[str, str] = Field(
        default_factory=dict,
        description="Packages the plan needs beyond the core install: module -> the pip requirement that installs it. "
        "launch_node.sh checks them on every node before anything starts.",
    )
    notes: list[str] = Field(default_factory=list)


def default_sharding(recipe: GRPORecipe) -> tuple[Sharding, str]:
    """DDP when the whole training state fits on each GPU (sharding would only add communication), else
    ZeRO-3, which shards weights, gradients and optimizer states over the training processes."""
    request = sharded_request(recipe, "ddp")
    try:
        whole = estimate_memory(request)
    except SkillError as exc:
        return "ddp", f"DDP: memory not estimated ({exc.problem}); pass sharding='zero3' if a GPU cannot hold it."
    if whole.fits:
        return "ddp", (
            f"DDP: each GPU holds the whole training state (estimated peak {whole.peak_gib:.1f} of "
            f"{whole.capacity_gib:.1f} GiB); sharding would only add communication."
        )
    if recipe.method == "qlora":
        return "ddp", (
            f"DDP: the estimated peak ({whole.peak_gib:.1f} GiB) does not fit {whole.capacity_gib:.1f} GiB, but "
            "sharding an NF4 base needs bnb_4bit_quant_storage, which the recipe does not set; see the remedies."
        )
    processes = recipe.launch.training_processes
    zero3 = estimate_memory(sharded_request(recipe, "zero3"))
    zero2 = estimate_memory(sharded_request(recipe, "zero2"))
    reason = (
        f"ZeRO-3: with DDP each GPU would need {whole.peak_gib:.1f} GiB of {whole.capacity_gib:.1f}; sharding "
        f"weights, gradients and optimizer states over {processes} training processes brings it to "
        f"{zero3.peak_gib:.1f} GiB"
    )
    if not zero3.fits:
        fixes = ", ".join(remedy.name for remedy in zero3.remedies if remedy.fits) or "none found"
        reason += f", which still does NOT fit (remedies: {fixes})"
    elif zero2.fits:
        reason += f"; ZeRO-2 also fits ({zero2.peak_gib:.1f} GiB, less communication): pass sharding='zero2'"
    return "zero3", reason + "."


def accelerate_config(recipe: GRPORecipe, sharding: Sharding) -> str:
    """The accelerate config YAML. machine_rank and main_process_ip are placeholders on several nodes:
    launch_node.sh passes each node's values on the command line, which win over the file."""
    import yaml

    trl, nodes, processes = recipe.trl, recipe.hardware.nodes, recipe.launch.training_processes
    precision = "bf16" if trl.get("bf16") else "fp16" if trl.get("fp16") else "no"
    config: dict[str, Any] = {"compute_environment": "LOCAL_MACHINE", "debug": False}
    if sharding == "ddp":
        config["distributed_type"] = "MULTI_GPU" if processes > 1 else "NO"
        config["gpu_ids"] = "all"  # CUDA_VISIBLE_DEVICES, set by launch_node.sh, selects the trainers' GPUs
    elif sharding in ("zero2", "zero3"):
        stage = 2 if sharding == "zero2" else 3
        config["distributed_type"] = "DEEPSPEED"
        config["deepspeed_config"] = {
            "deepspeed_multinode_launcher": "standard",  # torchrun on each node, no pdsh/ssh
            "offload_optimizer_device": "none",
            "offload_param_device": "none",
            "zero3_init_flag": stage == 3,
            "zero3_save_16bit_model": stage == 3,
            "zero_stage": stage,
        }
    else:
        config["distributed_type"] = "FSDP"
        config["fsdp_config"] = {
            "fsdp_version": 2,
            "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",  # wraps the model's _no_split_modules (its layers)
            "fsdp_activation_checkpointing": False,  # the recipe's activation_checkpointing does it
            "fsdp_cpu_ram_efficient_loading": True,
            "fsdp_offload_params": False,
            "fsdp_reshard_after_forward": True,
            "fsdp_state_dict_type": "FULL_STATE_DICT",
        }
    config.update(downcast_bf16="no", machine_rank=0, main_process_ip="127.0.0.1", main_process_port=MAIN_PROCESS_PORT)
    config.update(main_training_function="main", mixed_precision=precision, num_machines=nodes, num_processes=processes)
    config.update(rdzv_backend="static", same_network=True, use_cpu=False)
    text = yaml.safe_dump(config, sort_keys=False)
    if nodes > 1:
        marks = {
            "machine_rank": "  # placeholder: launch_node.sh passes --machine_rank (SLURM_NODEID)",
            "main_process_ip": "  # placeholder: launch_node.sh passes --main_process_ip (node 0's address)",
            "num_processes": "  # all trainers; launch_node.sh passes this node's trainers x num_machines",
        }
        lines = text.splitlines()
        text = "\n".join(line + marks.get(line.split(":")[0], "") for line in lines) + "\n"
    header = (
        f"# accelerate config for {recipe.model.name} ({recipe.method}): {sharding}, "
        f"{processes} training process(es) on {nodes} node(s). Written by grpo-rlvr.\n"
    )
    return header + text


def _model_argument(recipe: GRPORecipe) -> str:
    name = recipe.model.name
    if is_embedded(name):  # the script resolves it the same way on the target
        code = f"from skill.models.sources import resolve_model_path; print(resolve_model_path({name!r}))"
        return f'"$(python -c {shlex.quote(code)})"'
    return shlex.quote(name)


def vllm_command(recipe: GRPORecipe) -> str:
    """``trl vllm-serve`` for the recipe's server GPUs (without CUDA_VISIBLE_DEVICES)."""
    trl, launch = recipe.trl, recipe.launch
    parallel = launch.vllm_tensor_parallel_size
    parts = ["trl vllm-serve --model", _model_argument(recipe), f"--tensor-parallel-size {parallel}"]
    if launch.vllm_server_gpus // parallel > 1:
        parts.append(f"--data-parallel-size {launch.vllm_server_gpus // parallel}")
    parts.append(f"--port {trl.get('vllm_server_port', 8000)}")
    if trl.get("vllm_max_model_length"):
        parts.append(f"--max-model-len {trl['vllm_max_model_length']}")
    return " ".join(parts)


def _accelerate_command(local: int, nodes: int, rank: str) -> str:
    machine = f" --num_machines {nodes} --machine_rank {rank} --main_process_ip $MAIN_PROCESS_IP" if nodes > 1 else ""
    return (
        f"accelerate launch --config_file {CONFIG_FILE} --num_processes {local * nodes}{machine} "
        f"--main_process_port {MAIN_PROCESS_PORT} {SCRIPT_FILE} --output-dir grpo-output"
    )


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


def _node_script(recipe: GRPORecipe, nodes: list[NodeLayout], sharding: Sharding, needs: dict[str, str]) -> str:
    first, rest = nodes[0], nodes[1:]
    server = uses_vllm_server(recipe) and first.vllm_gpus
    port = recipe.trl.get("vllm_server_port", 8000)
    lines = [
        "#!/usr/bin/env bash",
        f"# {recipe.model.name} ({recipe.method}), {sharding}: {recipe.launch.training_processes} trainer(s)"
        f"{f', vLLM on {len(first.vllm_gpus)} GPU(s) of node 0' if server else ''}. Written by grpo-rlvr.",
        "# On every node: NODE_RANK=<rank> MAIN_PROCESS_IP=<node 0 address> bash launch_node.sh [OUTPUT_DIR]",
        "# (slurm.sbatch does it under SLURM; on one node, `bash launch_node.sh` is enough).",
        "set -euo pipefail",
        'cd "$(dirname "$0")"',
        "NODE_RANK=${NODE_RANK:-${SLURM_NODEID:-0}}",
        "MAIN_PROCESS_IP=${MAIN_PROCESS_IP:-127.0.0.1}",
        'OUTPUT_DIR="${1:-grpo-output}"',
        f"NUM_MACHINES={len(nodes)}",
        *_needs_check(needs),
        'if [ "$NODE_RANK" -eq 0 ]; then',
        f"  TRAINER_GPUS={gpu_list(first.trainer_gpus)}",
        f"  LOCAL_TRAINERS={first.trainer_processes}",
        "else",
        f"  TRAINER_GPUS={gpu_list(rest[0].trainer_gpus) if rest else ''}",
        f"  LOCAL_TRAINERS={rest[0].trainer_processes if rest else 0}",
        "fi",
    ]
    if server:
        lines += [
            'if [ "$NODE_RANK" -eq 0 ]; then',
            f"  CUDA_VISIBLE_DEVICES={gpu_list(first.vllm_gpus)} {vllm_command(recipe)} &",
            "  VLLM_PID=$!",
            "  trap 'kill \"$VLLM_PID\" 2>/dev/null || true' EXIT",
            "fi",
            "# Every node waits for the server: rank 0 (node 0) syncs weights with it before the first step, and",
            "# a slow model load must not outlast torchrun's rendezvous.",
            f"HEALTH=http://$MAIN_PROCESS_IP:{port}/health",
            "WAITED=0",
            "until python -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=5)' \"$HEALTH\" "
            "2>/dev/null; do",
            '  if [ -n "${VLLM_PID:-}" ] && ! kill -0 "$VLLM_PID" 2>/dev/null; then echo "vLLM server exited" >&2;'
            " exit 1; fi",
            f'  if [ "$WAITED" -ge "${{VLLM_WAIT_S:-{VLLM_WAIT_S}}}" ]; then echo "no vLLM server at $HEALTH" >&2;'
            " exit 1; fi",
            "  sleep 2; WAITED=$((WAITED + 2))",
            "done",
        ]
    lines += [
        "# accelerate starts num_processes // num_machines trainers here: pass this node's count x machines.",
        "CUDA_VISIBLE_DEVICES=$TRAINER_GPUS accelerate launch --config_file " + CONFIG_FILE + " \\",
        '  --num_processes $((LOCAL_TRAINERS * NUM_MACHINES)) --num_machines "$NUM_MACHINES" \\',
        '  --machine_rank "$NODE_RANK" --main_process_ip "$MAIN_PROCESS_IP" --main_process_port '
        + f"{MAIN_PROCESS_PORT} \\",
        f'  {SCRIPT_FILE} --output-dir "$OUTPUT_DIR"',
        "",
    ]
    return "\n".join(lines)


def _slurm_script(recipe: GRPORecipe) -> str:
    hardware = recipe.hardware
    return "\n".join(
        [
            "#!/bin/bash",
            "#SBATCH --job-name=grpo-rlvr",
            f"#SBATCH --nodes={hardware.nodes}",
            "#SBATCH --ntasks-per-node=1",
            f"#SBATCH --gpus-per-node={hardware.gpus_per_node}",
            "#SBATCH --exclusive",
            "#SBATCH --output=%x-%j.out",
            "# Submit from the directory holding these files: sbatch slurm.sbatch [OUTPUT_DIR]",
            "set -euo pipefail",
            'cd "${SLURM_SUBMIT_DIR:-.}"',
            "# The allocation's first node is machine rank 0: the main process (and the vLLM server) live there.",
            # sed reads every line: `head -n 1` would close the pipe early and, with pipefail, fail the job.
            'MAIN_PROCESS_IP=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed -n 1p)',
            "export MAIN_PROCESS_IP",
            "# One task per node; each takes its machine rank from SLURM_NODEID.",
            f'srun --nodes="$SLURM_JOB_NUM_NODES" --ntasks-per-node=1 bash -c \'NODE_RANK=$SLURM_NODEID bash '
            f'{NODE_SCRIPT} "$0"\' "${{1:-grpo-output}}"',
            "",
        ]
    )


def _commands(recipe: GRPORecipe, nodes: list[NodeLayout], server: bool) -> dict[str, str]:
    """The shell command lines by role and node: the vLLM server, the first two nodes' trainers, SLURM."""
    commands: dict[str, str] = {}
    if server:
        commands["vllm (node 0)"] = f"CUDA_VISIBLE_DEVICES={gpu_list(nodes[0].vllm_gpus)} {vllm_command(recipe)}"
    count = len(nodes)
    for node in nodes[:2]:  # nodes after the first are alike: one command with $NODE_RANK
        rank = "0" if node.node_rank == 0 else "$NODE_RANK"
        label = "node 0" if node.node_rank == 0 else "node 1" if count == 2 else f"node NODE_RANK = 1..{count - 1}"
        devices = f"CUDA_VISIBLE_DEVICES={gpu_list(node.trainer_gpus)}"
        commands[f"train ({label})"] = f"{devices} {_accelerate_command(node.trainer_processes, count, rank)}"
    commands["all nodes, under SLURM"] = f"sbatch {SLURM_SCRIPT}"
    return commands


def launch_files(recipe: GRPORecipe, sharding: Sharding | None = None) -> LaunchFiles:
    """The files and commands that run a GPU recipe on its nodes: accelerate config, the training script,
    a per-node launcher (vLLM server and trainers on disjoint GPUs), a SLURM script.

    ``sharding`` None picks one from the memory estimate and says why.

    >>> from skill.recipe.emit import RecipeRequest, emit_grpo_config
    >>> from skill.hardware.specs import HardwareSpec
    >>> from skill.recipe.schema import DatasetSpec, ModelSpec
    >>> from skill.rewards.spec import RewardSpec
    >>> recipe = emit_grpo_config(RecipeRequest(model=ModelSpec(name="Qwen/Qwen2.5-1.5B-Instruct"),
    ...     hardware=HardwareSpec(gpu_model="H100", gpus_per_node=8, nodes=2), method="full",
    ...     rewards=[RewardSpec(name="exact_match", role="correctness")],
    ...     dataset=DatasetSpec(name="openai/gsm8k", columns=["answer"])))
    >>> plan = launch_files(recipe)
    >>> plan.sharding, plan.training_processes, [node.trainer_gpus for node in plan.nodes][0]
    ('ddp', 15, [1, 2, 3, 4, 5, 6, 7])
    """
    refuse_unlaunchable(recipe, sharding)  # default_sharding never shards an NF4 base on its own
    chosen, reason = (sharding, f"{sharding}: chosen by the caller.") if sharding else default_sharding(recipe)
    refuse_whole_model_gather(recipe, chosen)
    recipe = with_reentrant_checkpointing(recipe, chosen)
    nodes = node_layouts(recipe.hardware, recipe.launch)
    server = uses_vllm_server(recipe) and bool(nodes[0].vllm_gpus)
    needs = plan_needs(recipe, chosen)
    files = {
        CONFIG_FILE: accelerate_config(recipe, chosen),
        SCRIPT_FILE: recipe.to_script(),
        NODE_SCRIPT: _node_script(recipe, nodes, chosen, needs),
        SLURM_SCRIPT: _slurm_script(recipe),
    }
    return LaunchFiles(
        sharding=chosen,
        sharding_reason=reason,
        training_processes=recipe.launch.training_processes,
        vllm_tensor_parallel_size=recipe.launch.vllm_tensor_parallel_size if server else None,
        nodes=nodes,
        commands=_commands(recipe, nodes, server),
        files=files,
        needs=needs,
        notes=_notes(recipe, nodes, server, reason, needs),
    )


def _notes(recipe: GRPORecipe, nodes: list[NodeLayout], server: bool, reason: str, needs: dict[str, str]) -> list[str]:
    notes = [f"Sharding: {reason}"]
    if nodes[0].vllm_gpus and not server:
        notes.append(
            f"The recipe's launch plan keeps GPU(s) {gpu_list(nodes[0].vllm_gpus)} of node 0 for a vLLM server, but "
            "the recipe does not generate with one: they stay idle (the trainer count is the world size the recipe's "
            "batch arithmetic was checked for)."
        )
    if server:
        notes.append(
            "Only rank 0 (node 0) talks to the vLLM server (TRL's server mode), so its default host 0.0.0.0 "
            "reaches it. Tested on CPU with vLLM's CPU build: `trl vllm-serve` generating for TRL's client; not "
            "tested: the server-mode weight sync, which TRL does over NCCL (CUDA only)."
        )
    reentrant = [item for item in recipe.reasons if item.field.endswith("checkpointing_kwargs")]
    notes.extend(f"{item.field}={item.value!r}: {item.reason}" for item in reentrant)
    if needs:
        installs = ", ".join(f"{module} (pip install {requirement!r})" for module, requirement in needs.items())
        notes.append(f"Needs, beyond the core install: {installs}; launch_node.sh checks them on every node first.")
    return notes


def plan_needs(recipe: GRPORecipe, sharding: Sharding) -> dict[str, str]:
    """The packages a plan needs beyond the core install: the script's (vLLM, PEFT, bitsandbytes), and DeepSpeed
    for ZeRO; module -> the pip requirement that installs it."""
    needs = needed_packages(recipe)
    if sharding in ("zero2", "zero3"):
        needs["deepspeed"] = INSTALL_HINTS["deepspeed"]
    return needs


def write_launch_files(plan: LaunchFiles, directory: str | Path) -> list[Path]:
    """Write the plan's files into a directory (created if needed); the shell scripts are executable."""
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in plan.files.items():
        path = target / name
        path.write_text(text)
        if name.endswith((".sh", ".sbatch")):
            path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        written.append(path)
    return written
