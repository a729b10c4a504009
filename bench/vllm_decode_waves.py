"""Counts the decode iterations a real vLLM engine runs when its KV cache holds fewer sequences than it is sent, and
compares them with the step-time estimate's waves (``timing.generation.engine_concurrency``): the calibration of
``constants.KV_HELD_SHARE_OF_COMPLETION`` on this project's own measurement, no published row.

Runs under the target environment (.venv-target: vLLM's CPU build). The embedded SmolLM2-135M decodes ``sequences``
completions of exactly ``tokens`` tokens (eos ignored), once with the KV cache vLLM sizes itself and once with it
cut to ``blocks`` blocks (``num_gpu_blocks_override``); vLLM's own counters give the engine iterations (the
``vllm:iteration_tokens_total`` histogram's count) and preemptions. The estimate's iterations for the same share:
the longest completion plus, per wave beyond the first, a mean completion, with the engine holding KV cache tokens
/ (prompt + 0.5-1 x completion) sequences. Iterations, not seconds: a CPU's decode time is not a GPU's.
Run: .venv-target/bin/python bench/vllm_decode_waves.py [--sequences 32] [--tokens 192] [--blocks 24]; prints JSON
(minutes of CPU decoding under vLLM's CPU build, so it is recorded under ``RECORDED``; ``recorded`` re-computes the
prediction from each recorded run with today's estimate).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

RECORDED = Path(__file__).resolve().parent / "results" / "2026-12-06-vllm-decode-waves"
SIDE = r"""
import json, sys
model, sequences, tokens, blocks = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
from vllm import LLM, SamplingParams
options = dict(model=model, max_model_len=512, seed=0, disable_log_stats=False, gpu_memory_utilization=0.15)
if blocks:
    options["num_gpu_blocks_override"] = blocks
llm = LLM(**options)
prompt = "Count slowly from one to one hundred, one number per line."
tokenizer = llm.get_tokenizer()
text = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True)
params = SamplingParams(n=1, max_tokens=tokens, ignore_eos=True, temperature=1.0, seed=0)
outputs = llm.generate([text] * sequences, params, use_tqdm=False)
counts = {}
for metric in llm.get_metrics():
    if metric.name == "vllm:iteration_tokens_total":
        counts["iterations"] = metric.count
    if metric.name == "vllm:num_preemptions":
        counts["preemptions"] = metric.value
config = llm.llm_engine.vllm_config.cache_config
counts |= {"block_size": config.block_size, "blocks": config.num_gpu_blocks,
           "prompt_tokens": len(outputs[0].prompt_token_ids),
           "generated": sum(len(o.outputs[0].token_ids) for o in outputs)}
print("RESULT " + json.dumps(counts))
"""


def engine_run(model: Path, sequences: int, tokens: int, blocks: int) -> dict:
    """One vLLM engine in a fresh process: its iteration and preemption counters."""
    command = [sys.executable, "-c", SIDE, str(model), str(sequences), str(tokens), str(blocks)]
    out = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0 or "RESULT " not in out.stdout:
        raise RuntimeError(f"vLLM run failed: {out.stderr[-3000:]}")
    return json.loads(out.stdout.split("RESULT ", 1)[1].splitlines()[0])


def predicted_iterations(cut: dict, sequences: int, tokens: int) -> dict[str, float]:
    """The estimate's decode iterations for one engine holding ``cut``'s KV cache, at both ends of its span."""
    from skill.hardware.specs import HardwareSpec
    from skill.models.shapes import SHAPES
    from skill.timing.generation import engine_concurrency
    from skill.timing.schema import StepTimeRequest

    request = StepTimeRequest(
        shape=SHAPES["smollm2-135m"].shape,
        hardware=HardwareSpec(gpu_model="H100"),
        completions_per_step=sequences,
        prompt_tokens=cut["prompt_tokens"],
        max_completion_length=tokens,
        completion_tokens=[tokens] * sequences,
        vllm_kv_cache_tokens=cut["blocks"] * cut["block_size"],
    )
    ends = {}
    for end in ("fast", "slow"):
        held = engine_concurrency(request, sequences, end)
        ends[end] = {"held": held, "iterations": tokens + (sequences / held - 1) * tokens}
    return ends


def measure(sequences: int, tokens: int, blocks: int) -> dict:
    from skill.models.sources import embedded_model_dir

    model = embedded_model_dir()
    started = time.perf_counter()
    ample = engine_run(model, sequences, tokens, 0)
    cut = engine_run(model, sequences, tokens, blocks)
    ends = predicted_iterations(cut, sequences, tokens)
    return {
        "measured_at": time.strftime("%Y-%m-%d %H:%M %Z"),
        "vllm": __import__("importlib.metadata").metadata.version("vllm"),
        "sequences": sequences,
        "tokens": tokens,
        "ample": ample,
        "cut": cut,
        "predicted": ends,
        "measured_over_predicted": {
            end: round(cut["iterations"] / value["iterations"], 3) for end, value in ends.items()
        },
        "seconds": round(time.perf_counter() - started, 1),
    }


def recorded() -> list[dict]:
    """Every recorded run, its prediction re-computed from what the engine held with today's estimate."""
    runs = []
    for path in sorted(RECORDED.glob("*.json")):
        run = json.loads(path.read_text(encoding="utf-8"))
        ends = predicted_iterations(run["cut"], run["sequences"], run["tokens"])
        runs.append({**run, "file": path.name, "predicted": ends})
    return runs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sequences", type=int, default=32)
    parser.add_argument("--tokens", type=int, default=192)
    parser.add_argument("--blocks", type=int, default=24)
    args = parser.parse_args()
    print(json.dumps(measure(args.sequences, args.tokens, args.blocks), indent=1))


if __name__ == "__main__":
    main()
