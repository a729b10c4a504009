"""Launch plans, checked as data and through the engines' own parsers (accelerate, trl vllm-serve, bash). The
runner's engines that run these plans are tested in tests/test_engines.py."""

from __future__ import annotations

import ast
import os
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from recipe_matrix import config_kwargs

from skill.errors import SkillError
from skill.hardware.specs import HardwareSpec
from skill.recipe.checking.trl_contract import recipe_grpo_config
from skill.recipe.deciding.memory_request import memory_request
from skill.recipe.emit import RecipeRequest, emit_as_asked
from skill.recipe.launching.launch import (
    CONFIG_FILE,
    NODE_SCRIPT,
    SCRIPT_FILE,
    SLURM_SCRIPT,
    launch_files,
    write_launch_files,
)
from skill.recipe.launching.script import render_script
from skill.recipe.schema import DatasetSpec, ModelSpec
from skill.rewards.spec import RewardSpec
from skill.runs.store import read_jsonl

TESTS = Path(__file__).resolve().parent
CORRECT = [RewardSpec(name="exact_match", role="correctness")]
GSM8K = DatasetSpec(name="openai/gsm8k", columns=["answer"])


def gpu_recipe(model: str, gpu: str, gpus: int, nodes: int = 1, method: str = "full", sharding=None, **overrides):
    """The recipe as asked, whatever its memory verdict: these tests read its launch plan."""
    return emit_as_asked(
        RecipeRequest(
            model=ModelSpec(name=model),
            hardware=HardwareSpec(gpu_model=gpu, gpus_per_node=gpus, nodes=nodes),
            method=method,
            rewards=CORRECT,
            dataset=GSM8K,
            overrides=overrides,
            sharding=sharding,
        )
    )


CASES = {
    "one GPU": ("Qwen/Qwen2.5-1.5B-Instruct", "H100", 1, 1, "full"),
    "8 GPUs, DDP, vLLM on 1": ("Qwen/Qwen2.5-1.5B-Instruct", "H100", 8, 1, "full"),
    "8 GPUs, ZeRO-3": ("Qwen/Qwen2.5-7B-Instruct", "H100", 8, 1, "full"),
    "4 A10G, vLLM tensor parallel 2": ("Qwen/Qwen2.5-7B-Instruct", "A10G", 4, 1, "lora"),
    "2 nodes x 8": ("Qwen/Qwen2.5-1.5B-Instruct", "H100", 8, 2, "full"),
}


def devices_of(command: str) -> list[int]:
    assignment = command.split()[0]
    assert assignment.startswith("CUDA_VISIBLE_DEVICES=")
    return [int(gpu) for gpu in assignment.split("=", 1)[1].split(",")]


def accelerate_args(command: str, config: dict):
    """The accelerate launch command line as accelerate itself parses it, machine values filled from the YAML."""
    from accelerate.commands.launch import launch_command_parser

    words = shlex.split(command.replace("$MAIN_PROCESS_IP", "10.0.0.1").replace("$NODE_RANK", "1"))
    start = words.index("launch") + 1
    args = launch_command_parser().parse_args(words[start:])
    args.num_machines = args.num_machines or config["num_machines"]
    return args


@pytest.mark.parametrize("case", list(CASES))
def test_plan_files_parse_and_match_the_recipe(case, tmp_path):
    from accelerate.commands.config.config_args import ClusterConfig
    from trl.scripts.vllm_serve import make_parser

    model, gpu, per_node, nodes, method = CASES[case]
    recipe = gpu_recipe(model, gpu, per_node, nodes, method)
    plan = launch_files(recipe)
    launch = recipe.launch

    config = yaml.safe_load(plan.files[CONFIG_FILE])
    (tmp_path / CONFIG_FILE).write_text(plan.files[CONFIG_FILE])
    ClusterConfig.from_yaml_file(str(tmp_path / CONFIG_FILE))  # accelerate refuses unknown keys
    assert config["num_processes"] == launch.training_processes == plan.training_processes
    assert config["num_machines"] == nodes == len(plan.nodes)

    for node in plan.nodes:  # disjoint, and together every GPU of the node
        assert not set(node.vllm_gpus) & set(node.trainer_gpus)
        assert sorted(node.vllm_gpus + node.trainer_gpus) == list(range(per_node))
    assert sum(node.trainer_processes for node in plan.nodes) == launch.training_processes
    assert sum(len(node.vllm_gpus) for node in plan.nodes) == launch.vllm_server_gpus

    train = [command for name, command in plan.commands.items() if name.startswith("train")]
    assert recipe.launch.commands == plan.commands  # emit's result shows the plan's own command lines
    assert all(f"  {role}: {command}" in render_script(recipe) for role, command in plan.commands.items())
    if launch.launcher == "python":  # one process: no launcher around it
        assert train == [f"python {SCRIPT_FILE} --output-dir grpo-output"]
        train = []
    for node, command in zip(plan.nodes, train, strict=False):
        assert devices_of(command) == node.trainer_gpus
        args = accelerate_args(command, config)
        assert args.num_processes // args.num_machines == node.trainer_processes  # what accelerate starts here
        assert (args.config_file, args.training_script) == (CONFIG_FILE, SCRIPT_FILE)
    if launch.vllm_server_gpus:
        command = plan.commands["vllm (node 0)"]
        assert devices_of(command) == plan.nodes[0].vllm_gpus == list(range(launch.vllm_server_gpus))
        (served,) = make_parser().parse_args_and_config(shlex.split(command)[3:])
        assert (served.model, served.tensor_parallel_size) == (model, launch.vllm_tensor_parallel_size)
        assert served.max_model_len == recipe.trl["vllm_max_model_length"]
    else:
        assert "vllm (node 0)" not in plan.commands and "vllm-serve" not in plan.files[NODE_SCRIPT]

    assert plan.files[SCRIPT_FILE] == render_script(recipe)
    ast.parse(plan.files[SCRIPT_FILE])
    for name in (NODE_SCRIPT, SLURM_SCRIPT):
        (tmp_path / name).write_text(plan.files[name])
        subprocess.run(["bash", "-n", str(tmp_path / name)], check=True)
    assert f"#SBATCH --nodes={nodes}" in plan.files[SLURM_SCRIPT]


@pytest.mark.parametrize("sharding", ["ddp", "zero2", "zero3", "fsdp2"])
def test_each_sharding_is_a_config_accelerate_loads(sharding, tmp_path):
    from accelerate.commands.config.config_args import ClusterConfig

    recipe = gpu_recipe("Qwen/Qwen2.5-1.5B-Instruct", "H100", 8, 2)
    text = launch_files(recipe, sharding).files[CONFIG_FILE]
    (tmp_path / CONFIG_FILE).write_text(text)
    loaded = ClusterConfig.from_yaml_file(str(tmp_path / CONFIG_FILE))
    config = yaml.safe_load(text)
    assert config["mixed_precision"] == "bf16" and config["machine_rank"] == 0
    assert "# placeholder" in text.split("machine_rank:")[1].splitlines()[0]  # set per node on several nodes
    if sharding == "ddp":
        assert loaded.distributed_type.value == "MULTI_GPU"
    elif sharding.startswith("zero"):
        assert loaded.distributed_type.value == "DEEPSPEED"
        deepspeed = config["deepspeed_config"]
        assert deepspeed["zero_stage"] == int(sharding[-1])
        assert deepspeed["offload_optimizer_device"] == deepspeed["offload_param_device"] == "none"
        assert deepspeed["deepspeed_multinode_launcher"] == "standard"
    else:
        assert loaded.distributed_type.value == "FSDP"
        assert config["fsdp_config"]["fsdp_version"] == 2
        assert config["fsdp_config"]["fsdp_auto_wrap_policy"] == "TRANSFORMER_BASED_WRAP"


def test_default_sharding_follows_the_memory_estimate():
    from skill.memory.estimate import estimate_memory

    small = launch_files(gpu_recipe("Qwen/Qwen2.5-1.5B-Instruct", "H100", 8))
    assert small.sharding == "ddp" and "whole training state" in small.sharding_reason
    big_recipe = gpu_recipe("Qwen/Qwen2.5-7B-Instruct", "H100", 8)
    whole = estimate_memory(memory_request(big_recipe, "ddp"))
    sharded = estimate_memory(memory_request(big_recipe))  # the plan's own sharding, decided at emit
    assert not whole.fits and sharded.fits
    assert big_recipe.launch.sharding == "zero3"
    # The verdict a user reads follows the plan that runs (it said "does NOT fit" under DDP while naming zero3).
    assert f"Memory: peak {sharded.peak_gib:.1f} GiB of 79.6 GiB per device: fits." in big_recipe.provenance.validation
    big = launch_files(big_recipe)
    assert big.sharding == "zero3"
    assert f"{whole.peak_gib:.1f} GiB" in big.sharding_reason and f"{sharded.peak_gib:.1f} GiB" in big.sharding_reason
    assert big.notes[0] == f"Sharding: {big.sharding_reason}"


def test_the_memory_estimate_and_the_launch_planner_agree_on_the_vllm_server_gpus():
    """4 x A10G and a 7B model: the server takes 2 GPUs (tensor parallel 2), so 2 train, not 3."""
    from skill.hardware.layout import layout_processes
    from skill.memory.components import training_processes
    from skill.memory.estimate import estimate_memory

    recipe = gpu_recipe("Qwen/Qwen2.5-7B-Instruct", "A10G", 4, method="lora")
    assert (recipe.launch.vllm_server_gpus, recipe.launch.training_processes) == (2, 2)
    from_recipe = memory_request(recipe).model_copy(update={"sharding": "zero3"})
    standalone = from_recipe.model_copy(update={"training_processes": None})
    assert standalone.vllm_mode == "server"
    assert training_processes(standalone) == recipe.launch.training_processes
    weights_gib = standalone.shape.parameters() * 2 / 2**30
    laid_out = recipe.launch.model_copy(update={"commands": {}, "sharding": None, "sharding_reason": None})
    assert layout_processes(recipe.hardware, weights_gib) == laid_out
    assert estimate_memory(standalone).components == estimate_memory(from_recipe).components
    over_three = estimate_memory(from_recipe.model_copy(update={"training_processes": 3}))
    assert over_three.components.weights < estimate_memory(standalone).components.weights


def test_plans_that_cannot_work_are_refused():
    qlora = gpu_recipe("Qwen/Qwen2.5-7B-Instruct", "A10G", 4, method="qlora")
    with pytest.raises(SkillError, match="bnb_4bit_quant_storage"):
        launch_files(qlora, "zero3")
    assert launch_files(qlora).sharding == "ddp"  # never shards an NF4 base on its own
    plain = gpu_recipe("Qwen/Qwen2.5-1.5B-Instruct", "H100", 8)
    no_server = launch_files(gpu_recipe("Qwen/Qwen2.5-1.5B-Instruct", "H100", 8, use_vllm=False))
    assert "vllm (node 0)" not in no_server.commands and "vllm-serve" not in no_server.files[NODE_SCRIPT]
    # without a server no GPU is kept for one: all eight train (no idle GPUs)
    assert no_server.vllm_tensor_parallel_size is None and no_server.training_processes == 8
    assert not any("stay idle" in note for note in no_server.notes)
    edited = plain.model_copy(update={"launch": plain.launch.model_copy(update={"training_processes": 8})})
    with pytest.raises(SkillError, match="leaves 7 trainers"):
        launch_files(edited)


QLORA_CONFIGURATIONS = [("A10G", 4, 1), ("RTX 4090", 1, 1), ("RTX 4090", 2, 1), ("H100", 8, 2), ("L4", 1, 1)]


@pytest.mark.parametrize(("gpu", "gpus", "nodes"), QLORA_CONFIGURATIONS)
def test_every_qlora_recipe_generates_without_vllm_and_qlora_through_vllm_is_refused(gpu, gpus, nodes):
    """vLLM 0.31 has no bitsandbytes method (checked in its source by tests/target/test_vllm_server.py) and TRL's
    server sync streams packed NF4 tensors: QLoRA generates with transformers, and asking for vLLM is refused."""
    from trl.scripts.vllm_serve import ScriptArguments

    assert not any("quant" in name for name in ScriptArguments.__dataclass_fields__)  # nothing to pass it with
    recipe = gpu_recipe("Qwen/Qwen2.5-7B-Instruct", gpu, gpus, nodes, method="qlora")
    assert recipe.trl["use_vllm"] is False and "vllm_mode" not in recipe.trl
    assert "transformers generates from the 4-bit policy" in {r.field: r for r in recipe.reasons}["use_vllm"].reason
    assert recipe.launch.vllm_server_gpus == 0 and recipe.launch.training_processes == gpus * nodes
    assert estimate_of(recipe).components.vllm == 0  # the estimate follows the generation path
    if gpus * nodes > 1:
        plan = launch_files(recipe)
        assert "vllm (node 0)" not in plan.commands and plan.needs["bitsandbytes"] == "grpo-rlvr[gpu]"
    for mode in ("colocate", "server"):
        with pytest.raises(SkillError, match="QLoRA cannot generate with vLLM") as refused:
            gpu_recipe("Qwen/Qwen2.5-7B-Instruct", gpu, gpus, nodes, method="qlora", use_vllm=True, vllm_mode=mode)
        assert "{'use_vllm': False}" in refused.value.fix and "method 'lora'" in refused.value.fix


def estimate_of(recipe):
    from skill.memory.estimate import estimate_memory

    return estimate_memory(memory_request(recipe))


def test_a_70b_lora_plan_whose_first_weight_sync_cannot_fit_is_refused_with_alternatives_that_fit():
    """Llama-3.1-70B LoRA on 2 x 8 H100: ZeRO-3 shards the training state to ~24 GiB per GPU, but TRL gathers the
    whole bf16 model (131 GiB plus the fp32 adapters) onto every trainer GPU to merge the adapters at each sync."""
    from skill.memory.estimate import estimate_memory

    with pytest.raises(SkillError, match="first weight sync") as refused:  # refused where it is emitted
        gpu_recipe("meta-llama/Llama-3.1-70B-Instruct", "H100", 8, 2, method="lora")
    recipe = gpu_recipe("meta-llama/Llama-3.1-70B-Instruct", "H100", 8, 2, method="lora", sharding="ddp")
    sharded = estimate_memory(memory_request(recipe, "zero3"))
    assert sharded.peak_train_gib < sharded.capacity_gib < sharded.peak_sync_gib
    problem, alternatives = refused.value.problem, refused.value.fix
    assert f"({sharded.components.weight_gather:.1f} GiB)" in problem and "vllm_mode does not matter" in problem
    assert "'ds3_gather_for_generation': False" in alternatives and "B200" in alternatives
    with pytest.raises(SkillError, match="first weight sync"):  # and when the launch re-plans it
        launch_files(recipe, "zero3")
    with pytest.raises(SkillError, match="first weight sync"):
        launch_files(recipe.model_copy(update={"trl": {**recipe.trl, "vllm_mode": "colocate"}}), "zero3")

    # The first alternative, applied: generation without vLLM, one layer at a time, never gathers the model.
    layered = gpu_recipe(
        "meta-llama/Llama-3.1-70B-Instruct", "H100", 8, 2, "lora", use_vllm=False, ds3_gather_for_generation=False
    )
    plan = launch_files(layered)
    assert plan.sharding == "zero3" and "deepspeed" in plan.needs and "vllm" not in plan.needs
    assert "ds3_gather_for_generation=False" in plan.files[SCRIPT_FILE]
    # ... and generation without vLLM under TRL's default ds3_gather_for_generation=True gathers it too.
    with pytest.raises(SkillError, match="first generation"):
        launch_files(gpu_recipe("meta-llama/Llama-3.1-70B-Instruct", "H100", 8, 2, "lora", use_vllm=False))


def test_peft_under_zero3_that_fits_gets_reentrant_checkpointing_under_the_name_transformers_reads():
    """Qwen2.5-7B LoRA on 8 H100 under ZeRO-3: the whole-model gather (14 GiB) fits. TRL forces use_reentrant=True
    for PEFT + ZeRO-3 into gradient_checkpointing_kwargs after the arguments are built, a name transformers >= 5.23
    no longer reads; the plan's script states it under the kwargs name of the checkpointing field it sets."""
    import dataclasses

    from trl import GRPOConfig

    recipe = gpu_recipe("Qwen/Qwen2.5-7B-Instruct", "H100", 8, method="lora")
    plan = launch_files(recipe, "zero3")
    flag = "activation_checkpointing" if "activation_checkpointing" in recipe.trl else "gradient_checkpointing"
    assert f"{flag}_kwargs={{'use_reentrant': True}}" in plan.files[SCRIPT_FILE]
    assert any(note.startswith(f"{flag}_kwargs=") for note in plan.notes)
    kwargs = config_kwargs(plan.files[SCRIPT_FILE])
    built = recipe_grpo_config(recipe.model_copy(update={"trl": kwargs}))
    fields = {field.name for field in dataclasses.fields(GRPOConfig)}
    read = (
        "activation_checkpointing_kwargs"
        if "activation_checkpointing_kwargs" in fields
        else "gradient_checkpointing_kwargs"
    )
    assert getattr(built, read) == {"use_reentrant": True}  # what Trainer passes to the model's checkpointing
    assert launch_files(recipe, "zero2").files[SCRIPT_FILE] == render_script(recipe)  # only ZeRO-3 needs it
    assert launch_files(gpu_recipe("Qwen/Qwen2.5-7B-Instruct", "H100", 8), "zero3").files[SCRIPT_FILE] == (
        render_script(gpu_recipe("Qwen/Qwen2.5-7B-Instruct", "H100", 8))
    )  # nor a full fine-tune


def test_the_install_hints_name_the_extras_that_install_each_package():
    import tomllib

    from packaging.requirements import Requirement

    from skill.recipe.launching.script import INSTALL_HINTS

    project = tomllib.loads((TESTS.parent / "pyproject.toml").read_text())["project"]
    for module, hint in INSTALL_HINTS.items():
        requirement = Requirement(hint)
        assert requirement.name == project["name"]
        listed = (
            project["optional-dependencies"][next(iter(requirement.extras))]
            if requirement.extras
            else (project["dependencies"])
        )
        assert module in {Requirement(line).name for line in listed}, (module, hint)


def test_a_node_stops_before_starting_anything_when_a_package_the_plan_needs_is_missing(tmp_path):
    import importlib.util

    if importlib.util.find_spec("deepspeed") is not None:
        pytest.skip("deepspeed is installed here: the check would pass and the node would start its processes")
    plan = launch_files(gpu_recipe("Qwen/Qwen2.5-7B-Instruct", "H100", 8), "zero3")
    assert plan.needs["deepspeed"] == "grpo-rlvr[gpu]"
    write_launch_files(plan, tmp_path)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    done = subprocess.run(["bash", str(tmp_path / NODE_SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "this recipe needs" in done.stderr and "deepspeed" in done.stderr
    assert "pip install 'grpo-rlvr[gpu]'" in done.stderr


@pytest.mark.slow
def test_the_rendered_script_stops_at_its_start_naming_the_extra_it_needs(tmp_path):
    import importlib.util

    if importlib.util.find_spec("bitsandbytes") is not None:
        pytest.skip("bitsandbytes is installed here")
    recipe = gpu_recipe("Qwen/Qwen2.5-7B-Instruct", "A10G", 4, method="qlora", vllm_mode="colocate")
    script = tmp_path / SCRIPT_FILE
    script.write_text(render_script(recipe))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 1, done.stderr[-2000:]
    assert "this recipe needs" in done.stderr and "bitsandbytes" in done.stderr
    assert "pip install 'grpo-rlvr[gpu]'" in done.stderr


def test_write_launch_files(tmp_path):
    plan = launch_files(gpu_recipe("Qwen/Qwen2.5-1.5B-Instruct", "H100", 8, 2))
    written = write_launch_files(plan, tmp_path / "plan")
    assert sorted(path.name for path in written) == sorted(plan.files)
    assert all(path.read_text() == plan.files[path.name] for path in written)
    assert os.access(tmp_path / "plan" / NODE_SCRIPT, os.X_OK) and os.access(tmp_path / "plan" / SLURM_SCRIPT, os.X_OK)


SRUN = """#!{python}
import os, subprocess, sys
words = sys.argv[1:]
command = words[next(i for i, word in enumerate(words) if not word.startswith("--")) :]  # after srun's options
env = lambda rank: {{**os.environ, "SLURM_NODEID": str(rank)}}
tasks = [subprocess.Popen(command, env=env(rank)) for rank in range(int(os.environ["SLURM_JOB_NUM_NODES"]))]
sys.exit(max(task.wait() for task in tasks))
"""
RECORDER = """#!{python}
import http.server, json, os, sys, time
with open(os.environ["SHIM_LOG"], "a") as log:
    log.write(json.dumps({{"tool": {tool!r}, "argv": sys.argv[1:], "node": os.environ.get("SLURM_NODEID"),
                          "devices": os.environ.get("CUDA_VISIBLE_DEVICES")}}) + "\\n")
if {tool!r} == "trl":  # answer /health like the vLLM server, until launch_node.sh stops it
    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
        def log_message(self, *args):
            pass
    http.server.HTTPServer(("127.0.0.1", int(sys.argv[sys.argv.index("--port") + 1])), Health).serve_forever()
time.sleep(4)  # node 0 keeps its server up while the other node is still waiting for it
"""


@pytest.mark.slow
def test_slurm_script_starts_each_node_with_its_rank_and_gpus(tmp_path):
    """The shell scripts run for real under stand-ins for srun, scontrol, trl and accelerate that record
    what each node was asked to do."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    recipe = gpu_recipe("Qwen/Qwen2.5-1.5B-Instruct", "H100", 8, 2, vllm_server_port=port)
    plan = launch_files(recipe)
    write_launch_files(plan, tmp_path / "plan")
    shims = tmp_path / "bin"
    shims.mkdir()
    scripts = {
        "srun": SRUN.format(python=sys.executable),
        # `scontrol show hostnames` lists the nodes; `scontrol show node N` gives its address.
        "scontrol": '#!/bin/sh\nif [ "$2" = node ]; then echo "NodeName=$3 Arch=x86_64 NodeAddr=127.0.0.1 Port=0"; '
        "else echo node-a; echo node-b; fi\n",
        "trl": RECORDER.format(python=sys.executable, tool="trl"),
        "accelerate": RECORDER.format(python=sys.executable, tool="accelerate"),
    }
    for name, text in scripts.items():
        (shims / name).write_text(text)
        (shims / name).chmod(0o755)
    # Stand-ins for the packages the plan needs (vLLM is not installed here), so its start-up check passes.
    packages = tmp_path / "site"
    for module in plan.needs:
        (packages / module).mkdir(parents=True)
        (packages / module / "__init__.py").write_text("")
    log = tmp_path / "calls.jsonl"
    env = {
        **os.environ,
        "PYTHONPATH": str(packages),
        "PATH": f"{shims}:{Path(sys.executable).parent}:{os.environ['PATH']}",
        "SHIM_LOG": str(log),
        "SLURM_JOB_NODELIST": "node-[a-b]",
        "SLURM_JOB_NUM_NODES": "2",
    }
    trainer = [SCRIPT_FILE, "--output-dir", "out"]
    subprocess.run(
        ["bash", str(tmp_path / "plan" / SLURM_SCRIPT), *trainer],
        env=env,
        check=True,
        timeout=60,
        cwd=tmp_path / "plan",
    )

    calls = read_jsonl(log)
    (server,) = [call for call in calls if call["tool"] == "trl"]
    assert server["node"] == "0" and server["devices"] == "0"
    assert server["argv"][:3] == ["vllm-serve", "--model", "Qwen/Qwen2.5-1.5B-Instruct"]
    config = yaml.safe_load(plan.files[CONFIG_FILE])
    trainers = sorted((call for call in calls if call["tool"] == "accelerate"), key=lambda call: call["node"])
    assert [call["node"] for call in trainers] == ["0", "1"]
    started = 0
    for node, call in zip(plan.nodes, trainers, strict=True):
        assert call["devices"] == ",".join(map(str, node.trainer_gpus))
        args = accelerate_args("accelerate " + shlex.join(call["argv"]), config)
        assert (args.machine_rank, args.main_process_ip) == (node.node_rank, "127.0.0.1")  # rank from SLURM_NODEID
        assert args.num_processes // args.num_machines == node.trainer_processes
        assert args.training_script_args == ["--output-dir", "out"]
        started += args.num_processes // args.num_machines
    assert started == recipe.launch.training_processes == 15
