"""The slurm engine against a hand submission, on the two-node CPU cluster of ``scripts/slurm_cluster.py``.

Both sides run the same plan (2 CPU ranks, one per node, gloo) from the same files: run_grpo writes slurm.sbatch,
launch_node.sh and the accelerate config into the run directory and submits it with the worker as the trainer; by
hand, the plan's own files are submitted with ``sbatch slurm.sbatch bare_grpo.py ...`` (the bare GRPOTrainer
script of ``runner_overhead``). Measured: submit to first optimizer step (the wall clock of the first logged
step), and seconds per step after it. Run: python bench/slurm_submit.py [--steps N]
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


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _hand(work: Path, recipe, settings, arguments: list[str]) -> tuple[float, list[float]]:
    """sbatch the plan's files by hand with the bare script as the trainer; (submit time, step times)."""
    from skill.recipe.launching.launch import launch_files, on_cpu_processes, write_files
    from skill.recipe.launching.slurm_script import slurm_script

    laid_out = on_cpu_processes(recipe, 2, nodes=2)
    hand = work / "hand"
    files = dict(launch_files(laid_out).files)
    files["slurm.sbatch"] = slurm_script(laid_out, settings)
    write_files(files, hand)
    (hand / "bare_grpo.py").write_text(_load(ROOT / "bench" / "runner_overhead.py").BARE)
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    submitted = time.time()
    done = subprocess.run(
        ["sbatch", "--parsable", "--output=hand.out", "slurm.sbatch", "bare_grpo.py", *arguments],
        cwd=hand,
        env={**os.environ, "PATH": path},
        capture_output=True,
        text=True,
        check=True,
    )
    job = done.stdout.strip()
    while subprocess.run(["squeue", "-h", "-j", job], capture_output=True, text=True).stdout.strip():
        time.sleep(1)
    output = (hand / "hand.out").read_text()
    if "TIMES " not in output:
        raise RuntimeError(f"the hand-submitted job printed no step times: {output[-2000:]}")
    return submitted, json.loads(output.split("TIMES ", 1)[1].splitlines()[0])


def measure(steps: int = 10) -> dict[str, float]:
    cluster = _load(ROOT / "scripts" / "slurm_cluster.py")
    overhead = _load(ROOT / "bench" / "runner_overhead.py")
    work = Path(tempfile.mkdtemp(prefix="grpo-bench-slurm-"))
    os.environ["GRPO_RLVR_HOME"] = str(work / "state")
    from skill.recipe.launching.slurm_script import SlurmSettings
    from skill.runs.jobs import RunRequest, run_grpo, run_status
    from skill.runs.store import read_jsonl

    model, data, specs, recipe = overhead.prepare(work, steps)
    settings = SlurmSettings()
    with cluster.slurm_cluster() as env:
        os.environ.update(env)
        arguments = [str(model), str(data), json.dumps(recipe.trl), json.dumps([s.model_dump() for s in specs])]
        hand_submitted, hand_times = _hand(work, recipe, settings, [*arguments, str(work / "bare-out")])
        submitted = time.time()
        request = RunRequest(
            recipe=recipe, run_id="bench-slurm", held_out_fraction=0.0, processes=2, nodes=2, engine=settings
        )
        status = run_grpo(request)
        while status.state in ("starting", "running"):
            status = run_status(status.run_id, wait_seconds=2)
        if status.state != "succeeded":
            raise RuntimeError(f"the slurm engine's run failed: {status.reason}")
        times = [row["time"] for row in read_jsonl(Path(status.paths["metrics.jsonl"]))]
    ours_first, hand_first = times[0] - submitted, hand_times[0] - hand_submitted
    ours_step = (times[-1] - times[0]) / (len(times) - 1)
    hand_step = (hand_times[-1] - hand_times[0]) / (len(hand_times) - 1)
    return {
        "steps": steps,
        "runner_first_step_s": ours_first,
        "hand_first_step_s": hand_first,
        "first_step_ratio": ours_first / hand_first,
        "runner_s_per_step": ours_step,
        "hand_s_per_step": hand_step,
        "step_ratio": ours_step / hand_step,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    for key, value in measure(args.steps).items():
        print(f"{key}: {value:.4f}" if isinstance(value, float) else f"{key}: {value}")


if __name__ == "__main__":
    main()
