"""The vLLM path's decisions, with their numbers: importance-sampling correction, tensor parallel size in colocate
mode, sleep mode when colocated memory is short, and a remote server's URL.

Each decision reads TRL 1.16's implementation (trl/trainer/grpo_trainer.py, trl/generation/vllm_generation.py),
cited at the constant it sets. May import: ``memory`` (the estimate), ``hardware.specs``, ``recipe.schema``,
``timing.estimate`` (sleep mode's seconds), ``errors``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

from skill.errors import SkillError
from skill.grpo_fields import GRPOFields, grpo_config_defaults
from skill.hardware.specs import HardwareSpec
from skill.memory.components import estimate_components, with_shape
from skill.recipe.deciding.memory_request import memory_request
from skill.recipe.schema import RecipeReason
from skill.timing.estimate import sleep_mode_seconds_per_step

# Truncated importance sampling's cap: the TIS authors (Yao et al. 2025, "Your Efficient RL Framework Secretly
# Brings You Off-Policy RL Training") truncate each token's vLLM/trainer ratio at C = 2.
TIS_CAP = 2.0
# TRL's masked-IS cap: its own default for vllm_importance_sampling_clip_max.
MASK_CAP = float(grpo_config_defaults()["vllm_importance_sampling_clip_max"])
# The importance-sampling mode emit decides when the caller and the variants leave it to the recipe (its reason is
# importance_sampling_fields'); TRL's own default is sequence_mask.
DECIDED_MODE = "token_truncate"
# vLLM's own activations and CUDA graphs inside its share (skill.memory.schema.VLLM_RUNTIME_GIB, modelled).
VLLM_RUNTIME_GIB = 0.5
Decision = tuple[str, Any, str]


def importance_sampling_fields(trl: dict[str, Any]) -> list[Decision]:
    """The vLLM importance-sampling correction: on, truncated per token, and the cap that fits the mode in
    ``trl`` (a caller's or variant's mode is kept: its cap follows it).

    >>> [value for _, value, _ in importance_sampling_fields({"use_vllm": True, "importance_sampling_level": "token"})]
    [True, 'token_truncate', 2.0]
    >>> importance_sampling_fields({"use_vllm": True, "vllm_importance_sampling_mode": "sequence_mask"})[2][1]
    3.0
    >>> importance_sampling_fields({"use_vllm": False})
    []
    """
    fields = GRPOFields(trl)
    if not fields.use_vllm:
        return []
    mode = fields.vllm_importance_sampling_mode if fields.is_set("vllm_importance_sampling_mode") else DECIDED_MODE
    if mode.endswith("_truncate"):
        cap = (
            TIS_CAP,
            f"truncate each ratio at {TIS_CAP:g} (the TIS authors' C, Yao et al. 2025): bounds the variance a rare "
            "mismatched token adds and keeps every token in the loss",
        )
    else:
        unit = mode.split("_")[0]  # token or sequence
        cap = (MASK_CAP, f"TRL's masked-IS cap {MASK_CAP:g}: a ratio above it drops its {unit} from the loss")
    return [
        (
            "vllm_importance_sampling_correction",
            True,
            "vLLM samples with bf16 weights and its own kernels while the trainer recomputes log-probs with fp32 "
            "master weights under autocast, so the samples are slightly off-policy; TRL reweights each by "
            "exp(trainer - vLLM log-prob) (grpo_trainer.py, _generate_and_score_completions)",
        ),
        (
            "vllm_importance_sampling_mode",
            mode,
            "truncated IS per token (TIS) for every loss (vespo accepts only token_* modes, grpo_trainer.py "
            "__init__): TRL's default sequence_mask multiplies the per-token ratios over the whole completion (their "
            "product, not GSPO's length-normalised mean): if vLLM and the trainer differ by 0.05 rms per token, 256 "
            "tokens sum to 0.8 rms in log space and about 1 sequence in 12 passes the cap of 3 and is masked whole",
        ),
        ("vllm_importance_sampling_clip_max", *cap),
    ]


def colocate_tensor_parallel(trl: dict[str, Any], hardware: HardwareSpec, parameters_b: float) -> list[Decision]:
    """A colocated vLLM's tensor parallel size: the smallest power of two whose bf16 weight shard (plus its
    runtime) fits vLLM's share of one GPU, at most the GPUs of a node and dividing the training processes.

    >>> h100x8 = HardwareSpec(gpu_model="H100", gpus_per_node=8)
    >>> colocate_tensor_parallel({"use_vllm": True, "vllm_mode": "colocate"}, h100x8, 32.8)[0][1]
    4
    >>> colocate_tensor_parallel({"use_vllm": True, "vllm_mode": "server"}, h100x8, 32.8)
    []
    """
    fields = GRPOFields(trl)
    if hardware.accelerator != "gpu" or not fields.use_vllm or fields.vllm_mode != "colocate":
        return []
    share = fields.vllm_gpu_memory_utilization * (hardware.memory_gib_per_gpu or 1.0)
    weights = parameters_b * 1e9 * 2 / 2**30  # vLLM serves in bf16 (2 bytes a parameter)
    size = 1
    while weights / size + VLLM_RUNTIME_GIB > share and size * 2 <= hardware.gpus_per_node:
        if hardware.total_gpus % (size * 2):  # TRL: tensor_parallel_size must divide the world size
            break
        size *= 2
    fits = weights / size + VLLM_RUNTIME_GIB <= share
    words = (
        f"bf16 weights {weights:.1f} GiB / {size} = {weights / size:.1f} GiB (+{VLLM_RUNTIME_GIB} GiB runtime) "
        f"{'fit' if fits else 'do NOT fit'} vLLM's {share:.1f} GiB share of one GPU"
    )
    if size == 1:
        words += "; no split needed" if fits else "; one GPU cannot be split: the memory estimate's remedies apply"
    else:
        words += f"; each group of {size} ranks shares one engine (TRL's colocate tensor-parallel subgroups)"
    return [("vllm_tensor_parallel_size", size, words)]


def check_server_url(trl: dict[str, Any]) -> None:
    """A caller's ``vllm_server_base_url`` must be an http(s) URL with a host, for a recipe that uses a server.

    >>> check_server_url({"use_vllm": True, "vllm_mode": "server", "vllm_server_base_url": "http://10.0.0.5:8000"})
    >>> check_server_url({"use_vllm": True, "vllm_mode": "colocate", "vllm_server_base_url": "http://h:8000"})
    Traceback (most recent call last):
    ...
    skill.errors.SkillError: vllm_server_base_url='http://h:8000' is set but the recipe generates with \
vllm_mode='colocate': TRL reads the URL only in server mode. Send overrides {'use_vllm': True, 'vllm_mode': \
'server'} with it, or leave the URL out.
    """
    fields = GRPOFields(trl)
    url = fields.vllm_server_base_url
    if url is None:
        return
    mode = fields.vllm_mode if fields.use_vllm else "none (use_vllm=False)"
    if mode != "server":
        raise SkillError(
            f"vllm_server_base_url={url!r} is set but the recipe generates with vllm_mode={mode!r}: TRL reads the "
            "URL only in server mode.",
            "Send overrides {'use_vllm': True, 'vllm_mode': 'server'} with it, or leave the URL out.",
        )
    parsed = urlparse(str(url))
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise SkillError(
            f"vllm_server_base_url={url!r} is not an http(s) URL with a host.",
            "Send the address `trl vllm-serve` listens on, e.g. 'http://10.0.0.5:8000'.",
        )


def server_url_reason(url: str) -> str:
    """Why a remote server's URL is in the recipe (what TRL does with it)."""
    return (
        f"a vLLM server on another node at {url}: TRL's rank-0 client uses it and ignores vllm_server_host/port "
        "(vllm_generation.py); serve it with `trl vllm-serve`, which sets --logprobs-mode "
        "processed_logprobs (TRL warns at start otherwise: the correction would be biased)"
    )


def _peak(request: Any) -> tuple[float, float, bool]:
    estimate = estimate_components(with_shape(request))[1]
    return estimate.peak_gib, estimate.capacity_gib, estimate.fits


def sleep_mode_decision(memory_request: Any, parameters_b: float, share: float) -> Decision:
    """Sleep mode for a colocated vLLM: on only when the estimate does not fit awake and fits asleep.

    The cost, from TRL 1.16's colocate path (trl/generation/vllm_generation.py): each generation round (one per
    optimizer step with the seed's steps_per_generation) calls ``empty_cache()``, ``wake_up(["weights"])`` before
    the weight sync TRL does every step anyway, ``wake_up(["kv_cache"])`` before generating, and ``sleep(level=2)``
    after, which discards (does not offload) weights and cache: no host copy, two re-allocations of vLLM's share
    and a cache flush per step.
    """
    awake_peak, capacity, awake_fits = _peak(memory_request.model_copy(update={"vllm_enable_sleep_mode": False}))
    if awake_fits:
        return (
            "vllm_enable_sleep_mode",
            False,
            f"colocated vLLM stays awake: the estimate fits awake ({awake_peak:.1f} of {capacity:.1f} GiB), so no "
            "step pays sleep mode's re-allocation",
        )
    asleep_peak, _, asleep_fits = _peak(memory_request.model_copy(update={"vllm_enable_sleep_mode": True}))
    weight_bytes = parameters_b * 1e9 * 2
    cost = (
        f"per step TRL wakes vLLM's weights ({weight_bytes / 2**30:.1f} GiB bf16 re-allocated, then filled by the "
        f"weight sync it does every step anyway) and its KV cache (the rest of the {share:.1f} GiB share), and "
        "sleep(level=2) discards both after generating: no host copy, two re-allocations and an empty_cache() per "
        f"step, at most about {sleep_mode_seconds_per_step(weight_bytes):.1f} s a step from vLLM's published wake "
        "times (CUDA only; not measured here)"
    )
    if asleep_fits:
        return (
            "vllm_enable_sleep_mode",
            True,
            f"colocated memory is short: {awake_peak:.1f} GiB awake does not fit {capacity:.1f} GiB, {asleep_peak:.1f} "
            f"GiB asleep does; {cost}",
        )
    return (
        "vllm_enable_sleep_mode",
        False,
        f"sleep mode alone does not make it fit ({awake_peak:.1f} GiB awake, {asleep_peak:.1f} asleep, of "
        f"{capacity:.1f}): see the memory estimate's remedies; if chosen, {cost}",
    )


def decide_sleep_mode(recipe: Any, overridden: bool) -> None:
    """Set ``vllm_enable_sleep_mode`` on a GPU recipe with a colocated vLLM, from the memory estimate awake and
    asleep, with its reason (a caller's value wins; a model without a shape keeps TRL's default, awake)."""
    fields, hardware = recipe.grpo, recipe.hardware
    if overridden or hardware.accelerator != "gpu" or not fields.use_vllm or fields.vllm_mode != "colocate":
        return
    try:
        memory = memory_request(recipe)
    except SkillError:  # no shape: nothing to decide from
        return
    share = fields.vllm_gpu_memory_utilization * (hardware.memory_gib_per_gpu or 1.0)
    field, value, reason = sleep_mode_decision(memory, recipe.model.parameters_billions or 0.0, share)
    recipe.trl[field] = value
    recipe.reasons.append(RecipeReason(field=field, value=value, source="hardware", reason=reason))
