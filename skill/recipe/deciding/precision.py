"""Precision: the dtype a recipe loads its weights in and the mixed precision it trains with, each with its reason.

The rule is that the weights the optimizer updates are float32. AdamW moves a weight by about the learning
rate per step, and a bfloat16 weight keeps 8 significant bits: at magnitude 0.02 its spacing is 1.2e-4, so
at the seed's learning rate 5e-7 almost every update rounds away and pure-bf16 weights barely train
(``bench/weights_moved.py`` measures the fraction that moves; ``bench/RESULTS.md``). Hence:

- full fine-tune on a GPU: float32 master weights (``model_init_kwargs.dtype="float32"``) trained under
  bf16 autocast (``bf16=True``; fp16 with loss scaling on GPUs without bf16). Matmuls run in half
  precision; weights, gradients and AdamW's states are float32 (2 bytes per parameter more than bf16
  weights for the weights alone; ``memory`` counts it from the dtype). Under DeepSpeed ZeRO or FSDP2 the
  launcher's ``mixed_precision`` keeps the same float32 master copy.
- LoRA: the frozen base loads in bf16; PEFT keeps the trained adapters in float32 (``get_peft_model``'s
  ``autocast_adapter_dtype=True``, peft 0.21; under ZeRO-3 TRL 1.16 keeps them in bf16 and DeepSpeed's
  optimizer holds their float32 master copy).
- QLoRA: the frozen base in NF4, computing in bf16. TRL 1.16 casts QLoRA adapters to bf16 after wrapping
  (the QLoRA paper's choice), so their updates are rounded like bf16 weights; LoRA keeps them in float32.
- CPU: float32 throughout (no autocast; mixed precision gains nothing there).

Pure half-precision weights in a full fine-tune are an explicit opt-in: an override of
``model_init_kwargs.dtype`` with a stated reason (e.g. an optimizer with stochastic rounding or Kahan
summation), refused otherwise. The dtype rule itself is ``memory.precision.load_dtype`` (the memory estimate
assumes it too). May import: ``hardware.specs``, ``memory.precision``, ``errors``.
"""

from __future__ import annotations

from typing import Any

from skill.errors import SkillError
from skill.grpo_fields import GRPOFields
from skill.hardware.specs import HardwareSpec
from skill.memory.precision import load_dtype

HALF_DTYPES = ("bfloat16", "float16")


def nf4_config(compute_dtype: str) -> dict[str, Any]:
    """The bitsandbytes NF4 quantization config of a QLoRA base (double quantization, as the QLoRA paper)."""
    return {
        "quant_method": "bitsandbytes",
        "load_in_4bit": True,
        "bnb_4bit_quant_type": "nf4",
        "bnb_4bit_compute_dtype": compute_dtype,
        "bnb_4bit_use_double_quant": True,
    }


def precision_fields(hardware: HardwareSpec, method: str) -> list[tuple[str, Any, str]]:
    """``bf16``, ``fp16`` and ``model_init_kwargs`` for a target and method: (field, value, reason) each.

    >>> fields = {f: v for f, v, _ in precision_fields(HardwareSpec(gpu_model="H100"), "full")}
    >>> fields["bf16"], fields["model_init_kwargs"]
    (True, {'dtype': 'float32'})
    >>> {f: v for f, v, _ in precision_fields(HardwareSpec(gpu_model="H100"), "lora")}["model_init_kwargs"]
    {'dtype': 'bfloat16'}
    """
    if hardware.accelerator == "cpu":
        return [
            ("bf16", False, "CPU: train in fp32 (mixed precision gains nothing here)"),
            ("fp16", False, "CPU: train in fp32"),
            ("model_init_kwargs", {"dtype": load_dtype(hardware, method)}, "load the weights in the training dtype"),
        ]
    half = "bfloat16" if hardware.bf16 else "float16"
    if hardware.bf16:
        flags = [
            ("bf16", True, "bf16 autocast: matmuls run in bf16 (Ampere or newer); weights keep their load dtype"),
            ("fp16", False, "bf16 is used instead"),
        ]
    else:
        flags = [
            ("bf16", False, "the GPU has no bf16 (pre-Ampere, e.g. T4/V100)"),
            ("fp16", True, "fp16 autocast with loss scaling on a GPU without bf16; weights keep their load dtype"),
        ]
    dtype = load_dtype(hardware, method)
    if method == "full":
        init = (
            {"dtype": dtype},
            f"fp32 master weights trained under {half} autocast: AdamW moves a weight by about the learning rate per "
            "step, which a bf16 weight of magnitude 0.02 (spacing 1.2e-4) rounds away at lr 5e-7, so pure-bf16 "
            "weights barely train (measured: in 10 steps at lr 5e-7, 0.1% of bf16 weights moved, 99.8% of fp32 ones); "
            "costs fp32 weights, gradients and Adam states",
        )
    elif method == "lora":
        init = (
            {"dtype": dtype},
            f"the frozen base loads in {half}; PEFT keeps the trained LoRA adapters in float32 "
            "(autocast_adapter_dtype=True), so their updates are not rounded away",
        )
    else:
        init = (
            {"dtype": dtype, "quantization_config": nf4_config(dtype)},
            f"NF4 base computing in {half}; TRL 1.16 casts QLoRA adapters to bf16 (the QLoRA paper), so their "
            "updates are bf16-rounded (LoRA keeps them in float32)",
        )
    return [*flags, ("model_init_kwargs", *init)]


def check_master_weights(trl: dict[str, Any], method: str, override_reasons: dict[str, str]) -> None:
    """Refuse a full fine-tune whose weights load in half precision unless the caller says why.

    >>> check_master_weights({"model_init_kwargs": {"dtype": "float32"}}, "full", {})
    >>> check_master_weights({"model_init_kwargs": {"dtype": "bfloat16"}}, "full", {"model_init_kwargs": "SR optim"})
    >>> check_master_weights({"model_init_kwargs": {"dtype": "bfloat16"}}, "full", {})
    Traceback (most recent call last):
    ...
    skill.errors.SkillError: A full fine-tune with bfloat16 weights ...
    """
    fields = GRPOFields(trl)
    dtype = (fields.model_init_kwargs or {}).get("dtype", "float32")  # TRL loads float32 when none is given
    if method != "full" or dtype not in HALF_DTYPES or override_reasons.get("model_init_kwargs", "").strip():
        return
    raise SkillError(
        f"A full fine-tune with {dtype} weights and {fields.optim} at lr "
        f"{fields.learning_rate}: AdamW moves a weight by about the learning rate per step, which {dtype} "
        "rounds away for most weights (spacing 1.2e-4 at magnitude 0.02 in bf16), so the run would barely train.",
        "Leave model_init_kwargs.dtype at float32 (the recipe trains it under bf16 autocast), or send "
        "override_reasons['model_init_kwargs'] saying why pure half-precision weights are wanted (e.g. an "
        "optimizer with stochastic rounding or Kahan summation).",
    )
