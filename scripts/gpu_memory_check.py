"""Measure the peak GPU memory and the time of real GRPO steps and print them next to the estimates.

What is measured, each configuration in a process of its own, over STEPS GRPOTrainer steps (generation with
transformers, no vLLM, then the optimizer step): per step its seconds, its generation's seconds and, on CUDA, two
phases - generation and scoring, then the rest of the step (log-probs, backward, optimizer) - each with the peak of
the tensors alive (max_memory_allocated from a reset of the counters at the phase's start) and the allocator's pool
at its end (max_memory_reserved: nothing here empties the cache, so the pool only grows and each phase's figure
includes what the phases before it left). The measured figure is the pool's peak plus the CUDA context, measured
once as the device memory in use after CUDA initialises, less what the caching allocator reserved.

What is estimated: the memory estimator's peak with its modelled context replaced by the measured one, each phase's
tensors (the estimator's phase peak without context and reserve: no vLLM here, so that is exact), and the step-time
estimate for the same step. The first step warms up kernels and the allocator and creates the AdamW state, so the
steady time is the median of the steps after it. Scope: TRL runs the reference model's forward (beta > 0) inside
generation and scoring, which the estimator counts with training.

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
# The first step warms up; the steady seconds per step are the median of the others. Two keep the whole device check
# within one 10-minute call on the lent GPU (each configuration adds a process start and a warm-up step).
STEPS = 2


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
    """STEPS real GRPOTrainer steps in this configuration: per step its seconds and its generation's; on CUDA, the
    allocator's peaks over each phase (see the module docstring)."""
    import statistics

    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    def correct(prompts, completions, answer, **kwargs):
        return [float(str(a) in c[-1]["content"]) for c, a in zip(completions, answer, strict=True)]

    on_gpu = device == "cuda"
    args = GRPOConfig(
        output_dir=str(output_dir),
        max_steps=STEPS,
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
    steps: list[dict] = []

    def phase_end() -> dict:
        """On CUDA, the tensors' peak since the phase began and the allocator's pool by its end; the counters start
        again (the pool's from where it stands)."""
        if not on_gpu:
            return {}
        torch.cuda.synchronize()
        peaks = {
            "allocated_peak_bytes": torch.cuda.max_memory_allocated(),
            "reserved_bytes": torch.cuda.max_memory_reserved(),
        }
        torch.cuda.reset_peak_memory_stats()
        return peaks

    class Steps(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            phase_end()  # what ran between steps (logging) is no phase of the next one
            steps.append({"start": time.perf_counter()})

        def on_step_end(self, args, state, control, **kwargs):
            step = steps[-1]
            step["training_peak"] = phase_end()
            step["seconds"] = time.perf_counter() - step.pop("start")

    generate = trainer._generate_and_score_completions  # TRL 1.16: a step's generation, rewards and reference

    def timed_generate(inputs):
        phase_end()
        began = time.perf_counter()
        generated = generate(inputs)
        steps[-1]["generation_peak"] = phase_end()
        steps[-1]["generation_seconds"] = time.perf_counter() - began
        return generated

    trainer._generate_and_score_completions = timed_generate
    trainer.add_callback(Steps())
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
    steady = steps[1:] or steps
    result["per_step"] = steps
    result["steady_seconds_per_step"] = statistics.median(step["seconds"] for step in steady)
    result["steady_generation_seconds"] = statistics.median(step["generation_seconds"] for step in steady)
    lengths = [
        entry["completions/mean_length"] for entry in trainer.state.log_history if "completions/mean_length" in entry
    ]
    result["completion_mean_tokens"] = statistics.mean(lengths[1:] or lengths) if lengths else None  # the steady steps
    if on_gpu:
        result["phase_allocated_peak_bytes"] = {
            phase: max(step[f"{phase}_peak"]["allocated_peak_bytes"] for step in steps)
            for phase in ("generation", "training")
        }
        result["max_allocated_bytes"] = max(result["phase_allocated_peak_bytes"].values())
        result["max_reserved_bytes"] = max(
            step[phase]["reserved_bytes"] for step in steps for phase in ("generation_peak", "training_peak")
        )
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


def device_spec(device: str, capacity_gib: float) -> object:
    """The HardwareSpec of this device: the GPU torch names (its throughput known when the table has it), or the CPU."""
    from skill.hardware.specs import HardwareSpec, lookup_gpu

    if device != "cuda":
        return HardwareSpec(accelerator="cpu")
    import torch

    name = torch.cuda.get_device_name(0)
    known = {"gpu_model": name} if lookup_gpu(name) else {}
    return HardwareSpec(**known, memory_gib_per_gpu=capacity_gib, bf16=True)


def estimate(
    model_dir: Path,
    configuration: dict,
    prompt_length: int,
    device: str,
    capacity_gib: float,
    mean_completion: float | None = None,
) -> dict:
    """estimate_memory's components for the same step, its peak without the modelled CUDA context, its phase peaks,
    and the step-time estimate (the completions' measured mean length, when the run logged one)."""
    from skill.errors import SkillError
    from skill.memory.components import estimate_components
    from skill.memory.schema import ALLOCATOR_SLACK, GIB, MemoryRequest
    from skill.models.size import resolve_shape
    from skill.timing.estimate import StepTimeRequest, estimate_step_time

    on_gpu = device == "cuda"
    shape = resolve_shape(str(model_dir))
    hardware = device_spec(device, capacity_gib)
    reserve = ALLOCATOR_SLACK if on_gpu else 0.0
    _, result = estimate_components(
        MemoryRequest(
            shape=shape,
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
    estimated = {
        "peak_without_overhead_bytes": (result.peak_gib - result.components.overhead) * GIB,
        "peak_gib": result.peak_gib,
        "peak_allocated_gib": result.peak_allocated_gib,
        # Each phase's tensors: its peak less the context and the modelled reserve (without vLLM, exactly).
        "phase_tensor_bytes": {
            "generation": (result.peak_generate_gib - result.components.overhead) / (1 + reserve) * GIB,
            "training": (result.peak_train_gib - result.components.overhead) / (1 + reserve) * GIB,
        },
        "components_gib": result.components.model_dump(),
    }
    budget = completion_length(device)
    try:
        step_time = estimate_step_time(
            StepTimeRequest(
                shape=shape,
                hardware=hardware,
                method=configuration["method"],
                dtype="bfloat16" if on_gpu else "float32",
                completions_per_step=configuration["batch"],
                micro_batch=configuration["batch"],
                prompt_tokens=prompt_length,
                max_completion_length=budget,
                mean_completion_tokens=min(mean_completion, budget) if mean_completion else None,
                reference_forward=configuration["beta"] > 0,
                activation_checkpointing=configuration["checkpointing"],
                generation="transformers",
                group_size=configuration["batch"],
            )
        )
    except SkillError as error:  # a GPU whose throughput the table does not know: no time estimate, said why
        estimated["seconds_per_step"] = None
        estimated["time_unavailable"] = str(error)
    else:
        estimated.update(
            seconds_per_step=step_time.seconds_per_step,
            low_seconds_per_step=step_time.low_seconds_per_step,
            high_seconds_per_step=step_time.high_seconds_per_step,
            generation_s=step_time.generation_s,
        )
    return estimated


def report(configuration: dict, measured: dict, estimated: dict, context: int, device: str) -> dict:
    """One row: on CUDA, estimate vs measured (max_memory_reserved + CUDA context) and the relative error, each
    phase's reserved peak beside the estimate's; on both, the steady seconds per step beside the estimate's."""
    row = {"configuration": configuration, "measured": measured, "estimated": estimated}
    name = f"{configuration['name']:18s}"
    if device == "cuda":
        truth = measured["max_reserved_bytes"] + context
        guess = estimated["peak_without_overhead_bytes"] + context
        row["error"] = (guess - truth) / truth
        phases = "  ".join(
            f"{phase} {measured['phase_allocated_peak_bytes'][phase] / 2**30:.2f}"
            f" (est. {estimated['phase_tensor_bytes'][phase] / 2**30:.2f})"
            for phase in ("generation", "training")
        )
        print(
            f"{name} measured {truth / 2**30:7.2f} GiB  estimated {guess / 2**30:7.2f} GiB  error {row['error']:+.1%}"
            f"  tensors by phase, GiB: {phases}",
            flush=True,
        )
    else:
        print(
            f"{name} {measured['steps']} steps in {measured['seconds']:.1f} s; estimated "
            f"{estimated['peak_gib']:.3f} GiB (no CUDA statistics on CPU)",
            flush=True,
        )
    steady = measured["steady_seconds_per_step"]
    if estimated["seconds_per_step"]:
        row["time_error"] = estimated["seconds_per_step"] / steady - 1
        print(
            f"{name} {steady:.2f} s/step (generation {measured['steady_generation_seconds']:.2f} s) measured; "
            f"estimated {estimated['seconds_per_step']:.2f} s/step ({estimated['low_seconds_per_step']:.2f}-"
            f"{estimated['high_seconds_per_step']:.2f}; generation {estimated['generation_s']:.2f} s), "
            f"error {row['time_error']:+.1%}",
            flush=True,
        )
    else:
        print(f"{name} {steady:.2f} s/step measured; no time estimate: {estimated['time_unavailable']}", flush=True)
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
        estimated = estimate(
            model_dir, configuration, longest, args.device, capacity_gib, measured["completion_mean_tokens"]
        )
        results.append(report(configuration, measured, estimated, context, args.device))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    summary = {
        "device": args.device,
        "versions": versions,
        "checkpointing_field": checkpointing_field(),
        "prompt_tokens": longest,
        "completion_tokens": completion_length(args.device),
        "steps": STEPS,
        "cuda_context_bytes": context,
        "rows": results,
    }
    args.output.write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
