"""vLLM against transformers on this CPU, in one run: generation throughput and the runner's seconds per step.

Runs under the target environment (.venv-target: vLLM's CPU build, transformers 5.17); `make bench` calls it
from bench/run_all.py. Both generation sides sample the same embedded SmolLM2-135M on the same chat prompts,
n completions each, exactly ``tokens`` new tokens per completion (eos ignored), each side in its own process
one after the other: transformers ``generate`` in the trainer's dtype (float32), vLLM's offline ``LLM`` in
the dtype it picks for a float32 checkpoint on this CPU (reported). Then the project's runner trains the same
recipe twice, generating with transformers and with vLLM colocated (the CPU weight sync of
skill.runs.vllm_cpu), and the median seconds between logged steps are compared (the first step, with vLLM's
warm-up, is left out; no checkpoint is written mid-run: saving SmolLM2 with its optimizer state every step
would swamp both sides). The load average before and after is recorded: on a shared 2-core machine other
processes' load moves every figure here.
Run: .venv-target/bin/python bench/vllm_generation.py [--quick] [--json OUT]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from runner_overhead import passed_inspection  # bench/ is this script's directory, first on sys.path

PROMPTS = ["What is 7 + 5? Answer with just the number.", "Name three primary colours."]
SIDE = r"""
import json, statistics, sys, time
side, model, prompts, n, tokens, repeats = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), *map(int, sys.argv[4:7])
from transformers import AutoTokenizer
tokenizer = AutoTokenizer.from_pretrained(model)
texts = [tokenizer.apply_chat_template([{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True)
         for p in prompts]
started = time.perf_counter()
if side == "vllm":
    from vllm import LLM, SamplingParams
    llm = LLM(model=model, gpu_memory_utilization=0.15, max_model_len=256, seed=0)
    dtype = str(llm.llm_engine.vllm_config.model_config.dtype)
    params = SamplingParams(n=n, max_tokens=tokens, ignore_eos=True, temperature=1.0, seed=0)
    def generate():
        outputs = llm.generate(texts, params, use_tqdm=False)
        return sum(len(c.token_ids) for o in outputs for c in o.outputs)
else:
    import torch
    from transformers import AutoModelForCausalLM
    torch.manual_seed(0)
    lm = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32)
    dtype = str(lm.dtype)
    tokenizer.padding_side = "left"
    batch = tokenizer(texts, return_tensors="pt", padding=True)
    def generate():
        with torch.no_grad():
            out = lm.generate(**batch, do_sample=True, num_return_sequences=n, min_new_tokens=tokens,
                              max_new_tokens=tokens, pad_token_id=tokenizer.pad_token_id)
        return (out.shape[1] - batch["input_ids"].shape[1]) * out.shape[0]
ready = time.perf_counter() - started
generate()  # warm-up (vLLM compiles graphs for new shapes)
rates = []
for _ in range(repeats):
    t = time.perf_counter()
    count = generate()
    rates.append(count / (time.perf_counter() - t))
print("RESULT " + json.dumps({"ready_s": ready, "dtype": dtype, "tokens": count, "tokens_per_s": rates}))
"""


def generation_side(side: str, model: Path, n: int, tokens: int, repeats: int) -> dict:
    """One side's throughput, measured in a fresh process."""
    command = [sys.executable, "-c", SIDE, side, str(model), json.dumps(PROMPTS), str(n), str(tokens), str(repeats)]
    out = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"{side} generation failed: {out.stderr[-2000:]}")
    result = json.loads(out.stdout.split("RESULT ", 1)[1].splitlines()[0])
    rates = result.pop("tokens_per_s")
    return {**result, "median_tokens_per_s": statistics.median(rates), "spread_tokens_per_s": max(rates) - min(rates)}


def runner_seconds_per_step(steps: int, tokens: int) -> dict:
    """The runner's s/step on SmolLM2-135M generating with transformers, then with colocated vLLM."""
    from skill.data import addition_rows
    from skill.hardware.specs import HardwareSpec
    from skill.models.sources import EMBEDDED_MODEL_ID
    from skill.recipe.emit import RecipeRequest, emit_grpo_config
    from skill.recipe.schema import DatasetSpec, ModelSpec
    from skill.rewards.spec import RewardSpec
    from skill.runs.jobs import RunRequest, run_grpo, run_status
    from skill.runs.store import read_jsonl

    data = Path(os.environ["GRPO_RLVR_HOME"]) / "addition.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in addition_rows(64)))
    specs = [
        RewardSpec(name="format", role="format", weight=0.2, params={"pattern": "number"}),
        RewardSpec(name="exact_match", role="correctness", params={"extract": "last_number"}),
    ]
    passed_inspection(specs)
    common = {"per_device_train_batch_size": 8, "gradient_accumulation_steps": 1, "num_generations": 8}
    common |= {"max_completion_length": tokens, "logging_steps": 1, "beta": 0.0, "seed": 3407}
    common["save_steps"] = 10 * steps  # no mid-run checkpoint: SmolLM2's (1.6 GB with Adam state) would dominate
    vllm = {"use_vllm": True, "vllm_mode": "colocate", "vllm_gpu_memory_utilization": 0.15}
    result: dict = {"steps": steps, "model": "SmolLM2-135M", "completion_tokens": tokens}
    for label, extra in (("transformers", {}), ("vllm", vllm)):
        recipe = emit_grpo_config(
            RecipeRequest(
                model=ModelSpec(name=EMBEDDED_MODEL_ID),
                hardware=HardwareSpec(accelerator="cpu"),
                method="full",
                rewards=specs,
                dataset=DatasetSpec(name=str(data), columns=["answer"]),
                overrides={**common, **extra},
                max_steps=steps,
            )
        )
        started = time.time()
        status = run_grpo(RunRequest(recipe=recipe, run_id=f"bench-{label}-{int(started)}", held_out_fraction=0.0))
        while status.state in ("starting", "running"):
            status = run_status(status.run_id, wait_seconds=5)
        if status.state != "succeeded":
            raise RuntimeError(f"runner with {label} generation failed: {status.reason}")
        times = [row["time"] for row in read_jsonl(Path(status.paths["metrics.jsonl"]))]
        intervals = [later - earlier for earlier, later in zip(times, times[1:], strict=False)]
        result[f"{label}_s_per_step"] = statistics.median(intervals)  # robust to a busy neighbour's spikes
        result[f"{label}_spread_s"] = max(intervals) - min(intervals)
        result[f"{label}_wall_s"] = time.time() - started
    result["ratio"] = result["transformers_s_per_step"] / result["vllm_s_per_step"]
    return result


def measure(quick: bool = False) -> dict:
    """Both comparisons; numbers only from this run."""
    os.environ.setdefault("GRPO_RLVR_HOME", tempfile.mkdtemp(prefix="grpo-bench-vllm-"))
    load_before = os.getloadavg()[1]
    from skill.models.sources import embedded_model_dir

    model = embedded_model_dir()
    n, tokens, repeats = (4, 8, 1) if quick else (8, 16, 3)
    generation = {side: generation_side(side, model, n, tokens, repeats) for side in ("transformers", "vllm")}
    generation |= {"prompts": len(PROMPTS), "n": n, "tokens": tokens, "repeats": repeats}
    vllm_rate, hf_rate = generation["vllm"]["median_tokens_per_s"], generation["transformers"]["median_tokens_per_s"]
    generation["ratio"] = vllm_rate / hf_rate
    runner = runner_seconds_per_step(3 if quick else 8, tokens)
    versions = {name: importlib.metadata.version(name) for name in ("vllm", "transformers", "trl", "torch")}
    load = {"before": load_before, "after": os.getloadavg()[1]}  # 5-minute load averages, 2 cores
    return {"generation": generation, "runner": runner, "versions": versions, "load_average_5min": load}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", type=Path, help="write the result here as JSON")
    args = parser.parse_args()
    result = measure(args.quick)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
