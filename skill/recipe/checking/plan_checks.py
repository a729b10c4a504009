"""What a launch plan's sharding demands of a recipe: plans no launch file can run, refused with the alternative
that works, and the one setting ZeRO-3 forces on a PEFT recipe (reentrant checkpointing). Checked before the launch
files are written.

- A vLLM server without GPUs.
- A sharded NF4 base (QLoRA under ZeRO-3 / FSDP2): it needs ``bnb_4bit_quant_storage``, which no recipe sets.
- QLoRA with vLLM, in either mode (``refuse_quantized_vllm``): see ``QLORA_GENERATION``.
- A plan whose weight gather does not fit: with PEFT under ZeRO-3 TRL gathers the whole model onto every
  trainer GPU at each weight sync into vLLM (``memory.gather``), in server and colocate mode alike, so a
  70B model on 80 GB cards stops at the first sync although its sharded training step fits.

May import: ``recipe.schema``, ``recipe.launching.launch_commands``, ``memory``, ``hardware``, ``errors``.
"""

from __future__ import annotations

from typing import Any

from skill.errors import SkillError
from skill.grpo_fields import GRPOFields
from skill.hardware.layout import Sharding
from skill.hardware.specs import KNOWN_GPUS, HardwareSpec
from skill.memory.estimate import estimate_memory
from skill.memory.gather import gathers_whole_model
from skill.memory.schema import ALLOCATOR_SLACK, GIB, MemoryEstimate
from skill.models.shapes import DTYPE_BYTES
from skill.recipe.deciding.memory_request import memory_request
from skill.recipe.launching.launch_commands import starts_vllm_server, uses_vllm_server
from skill.recipe.schema import GRPORecipe, RecipeReason

# Read in vLLM 0.31's source (vllm/model_executor/layers/quantization/__init__.py, QuantizationMethods) and TRL 1.16's
# (trl/generation/vllm_generation.py): TRL starts a colocated engine with quantization="bitsandbytes" when the policy
# holds bnb Linear4bit layers, and that vLLM lists no such method, so the engine refuses at start. Server mode fails
# too: TRL streams the merged NF4 base as packed uint8 tensors without their scales (huggingface/trl#4973).
QLORA_GENERATION = (
    "QLoRA: transformers generates from the 4-bit policy itself; vLLM cannot serve it (vLLM 0.31 has no "
    "bitsandbytes quantization method, which TRL 1.16 asks a colocated engine for, and TRL's server sync streams "
    "packed NF4 tensors without their scales)"
)


def refuse_quantized_vllm(trl: dict[str, Any], method: str) -> None:
    """Refuse QLoRA with vLLM generation (see ``QLORA_GENERATION``), naming what does start.

    >>> refuse_quantized_vllm({"use_vllm": False}, "qlora")
    >>> refuse_quantized_vllm({"use_vllm": True, "vllm_mode": "colocate"}, "qlora")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    skill.errors.SkillError: QLoRA cannot generate with vLLM (vllm_mode='colocate'): ...
    """
    fields = GRPOFields(trl)
    if method != "qlora" or not fields.use_vllm:
        return
    raise SkillError(
        f"QLoRA cannot generate with vLLM (vllm_mode={fields.vllm_mode!r}): vLLM 0.31 has no "
        "bitsandbytes quantization method, which TRL 1.16 asks a colocated engine for when the policy holds 4-bit "
        "layers, so the engine refuses at start; a vLLM server cannot take TRL's weight sync of packed NF4 tensors "
        "(huggingface/trl#4973).",
        "Send overrides {'use_vllm': False} (transformers generates from the 4-bit policy, emit's default for QLoRA), "
        "or method 'lora' (a bf16 base that vLLM serves).",
    )


def refuse_unlaunchable(recipe: GRPORecipe, sharding: Sharding | None) -> None:
    """Refuse what no launch plan can run: a server without GPUs, a sharded NF4 base, QLoRA through vLLM."""
    remote = bool(recipe.grpo.vllm_server_base_url)
    if uses_vllm_server(recipe) and not remote and not starts_vllm_server(recipe):
        raise SkillError(
            "The recipe generates with a vLLM server but its launch plan gives the server no GPU.",
            "Re-emit the recipe (several GPUs get a server), or set vllm_mode='colocate'.",
        )
    if recipe.method == "qlora" and sharding in ("zero3", "fsdp2"):
        raise SkillError(
            f"QLoRA under {sharding} shards the NF4 base, which needs bnb_4bit_quant_storage in the quantization "
            "config; the recipe does not set it.",
            "Use sharding 'ddp' or 'zero2' (the adapters are small), or method 'lora'.",
        )
    refuse_quantized_vllm(recipe.trl, recipe.method)


def _larger_gpu(recipe: GRPORecipe, sharding: Sharding) -> str | None:
    """The smallest known GPU with more memory on which the same plan fits, re-laid out for it."""
    current = recipe.hardware.memory_gib_per_gpu or 0.0
    for gpu in sorted({gpu.name: gpu for gpu in KNOWN_GPUS.values()}.values(), key=lambda gpu: gpu.memory_gib):
        if gpu.memory_gib <= current:
            continue
        hardware = HardwareSpec(
            gpu_model=gpu.name, gpus_per_node=recipe.hardware.gpus_per_node, nodes=recipe.hardware.nodes
        )
        request = memory_request(recipe, sharding).model_copy(update={"hardware": hardware, "training_processes": None})
        try:
            estimate = estimate_memory(request)
        except SkillError:
            continue
        if estimate.fits:
            size = f"{estimate.capacity_gib:.1f} GiB"
            return f"larger GPUs: {gpu.name} ({size}) holds it at a peak of {estimate.peak_gib:.1f} GiB"
    return None


def gather_alternatives(recipe: GRPORecipe, sharding: Sharding, estimate: MemoryEstimate) -> list[str]:
    """The changes that fit, each re-estimated: layer-by-layer generation, QLoRA unsharded, larger GPUs, a smaller
    model."""
    request = memory_request(recipe, sharding)
    found = []
    layered = estimate_memory(request.model_copy(update={"use_vllm": False, "ds3_gather_for_generation": False}))
    if layered.fits:
        found.append(
            "overrides {'use_vllm': False, 'ds3_gather_for_generation': False}: transformers generation under ZeRO-3 "
            f"fetches one layer at a time (much slower sampling; peak {layered.peak_gib:.1f} GiB)"
        )
    qlora = request.model_copy(update={"method": "qlora", "sharding": "none", "use_vllm": False})
    unsharded = estimate_memory(qlora)
    if unsharded.fits:
        found.append(
            "method 'qlora' with overrides {'use_vllm': False} and sharding 'ddp': the NF4 base whole on each GPU, "
            f"nothing gathered (peak {unsharded.peak_gib:.1f} GiB; QLoRA generates without vLLM)"
        )
    larger = _larger_gpu(recipe, sharding)
    if larger:
        found.append(larger)
    bytes_per_parameter = DTYPE_BYTES[request.dtype or "bfloat16"] * (1 + ALLOCATOR_SLACK)
    rest = (estimate.peak_sync_gib or estimate.peak_generate_gib) - estimate.components.weight_gather * (
        1 + ALLOCATOR_SLACK
    )
    largest_b = (estimate.capacity_gib - rest) * GIB / bytes_per_parameter / 1e9
    if largest_b > 0.5:
        found.append(f"a model under about {largest_b:.0f}B parameters, whose whole weights fit beside the shard")
    return found


def refuse_whole_model_gather(recipe: GRPORecipe, sharding: Sharding) -> None:
    """Refuse a plan whose whole-model gather (PEFT's sync into vLLM, or generation, under ZeRO-3) does not fit."""
    try:
        request = memory_request(recipe, sharding)
        if not gathers_whole_model(request):
            return
        estimate = estimate_memory(request)
    except SkillError:  # no shape: the recipe's validation notes say so already
        return
    syncing = estimate.peak_sync_gib is not None
    phase = estimate.peak_sync_gib if estimate.peak_sync_gib is not None else estimate.peak_generate_gib
    if phase <= estimate.capacity_gib:
        return
    when = (
        "to merge the adapters at every weight sync into vLLM (vllm_mode does not matter: every trainer rank takes "
        "part)"
        if syncing
        else "for generation (ds3_gather_for_generation=True, TRL's default)"
    )
    alternatives = gather_alternatives(recipe, sharding, estimate)
    raise SkillError(
        f"Under ZeRO-3 TRL gathers the whole model ({estimate.components.weight_gather:.1f} GiB) onto every trainer "
        f"GPU {when}: that needs {phase:.1f} GiB of {estimate.capacity_gib:.1f} GiB per GPU, so the run would stop "
        f"at the {'first weight sync' if syncing else 'first generation'}"
        + (
            f", although the sharded training step ({estimate.peak_train_gib:.1f} GiB) fits."
            if estimate.peak_train_gib <= estimate.capacity_gib
            else "."
        ),
        "Send one of: " + "; ".join(alternatives) + "." if alternatives else "Send a smaller model or larger GPUs.",
    )


def with_reentrant_checkpointing(recipe: GRPORecipe, sharding: Sharding) -> GRPORecipe:
    """PEFT + ZeRO-3 + activation checkpointing: ``use_reentrant=True``, under the kwargs name the target reads.

    Non-reentrant checkpointing (transformers' default) fails there in backward: ZeRO-3 re-partitions the frozen
    base weights during the recompute (huggingface/transformers#47254). TRL 1.16 forces ``use_reentrant=True``
    itself, but writes it into ``args.gradient_checkpointing_kwargs`` after the arguments are built: transformers
    5.17 reads that name, while from 5.23 the Trainer reads ``activation_checkpointing_kwargs`` (the old name
    only mirrors it when the arguments are built), so TRL's value never arrives. The recipe therefore states it,
    under the kwargs name of the checkpointing field it emits for its target (an alias resolved at construction
    on newer transformers).
    """
    fields = recipe.grpo
    flag = "activation_checkpointing" if "activation_checkpointing" in recipe.trl else "gradient_checkpointing"
    if sharding != "zero3" or recipe.peft is None or not getattr(fields, flag):
        return recipe
    field = f"{flag}_kwargs"
    value = {**(getattr(fields, field) or {}), "use_reentrant": True}
    reason = RecipeReason(
        field=field,
        value=value,
        source="hardware",
        reason="PEFT under ZeRO-3 with checkpointing needs reentrant checkpointing (non-reentrant recomputes see the "
        "frozen weights partitioned: transformers#47254); stated here because TRL's own override does not reach "
        "transformers >= 5.23",
    )
    reasons = [item for item in recipe.reasons if item.field != field] + [reason]
    return recipe.model_copy(update={"trl": {**recipe.trl, field: value}, "reasons": reasons})
