"""Whole parameters TRL materialises on each GPU outside the training step, when the weights are sharded.

Read from TRL 1.16 (``trl/generation/vllm_generation.py``, ``trl/distributed.py``, ``trl/models/utils.py``):

- Weight sync into vLLM, before the first generation and after every optimizer step, in server and
  colocate mode alike (``VLLMGeneration._iter_named_params``). With PEFT under DeepSpeed ZeRO-3 it runs
  ``DistributedBackend.gather_params(list(model.parameters()))``, i.e. ``deepspeed.zero.GatheredParameters``
  over every parameter at once ("merging adapters in a sharded manner is not supported"), merges the
  adapters, streams the merged weights and unmerges: every trainer rank holds the whole model, in
  DeepSpeed's parameter dtype (half precision when bf16 / fp16 is enabled, whatever the load dtype:
  ``memory.precision.module_dtype``), besides its own shard. In server mode the first sync walks the
  parameters twice (once for their names and shapes, once to send them), one gather after the other.
  Without PEFT each parameter is gathered alone; under FSDP2 each parameter is
  materialised alone (``full_tensor()``), PEFT or not (PEFT's merge then runs on the sharded parameters, which
  TRL's own comment leaves open, "TODO: does this work with FSDP?": it does, exactly, tests/target/
  test_fsdp_lora_sync.py).
- Generation without vLLM under ZeRO-3 (``unwrap_model_for_generation``): ``GatheredParameters`` over every
  parameter unless ``ds3_gather_for_generation=False``, the GRPOConfig field that makes generation fetch
  the layers one at a time instead (TRL: slower, and "not compatible with vLLM generation").
- ZeRO-2 and DDP keep the whole weights on every GPU already: nothing extra is gathered.

May import: ``memory.schema``, ``models.shapes``.
"""

from __future__ import annotations

from typing import NamedTuple

from skill.memory.schema import GIB, MemoryRequest
from skill.models.shapes import ModelShape


class Gather(NamedTuple):
    """Bytes gathered at once on each GPU beyond its shard, when, and why."""

    bytes: float
    during: str  # "sync" (weight sync into vLLM), "generation" (transformers generation), or "" (none)
    reason: str


NO_GATHER = Gather(0.0, "", "")


def largest_parameter(shape: ModelShape) -> int:
    """Elements of the largest single parameter: the embedding (or LM head), an MLP or a query projection, or a
    mixture of experts' fused gate-and-up projection of every expert (transformers 5 stores them as one tensor).

    >>> from skill.models.shapes import SHAPES
    >>> largest_parameter(SHAPES["llama-3.1-8b"].shape) == 128256 * 4096
    True
    """
    fused_experts = shape.experts * 2 * shape.expert_ffn * shape.hidden
    return max(shape.vocab * shape.hidden, shape.ffn * shape.hidden, shape.q_dim * shape.hidden, fused_experts)


def uses_vllm(request: MemoryRequest) -> bool:
    """Whether the request generates with vLLM (default: on GPUs, not on CPU, never for QLoRA, which vLLM 0.31
    cannot load: skill.recipe.checking.plan_checks)."""
    if request.use_vllm is None:
        return request.hardware.accelerator != "cpu" and request.method != "qlora"
    return request.use_vllm


def gathers_whole_model(request: MemoryRequest) -> bool:
    """Whether TRL gathers the whole model onto each trainer GPU: ZeRO-3 with PEFT's weight sync into vLLM, or
    ZeRO-3 generation without vLLM unless ``ds3_gather_for_generation=False``."""
    if request.hardware.accelerator == "cpu" or request.sharding != "zero3":
        return False
    return request.method != "full" if uses_vllm(request) else request.ds3_gather_for_generation


def gathered(request: MemoryRequest, shape: ModelShape, whole_weights: float, dtype_bytes: int) -> Gather:
    """What TRL gathers onto each trainer GPU at once, beyond its shard (``whole_weights``: unsharded bytes).

    >>> from skill.hardware.specs import HardwareSpec
    >>> from skill.models.shapes import SHAPES
    >>> shape = SHAPES["llama-3.1-70b"].shape
    >>> request = MemoryRequest(shape=shape, hardware=HardwareSpec(gpu_model="H100", gpus_per_node=8, nodes=2),
    ...     method="lora", sharding="zero3", vllm_mode="server")
    >>> gather = gathered(request, shape, shape.parameters() * 2, 2)
    >>> gather.during, round(gather.bytes / 2**30, 1)
    ('sync', 131.4)
    """
    if request.hardware.accelerator == "cpu" or request.sharding in ("none", "zero2"):
        return NO_GATHER
    size = f"{whole_weights / GIB:.1f} GiB"
    if gathers_whole_model(request) and uses_vllm(request):
        return Gather(
            whole_weights,
            "sync",
            f"PEFT under ZeRO-3: TRL gathers the whole model ({size}) onto every trainer GPU to merge the adapters at "
            "each weight sync into vLLM, server and colocate mode alike",
        )
    if gathers_whole_model(request):
        return Gather(
            whole_weights,
            "generation",
            f"ZeRO-3 generation without vLLM gathers the whole model ({size}) onto every trainer GPU "
            "(ds3_gather_for_generation=True, TRL's default)",
        )
    if uses_vllm(request):
        one = largest_parameter(shape) * dtype_bytes
        return Gather(one, "sync", "the weight sync into vLLM gathers one parameter at a time")
    return NO_GATHER
