"""Measure the peak GPU memory of real GRPO steps and print it next to estimate_memory's answer.

What is measured, each configuration in a process of its own: ``torch.cuda.max_memory_reserved()`` over one
GRPOTrainer step (generation with transformers, no vLLM, then the optimizer step) plus the CUDA context, measured
once as the device memory in use after CUDA initialises, less what the caching allocator reserved. What is estimated:
the same quantity, the estimator's peak with its modelled context replaced by the measured one.

Models are random-init 0.5B-class (Qwen2.5-0.5B shape, Qwen-sized vocabulary) with the embedded
SmolLM2 tokenizer (token ids need not cover the vocabulary). The prompts are the ``embedded:addition``
chat prompts; the estimate is given their real token count (the chat template applied, as TRL does).
The checkpointing switch goes under the GRPOConfig field the recipe contract names for the installed
transformers (``gradient_checkpointing`` up to 5.22, ``activation_checkpointing`` from 5.23).

``--device cpu --tiny`` runs the same flow on a tiny model without CUDA statistics (everything in
float32), so the script is tested where no GPU exists (tests/target/test_device_check.py).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

# dtype: the weights' load dtype on a GPU (bf16, or float32 master weights under bf16 autocast); CPU runs use float32.
CONFIGURATIONS = [
    {"name": "full-ckpt-b4", "method": "full", "checkpointing": True, "batch": 4, "beta": 0.0, "dtype": "bfloat16"},
    {"name": "full-ckpt-b8", "method": "full", "checkpointing": True, "batch": 8, "beta": 0.0, "dtype": "bfloat16"},
    {"name": "full-nockpt-b4", "method": "full", "checkpointing": False, "batch": 4, "beta": 0.0, "dtype": "bfloat16"},
    {
        "name": "full-ckpt-b4-ref",
        "method": "full",
        "checkpointing": True,
        "batch": 4,
        "beta": 0.04,
        "dtype": "bfloat16",
    },
    {"name": "full-fp32-ckpt-b4", "method": "full", "checkpointing": True, "batch": 4, "beta": 0.0, "dtype": "float32"},
    {"name": "lora-ckpt-b8", "method": "lora", "checkpointing": True, "batch": 8, "beta": 0.0, "dtype": "bfloat16"},
    {"name": "lora-nockpt-b8", "method": "lora", "checkpointing": False, "batch": 8, "beta": 0.0, "dtype": "bfloat16"},
]
COMPLETION = 256


def build_model(directory: Path, tokenizer_dir: Path, tiny: bool) -> None:
    import torch
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    if tiny:
        shape = {
            "num_hidden_layers": 2,
            "hidden_size": 32,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "intermediate_size": 64,
            "vocab_size": len(tokenizer),
        }
    else:  # Qwen/Qwen2.5-0.5B-Instruct config.json
        shape = {
            "num_hidden_layers": 24,
            "hidden_size": 896,
            "num_attention_heads": 14,
            "num_key_value_heads": 2,
            "intermediate_size": 4864,
            "vocab_size": 151936,
        }
    config = Qwen2Config(
        **shape,
        tie_word_embeddings=True,
        max_position_embeddings=4096,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    Qwen2ForCausalLM(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)


def cuda_context_bytes() -> int:
    """Device memory in use once CUDA is initialised with one tiny tensor, less the allocator's own reservation."""
    import torch

    torch.empty(1, device="cuda")
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    return max(0, total - free - torch.cuda.memory_reserved())


def checkpointing_field() -> str:
    """The GRPOConfig field that switches activation checkpointing on, named as the recipe contract names it for
    the installed transformers (the recipes' own rule: ``trl_contract.field_name``)."""
    from skill.recipe.checking.trl_contract import field_name, installed_transformers

    return field_name("activation_checkpointing", installed_transformers())


def prompt_tokens(tokenizer_dir: Path, rows: list[dict]) -> int:
    """The longest prompt in tokens, with the chat template and generation prompt applied as TRL applies them.

    ``apply_chat_template(..., tokenize=True)`` returns a BatchEncoding in transformers 5, whose ``len`` is its
    number of keys (2), so the token ids are read from it."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    template = {"tokenize": True, "add_generation_prompt": True, "return_dict": True}
    lengths = [len(tokenizer.apply_chat_template(row["prompt"], **template)["input_ids"]) for row in rows]
    return max(lengths)


def weight_dtype(configuration: dict, device: str) -> str:
    return configuration["dtype"] if device == "cuda" else "float32"


def run_step(model_dir: Path, configuration: dict, device: str, output_dir: Path, rows: list[dict]) -> dict:
    """One real GRPOTrainer step (max_steps=1) in this configuration; on CUDA, the allocator's peaks over it."""
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from trl import GRPOConfig, GRPOTrainer

    def correct(prompts, completions, answer, **kwargs):
        return [float(str(a) in c[-1]["content"]) for c, a in zip(completions, answer, strict=True)]

    on_gpu = device == "cuda"
    args = GRPOConfig(
        output_dir=str(output_dir),
        max_steps=1,
        save_strategy="no",
        report_to="none",
        logging_steps=1,
        use_cpu=not on_gpu,
        bf16=on_gpu,
        model_init_kwargs={"dtype": weight_dtype(configuration, device)},
        per_device_train_batch_size=configuration["batch"],
        gradient_accumulation_steps=1,
        num_generations=configuration["batch"],
        max_completion_length=completion_length(device),
        beta=configuration["beta"],
        learning_rate=1e-6,
        use_vllm=False,
        **{checkpointing_field(): configuration["checkpointing"]},
    )
    peft = LoraConfig(r=16, lora_alpha=32, target_modules="all-linear") if configuration["method"] == "lora" else None
    trainer = GRPOTrainer(
        model=str(model_dir), reward_funcs=[correct], args=args, peft_config=peft, train_dataset=Dataset.from_list(rows)
    )
    result: dict = {}
    if on_gpu:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        # In a fresh process these are the model alone; a reserve left by an earlier step would show here.
        result["reserved_at_start_bytes"] = torch.cuda.memory_reserved()
        result["allocated_at_start_bytes"] = torch.cuda.memory_allocated()
    start = time.perf_counter()
    trainer.train()
    result.update(seconds=time.perf_counter() - start, steps=trainer.state.global_step, process=os.getpid())
    if on_gpu:
        result["max_reserved_bytes"] = torch.cuda.max_memory_reserved()
        result["max_allocated_bytes"] = torch.cuda.max_memory_allocated()
    return result


def measure_alone(args: argparse.Namespace, configuration: dict) -> dict:
    """``run_step`` in a process of its own: in one process, a step's reserved peak can include segments the steps
    before it left (empty_cache releases only segments with no live block), so the 2026-12-04 H200 check's
    lora-ckpt-b8 row (1.34 GiB allocated, 3.83 GiB reserved) cannot be told apart from that."""
    import subprocess

    result = args.work / f"{configuration['name']}.measured.json"
    command = [sys.executable, __file__, "--device", args.device, "--tokenizer", str(args.tokenizer)]
    command += ["--work", str(args.work), "--output", str(args.output), "--measure", configuration["name"]]
    command += ["--tiny"] if args.tiny else []
    subprocess.run(command, check=True)
    return json.loads(result.read_text())


def completion_length(device: str) -> int:
    return COMPLETION if device == "cuda" else 8


def estimate(model_dir: Path, configuration: dict, prompt_length: int, device: str, capacity_gib: float) -> dict:
    """estimate_memory's components for the same step, and its peak without the modelled CUDA context."""
    from skill.hardware.specs import HardwareSpec
    from skill.memory.components import estimate_components
    from skill.memory.schema import GIB, MemoryRequest
    from skill.models.size import resolve_shape

    on_gpu = device == "cuda"
    hardware = HardwareSpec(memory_gib_per_gpu=capacity_gib, bf16=True) if on_gpu else HardwareSpec(accelerator="cpu")
    _, result = estimate_components(
        MemoryRequest(
            shape=resolve_shape(str(model_dir)),
            hardware=hardware,
            method=configuration["method"],
            dtype=weight_dtype(configuration, device),
            beta=configuration["beta"],
            per_device_train_batch_size=configuration["batch"],
            steps_per_generation=1,
            prompt_length=prompt_length,
            completion_length=completion_length(device),
            activation_checkpointing=configuration["checkpointing"],
            use_vllm=False,
            triton=on_gpu,
        )
    )
    return {
        "peak_without_overhead_bytes": (result.peak_gib - result.components.overhead) * GIB,
        "peak_gib": result.peak_gib,
        "components_gib": result.components.model_dump(),
    }


def report(configuration: dict, measured: dict, estimated: dict, context: int, device: str) -> dict:
    """One row: on CUDA, estimate vs measured (max_memory_reserved + CUDA context) and the relative error."""
    row = {"configuration": configuration, "measured": measured, "estimated": estimated}
    name = f"{configuration['name']:18s}"
    if device == "cuda":
        truth = measured["max_reserved_bytes"] + context
        guess = estimated["peak_without_overhead_bytes"] + context
        row["error"] = (guess - truth) / truth
        print(
            f"{name} measured {truth / 2**30:7.2f} GiB  estimated {guess / 2**30:7.2f} GiB  error {row['error']:+.1%}",
            flush=True,
        )
    else:
        print(
            f"{name} {measured['steps']} step in {measured['seconds']:.1f} s; estimated "
            f"{estimated['peak_gib']:.3f} GiB (no CUDA statistics on CPU)",
            flush=True,
        )
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--tiny", action="store_true", help="a tiny model (for testing the script on CPU)")
    parser.add_argument("--tokenizer", type=Path, required=True, help="directory with the SmolLM2 tokenizer")
    parser.add_argument("--work", type=Path, required=True, help="scratch directory")
    parser.add_argument("--output", type=Path, required=True, help="JSON results file")
    parser.add_argument("--only", nargs="*", help="configuration names to run")
    parser.add_argument("--measure", help="(internal) measure this one configuration in this process")
    args = parser.parse_args()
    if args.measure:
        from skill.data import addition_rows

        configuration = next(c for c in CONFIGURATIONS if c["name"] == args.measure)
        rows = addition_rows(64)
        measured = run_step(args.work / "model", configuration, args.device, args.work / args.measure, rows)
        (args.work / f"{args.measure}.measured.json").write_text(json.dumps(measured))
        return 0

    import torch
    import transformers
    import trl

    from skill.data import addition_rows

    model_dir = args.work / "model"
    build_model(model_dir, args.tokenizer, args.tiny)
    rows = addition_rows(64)
    longest = prompt_tokens(args.tokenizer, rows)
    context = cuda_context_bytes() if args.device == "cuda" else 0
    capacity_gib = torch.cuda.get_device_properties(0).total_memory / 2**30 if args.device == "cuda" else 0.0
    versions = {"torch": torch.__version__, "transformers": transformers.__version__, "trl": trl.__version__}
    print(f"{versions}; checkpointing field {checkpointing_field()}; longest prompt {longest} tokens", flush=True)
    results = []
    for configuration in CONFIGURATIONS:
        if args.only and configuration["name"] not in args.only:
            continue
        measured = measure_alone(args, configuration)
        estimated = estimate(model_dir, configuration, longest, args.device, capacity_gib)
        results.append(report(configuration, measured, estimated, context, args.device))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    summary = {
        "device": args.device,
        "versions": versions,
        "checkpointing_field": checkpointing_field(),
        "prompt_tokens": longest,
        "completion_tokens": completion_length(args.device),
        "cuda_context_bytes": context,
        "rows": results,
    }
    args.output.write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
