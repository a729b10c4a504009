"""Launch files: what runs a recipe on its nodes with existing engines, as data.

Nothing here trains: ``accelerate launch`` runs a trainer under DDP, DeepSpeed ZeRO-2/3 or FSDP2 (on a CPU, DDP
over gloo); ``trl vllm-serve`` serves generation on GPUs of its own in server mode; ``sbatch`` starts one launcher
per node. The trainer is the recipe's own script (``render_script(recipe)``) for a hand launch, or the project's
worker when ``run_grpo`` launches the same files (``bash launch_node.sh -m skill.runs.worker RUN_DIR``). The plan
is data (YAML text, shell text, a layout of GPUs per node), so tests check it without a GPU. The layout is
``hardware.layout``'s: the vLLM server takes GPUs 0..K-1 of node 0, trainers take every other GPU. accelerate
starts ``num_processes // num_machines`` trainers per node, so a node passes its own count times the number of
machines; torchrun then numbers the ranks from each node's real count, node 0 first (measured here with two
localhost "nodes" of 1 and 2 processes: world size 3, rank 0 on node 0). Rank 0, the only trainer that talks to
the vLLM server, is thus on node 0. The command lines are ``launch_commands``'s.

It renders a recipe, as ``script`` does, and sits in ``recipe`` for that reason: it reads the recipe,
the memory estimate (to pick the sharding) and ``hardware.layout`` (the one process layout), all of
which lie below it. May import: ``recipe.schema``, ``recipe.launching.launch_commands``, ``hardware``, ``memory``,
``errors``.
"""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from skill.errors import SkillError
from skill.hardware.layout import LAUNCH_SHARDING, NodeLayout, Sharding, cpu_processes_plan, gpu_list, node_layouts
from skill.memory.estimate import decide_sharding
from skill.recipe.checking.plan_checks import (
    refuse_unlaunchable,
    refuse_whole_model_gather,
    with_reentrant_checkpointing,
)
from skill.recipe.deciding.memory_request import memory_request
from skill.recipe.launching.launch_commands import (
    CONFIG_FILE,
    MAIN_PROCESS_PORT,
    NODE_SCRIPT,
    SCRIPT_FILE,
    SLURM_SCRIPT,
    launch_commands,
    starts_vllm_server,
    uses_vllm_server,
)
from skill.recipe.launching.node_script import node_script
from skill.recipe.launching.script import INSTALL_HINTS, needed_packages, render_script
from skill.recipe.launching.slurm_script import slurm_script
from skill.recipe.schema import GRPORecipe


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
    """The sharding memory decides for the recipe (``memory.estimate.decide_sharding``: DDP when the whole training
    state fits each GPU, else ZeRO-3), as a launch plan names it."""
    try:
        request, reason = decide_sharding(memory_request(recipe, "ddp").model_copy(update={"sharding": None}))
    except SkillError as exc:
        return "ddp", f"DDP: memory not estimated ({exc.problem}); pass sharding='zero3' if a GPU cannot hold it."
    return LAUNCH_SHARDING[request.sharding], reason


def with_sharding(recipe: GRPORecipe, sharding: Sharding | None = None) -> GRPORecipe:
    """The recipe with its launch plan's sharding decided: the caller's ``sharding`` (checked: refused where no launch
    file can run it, or where its whole-model gather does not fit), else the recipe's own, else
    ``default_sharding``'s; with what the sharding demands of the GRPOConfig (reentrant checkpointing for PEFT under
    ZeRO-3). Every reader of the plan (memory verdict, time estimate, launch files, run_grpo) reads the result.

    >>> from skill.hardware.specs import HardwareSpec
    >>> from skill.recipe.schema import ModelSpec
    >>> from skill.data import DatasetSpec
    >>> cpu = GRPORecipe.model_construct(hardware=HardwareSpec(accelerator="cpu"), launch=cpu_processes_plan(2),
    ...     trl={"per_device_train_batch_size": 8}, method="full", peft=None, reasons=[], model=ModelSpec(),
    ...     dataset=DatasetSpec(name="embedded:addition"))
    >>> with_sharding(cpu).launch.sharding
    'ddp'
    >>> with_sharding(cpu, "zero3")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    skill.errors.SkillError: sharding='zero3' is for GPUs; a CPU target runs DDP over gloo. ...
    """
    if sharding is None and recipe.launch.sharding is not None:
        chosen, reason = recipe.launch.sharding, recipe.launch.sharding_reason or ""
    elif sharding is not None:
        chosen, reason = sharding, f"{sharding}: chosen by the caller."
        if recipe.hardware.accelerator == "cpu" and sharding != "ddp":
            raise SkillError(
                f"sharding={sharding!r} is for GPUs; a CPU target runs DDP over gloo.",
                "Send sharding='ddp' (or none), or emit the recipe for its GPUs and rehearse it (rehearse=true).",
            )
        if recipe.launch.training_processes == 1 and sharding != "ddp":
            raise SkillError(
                f"sharding={sharding!r} needs several training processes; this plan runs one.",
                "Send sharding='ddp' (or none), or emit the recipe for several GPUs.",
            )
    else:
        chosen, reason = default_sharding(recipe)
    refuse_unlaunchable(recipe, chosen)
    refuse_whole_model_gather(recipe, chosen)
    launch = recipe.launch.model_copy(update={"sharding": chosen, "sharding_reason": reason})
    return with_reentrant_checkpointing(recipe.model_copy(update={"launch": launch}), chosen)


def separate_reference_model(recipe: GRPORecipe) -> bool:
    """Whether TRL builds a reference model of its own: beta > 0 on a full fine-tune (a PEFT run's reference is the
    base with its adapters off). Under FSDP2 that model must load whole on every rank: with
    ``fsdp_cpu_ram_efficient_loading`` transformers (5.17) loads zeros on every local rank but 0 and only
    ``Accelerator.prepare`` broadcasts rank 0's weights, which it never does for a model TRL builds apart, so those
    ranks would measure the KL against a model of zeros. Without it each rank reads the checkpoint into host RAM.

    >>> full = GRPORecipe.model_construct(trl={"beta": 0.01}, peft=None)
    >>> separate_reference_model(full), separate_reference_model(full.model_copy(update={"trl": {"beta": 0.0}}))
    (True, False)
    """
    return float(recipe.grpo.beta or 0.0) > 0 and recipe.peft is None


def accelerate_config(recipe: GRPORecipe, sharding: Sharding) -> str:
    """The accelerate config YAML. machine_rank and main_process_ip are placeholders on several nodes:
    launch_node.sh passes each node's values on the command line, which win over the file."""
    import yaml

    trl, nodes, processes = recipe.grpo, recipe.hardware.nodes, recipe.launch.training_processes
    precision = "bf16" if trl.bf16 else "fp16" if trl.fp16 else "no"
    config: dict[str, Any] = {"compute_environment": "LOCAL_MACHINE", "debug": False}
    on_cpu = recipe.hardware.accelerator == "cpu"
    if sharding == "ddp":
        # On a CPU too: accelerate's MULTI_CPU type launches through mpirun (one process without it), while its
        # torchrun launcher (MULTI_GPU) with use_cpu starts N processes whose trainers (GRPOConfig use_cpu=True)
        # join as MULTI_CPU over gloo (measured here with accelerate 1.15).
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
            "fsdp_cpu_ram_efficient_loading": not separate_reference_model(recipe),
            "fsdp_offload_params": False,
            "fsdp_reshard_after_forward": True,
            "fsdp_state_dict_type": "FULL_STATE_DICT",
        }
    config.update(downcast_bf16="no", machine_rank=0, main_process_ip="127.0.0.1", main_process_port=MAIN_PROCESS_PORT)
    config.update(main_training_function="main", mixed_precision=precision, num_machines=nodes, num_processes=processes)
    config.update(rdzv_backend="static", same_network=True, use_cpu=on_cpu)
    text = yaml.safe_dump(config, sort_keys=False)
    if nodes > 1:
        marks = {
            "machine_rank": "  # placeholder: launch_node.sh passes --machine_rank (SLURM_NODEID)",
            "main_process_ip": "  # placeholder: launch_node.sh passes --main_process_ip (node 0's address)",
            "main_process_port": "  # launch_node.sh passes --main_process_port (MAIN_PROCESS_PORT)",
            "num_processes": "  # all trainers; launch_node.sh passes this node's trainers x num_machines",
        }
        lines = text.splitlines()
        text = "\n".join(line + marks.get(line.split(":")[0], "") for line in lines) + "\n"
    header = (
        f"# accelerate config for {recipe.model.name} ({recipe.method}): {sharding}, "
        f"{processes} training process(es) on {nodes} node(s){' (CPU)' if on_cpu else ''}. Written by grpo-rlvr.\n"
    )
    return header + text


def on_cpu_processes(recipe: GRPORecipe, processes: int, nodes: int = 1) -> GRPORecipe:
    """The recipe laid out for N processes on CPUs, spread equally over ``nodes`` machines (one of the plans a CPU
    recipe can run); a GPU recipe's processes and nodes are its own plan's, so both must be 1 for it.

    >>> from skill.hardware.specs import HardwareSpec
    >>> from skill.hardware.layout import LaunchPlan
    >>> cpu = GRPORecipe.model_construct(hardware=HardwareSpec(accelerator="cpu"), launch=cpu_processes_plan(1),
    ...     trl={}, model=None)
    >>> on_cpu_processes(cpu, 2).launch.training_processes, on_cpu_processes(cpu, 1) is cpu
    (2, True)
    >>> on_cpu_processes(cpu, 2, nodes=2).hardware.nodes
    2
    """
    if processes == recipe.launch.training_processes and nodes == recipe.hardware.nodes:
        return recipe
    if recipe.hardware.accelerator != "cpu":
        raise SkillError(
            f"processes={processes}, nodes={nodes} are for CPU recipes; this GPU recipe's launch plan runs "
            f"{recipe.launch.training_processes} training process(es) on {recipe.hardware.nodes} node(s).",
            "Send processes=1 and nodes=1 (the plan decides), or emit the recipe for the hardware you want.",
        )
    hardware = recipe.hardware.model_copy(update={"nodes": nodes})
    plan = cpu_processes_plan(processes, nodes, vllm_server=uses_vllm_server(recipe))
    laid_out = recipe.model_copy(update={"launch": plan, "hardware": hardware})
    laid_out.launch.commands = launch_commands(laid_out)
    return laid_out


def launch_files(recipe: GRPORecipe, sharding: Sharding | None = None) -> LaunchFiles:
    """The files and commands that run a recipe on its nodes: accelerate config, the training script, a per-node
    launcher (vLLM server and trainers on disjoint GPUs), a SLURM script. A CPU recipe laid out for several
    processes (``cpu_processes_plan``) gets the same files with a gloo config.

    ``sharding`` None runs the plan's own (``with_sharding``: decided at emit, or from the memory estimate for an
    older recipe); a value re-plans with the caller's choice.

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
    recipe = with_sharding(recipe, sharding)
    chosen, reason = recipe.launch.sharding or "ddp", recipe.launch.sharding_reason or ""
    nodes = node_layouts(recipe.hardware, recipe.launch)
    server = starts_vllm_server(recipe)
    needs = plan_needs(recipe, chosen)
    files = {
        CONFIG_FILE: accelerate_config(recipe, chosen),
        SCRIPT_FILE: render_script(recipe),
        NODE_SCRIPT: node_script(recipe, nodes, chosen, needs),
        SLURM_SCRIPT: slurm_script(recipe),
    }
    return LaunchFiles(
        sharding=chosen,
        sharding_reason=reason,
        training_processes=recipe.launch.training_processes,
        vllm_tensor_parallel_size=recipe.launch.vllm_tensor_parallel_size if server else None,
        nodes=nodes,
        commands=launch_commands(recipe),
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
    return write_files(plan.files, directory)


def write_files(files: dict[str, str], directory: str | Path) -> list[Path]:
    """Write files by name into a directory (created if needed); ``.sh`` and ``.sbatch`` files executable."""
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in files.items():
        path = target / name
        path.write_text(text)
        if name.endswith((".sh", ".sbatch")):
            path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        written.append(path)
    return written
