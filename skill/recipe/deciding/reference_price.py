"""The reference model's price: what beta > 0 costs in a full fine-tune, and the alternative.

TRL 1.16 loads no reference model at beta 0.0 (its default) and none under PEFT (the base with adapters disabled
is the reference); otherwise GRPOTrainer.__init__ builds a second, frozen copy of the policy with
``dtype=self.model.dtype`` (trl/trainer/grpo_trainer.py, "Reference model"), i.e. in the policy's load dtype:
float32 for this project's full fine-tunes (skill.recipe.deciding.precision). Imports nothing from the project.
"""

from __future__ import annotations

from typing import Any

from skill.grpo_fields import GRPOFields

BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def reference_price(trl: dict[str, Any], method: str, parameters_b: float) -> str | None:
    """The memory a KL reference costs in this recipe and the alternative, or None when there is no copy.

    >>> reference_price({"beta": 0.01, "model_init_kwargs": {"dtype": "float32"}}, "full", 7.6)[:60]
    'beta > 0 in a full fine-tune loads a frozen float32 referenc'
    >>> reference_price({"beta": 0.0}, "full", 7.6), reference_price({"beta": 0.01}, "lora", 7.6)
    (None, None)
    """
    fields = GRPOFields(trl)
    if method != "full" or not fields.beta:
        return None
    dtype = str((fields.model_init_kwargs or {}).get("dtype", "float32"))
    gib = parameters_b * 1e9 * BYTES.get(dtype, 4) / 2**30
    return (
        f"beta > 0 in a full fine-tune loads a frozen {dtype} reference copy (GRPOTrainer builds it in the policy's "
        f"dtype): {gib:.1f} GiB per GPU under DDP (sharded like the policy under ZeRO-3/FSDP), plus its forward pass "
        "every step. The alternative is beta=0 (TRL 1.16's default; DAPO trains without a KL term): no reference, "
        "cheaper steps, and the policy is held only by the clip and a small learning rate; keep beta when the "
        "reward is not fully trusted or the run is long"
    )
