"""The process layout: who trains and who generates, on which GPUs of which node.

The one rule, used by the recipe (``layout_processes`` at emit time), the memory estimate (how many
processes share the training state) and the launch files (``node_layouts``): on one GPU, one
process trains and vLLM, if used, is colocated with it; on several, a ``trl vllm-serve`` server
takes GPUs 0..K-1 of node 0 (K a power of two, enough to hold the weights in half of each GPU) and
every other GPU trains.

May import: ``hardware.specs``, ``errors``. Nothing here knows the recipe, so ``memory`` can use it.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, Field

from skill.errors import SkillError
from skill.hardware.specs import HardwareSpec

# How the trainers share the training state: DDP (a whole copy each), DeepSpeed ZeRO-2 / ZeRO-3, or FSDP2.
Sharding = Literal["ddp", "zero2", "zero3", "fsdp2"]
# The memory model's name for each (skill.memory.schema's ``sharding``).
MEMORY_SHARDING = {"ddp": "none", "zero2": "zero2", "zero3": "zero3", "fsdp2": "fsdp"}
LAUNCH_SHARDING = {memory: launch for launch, memory in MEMORY_SHARDING.items()}  # the memory estimate's names back


class LaunchPlan(BaseModel):
    """How the processes are laid out on the target: who trains, who generates, how they shard the state."""

    training_processes: int = Field(description="Trainer processes (the world size TRL sees).")
    vllm_server_gpus: int = Field(default=0, description="GPUs given to a separate `trl vllm-serve` process.")
    vllm_tensor_parallel_size: int = Field(default=1, description="Tensor parallel size of the vLLM server.")
    launcher: Literal["python", "accelerate"] = Field(
        description="'python' for one process; 'accelerate' (accelerate launch) for several."
    )
    sharding: Sharding | None = Field(
        default=None,
        description="How the trainers share the training state; the one value emit's memory verdict, the time "
        "estimate, the launch files and run_grpo read. None (recipes written before the plan carried it): decided "
        "from the memory estimate when the plan is launched.",
    )
    sharding_reason: str | None = Field(default=None, description="Why this sharding (or that the caller chose it).")
    notes: list[str] = Field(default_factory=list)
    commands: dict[str, str] = Field(
        default_factory=dict,
        description="The command lines that launch it, by role and node (skill.recipe.launching.launch_commands); "
        "run_grpo starts these itself.",
    )


class NodeLayout(BaseModel):
    """Which GPUs of one node serve vLLM and which train."""

    node_rank: int
    vllm_gpus: list[int] = Field(default_factory=list)
    trainer_gpus: list[int]
    trainer_processes: int


def vllm_server_size(hardware: HardwareSpec, model_gib_bf16: float) -> int:
    """GPUs for the vLLM server: a power of two, enough to hold the weights in half of each GPU's memory.

    >>> vllm_server_size(HardwareSpec(gpu_model="A10G", gpus_per_node=4), 14.2)
    2
    """
    memory = hardware.memory_gib_per_gpu or 1.0
    needed = max(1, math.ceil(model_gib_bf16 / (0.5 * memory)))
    return 1 << (needed - 1).bit_length()


def layout_processes(hardware: HardwareSpec, model_gib_bf16: float, vllm_server: bool = True) -> LaunchPlan:
    """Lay out trainer and vLLM processes: colocated on one GPU, a separate vLLM server on several.

    ``model_gib_bf16`` sizes the vLLM server (see ``vllm_server_size``), leaving the rest of its GPUs
    for the KV cache. Without a server (vLLM colocated, or no vLLM) every GPU trains.

    >>> layout_processes(HardwareSpec(gpu_model="H100", gpus_per_node=8), 14.2).training_processes
    7
    >>> layout_processes(HardwareSpec(gpu_model="H100", gpus_per_node=8), 14.2, vllm_server=False).training_processes
    8
    >>> cpu = HardwareSpec(accelerator="cpu")
    >>> layout_processes(cpu, 0.3, vllm_server=False).launcher, layout_processes(cpu, 0.3).launcher
    ('python', 'accelerate')
    """
    if hardware.accelerator == "cpu" and hardware.nodes > 1:
        raise SkillError(
            f"A CPU recipe is laid out for one node (nodes={hardware.nodes} was sent).",
            "Send nodes=1; run_grpo spreads a CPU recipe's processes over cluster nodes (processes, nodes, slurm).",
        )
    if hardware.accelerator == "cpu":
        return cpu_processes_plan(1, vllm_server=vllm_server)
    if hardware.total_gpus == 1:
        return LaunchPlan(training_processes=1, launcher="python")
    if not vllm_server:
        return LaunchPlan(
            training_processes=hardware.total_gpus,
            launcher="accelerate",
            notes=[f"`accelerate launch` with {hardware.total_gpus} training processes; no vLLM server GPUs."],
        )
    tensor_parallel = vllm_server_size(hardware, model_gib_bf16)
    if tensor_parallel > hardware.gpus_per_node:
        raise SkillError(
            f"Serving the model with vLLM needs {tensor_parallel} GPUs of {hardware.memory_gib_per_gpu or 1.0} GiB "
            f"on one node, but a node has {hardware.gpus_per_node}.",
            "Send larger GPUs, more GPUs per node, or method 'lora'/'qlora' with a smaller model.",
        )
    trainers = hardware.total_gpus - tensor_parallel
    if trainers < 1:
        raise SkillError(
            f"All {hardware.total_gpus} GPUs would serve vLLM (tensor parallel {tensor_parallel}); none would train.",
            "Send more GPUs, or a single GPU to colocate vLLM with training.",
        )
    return LaunchPlan(
        training_processes=trainers,
        vllm_server_gpus=tensor_parallel,
        vllm_tensor_parallel_size=tensor_parallel,
        launcher="accelerate",
        notes=[
            f"`trl vllm-serve` on {tensor_parallel} GPU(s) of node 0; `accelerate launch` with "
            f"{trainers} training process(es) on the remaining GPUs."
        ],
    )


def cpu_processes_plan(processes: int, nodes: int = 1, vllm_server: bool = False) -> LaunchPlan:
    """N trainer processes on CPUs, each with a whole model copy: one ``python`` process, or ``accelerate launch``
    over gloo with N processes spread equally over ``nodes`` machines (a cluster's; run_grpo's Slurm engine). A
    vLLM server runs on node 0's CPU beside them, so its plan is the launch script's even for one trainer.

    >>> cpu_processes_plan(2).launcher, cpu_processes_plan(1).launcher, cpu_processes_plan(2, nodes=2).launcher
    ('accelerate', 'python', 'accelerate')
    >>> cpu_processes_plan(1, vllm_server=True).launcher
    'accelerate'
    """
    if processes % nodes:
        raise SkillError(
            f"{processes} CPU process(es) do not split equally over {nodes} nodes.",
            f"Send processes as a multiple of nodes (e.g. processes={nodes}).",
        )
    if processes == 1 and not vllm_server:
        return LaunchPlan(training_processes=1, launcher="python")
    where = f" on {nodes} nodes ({processes // nodes} each)" if nodes > 1 else ""
    notes = [f"`accelerate launch` with {processes} CPU training process(es){where} (gloo), each holding a model copy."]
    if vllm_server:
        notes.append("`trl vllm-serve` on the CPU of node 0, beside the trainers.")
    return LaunchPlan(training_processes=processes, launcher="accelerate", notes=notes)


def node_layouts(hardware: HardwareSpec, plan: LaunchPlan) -> list[NodeLayout]:
    """vLLM on GPUs 0..K-1 of node 0, trainers on the rest; refuses a plan its hardware cannot hold. On a CPU target
    the trainers hold no GPU, the same number on each node.

    >>> hardware = HardwareSpec(gpu_model="H100", gpus_per_node=8, nodes=2)
    >>> [node.trainer_processes for node in node_layouts(hardware, layout_processes(hardware, 3.0))]
    [7, 8]
    """
    if hardware.accelerator == "cpu":  # cpu_processes_plan split the processes equally
        each = plan.training_processes // hardware.nodes
        return [NodeLayout(node_rank=rank, trainer_gpus=[], trainer_processes=each) for rank in range(hardware.nodes)]
    per_node, servers = hardware.gpus_per_node, plan.vllm_server_gpus
    if servers > per_node:
        raise SkillError(
            f"The vLLM server needs {servers} GPUs of one node; a node has {per_node}.",
            "Re-emit the recipe for this hardware (emit_grpo_config lays the processes out).",
        )
    nodes = []
    for rank in range(hardware.nodes):
        vllm = list(range(servers)) if rank == 0 else []
        trainers = [gpu for gpu in range(per_node) if gpu not in vllm]
        nodes.append(NodeLayout(node_rank=rank, vllm_gpus=vllm, trainer_gpus=trainers, trainer_processes=len(trainers)))
    total = sum(node.trainer_processes for node in nodes)
    if total != plan.training_processes:
        raise SkillError(
            f"The recipe's launch plan has {plan.training_processes} training process(es) and {servers} vLLM "
            f"GPU(s), but its hardware ({hardware.nodes} node(s) x {per_node} GPUs) leaves {total} trainers.",
            "Re-emit the recipe for this hardware, so its launch plan and hardware agree.",
        )
    return nodes


def gpu_list(gpus: list[int]) -> str:
    """A CUDA_VISIBLE_DEVICES value.

    >>> gpu_list([2, 3, 4])
    '2,3,4'
    """
    return ",".join(str(gpu) for gpu in gpus)
