"""Measure the peak GPU memory of real GRPO steps and print it next to estimate_memory's answer.

What is measured: ``torch.cuda.max_memory_reserved()`` over one GRPOTrainer step (generation with
transformers, no vLLM, then the optimizer step) plus the CUDA context, measured once as the drop
in free device memory when CUDA initialises. What is estimated: the same quantity — the estimator's
peak with its modelled context replaced by the measured one.

Models are random-init 0.5B-class (Qwen2.5-0.5B shape, Qwen-sized vocabulary) with the embedded
SmolLM2 tokenizer (token ids need not cover the vocabulary). ``--device cpu --tiny`` runs the same
flow on a tiny model without CUDA statistics, so the script is tested where no GPU exists.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

CONFIGURATIONS = [
    {"name": "full-ckpt-b4", "method": "full", "activation_checkpointing": True, "batch": 4, "beta": 0.0},
    {"name": "full-ckpt-b8", "method": "full", "activation_checkpointing": True, "batch": 8, "beta": 0.0},
    {"name": "full-nockpt-b4", "method": "full", "activation_checkpointing": False, "batch": 4, "beta": 0.0},
    {"name": "full-ckpt-b4-ref", "method": "full", "activation_checkpointing": True, "batch": 4, "beta": 0.04},
    {"name": "lora-ckpt-b8", "method": "lora", "activation_checkpointing": True, "batch": 8, "beta": 0.0},
    {"name": "lora-nockpt-b8", "method": "lora", "activation_checkpointing": False, "batch": 8, "beta": 0.0},
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
    import torch

    torch.cuda.init()
    free_before, total = torch.cuda.mem_get_info()
    torch.empty(1, device="cuda")
    free_after, _ = torch.cuda.mem_get_info()
    return max(0, free_before - free_after) + (total - free_before)


def run_step(model_dir: Path, configuration: dict, device: str, output_dir: Path) -> dict:
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from trl import GRPOConfig, GRPOTrainer

    from skill.data import addition_rows

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
        model_init_kwargs={"dtype": "bfloat16" if on_gpu else "float32"},
        per_device_train_batch_size=configuration["batch"],
        gradient_accumulation_steps=1,
        num_generations=configuration["batch"],
        max_completion_length=COMPLETION if on_gpu else 8,
        activation_checkpointing=configuration["activation_checkpointing"],
        beta=configuration["beta"],
        learning_rate=1e-6,
        use_vllm=False,
    )
    peft = LoraConfig(r=16, lora_alpha=32, target_modules="all-linear") if configuration["method"] == "lora" else None
    trainer = GRPOTrainer(
        model=str(model_dir),
        reward_funcs=[correct],
        args=args,
        peft_config=peft,
        train_dataset=Dataset.from_list(addition_rows(64)),
    )
    if on_gpu:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    trainer.train()
    result = {"seconds": time.perf_counter() - start}
    if on_gpu:
        result["max_reserved_bytes"] = torch.cuda.max_memory_reserved()
        result["max_allocated_bytes"] = torch.cuda.max_memory_allocated()
    prompt_lengths = [
        len(trainer.processing_class.apply_chat_template(row["prompt"], tokenize=True, add_generation_prompt=True))
        for row in addition_rows(8)
    ]
    result["prompt_tokens"] = max(prompt_lengths)
    del trainer
    if on_gpu:
        torch.cuda.empty_cache()
    return result


def estimate(model_dir: Path, configuration: dict, prompt_tokens: int, device: str, capacity_gib: float) -> dict:
    from skill.hardware.specs import HardwareSpec
    from skill.memory.components import estimate_components
    from skill.memory.schema import GIB, MemoryRequest
    from skill.models.shapes import resolve_shape

    on_gpu = device == "cuda"
    hardware = HardwareSpec(memory_gib_per_gpu=capacity_gib, bf16=True) if on_gpu else HardwareSpec(accelerator="cpu")
    _, result = estimate_components(
        MemoryRequest(
            shape=resolve_shape(str(model_dir)),
            hardware=hardware,
            method=configuration["method"],
            dtype="bfloat16" if on_gpu else "float32",
            beta=configuration["beta"],
            per_device_train_batch_size=configuration["batch"],
            steps_per_generation=1,
            prompt_length=prompt_tokens,
            completion_length=COMPLETION if on_gpu else 8,
            activation_checkpointing=configuration["activation_checkpointing"],
            use_vllm=False,
            triton=on_gpu,
        )
    )
    return {
        "peak_without_overhead_bytes": (result.peak_gib - result.components.overhead) * GIB,
        "components_gib": result.components.model_dump(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--tiny", action="store_true", help="a tiny model (for testing the script on CPU)")
    parser.add_argument("--tokenizer", type=Path, required=True, help="directory with the SmolLM2 tokenizer")
    parser.add_argument("--work", type=Path, required=True, help="scratch directory")
    parser.add_argument("--output", type=Path, required=True, help="JSON results file")
    parser.add_argument("--only", nargs="*", help="configuration names to run")
    args = parser.parse_args()

    model_dir = args.work / "model"
    build_model(model_dir, args.tokenizer, args.tiny)
    context = cuda_context_bytes() if args.device == "cuda" else 0
    capacity_gib = 0.0
    if args.device == "cuda":
        import torch

        capacity_gib = torch.cuda.get_device_properties(0).total_memory / 2**30
    rows = []
    for configuration in CONFIGURATIONS:
        if args.only and configuration["name"] not in args.only:
            continue
        measured = run_step(model_dir, configuration, args.device, args.work / configuration["name"])
        estimated = estimate(model_dir, configuration, measured["prompt_tokens"], args.device, capacity_gib)
        row = {"configuration": configuration, "measured": measured, "estimated": estimated}
        if args.device == "cuda":
            truth = measured["max_reserved_bytes"] + context
            guess = estimated["peak_without_overhead_bytes"] + context
            row["error"] = (guess - truth) / truth
            print(
                f"{configuration['name']:18s} measured {truth / 2**30:7.2f} GiB  estimated {guess / 2**30:7.2f} GiB "
                f" error {row['error']:+.1%}",
                flush=True,
            )
        else:
            print(f"{configuration['name']:18s} ran in {measured['seconds']:.1f} s (no CUDA statistics on CPU)")
        rows.append(row)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({"device": args.device, "cuda_context_bytes": context, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
