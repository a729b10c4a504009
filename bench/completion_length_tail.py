"""Measures how far the longest completion of a group lies above the mean, on the embedded model (SmolLM2-135M-
Instruct) sampled on this machine's CPU: the calibration behind ``timing.generation.longest_of`` when only a mean
completion length is known.

A decode batch ends when its longest completion does. When a request states only the mean length, the estimate
models lengths as exponential (the maximum-entropy law for a positive length of known mean) censored at the
budget, and takes the expected longest of the batch from it. This script samples groups of completions per prompt
(as GRPO does), and for each group size compares the measured mean longest with that prediction and with the
budget (what the estimate assumed before). No published step-time row is used.

Run: ``python bench/completion_length_tail.py [--prompts 24] [--group 8] [--budget 192]``; prints JSON (a CPU
sampling of minutes, so it is recorded under ``RECORDED`` rather than re-run by ``make bench``, which re-computes the
comparison from the recorded lengths: ``recorded``).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path

RECORDED = Path(__file__).resolve().parent / "results" / "2026-12-06-completion-length-tail"

QUESTIONS = [
    "Explain step by step how to add {a} and {b}, then give the sum.",
    "A shop sells {a} apples in the morning and {b} in the afternoon. How many apples did it sell? Show your work.",
    "Write a short story of a few sentences about a cat who counts to {a}.",
    "What is {a} times {b}? Think it through, then answer.",
    "Describe in your own words why the sky looks blue, and mention the number {a} once.",
    "List some facts about the number {a}.",
    "Tom has {a} marbles and gives away {b}. How many remain? Explain.",
    "Give a recipe idea that uses {a} grams of flour.",
]


def prompts(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [rng.choice(QUESTIONS).format(a=rng.randint(2, 99), b=rng.randint(2, 99)) for _ in range(count)]


def sample_lengths(count: int, group: int, budget: int, seed: int) -> list[list[int]]:
    """Completion lengths in tokens, one list of ``group`` per prompt (temperature 1, as GRPO samples)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from skill.models.sources import embedded_model_dir

    torch.manual_seed(seed)
    directory = embedded_model_dir()
    tokenizer = AutoTokenizer.from_pretrained(directory)
    tokenizer.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(directory).eval()
    groups = []
    for text in prompts(count, seed):
        chat = tokenizer.apply_chat_template(
            [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False
        )
        encoded = tokenizer([chat] * group, return_tensors="pt")
        with torch.no_grad():
            out = model.generate(
                **encoded,
                do_sample=True,
                temperature=1.0,
                top_p=1.0,
                max_new_tokens=budget,
                pad_token_id=tokenizer.pad_token_id or tokenizer.eos_token_id,
            )
        new = out[:, encoded["input_ids"].shape[1] :]
        stop = tokenizer.eos_token_id
        lengths = []
        for row in new.tolist():
            length = next((i + 1 for i, token in enumerate(row) if token == stop), len(row))
            lengths.append(length)
        groups.append(lengths)
    return groups


def compare(groups: list[list[int]], budget: int) -> list[dict[str, float]]:
    """For each batch size n: the measured mean longest of n against the censored-exponential prediction from the
    measured mean, and against the budget. Up to the group size, n completions of one prompt (the first n of each
    group); beyond it, batches pooled across prompts (the lengths shuffled with a fixed seed), as an engine's share
    of a step pools several prompts' groups."""
    from skill.timing.generation import expected_longest

    lengths = [length for group in groups for length in group]
    mean = statistics.fmean(lengths)
    pooled = random.Random(0).sample(lengths, len(lengths))
    rows = []
    for n in sorted({1, 2, 4, len(groups[0]), 16, 32}):
        if n <= len(groups[0]):
            batches = [group[:n] for group in groups]
        else:
            batches = [pooled[i : i + n] for i in range(0, len(pooled) - n + 1, n)]
        measured = statistics.fmean(max(batch) for batch in batches)
        predicted = expected_longest(mean, n, budget)
        rows.append(
            {
                "n": n,
                "batches": len(batches),
                "measured_mean_longest": round(measured, 1),
                "predicted": round(predicted, 1),
                "predicted_over_measured": round(predicted / measured, 3),
                "budget_over_measured": round(budget / measured, 3),
            }
        )
    return rows


def recorded() -> list[dict]:
    """Every recorded sampling, its comparison re-computed from its lengths with today's ``expected_longest``."""
    runs = []
    for path in sorted(RECORDED.glob("*.json")):
        run = json.loads(path.read_text(encoding="utf-8"))
        runs.append({**run, "file": path.name, "by_batch": compare(run["groups"], run["budget"])})
    return runs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prompts", type=int, default=24)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--budget", type=int, default=192)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    start = time.perf_counter()
    groups = sample_lengths(args.prompts, args.group, args.budget, args.seed)
    lengths = [length for group in groups for length in group]
    import torch
    import transformers

    result = {
        "measured_at": time.strftime("%Y-%m-%d %H:%M %Z"),
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
        "seed": args.seed,
        "model": "embedded:SmolLM2-135M-Instruct",
        "prompts": args.prompts,
        "group": args.group,
        "budget": args.budget,
        "mean": round(statistics.fmean(lengths), 1),
        "cut_at_budget": sum(length >= args.budget for length in lengths),
        "completions": len(lengths),
        "by_batch": compare(groups, args.budget),
        "seconds": round(time.perf_counter() - start, 1),
        "groups": groups,
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
