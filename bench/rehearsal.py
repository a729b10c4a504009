"""Rehearsal wall time: ``run_grpo(rehearse=True)`` of GPU plans on this machine, submit to a finished run.

- The 8-rank plan: 8 x H100, Qwen2.5-7B-Instruct, full fine-tune, ZeRO-3 with a vLLM server on GPU 0 (7 trainers
  under DeepSpeed's CPU accelerator, the real ``trl vllm-serve``), in the target environment (vLLM's CPU build,
  DeepSpeed): this script runs itself there with ``--plan eight-gpus``.
- The 2-node plan: 2 nodes x 4 H100, Qwen2.5-1.5B-Instruct, full fine-tune, DDP without vLLM (8 trainers, 4 a
  node), on the two-node CPU cluster of ``scripts/slurm_cluster.py``.

Each is the recipe emit_grpo_config gives for that hardware, on 80 addition prompts; the figure is the wall clock from
run_grpo to the run's end (2 steps, held-out evaluation before and after, checkpoints, the final model). Run:
python bench/rehearsal.py [--plan eight-gpus|two-nodes] [--json FILE]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_PYTHON = ROOT / ".venv-target" / "bin" / "python"


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rehearse(model: str, gpus: int, nodes: int, overrides: dict, slurm=None) -> dict:
    """Emit the recipe for the hardware, rehearse it, and time it; the report's figures with the wall time."""
    from skill.data import addition_rows
    from skill.hardware.specs import HardwareSpec
    from skill.recipe.emit import RecipeRequest, emit_grpo_config
    from skill.recipe.schema import DatasetSpec, ModelSpec
    from skill.rewards.spec import RewardSpec
    from skill.runs.engine_choice import ThisMachine
    from skill.runs.jobs import RunRequest, run_grpo, run_status

    work = Path(tempfile.mkdtemp(prefix="grpo-bench-rehearsal-"))
    os.environ["GRPO_RLVR_HOME"] = str(work / "state")
    data = work / "addition.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in addition_rows(80)))
    specs = [
        RewardSpec(name="format", role="format", weight=0.2, params={"pattern": "number"}),
        RewardSpec(name="exact_match", role="correctness", params={"extract": "last_number"}),
    ]
    _load(ROOT / "bench" / "runner_overhead.py").passed_inspection(specs)
    recipe = emit_grpo_config(
        RecipeRequest(
            model=ModelSpec(name=model),
            hardware=HardwareSpec(gpu_model="H100", gpus_per_node=gpus, nodes=nodes),
            method="full",
            rewards=specs,
            dataset=DatasetSpec(name=str(data), columns=["answer"]),
            overrides=overrides,
            report_to="none",
        )
    )
    started = time.time()
    status = run_grpo(RunRequest(recipe=recipe, run_id="bench-rehearsal", rehearse=True, engine=slurm or ThisMachine()))
    status = run_status(status.run_id, wait_seconds=1800)
    if status.state != "succeeded":
        raise RuntimeError(f"the rehearsal failed: {status.reason}")
    report = status.rehearsal
    return {
        "seconds": time.time() - started,
        "plan": report.plan,
        "ranks": len(report.ranks),
        "in_sync": report.ranks_in_sync,
        "substitutions": [item.what for item in report.substitutions],
    }


def eight_gpus() -> dict:
    return rehearse("Qwen/Qwen2.5-7B-Instruct", 8, 1, {})


def two_nodes() -> dict:
    from skill.recipe.launching.slurm_script import SlurmSettings

    cluster = _load(ROOT / "scripts" / "slurm_cluster.py")
    overrides = {"use_vllm": False, "per_device_train_batch_size": 2, "gradient_accumulation_steps": 1}
    with cluster.slurm_cluster() as env:
        os.environ.update(env)
        # the test cluster's nodes have one CPU each: the plan's 4 ranks a node share it
        return rehearse("Qwen/Qwen2.5-1.5B-Instruct", 4, 2, overrides, SlurmSettings(cpus_per_task=1))


def measure() -> dict:
    """Both plans: the 8-rank one in the target environment (a subprocess), the 2-node one here."""
    if not TARGET_PYTHON.exists():
        raise RuntimeError("no .venv-target (vLLM's CPU build, DeepSpeed): build it with `make target-env`")
    output = Path(tempfile.mkdtemp(prefix="grpo-bench-rehearsal-")) / "eight.json"
    env = {key: value for key, value in os.environ.items() if key != "GRPO_RLVR_HOME"}
    command = [str(TARGET_PYTHON), str(Path(__file__)), "--plan", "eight-gpus", "--json", str(output)]
    subprocess.run(command, check=True, env=env, timeout=3600, cwd=ROOT)
    return {"eight_gpus": json.loads(output.read_text()), "two_nodes": two_nodes()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--plan", choices=["eight-gpus", "two-nodes"])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    result = {"eight-gpus": eight_gpus, "two-nodes": two_nodes}[args.plan]() if args.plan else measure()
    text = json.dumps(result, indent=1)
    args.json.write_text(text) if args.json else print(text)


if __name__ == "__main__":
    main()
