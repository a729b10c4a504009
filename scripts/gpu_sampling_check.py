"""Sampling on the device: route_check's transformers engine on the model gpu_memory_check.py built.

Prints and writes which engine ``auto`` chose, the device and dtype it sampled in (a GPU: bf16), and the
throughput of 8 addition prompts x 8 completions x 64 tokens, after one warm-up call. On a CPU (the tiny test of
tests/target/test_device_check.py) the same flow runs in the weights' dtype.
Run: PYTHONPATH="$PWD" python scripts/gpu_sampling_check.py --model DIR --output FILE
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, required=True, help="a saved model directory (with its tokenizer)")
    parser.add_argument("--output", type=Path, required=True, help="JSON results file")
    args = parser.parse_args()

    from skill.data import addition_rows
    from skill.sampling.engines import chosen_engine, sample_completions
    from skill.sampling.schema import SamplingEngine, SamplingSettings

    prompts = [row["prompt"] for row in addition_rows(8)]
    settings = SamplingSettings(n=8, max_new_tokens=64, temperature=1.0)
    sample_completions(str(args.model), prompts[:1], settings.model_copy(update={"n": 2}))  # load and warm up
    started = time.perf_counter()
    sampled = sample_completions(str(args.model), prompts, settings)
    seconds = time.perf_counter() - started
    tokens = sum(sum(group.token_counts) for group in sampled.groups)
    result = {
        "auto_engine": chosen_engine(SamplingEngine()),
        "sampled_with": sampled.sampled_with.model_dump(),
        "completions": sum(len(group.completions) for group in sampled.groups),
        "tokens": tokens,
        "seconds": round(seconds, 3),
        "tokens_per_s": round(tokens / seconds, 1),
    }
    used = sampled.sampled_with
    print(
        f"sampling: {result['auto_engine']} chosen; {used.engine} {used.version} on {used.device} in {used.dtype}: "
        f"{result['completions']} completions, {tokens} tokens in {seconds:.2f} s ({result['tokens_per_s']} tok/s)",
        flush=True,
    )
    args.output.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
