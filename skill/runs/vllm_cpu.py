"""Colocated vLLM on a CPU: the weight sync that TRL 1.16 cannot do there, and what shows that it worked.

TRL's colocate sync hands each trainer parameter to ``model.load_weights``, which calls the target
parameter's ``weight_loader``. vLLM's CPU backend repacks every linear layer's weight after loading
(oneDNN or a packed GEMM kernel) and leaves an empty parameter without a ``weight_loader``, so the first
sync fails with ``'Parameter' object has no attribute 'weight_loader'``. On a CPU the worker instead
hands all the trainer's weights, in checkpoint names, to vLLM's ``model_runner.reload_weights(...,
is_checkpoint_format=True)``: vLLM restores its layers' checkpoint layout, loads, repacks, and the prefix
cache is then reset. This replaces the sync only where the trainer's device is a CPU and vLLM is
colocated (``sync_replacement_needed``); on a GPU, TRL's own sync runs untouched.

Two records back this up (rank 0 writes them into the run directory): ``vllm_engine.json``, the
settings the colocated engine was really built with (read back from vLLM), and, with
``GRPO_RLVR_VLLM_SYNC_CHECK=1``, ``vllm_sync.jsonl``: after each sync every weight is read back from vLLM
(a packed linear layer by multiplying it with the identity matrix) and compared, element for element,
with the trainer's weight cast to vLLM's dtype.

May import: ``runs.store``. Imports torch and vLLM inside the functions that need them.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from skill.runs.store import append_jsonl

SYNC_CHECK_ENV = "GRPO_RLVR_VLLM_SYNC_CHECK"
ENGINE_FILE = "vllm_engine.json"
SYNC_FILE = "vllm_sync.jsonl"


def sync_replacement_needed(device: Any, vllm_mode: str) -> bool:
    """True only for colocated vLLM trained on a CPU device; never on a GPU, never for server mode.

    >>> sync_replacement_needed("cpu", "colocate"), sync_replacement_needed("cuda:0", "colocate")
    (True, False)
    >>> sync_replacement_needed("cpu", "server")
    False
    """
    kind = getattr(device, "type", None) or str(device).split(":", 1)[0]
    return kind == "cpu" and vllm_mode == "colocate"


def checkpoint_weights(model: Any) -> Iterator[tuple[str, Any]]:
    """The trainer model's weights under their checkpoint names, one tensor at a time. A PEFT model's
    adapters are merged into the base weights for the walk (and unmerged after it); adapter tensors
    themselves are left out, as vLLM's model has no such weights. Merged weights are yielded as copies:
    vLLM's layerwise reload may hold a tensor until its layer is complete, after the unmerge."""
    peft_prefix = getattr(model, "prefix", None) if hasattr(model, "merge_adapter") else None
    if peft_prefix is None:
        for name, parameter in model.named_parameters():
            yield name, parameter.data
        return
    model.merge_adapter()
    try:
        for name, parameter in model.named_parameters():
            if peft_prefix in name or "original_module" in name:
                continue
            name = name.removeprefix("base_model.model.").replace(".base_layer", "")
            yield name.replace("modules_to_save.default.", ""), parameter.data.clone()
    finally:
        model.unmerge_adapter()


def _model_runner(generation: Any) -> Any:
    return generation.llm.llm_engine.model_executor.driver_worker.model_runner


def install_cpu_weight_sync(trainer: Any, run_dir: Path | None = None) -> bool:
    """Replace the trainer's vLLM weight sync with the CPU one when ``sync_replacement_needed``; returns
    whether it did. With GRPO_RLVR_VLLM_SYNC_CHECK set and a run directory, each sync is also verified."""
    generation = getattr(trainer, "vllm_generation", None)
    if generation is None or not sync_replacement_needed(trainer.accelerator.device, generation.mode):
        return False
    check = bool(os.environ.get(SYNC_CHECK_ENV)) and run_dir is not None
    count = 0

    def sync_weights() -> None:
        nonlocal count
        started = time.perf_counter()
        runner = _model_runner(generation)
        runner.reload_weights(weights_iterator=checkpoint_weights(generation.model), is_checkpoint_format=True)
        generation.llm.reset_prefix_cache()
        seconds = time.perf_counter() - started
        count += 1
        if check:
            row = {"sync": count, "step": trainer.state.global_step, "seconds": round(seconds, 3)}
            append_jsonl(run_dir / SYNC_FILE, {**row, **compare_weights(generation.model, runner)})

    generation.sync_weights = sync_weights
    return True


def engine_settings(trainer: Any) -> dict[str, Any] | None:
    """What the colocated vLLM engine was built with, read back from vLLM (None without one)."""
    generation = getattr(trainer, "vllm_generation", None)
    if generation is None or getattr(generation, "llm", None) is None:
        return None
    config = generation.llm.llm_engine.vllm_config
    return {
        "gpu_memory_utilization": config.cache_config.gpu_memory_utilization,
        "max_model_len": config.model_config.max_model_len,
        "max_num_seqs": config.scheduler_config.max_num_seqs,
        "tensor_parallel_size": config.parallel_config.tensor_parallel_size,
        "distributed_executor_backend": str(config.parallel_config.distributed_executor_backend),
        "enable_sleep_mode": config.model_config.enable_sleep_mode,
        "model_impl": str(config.model_config.model_impl),
        "dtype": str(config.model_config.dtype).removeprefix("torch."),
        "model": config.model_config.model,
        "device": str(config.device_config.device),
    }


# GRPOConfig fields that size the colocated engine -> the engine setting they become (engine_settings' names).
ENGINE_FIELDS = {
    "vllm_gpu_memory_utilization": "gpu_memory_utilization",
    "vllm_max_model_length": "max_model_len",
    "vllm_tensor_parallel_size": "tensor_parallel_size",
    "vllm_enable_sleep_mode": "enable_sleep_mode",
    "vllm_model_impl": "model_impl",
}


def recipe_vs_engine(trl: dict[str, Any], settings: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Each engine-sizing vllm_* field the recipe sets, as (recipe value, value the engine was built with).

    >>> recipe_vs_engine({"vllm_mode": "colocate", "vllm_max_model_length": 136, "learning_rate": 1e-6},
    ...                  {"max_model_len": 136, "distributed_executor_backend": "external_launcher"})
    {'vllm_max_model_length': (136, 136), 'vllm_mode': ('colocate', 'colocate')}
    """
    compared = {field: (trl[field], settings.get(name)) for field, name in ENGINE_FIELDS.items() if field in trl}
    if "vllm_mode" in trl:
        built = "colocate" if settings.get("distributed_executor_backend") == "external_launcher" else "other"
        compared["vllm_mode"] = (trl["vllm_mode"], built)
    return compared


def write_engine_settings(trainer: Any, run_dir: Path) -> dict[str, Any] | None:
    """Write vllm_engine.json (see engine_settings) and return it."""
    settings = engine_settings(trainer)
    if settings is not None:
        (run_dir / ENGINE_FILE).write_text(json.dumps(settings, indent=1, default=str))
    return settings


def vllm_weights(runner: Any) -> Iterator[tuple[str, Any]]:
    """Every weight of vLLM's model under checkpoint names, read back as it computes with them: a linear
    layer (whose CPU weight may be packed away) as ``apply(identity)``, transposed, and split into the
    checkpoint tensors it fuses (``packed_modules_mapping``, e.g. qkv_proj into q/k/v_proj); every other
    parameter as stored."""
    import torch
    from vllm.model_executor.layers.linear import LinearBase

    model = runner.get_model()
    packed = getattr(model, "packed_modules_mapping", {}) or {}
    linear_weights: set[str] = set()
    with torch.no_grad():
        for name, module in model.named_modules():
            if not isinstance(module, LinearBase):
                continue
            linear_weights.add(f"{name}.weight")
            identity = torch.eye(module.input_size, dtype=runner.model_config.dtype)
            weight = module.quant_method.apply(module, identity, None).t()
            prefix, _, leaf = name.rpartition(".")
            parts = packed.get(leaf, [leaf])
            sizes = getattr(module, "output_sizes", None) or [weight.shape[0]]
            for part, piece in zip(parts, torch.split(weight, list(sizes)), strict=True):
                yield f"{prefix}.{part}.weight" if prefix else f"{part}.weight", piece
        for name, parameter in model.named_parameters():
            if name not in linear_weights and parameter.numel():
                yield name, parameter.data


def compare_weights(model: Any, runner: Any) -> dict[str, Any]:
    """The trainer's weights against vLLM's, element for element, in vLLM's dtype: how many elements of
    each side were compared, which tensors differ or are missing, and a digest of the trainer's weights
    (which changes from sync to sync while training moves them)."""
    import torch

    dtype = runner.model_config.dtype
    theirs = dict(vllm_weights(runner))
    sha = hashlib.sha256()
    compared = trainer_elements = 0
    mismatched, missing = [], []
    for name, tensor in sorted(checkpoint_weights(model)):
        ours = tensor.detach().to("cpu", dtype)
        trainer_elements += ours.numel()
        sha.update(name.encode() + ours.float().numpy().tobytes())
        other = theirs.get(name)
        if other is None:
            missing.append(name)
            continue
        other = other[: ours.shape[0]].to(dtype) if other.ndim == ours.ndim else other
        if other.shape != ours.shape or not torch.equal(other, ours):
            mismatched.append(name)
        compared += ours.numel()
    return {
        "dtype": str(dtype).removeprefix("torch."),
        "trainer_elements": trainer_elements,
        "compared_elements": compared,
        "mismatched": mismatched,
        "missing": missing,
        "trainer_sha256": sha.hexdigest(),
    }
