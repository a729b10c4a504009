"""The smallest configuration that fits, when no single change does: a search over GPU count, method, CPU offload
and where generation runs, cheapest first, each candidate re-estimated in full.

Order of cost: fewer GPUs first; then the request's own method before LoRA before QLoRA (less quality given
up); then no offload before optimizer offload before optimizer and parameter offload (slower steps); then a
vLLM server before a colocated vLLM sharded over the node before generation without vLLM (slower sampling).
Streaming the weights from host RAM is tried only when nothing else fits on up to 512 GPUs, and offload must
fit in the host RAM a node is assumed to have.
Nodes hold 8 GPUs once a configuration needs more than the request's node. May import: ``memory.schema``,
``memory.components``, ``memory.placement`` (valid vLLM tensor parallel sizes), ``memory.remedies`` (the vLLM
share), ``errors``. A remedy's ``changes`` hold every request field the configuration changed (plus ``gpus``,
``gpus_per_node`` and ``nodes``), so the request with them applied re-estimates to the same peak.
"""

from __future__ import annotations

from collections.abc import Iterator

from skill.errors import SkillError
from skill.memory.components import estimate_components, training_processes, with_shape
from skill.memory.placement import tensor_parallel_problem
from skill.memory.remedies import smallest_vllm_share
from skill.memory.schema import MemoryRequest, Remedy

GPU_COUNTS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
NODE_SIZE = 8
HOST_RAM_GIB_PER_NODE = 1024  # modelled: what a rented 8-GPU node typically has; offload beyond it is refused

# (label, cost, changes) for each way to place the training state, cheapest first.
PLACEMENTS: tuple[tuple[str, str, dict[str, object]], ...] = (
    ("", "", {}),
    (
        "optimizer offloaded",
        "optimizer states in host RAM: each optimizer step waits on the CPU and PCIe",
        {"offload_optimizer": True},
    ),
    (
        "optimizer and weights offloaded",
        "weights streamed from host RAM layer by layer: several times slower steps",
        {"offload_optimizer": True, "offload_parameters": True},
    ),
)


def _hardware(request: MemoryRequest, gpus: int) -> object:
    per_node = max(request.hardware.gpus_per_node, min(gpus, NODE_SIZE)) if gpus > 1 else 1
    per_node = min(per_node, gpus)
    return request.hardware.model_copy(update={"gpus_per_node": per_node, "nodes": max(1, gpus // per_node)})


def _generations(
    request: MemoryRequest, gpus: int, per_node: int, method: str
) -> Iterator[tuple[str, dict[str, object]]]:
    """Where generation runs, cheapest (fastest) first; QLoRA only without vLLM (vLLM 0.31 cannot load NF4)."""
    if request.use_vllm is not False and method != "qlora":
        if gpus > 1:
            yield "a vLLM server on its own GPUs", {"use_vllm": True, "vllm_mode": "server"}
        # The largest tensor parallel size vLLM accepts for this model on one node.
        sizes = [size for size in range(per_node if gpus > 1 else 1, 0, -1) if per_node % size == 0]
        probe = request.model_copy(update={"vllm_tensor_parallel_size": 1})
        tensor_parallel = next(
            size
            for size in sizes
            if not tensor_parallel_problem(probe.model_copy(update={"vllm_tensor_parallel_size": size}), per_node)
        )
        yield (
            f"vLLM colocated (tensor parallel {tensor_parallel}, asleep while training)",
            {
                "use_vllm": True,
                "vllm_mode": "colocate",
                "vllm_enable_sleep_mode": True,
                "vllm_tensor_parallel_size": tensor_parallel,
            },
        )
    yield (
        "transformers generation without vLLM (slow sampling; under ZeRO-3 one layer at a time)",
        {"use_vllm": False, "ds3_gather_for_generation": False},
    )


def _candidates(
    request: MemoryRequest, stream_weights: bool, keep_method: bool
) -> Iterator[tuple[int, str, MemoryRequest]]:
    """(GPUs, what it costs, the request with it applied), cheapest first; weights streamed from host RAM only
    when ``stream_weights`` (the last resort: several times slower steps)."""
    methods = ["full", "lora", "qlora"]
    methods = [request.method] if keep_method else methods[methods.index(request.method) :]
    for gpus in GPU_COUNTS:
        hardware = _hardware(request, gpus)
        for method in methods:
            for label, cost, changes in PLACEMENTS:
                if changes.get("offload_parameters") and (method == "qlora" or not stream_weights):
                    continue  # a sharded NF4 base needs bnb_4bit_quant_storage, which no recipe sets
                sharded = "zero2" if method == "qlora" else "zero3"
                sharding = sharded if gpus > 1 or changes else "none"
                for where, generation in _generations(request, gpus, hardware.gpus_per_node, method):
                    update = {"hardware": hardware, "method": method, "sharding": sharding, "training_processes": None}
                    parts = [f"{gpus} GPU(s)", f"method {method}", f"sharding {sharding}", label or "no offload", where]
                    costs = [cost] if cost else []
                    candidate = request.model_copy(update={**update, **changes, **generation})
                    if candidate.use_vllm and candidate.vllm_mode == "colocate":
                        share = smallest_vllm_share(candidate)
                        candidate = candidate.model_copy(update={"vllm_gpu_memory_utilization": share})
                    yield gpus, "; ".join([*parts, *costs]), candidate


def configuration_changes(request: MemoryRequest, candidate: MemoryRequest, gpus: int) -> dict[str, object]:
    """Every field the candidate sets differently from the request, plus the GPU layout and the main choices
    (method, sharding, offload, generation) even where unchanged, so the remedy reads on its own."""
    shown = ("method", "sharding", "offload_optimizer", "offload_parameters", "use_vllm", "vllm_mode")
    changes: dict[str, object] = {
        "gpus": gpus,
        "gpus_per_node": candidate.hardware.gpus_per_node,
        "nodes": candidate.hardware.nodes,
    }
    for field in MemoryRequest.model_fields:
        if field in ("hardware", "shape", "model"):
            continue
        value = getattr(candidate, field)
        if field in shown or value != getattr(request, field):
            changes[field] = value
    return changes


def smallest_configuration(request: MemoryRequest, keep_method: bool = False) -> Remedy | None:
    """The cheapest configuration (fewest GPUs, least given up) on which the whole GRPO step fits; with
    ``keep_method``, the fewest GPUs for the request's own method.

    >>> from skill.hardware.specs import HardwareSpec
    >>> remedy = smallest_configuration(MemoryRequest(model="meta-llama/Llama-3.1-70B-Instruct",
    ...     hardware=HardwareSpec(gpu_model="H100"), method="full"))
    >>> remedy.changes["gpus"], remedy.changes["method"]
    (1, 'qlora')
    >>> same = smallest_configuration(MemoryRequest(model="meta-llama/Llama-3.1-70B-Instruct",
    ...     hardware=HardwareSpec(gpu_model="H100"), method="full"), keep_method=True)
    >>> same.changes["gpus"], same.changes["offload_optimizer"]
    (8, True)
    """
    if request.hardware.accelerator != "gpu":
        return None
    request = with_shape(request)
    searched = (*_candidates(request, False, keep_method), *_candidates(request, True, keep_method))
    for gpus, cost, candidate in searched:
        try:
            result = estimate_components(candidate)[1]
            trainers = training_processes(candidate)
        except SkillError:  # a layout the launch planner refuses (a vLLM server too big for a node)
            continue
        host = result.offloaded_to_cpu_gib
        if result.fits and host * candidate.hardware.gpus_per_node <= HOST_RAM_GIB_PER_NODE:
            offloaded = (
                f"; {host:.0f} GiB of host RAM per process (assumes at most {HOST_RAM_GIB_PER_NODE} GiB per node)"
                if host
                else ""
            )
            return Remedy(
                name="smallest_configuration_same_method" if keep_method else "smallest_configuration",
                cost=f"{cost}; {trainers} training process(es){offloaded}",
                changes=configuration_changes(request, candidate, gpus),
                peak_gib=result.peak_gib,
                fits=True,
            )
    return None
