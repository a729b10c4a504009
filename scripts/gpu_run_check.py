"""The product on the card: ``run_grpo`` through the project's worker, for a LoRA and a full recipe of a random-init
model of a real architecture, with held-out evaluation, a kill and a resume; its peak memory and seconds per step
beside ``estimate_memory`` and the step-time estimate.

Per method: the recipe emit_grpo_config gives for this device (the GPU nvidia-smi names; ``--device cpu`` a CPU
recipe), with transformers generation (no vLLM on the device), 10 steps, a held-out score before the first step,
at step 5 and after the last, a checkpoint every step. The rewards' gate is opened with ``accept_unread`` (stamped
"reward not reviewed" on the run), never bypassed. The worker is SIGKILLed once it has logged step 4, the run
resumed from its last checkpoint, and waited for (``--tiny``: 6 short steps, killed after 3, scored every 3).
Peak memory is polled while it trains: the worker's device memory from nvidia-smi (what a user sees), or its
resident set on a CPU. Each phase's result is written to
``--output`` as it ends, so a device session cut short keeps what it measured.

Models: Qwen2.5-0.5B's shape with random weights and the carried SmolLM2 tokenizer (``gpu_memory_check``'s), or a
2-layer one with ``--tiny``. Run: python scripts/gpu_run_check.py --tokenizer DIR --work DIR --output FILE
[--device cpu --tiny]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

STEPS, KILL_AT, EVERY = 10, 4, 5
# --tiny (the CPU path CI runs): fewer, shorter steps of the same flow.
TINY_STEPS, TINY_KILL_AT, TINY_EVERY = 6, 3, 3
TINY_OVERRIDES = {"per_device_train_batch_size": 8, "gradient_accumulation_steps": 1, "max_completion_length": 16}
PHASE_TIMEOUT_S = 600


def samples() -> list:
    from skill.data import addition_rows
    from skill.inspection.schema import SuppliedSample

    rows = addition_rows(60)
    answers = [[r["answer"], str(int(r["answer"]) + 1), "no idea"][i % 3] for i, r in enumerate(rows)]
    return [
        SuppliedSample(prompt=r["prompt"], completion=answer, columns={"answer": r["answer"]}, group=i // 6)
        for i, (r, answer) in enumerate(zip(rows, answers, strict=True))
    ]


def open_gate_unread(specs: list) -> str:
    """An inspection of the rewards on 60 addition samples, accepted unread (stamped on everything it trains)."""
    from skill.inspection.gate import record_review
    from skill.inspection.run import inspect_rewards
    from skill.inspection.schema import InspectionRequest, ReviewRequest

    report = inspect_rewards(InspectionRequest(rewards=specs, samples=samples()))
    reason = "the device check measures memory and speed; the rewards are read in the test suite"
    review = ReviewRequest(
        report_id=report.id,
        reviewer="device_check",
        reviewer_kind="program",
        accept_unread=True,
        accept_unread_reason=reason,
    )
    return record_review(review).id


def device_hardware(device: str) -> dict:
    if device == "cpu":
        return {"accelerator": "cpu"}
    name = (
        subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, check=True
        )
        .stdout.splitlines()[0]
        .strip()
    )
    from skill.hardware.specs import lookup_gpu

    if lookup_gpu(name) is None:
        raise SystemExit(f"nvidia-smi names {name!r}, which the GPU table does not know: add it to skill/hardware")
    return {"gpu_model": name}


def peak_poller(pid_of, device: str) -> tuple[threading.Event, list[float]]:
    """Poll the worker's memory until the event is set: nvidia-smi's per-process GiB on a GPU, VmRSS on a CPU."""
    stop, peaks = threading.Event(), [0.0]

    def used() -> float:
        pid = pid_of()
        if pid is None:
            return 0.0
        if device == "cpu":
            try:
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                return 0.0
            return next((int(line.split()[1]) / 2**20 for line in status.splitlines() if line.startswith("VmRSS")), 0.0)
        query = ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"]
        lines = subprocess.run(query, capture_output=True, text=True).stdout.splitlines()
        return sum(float(line.split(",")[1]) / 1024 for line in lines if line.split(",")[0].strip() == str(pid))

    def poll() -> None:
        while not stop.is_set():
            peaks[0] = max(peaks[0], used())
            time.sleep(0.5)

    threading.Thread(target=poll, daemon=True).start()
    return stop, peaks


def wait_for(run_id: str, done, timeout: float = PHASE_TIMEOUT_S):
    from skill.runs.jobs import run_status

    deadline = time.time() + timeout
    status = run_status(run_id)
    while not done(status):
        if time.time() > deadline:
            raise SystemExit(f"run {run_id} did not get there in {timeout:.0f} s: {status.state} at step {status.step}")
        status = run_status(run_id, wait_seconds=2)
    return status


def run_method(method: str, model: Path, data: Path, device: str, specs: list, tiny: bool) -> dict:
    """One recipe through run_grpo: kill after step KILL_AT, resume, finish; measured beside the estimates."""
    from skill.hardware.specs import HardwareSpec
    from skill.memory.estimate import estimate_memory
    from skill.recipe.deciding.evaluation_plan import EvaluationPlan
    from skill.recipe.deciding.memory_request import memory_request
    from skill.recipe.emit import RecipeRequest, emit_grpo_config
    from skill.recipe.schema import DatasetSpec, ModelSpec
    from skill.runs.jobs import RunRequest, run_grpo
    from skill.runs.store import read_record, run_dir

    steps, kill_at, every = (TINY_STEPS, TINY_KILL_AT, TINY_EVERY) if tiny else (STEPS, KILL_AT, EVERY)
    overrides = {"use_vllm": False, "logging_steps": 1, "save_steps": 1, **(TINY_OVERRIDES if tiny else {})}
    recipe = emit_grpo_config(
        RecipeRequest(
            model=ModelSpec(name=str(model)),
            hardware=HardwareSpec(**device_hardware(device)),
            method=method,
            rewards=specs,
            dataset=DatasetSpec(name=str(data), columns=["answer"]),
            max_steps=steps,
            report_to="none",
            overrides=overrides,
            evaluation=EvaluationPlan(every_steps=every, prompts=16, generations=2, reason="the device check"),
        )
    )
    run_id, started = f"device-{method}", time.time()
    run_grpo(RunRequest(recipe=recipe, run_id=run_id))
    stop, peaks = peak_poller(lambda: read_record(run_dir(run_id)).pid, device)
    try:
        killed = wait_for(run_id, lambda s: s.step >= kill_at or s.state not in ("starting", "running"))
        if killed.state != "running":
            raise SystemExit(f"run {run_id} ended before step {kill_at}: {killed.state} ({killed.reason})")
        os.kill(read_record(run_dir(run_id)).pid, signal.SIGKILL)
        failed = wait_for(run_id, lambda s: s.state not in ("starting", "running"), 60)
        run_grpo(RunRequest(resume_run_id=run_id))
        final = wait_for(run_id, lambda s: s.state not in ("starting", "running"))
    finally:
        stop.set()
    estimate = estimate_memory(memory_request(recipe))
    return {
        "method": method,
        "recipe": {"hardware": recipe.hardware.model_dump(), "sharding": recipe.launch.sharding},
        "state": final.state,
        "reason": final.reason,
        "killed_at_step": killed.step,
        "killed_run": {"state": failed.state, "signal": failed.signal},
        "resume": final.resume,
        "steps": final.step,
        "held_out": [score.describe() for score in final.held_out],
        "reward_review": final.reward_review,
        "seconds_per_step": final.seconds_per_step,
        "estimated_seconds_per_step": final.estimated_seconds_per_step,
        "peak_measured_gib": round(peaks[0], 3),
        "peak_measured_as": "nvidia-smi used_memory of the worker" if device == "cuda" else "VmRSS of the worker",
        "peak_estimated_gib": round(estimate.peak_gib, 3),
        "wall_s": round(time.time() - started, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tokenizer", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--tiny", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from gpu_memory_check import build_model

    from skill.data import addition_rows
    from skill.rewards.spec import RewardSpec

    os.environ["GRPO_RLVR_HOME"] = str(args.work / "state")
    model, data = args.work / "run-model", args.work / "addition.jsonl"
    build_model(model, args.tokenizer, args.tiny)
    data.write_text("".join(json.dumps(row) + "\n" for row in addition_rows(200)))
    specs = [
        RewardSpec(name="format", role="format", weight=0.2, params={"pattern": "number"}),
        RewardSpec(name="exact_match", role="correctness", params={"extract": "last_number"}),
    ]
    result = {"device": args.device, "tiny": args.tiny, "inspection": open_gate_unread(specs), "phases": []}
    for method in ("lora", "full"):
        result["phases"].append(run_method(method, model, data, args.device, specs, args.tiny))
        args.output.write_text(json.dumps(result, indent=1))  # each phase kept as it ends
        phase = result["phases"][-1]
        print(
            f"{method}: {phase['state']} {phase['steps']} steps, killed at {phase['killed_at_step']}, "
            f"{phase['seconds_per_step'] or 0:.2f} s/step (estimated {phase['estimated_seconds_per_step']}), "
            f"peak {phase['peak_measured_gib']} GiB (estimated {phase['peak_estimated_gib']})",
            flush=True,
        )


if __name__ == "__main__":
    main()
