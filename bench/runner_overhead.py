"""Runner overhead: seconds per step of `run_grpo` against a bare GRPOTrainer script, same config, same tiny
model, same rewards, on CPU; interleaved rounds, >= 20 steps each. Target: ratio <= 1.05.

With ``--processes 2`` both sides run the same launch plan (the accelerate engine's files, two gloo processes):
the runner through run_grpo, the bare script by hand as the trainer of the plan's own launch_node.sh.

Both sides time steps the same way: the wall clock at each logged step (a callback that records the time).
The runner's side includes everything it adds: its own process, metrics/completions files, checkpoints.
Run: python bench/runner_overhead.py [--steps N] [--rounds R]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

TARGET_RATIO = 1.05
CONFIG = {
    "use_cpu": True,
    "bf16": False,
    "per_device_train_batch_size": 8,
    "gradient_accumulation_steps": 1,
    "num_generations": 8,
    "max_completion_length": 8,
    "beta": 0.0,
    "logging_steps": 1,
    "learning_rate": 1e-5,
    "report_to": "none",
    "seed": 3407,
    "activation_checkpointing": False,
}
BARE = r"""
import json, sys, time
from datasets import Dataset
from transformers import TrainerCallback
from trl import GRPOConfig, GRPOTrainer
from skill.rewards.registry import build_reward_functions
from skill.rewards.spec import RewardSpec
model, data, config, specs, out = sys.argv[1:6]
times = []
class Clock(TrainerCallback):
    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            times.append(time.time())
rows = [json.loads(line) for line in open(data)]
trainer = GRPOTrainer(model=model, args=GRPOConfig(output_dir=out, save_strategy="no", **json.loads(config)),
                      reward_funcs=build_reward_functions([RewardSpec(**s) for s in json.loads(specs)]),
                      train_dataset=Dataset.from_list(rows), callbacks=[Clock()])
trainer.train()
print("TIMES " + json.dumps(times))
"""


def _per_step(times: list[float]) -> float:
    return (times[-1] - times[0]) / (len(times) - 1)


def blind_labels(completion: str, answer: str) -> dict[str, str]:
    """The bench's own read of one addition sample, before any score: correct when the completion's last number is
    the sum (compared as numbers), well-formed when the completion is just a number. Nothing from skill.rewards."""
    numbers = re.findall(r"-?\d+(?:\.\d+)?", completion.replace(",", ""))
    right = bool(numbers) and float(numbers[-1]) == float(answer)
    bare = re.fullmatch(r"\s*-?\d+\s*", completion) is not None
    return {"correctness": "pass" if right else "fail", "format": "pass" if bare else "fail"}


def passed_inspection(specs) -> None:
    """Inspect ``specs`` on 60 addition samples and record the bench's blind read, which must pass the gate (bench
    setup only; the review is stamped reviewer kind ``program``)."""
    from skill.data import addition_rows
    from skill.inspection.gate import record_review
    from skill.inspection.run import inspect_rewards
    from skill.inspection.schema import InspectionRequest, ReviewRequest, SuppliedSample

    samples = [
        SuppliedSample(
            prompt=r["prompt"],
            completion=[r["answer"], str(int(r["answer"]) + 1), "no idea"][i % 3],
            columns={"answer": r["answer"]},
            group=i // 6,
        )
        for i, r in enumerate(addition_rows(60))
    ]
    report = inspect_rewards(InspectionRequest(rewards=specs, samples=samples))
    labels = {
        s.id: {
            role: label
            for role, label in blind_labels(s.completion, s.columns["answer"]).items()
            if role in report.read_roles
        }
        for s in report.samples
    }
    review = record_review(ReviewRequest(report_id=report.id, reviewer="bench", reviewer_kind="program", labels=labels))
    if review.verdict != "passed":
        raise RuntimeError(f"bench setup: the review did not pass: {review.verdict_reasons}")


def _bare_command(work: Path, recipe, processes: int, arguments: list[str]) -> tuple[list[str], dict[str, str]]:
    """The bare script's command line: one process, or the plan's launch_node.sh with it as the trainer."""
    script = work / "bare_grpo.py"
    script.write_text(BARE)
    if processes == 1:
        return [sys.executable, str(script), *arguments], dict(os.environ)
    from skill.recipe.launching.launch import launch_files, on_cpu_processes, write_launch_files
    from skill.runs.engines import free_port

    hand = work / "hand-launch"
    write_launch_files(launch_files(on_cpu_processes(recipe, processes)), hand)
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    env = {**os.environ, "PATH": path, "MAIN_PROCESS_PORT": str(free_port())}
    return ["bash", str(hand / "launch_node.sh"), str(script), *arguments], env


def prepare(work: Path, steps: int):
    """The benchmark's setup, shared by every runner benchmark: the tiny model, 200 addition prompts, the two
    rewards (with a passed review) and the CPU recipe emitted for them; returns (model, data, specs, recipe)."""
    from skill.data import addition_rows
    from skill.hardware.specs import HardwareSpec
    from skill.models.sources import save_tiny_random_model
    from skill.recipe.emit import RecipeRequest, emit_grpo_config
    from skill.recipe.schema import DatasetSpec, ModelSpec
    from skill.rewards.spec import RewardSpec

    model, data = work / "tiny", work / "addition.jsonl"
    save_tiny_random_model(model)
    data.write_text("".join(json.dumps(r) + "\n" for r in addition_rows(200)))
    specs = [
        RewardSpec(name="format", role="format", weight=0.2, params={"pattern": "number"}),
        RewardSpec(name="exact_match", role="correctness", params={"extract": "last_number"}),
    ]
    passed_inspection(specs)
    overrides = {k: v for k, v in CONFIG.items() if k not in ("use_cpu", "bf16", "report_to")}
    recipe = emit_grpo_config(
        RecipeRequest(
            model=ModelSpec(name=str(model)),
            hardware=HardwareSpec(accelerator="cpu"),
            method="full",
            rewards=specs,
            overrides=overrides,
            max_steps=steps,
            dataset=DatasetSpec(name=str(data), columns=["answer"]),
        )
    )
    return model, data, specs, recipe


def measure(steps: int = 20, rounds: int = 2, processes: int = 1) -> dict[str, float]:
    """Median seconds per step of each side over interleaved rounds, and their ratio. The state root and trackio
    directory it points the environment at are undone afterwards: a caller in the same process (the bench smoke
    test's pytest worker) would otherwise run its later runs in the bench's directories."""
    from unittest.mock import patch

    work = Path(tempfile.mkdtemp(prefix="grpo-bench-"))
    # Both sides report to the recipe's tracker (trackio where installed): the bare script's files stay in the bench's
    # own directory, not in the user's HF_HOME (where trackio writes without TRACKIO_DIR).
    bench_environment = {"GRPO_RLVR_HOME": str(work / "state"), "TRACKIO_DIR": str(work / "trackio")}
    with patch.dict(os.environ, bench_environment):
        return _measure(work, steps, rounds, processes)


def _measure(work: Path, steps: int, rounds: int, processes: int) -> dict[str, float]:
    from skill.runs.jobs import RunRequest, run_grpo, run_status
    from skill.runs.store import read_jsonl

    model, data, specs, recipe = prepare(work, steps)
    bare_config = {**recipe.trl}
    bare, ours = [], []
    for round_index in range(rounds):
        arguments = [str(model), str(data), json.dumps(bare_config), json.dumps([s.model_dump() for s in specs])]
        command, env = _bare_command(work, recipe, processes, [*arguments, str(work / f"bare-{round_index}")])
        out = subprocess.run(command, capture_output=True, text=True, check=True, env=env).stdout
        bare.append(_per_step(json.loads(out.split("TIMES ", 1)[1].splitlines()[0])))  # rank 0 or the first to print
        run_id = f"bench-{processes}p-{round_index}-{os.getpid()}"
        status = run_grpo(RunRequest(recipe=recipe, run_id=run_id, held_out_fraction=0.0, processes=processes))
        while status.state in ("starting", "running"):
            status = run_status(status.run_id, wait_seconds=2)
        if status.state != "succeeded":
            raise RuntimeError(f"runner round failed: {status.reason}")
        ours.append(_per_step([row["time"] for row in read_jsonl(Path(status.paths["metrics.jsonl"]))]))
    return {
        "steps": steps,
        "rounds": rounds,
        "processes": processes,
        "bare_s_per_step": statistics.median(bare),
        "runner_s_per_step": statistics.median(ours),
        "bare_spread_s": max(bare) - min(bare),
        "runner_spread_s": max(ours) - min(ours),
        "ratio": statistics.median(ours) / statistics.median(bare),
        "target_ratio": TARGET_RATIO,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--processes", type=int, default=1)
    args = parser.parse_args()
    for key, value in measure(args.steps, args.rounds, args.processes).items():
        print(f"{key}: {value:.4f}" if isinstance(value, float) else f"{key}: {value}")


if __name__ == "__main__":
    main()
