"""The recipe matrix that tests/test_target_stack.py (newest transformers, .venv) and
tests/target/test_recipe_matrix.py (the target's transformers 5.17, .venv-target) both build.

Each configuration is emitted by ``emit_grpo_config``; a multi-GPU one goes through ``launch_files`` with its
sharding (which may add fields, e.g. reentrant checkpointing for PEFT under ZeRO-3). The GRPOConfig keywords
are read back from the rendered ``train_grpo.py``, i.e. exactly what the target's script passes to TRL.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from skill.hardware.specs import HardwareSpec
from skill.recipe.emit import RecipeRequest, emit_grpo_config
from skill.recipe.launching.launch import SCRIPT_FILE, launch_files
from skill.recipe.launching.script import render_script
from skill.recipe.schema import DatasetSpec, GRPORecipe, ModelSpec
from skill.rewards.spec import RewardSpec

MODEL = "Qwen/Qwen2.5-1.5B-Instruct"

# The metric GRPOTrainer logs for each loss variant (trl/trainer/grpo_trainer.py, _compute_loss); SAPO's soft gate
# logs none of its own. tests/target/test_loss_variants.py trains each one.
LOSS_METRICS = {
    "luspo": "clip_ratio/region_mean",
    "vespo": "vespo/phi_seq_mean",
    "cispo": "cispo_clip_ratio",
    "bnpo": "clip_ratio/region_mean",
    "sapo": None,
}


@dataclass(frozen=True)
class Configuration:
    """One cell of the matrix: a method on a layout, with the sharding its launch plan uses."""

    name: str
    method: str
    gpus_per_node: int = 1
    nodes: int = 1
    sharding: str | None = None  # None: one GPU (no launch plan), or the plan's own choice on several
    overrides: dict[str, Any] = field(default_factory=dict)
    variant: str | None = None  # a named variant of skill.recipe.deciding.variants applied by emit


CONFIGURATIONS = (
    Configuration("full-1gpu-colocate", "full"),
    *(Configuration(f"full-1gpu-colocate-{loss}", "full", variant=loss) for loss in LOSS_METRICS),
    Configuration("full-8gpu-server-ddp", "full", 8, sharding="ddp"),
    Configuration("full-8gpu-server-zero3", "full", 8, sharding="zero3"),
    Configuration("full-8gpu-server-fsdp2", "full", 8, sharding="fsdp2"),
    Configuration("full-2x8gpu-server", "full", 8, 2),
    Configuration("lora-1gpu-colocate", "lora"),
    Configuration("lora-8gpu-server-ddp", "lora", 8, sharding="ddp"),
    Configuration("lora-8gpu-server-zero3", "lora", 8, sharding="zero3"),
    Configuration("lora-8gpu-server-fsdp2", "lora", 8, sharding="fsdp2"),
    Configuration("lora-2x8gpu-server", "lora", 8, 2),
    # QLoRA generates with transformers: vLLM 0.31 cannot load a bitsandbytes base (skill.recipe.checking.plan_checks).
    Configuration("qlora-1gpu", "qlora"),
    Configuration("qlora-8gpu-ddp", "qlora", 8, sharding="ddp"),
    Configuration("qlora-8gpu-zero2", "qlora", 8, sharding="zero2"),
    Configuration("qlora-2x8gpu", "qlora", 8, 2, sharding="ddp"),
)


def emit(configuration: Configuration) -> GRPORecipe:
    """The recipe of one configuration (H100s, the seed recipe, one correctness reward)."""
    return emit_grpo_config(
        RecipeRequest(
            model=ModelSpec(name=MODEL),
            hardware=HardwareSpec(
                gpu_model="H100", gpus_per_node=configuration.gpus_per_node, nodes=configuration.nodes
            ),
            method=configuration.method,
            rewards=[RewardSpec(name="exact_match", role="correctness")],
            dataset=DatasetSpec(name="openai/gsm8k", columns=["answer"]),
            overrides=configuration.overrides,
            override_reasons={name: "matrix configuration" for name in configuration.overrides},
            variant=configuration.variant,
        )
    )


def config_kwargs(script: str, environ: dict[str, str] | None = None) -> dict[str, Any]:
    """The keywords of the ``GRPOConfig(...)`` call in a rendered script, as values (output_dir left out). Values
    are literals, but for a server plan's port, read from the environment (``environ``; none set: its default)."""
    scope = {"os": SimpleNamespace(environ=environ or {}), "int": int}
    for node in ast.walk(ast.parse(script)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "GRPOConfig":
            return {
                kw.arg: eval(compile(ast.Expression(kw.value), "<script>", "eval"), scope)  # noqa: S307 (our script)
                for kw in node.keywords
                if kw.arg != "output_dir"
            }
    raise AssertionError("the rendered script has no GRPOConfig(...) call")


def script_kwargs(configuration: Configuration) -> tuple[dict[str, Any], int, GRPORecipe]:
    """(GRPOConfig keywords of the script the target runs, its training processes, the recipe)."""
    recipe = emit(configuration)
    if configuration.gpus_per_node * configuration.nodes == 1:
        return config_kwargs(render_script(recipe)), recipe.launch.training_processes, recipe
    plan = launch_files(recipe, configuration.sharding)
    return config_kwargs(plan.files[SCRIPT_FILE]), plan.training_processes, recipe


def rendered_files(configuration: Configuration) -> dict[str, str]:
    """What a user of one configuration receives, by file name: the recipe as JSON, and the script a one-GPU
    recipe runs or every file of a multi-GPU launch plan."""
    recipe = emit(configuration)
    files = {"recipe.json": recipe.model_dump_json(indent=2) + "\n"}
    if configuration.gpus_per_node * configuration.nodes == 1:
        files[SCRIPT_FILE] = render_script(recipe)
    else:
        files.update(launch_files(recipe, configuration.sharding).files)
    return files
