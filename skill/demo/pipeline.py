"""The demo flow on the embedded default: what `grpo-rlvr demo` runs.

The request below reproduces a measured CPU run: 40 steps of 2 prompts x 8 generations, 16 new
tokens, lr 1e-5, beta 0, rewards correctness 1.0 / format 0.2 lifted correctness from 0.16 to
0.79 (first vs last 10 steps) in about 11 minutes on 2 cores. With equal weights the same run
learned to be well-formed but wrong, which is why the weights are not equal.
"""

from __future__ import annotations

from skill.demo.task import DEMO_DATASET_ID
from skill.emit import RecipeRequest
from skill.hardware import HardwareSpec
from skill.models import EMBEDDED_MODEL_ID
from skill.recipe import DatasetSpec, ModelSpec
from skill.rewards.spec import RewardSpec

DEMO_STEPS = 40


def demo_recipe_request() -> RecipeRequest:
    """The recipe request for the embedded SmolLM2 on the addition task, on this machine's CPU.

    >>> request = demo_recipe_request()
    >>> request.hardware.accelerator, [spec.weight for spec in request.rewards]
    ('cpu', [0.2, 1.0])
    """
    measured = "measured on 2 CPU cores: 40 steps lift correctness 0.16 -> 0.79 with this setting"
    return RecipeRequest(
        model=ModelSpec(name=EMBEDDED_MODEL_ID),
        hardware=HardwareSpec(accelerator="cpu"),
        method="full",
        rewards=[
            RewardSpec(name="format", role="format", weight=0.2, params={"pattern": "number"}),
            RewardSpec(
                name="exact_match",
                role="correctness",
                weight=1.0,
                params={"extract": "last_number", "answer_column": "answer"},
            ),
        ],
        dataset=DatasetSpec(name=DEMO_DATASET_ID, columns=["answer"]),
        overrides={
            "learning_rate": 1e-5,
            "beta": 0.0,
            "max_completion_length": 16,
            "gradient_accumulation_steps": 2,
            "logging_steps": 1,
        },
        override_reasons={
            "learning_rate": f"a 40-step CPU demo needs visible movement; {measured}",
            "beta": "no reference model: halves the CPU cost of a step on a 40-step demo",
            "max_completion_length": "the answer is one number; 16 tokens leave room for a short preamble",
            "gradient_accumulation_steps": "2 prompts x 8 generations per step keeps a CPU step near 15 s",
            "logging_steps": "a short run: log every step so the reward curve has 40 points",
        },
        max_steps=DEMO_STEPS,
    )
