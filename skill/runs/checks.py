"""Checks before a run starts: refuse with the reason, before any process is spawned.

An explicit ``force`` with a recorded reason overrides the memory, route and device checks (a CPU server plan
included), never the inspection gate. The data is loaded, checked for the columns the rewards read, filtered for prompts
over the token budget (TRL 1.16 no longer truncates prompts), and split into training and held-out
prompts.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
from typing import Any

from skill import data
from skill.errors import SkillError
from skill.inspection.reports import load_report
from skill.memory.estimate import estimate_memory
from skill.models.sources import resolve_tokenizer_path
from skill.recipe.checking.group_arithmetic import check_group_arithmetic
from skill.recipe.deciding.memory_request import memory_request
from skill.recipe.deciding.tracking import check_trackers_installed
from skill.recipe.launching.launch import plan_needs
from skill.recipe.launching.launch_commands import uses_vllm_server
from skill.recipe.schema import GRPORecipe
from skill.rewards.registry import library_entry
from skill.routing.route import load_route

HELD_OUT_FRACTION = 0.1
MIN_HELD_OUT = 8


def columns_read(recipe: GRPORecipe) -> set[str]:
    """Dataset columns the recipe's rewards read (params ending in _column, and each reward's default)."""
    needed = set(recipe.dataset.columns)
    for spec in recipe.rewards:
        columns = {value for key, value in spec.params.items() if key.endswith("_column") and isinstance(value, str)}
        entry = library_entry(spec.name)
        default = entry.reads if entry else None
        if default and not any(key.endswith("_column") for key in spec.params if key != "schema_column"):
            columns.add(default)
        needed |= columns
    return needed


def load_rows(recipe: GRPORecipe) -> list[dict[str, Any]]:
    """The recipe's dataset as rows shaped by skill.data: the prompt under 'prompt', an extracted reference answer
    under 'answer' (a local file, a built-in or a hub dataset where the network allows)."""
    return data.load_rows(recipe.dataset)


def check_columns(recipe: GRPORecipe, rows: list[dict[str, Any]]) -> None:
    if not rows:
        raise SkillError(f"Dataset {recipe.dataset.name!r} is empty.", "Send a dataset with prompts.")
    needed = {"prompt"} | columns_read(recipe)
    missing = sorted(needed - set(rows[0]))
    if missing:
        raise SkillError(
            f"Dataset {recipe.dataset.name!r} lacks column(s) {missing} that the prompt or the rewards read "
            f"(it has {sorted(rows[0])}).",
            "Add the columns, or set the rewards' *_column params / dataset.prompt_column to existing ones.",
        )


def filter_long_prompts(recipe: GRPORecipe, rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """Drop prompts longer than the recipe's token budget; returns the kept rows and how many were dropped."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(resolve_tokenizer_path(recipe.model.name))
    budget = recipe.dataset.max_prompt_tokens
    counts = data.prompt_token_counts(tokenizer, [row["prompt"] for row in rows])  # as TRL tokenizes prompts
    kept = [row for row, count in zip(rows, counts, strict=True) if count <= budget]
    if not kept:
        raise SkillError(f"Every prompt is longer than {budget} tokens.", "Raise dataset.max_prompt_tokens.")
    return kept, len(rows) - len(kept)


def prompt_key(prompt: Any) -> str:
    """One text per prompt, a string or chat messages alike, to compare prompts by.

    >>> prompt_key([{"role": "user", "content": "2+2?"}]) == prompt_key([{"content": "2+2?", "role": "user"}])
    True
    """
    return json.dumps(prompt, sort_keys=True, default=str)


def probed_prompts(route_id: str | None, inspection_id: str | None) -> set[str]:
    """The prompts (as prompt_key) the route probed and the inspection scored. The rewards were chosen and read on
    them, so a held-out score there would be measured where the reward was tuned: they are never held out."""
    prompts = {prompt_key(sample["prompt"]) for sample in load_route(route_id)[1]} if route_id else set()
    if inspection_id:
        prompts |= {prompt_key(sample.prompt) for sample in load_report(inspection_id).samples}
    return prompts


def split_held_out(
    rows: list[dict[str, Any]], seed: int, fraction: float = HELD_OUT_FRACTION, probed: set[str] | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Keep a held-out share of prompts for evaluation (never trained on); fraction 0 keeps none. ``probed`` prompts
    (probed_prompts) go to training only. A prompt is held out whole: where the data repeats it, one copy is held
    out and the others are not trained on (else the held-out score would count a trained prompt, and twice).

    >>> train, held = split_held_out([{"prompt": str(i)} for i in range(100)], 3407, probed={prompt_key("7")})
    >>> len(train), len(held), not {r["prompt"] for r in train} & {r["prompt"] for r in held}, "7" in {r["prompt"]
    ...     for r in held}
    (90, 10, True, False)
    >>> train, held = split_held_out([{"prompt": str(i % 50)} for i in range(100)], 3407)
    >>> len(held), len({r["prompt"] for r in held}), len(train), not {r["prompt"] for r in train} & {r["prompt"]
    ...     for r in held}
    (10, 10, 80, True)
    """
    shuffled = list(rows)
    random.Random(seed).shuffle(shuffled)
    enough = fraction > 0 and len(shuffled) > 2 * MIN_HELD_OUT
    count = max(MIN_HELD_OUT, int(len(shuffled) * fraction)) if enough else 0
    probed = probed or set()
    held: dict[str, dict[str, Any]] = {}
    for row in shuffled:
        if len(held) == count:
            break
        key = prompt_key(row["prompt"])
        if key not in probed:
            held.setdefault(key, row)
    return [row for row in shuffled if prompt_key(row["prompt"]) not in held], list(held.values())


def check_target(recipe: GRPORecipe, force: bool = False, on_this_machine: bool = True) -> list[str]:
    """The recipe must run where it is sent: a GPU recipe needs CUDA here (on a cluster, the scheduler grants the
    nodes' GPUs), vLLM needs vLLM installed, and a CPU recipe cannot sync weights into a vLLM server (forced, the
    plan starts the server and checks it, and the trainer stops where TRL refuses the sync)."""
    notes = []
    if recipe.hardware.accelerator == "gpu" and on_this_machine:
        import torch

        if not torch.cuda.is_available():
            raise SkillError(
                "This recipe targets GPUs and this machine has none.",
                "Run it on its target (grpo-rlvr config --output script, or the launch plan), send engine "
                '{"kind": "slurm"} to submit it to a cluster, or emit a CPU recipe.',
            )
    if recipe.grpo.use_vllm and importlib.util.find_spec("vllm") is None:
        raise SkillError(
            "The recipe generates with vLLM, which is not installed here.",
            "Install the vllm extra (pip install 'grpo-rlvr[vllm]'), or emit the recipe with use_vllm=False.",
        )
    if uses_vllm_server(recipe) and recipe.hardware.accelerator == "cpu":
        line = (
            "A CPU recipe cannot train against a vLLM server: TRL 1.16 pushes each step's weights into the server "
            "through vLLM's NCCL weight-transfer engine, which needs CUDA."
        )
        if not force:
            raise SkillError(
                line,
                "Send vllm_mode='colocate' (vLLM inside the training process; runs on CPU with vLLM's CPU build), "
                "or use_vllm=False.",
            )
        notes.append(line + " Forced: the server starts and is checked; the trainer stops at TRL's weight sync.")
    return notes


def check_packages(recipe: GRPORecipe) -> list[str]:
    """The packages the plan needs beyond the core install (``plan_needs``: vLLM, PEFT, bitsandbytes for QLoRA,
    DeepSpeed for ZeRO, the tracker), looked up where the trainers run before anything starts: a missing one would
    otherwise stop the trainer after the model loaded (bitsandbytes at the 4-bit load, DeepSpeed at accelerate's
    start). Not overridable: no run trains without them. On a cluster, launch_node.sh checks each node."""
    needs = plan_needs(recipe, recipe.launch.sharding or "ddp")
    missing = sorted(module for module in needs if importlib.util.find_spec(module) is None)
    if missing:
        installs = " ".join(sorted({repr(needs[module]) for module in missing}))
        raise SkillError(
            f"This recipe's plan needs {', '.join(missing)}, not installed in this environment.",
            f"pip install {installs} where the run starts, or emit a recipe that does without it.",
        )
    return [f"Packages the plan needs: {', '.join(sorted(needs))} (installed)."] if needs else []


def check_cpu_processes(recipe: GRPORecipe, force: bool, on_this_machine: bool = True) -> list[str]:
    """Refuse a CPU plan of several processes that cannot work: whole GRPO groups in each generation batch and, on
    this machine, a core per process and RAM for one model copy per process (a cluster's nodes: sbatch asks Slurm
    for a core per process)."""
    processes = recipe.launch.training_processes
    if processes == 1 or recipe.hardware.accelerator != "cpu":
        return []  # a GPU recipe sent with processes > 1 is refused by the layout (on_cpu_processes)
    if not on_this_machine:
        check_group_arithmetic(recipe.trl, processes)
        return []
    cores = os.cpu_count() or 1
    if processes > cores:
        raise SkillError(
            f"processes={processes} exceeds this machine's {cores} CPU cores; each process needs one.",
            f"Send processes <= {cores}.",
        )
    check_group_arithmetic(recipe.trl, processes)
    available = available_ram_gib()
    request, skipped = _memory_request(recipe, force, f"RAM for {processes} CPU processes")
    if request is None:
        return skipped
    request = request.model_copy(
        update={"hardware": recipe.hardware.model_copy(update={"memory_gib_per_gpu": available})}
    )
    needed = processes * estimate_memory(request).peak_gib
    line = f"{processes} CPU processes (accelerate launch, gloo): {needed:.2f} GiB of {available:.1f} GiB RAM."
    if needed > available:
        if not force:
            raise SkillError(f"{line} Each process holds a whole model copy: it does not fit.", "Send fewer processes.")
        return [line + " Does not fit; forced."]
    return [line]


DEVICE_MEMORY_TOLERANCE = 0.02  # the GPU table holds nvidia-smi's MiB, which torch reports as total_memory


def compare_devices(recipe: GRPORecipe, present: list[tuple[str, float]], force: bool) -> list[str]:
    """The GPUs this machine has (name, GiB) against the ones the recipe was laid out and estimated for.

    >>> from skill.hardware.specs import HardwareSpec
    >>> recipe = GRPORecipe.model_construct(hardware=HardwareSpec(gpu_model="H100", gpus_per_node=2))
    >>> compare_devices(recipe, [("NVIDIA H100 80GB HBM3", 79.6)] * 2, force=False)
    ['Devices: 2 x NVIDIA H100 80GB HBM3 (79.6 GiB) for 2 x 79.6 GiB planned.']
    >>> compare_devices(recipe, [("NVIDIA L4", 22.0)], force=False)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    skill.errors.SkillError: This machine has 1 GPU(s) (NVIDIA L4, 22.0 GiB) but the recipe is laid out for 2 ...
    """
    hardware = recipe.hardware
    if hardware.accelerator != "gpu":
        return []
    planned = hardware.memory_gib_per_gpu or 0.0
    line = (
        f"Devices: {len(present)} x {present[0][0]} ({present[0][1]:.1f} GiB) for {hardware.gpus_per_node} x "
        f"{planned:.1f} GiB planned."
        if present
        else "Devices: none."
    )
    problems = []
    if len(present) < hardware.gpus_per_node:
        problems.append(f"the recipe is laid out for {hardware.gpus_per_node}")
    smallest = min((gib for _name, gib in present), default=0.0)
    if present and smallest < planned * (1 - DEVICE_MEMORY_TOLERANCE):
        problems.append(f"its memory estimate assumed {planned:.1f} GiB per GPU")
    if not problems:
        return [line]
    if force:
        return [line + " Differs from the recipe; forced."]
    names = ", ".join(sorted({f"{name}, {gib:.1f} GiB" for name, gib in present})) or "none"
    raise SkillError(
        f"This machine has {len(present)} GPU(s) ({names}) but " + " and ".join(problems) + ".",
        "Emit the recipe for this machine's GPUs (hardware gpu_model / memory_gib_per_gpu and gpus_per_node), "
        "run it where its GPUs are, or pass force with a reason.",
    )


def check_devices(recipe: GRPORecipe, force: bool) -> list[str]:
    """The devices actually present (count, memory) against the recipe's hardware; CPU recipes check RAM instead."""
    if recipe.hardware.accelerator != "gpu":
        return []  # before importing torch
    import torch

    present = [
        (torch.cuda.get_device_name(index), torch.cuda.get_device_properties(index).total_memory / 2**30)
        for index in range(torch.cuda.device_count())
    ]
    return compare_devices(recipe, present, force)


def check_tracker(recipe: GRPORecipe) -> list[str]:
    """Refuse a tracker the recipe reports to that this environment lacks (transformers would fail at the trainer's
    start, after the model loaded); not overridable: a run cannot train without its callback. Notes for run.json."""
    note = check_trackers_installed(recipe.grpo.report_to)
    return [note] if note else []


def check_route(recipe: GRPORecipe, force: bool) -> list[str]:
    if not recipe.provenance.route_decision:
        return ["No route decision recorded (route_check was not run for this recipe)."]
    decision, _ = load_route(recipe.provenance.route_decision)
    if decision.route == "grpo":
        return [f"Route {decision.id}: grpo."]
    if not force:
        raise SkillError(
            f"Route decision {decision.id} sent this task to {decision.route!r}: {decision.reasons[0]}",
            "Follow its next step, or pass force with a reason to train anyway.",
        )
    return [f"Route {decision.id} said {decision.route}; forced."]


def _memory_request(recipe: GRPORecipe, force: bool, what: str) -> tuple[Any, list[str]]:
    """The recipe's MemoryRequest; for a model whose shape cannot be resolved (config.json unreadable, a
    mixture-of-experts model), a refusal saying what to send, or under force none, with a note saying why."""
    try:
        return memory_request(recipe), []
    except SkillError as exc:
        if not force:
            raise SkillError(
                f"{what} cannot be checked: {exc.problem}",
                f"{exc.fix} Or pass force with a reason to run without this check.",
            ) from None
        return None, [f"{what} not checked (forced): {exc.problem}"]


def check_memory(recipe: GRPORecipe, force: bool) -> list[str]:
    """The estimated peak against the device's memory (this machine's free RAM for a CPU recipe)."""
    request, skipped = _memory_request(recipe, force, "Memory")
    if request is None:
        return skipped
    if recipe.hardware.accelerator == "cpu":
        available = available_ram_gib()
        request = request.model_copy(
            update={"hardware": recipe.hardware.model_copy(update={"memory_gib_per_gpu": available})}
        )
    estimate = estimate_memory(request)
    line = f"Memory: peak {estimate.peak_gib:.2f} GiB of {estimate.capacity_gib:.1f} GiB available."
    if estimate.fits:
        return [line]
    if not force:
        fixes = ", ".join(f"{r.name} ({r.peak_gib:.1f} GiB)" for r in estimate.remedies if r.fits) or "none here"
        raise SkillError(f"{line} It does not fit.", f"Remedies that fit: {fixes}; or pass force with a reason.")
    return [line + " Does not fit; forced."]


def available_ram_gib() -> float:
    for line in open("/proc/meminfo"):  # noqa: SIM115 (a two-line read of a virtual file)
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 2**20
    return 16.0
