"""The training process of one run: ``python -m skill.runs.worker RUN_DIR [--resume]``.

It runs in its own OS process (and process group), so a crash never takes the caller down. It
builds the rewards from the registry, the model (a path, the embedded SmolLM2, with PEFT when the
recipe asks), a real ``trl.GRPOConfig`` from the recipe and ``GRPOTrainer``; every logged step goes
to metrics.jsonl and a few sampled completions to completions.jsonl; checkpoints are kept (the last
few), and at the end the reward curve, the final model or adapter (and a merged model with PEFT)
and a model card holding the recipe and its provenance are written. run.json says how it ended.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from skill.recipe import GRPORecipe
from skill.runs.store import append_jsonl, read_jsonl, read_record, write_record

KEEP_CHECKPOINTS = 2
MIN_SAVE_STEPS = 5  # a full checkpoint (weights + optimizer) costs seconds: not every step of a short run
COMPLETIONS_PER_STEP = 4


def latest_checkpoint(directory: Path) -> Path | None:
    """The newest checkpoint-N directory holding a trainer state, or None."""
    found = [p for p in directory.glob("checkpoint-*") if (p / "trainer_state.json").is_file()]
    return max(found, key=lambda p: int(p.name.split("-")[1]), default=None)


def _make_callback(run_dir: Path, max_steps: int):
    from transformers import TrainerCallback

    class RunLogger(TrainerCallback):
        """metrics.jsonl, completions.jsonl and one progress line per logged step."""

        def __init__(self) -> None:
            self.trainer: Any = None
            self.started = time.time()

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not logs or "loss" not in logs:
                return
            row = {"step": state.global_step, "time": time.time(), **logs}
            append_jsonl(run_dir / "metrics.jsonl", row)
            logs_store = getattr(self.trainer, "_logs", None)
            if logs_store and logs_store.get("completion"):
                completions = list(logs_store["completion"])[-COMPLETIONS_PER_STEP:]
                prompts = list(logs_store["prompt"])[-COMPLETIONS_PER_STEP:]
                for index, (prompt, completion) in enumerate(zip(prompts, completions, strict=False)):
                    rewards = {
                        name: list(values)[-COMPLETIONS_PER_STEP:][index]
                        for name, values in logs_store["rewards"].items()
                        if len(values) >= COMPLETIONS_PER_STEP
                    }
                    append_jsonl(
                        run_dir / "completions.jsonl",
                        {"step": state.global_step, "prompt": prompt, "completion": completion, "rewards": rewards},
                    )
            per_reward = " ".join(
                f"{k.split('/')[1]}={v:.3f}"
                for k, v in logs.items()
                if k.startswith("rewards/") and k.endswith("/mean") and isinstance(v, int | float)
            )
            elapsed = time.time() - self.started
            print(
                f"step {state.global_step}/{max_steps} reward={logs.get('reward', float('nan')):.3f} {per_reward} "
                f"({elapsed:.0f} s)",
                flush=True,
            )

    return RunLogger()


def model_card(recipe: GRPORecipe, record: Any, metrics: list[dict[str, Any]]) -> str:
    """README.md for the exported model: what it is, how it was trained, and from what checks."""
    first = metrics[: min(10, len(metrics))]
    last = metrics[-min(10, len(metrics)) :]
    lines = [
        f"# {recipe.model.name} trained with GRPO (grpo-rlvr run {record.run_id})",
        "",
        f"Method: {recipe.method}; steps: {metrics[-1]['step'] if metrics else 0}; "
        f"trl {recipe.provenance.trl_version}.",
        f"Inspection: {record.inspection_id} ({record.review}). Route: {recipe.provenance.route_decision}.",
        "",
        "| reward | first-10 mean | last-10 mean |",
        "|---|---|---|",
    ]
    for key in sorted({k for row in metrics for k in row if k.startswith("rewards/") and k.endswith("/mean")}):
        before = [row[key] for row in first if isinstance(row.get(key), int | float)]
        after = [row[key] for row in last if isinstance(row.get(key), int | float)]
        if before and after:
            lines.append(f"| {key.split('/')[1]} | {sum(before) / len(before):.3f} | {sum(after) / len(after):.3f} |")
    lines += ["", "## Recipe", "", "```json", recipe.model_dump_json(indent=1), "```", ""]
    return "\n".join(lines)


def train(run_dir: Path, recipe: GRPORecipe, resume: bool) -> None:
    from datasets import Dataset
    from trl import GRPOTrainer

    from skill.models import resolve_model_path
    from skill.rewards.registry import build_reward_functions
    from skill.runs.plots import plot_reward_curve
    from skill.trl_contract import build_grpo_config

    record = read_record(run_dir)
    rows = read_jsonl(run_dir / "train.jsonl")
    max_steps = recipe.trl.get("max_steps") or -1
    kwargs = dict(recipe.trl)
    kwargs.update(
        save_strategy="steps",
        save_total_limit=KEEP_CHECKPOINTS,
        save_steps=kwargs.get("save_steps") or max(1, (max_steps if max_steps > 0 else 100) // 4),
    )
    config, _ = build_grpo_config(
        kwargs, str(run_dir / "checkpoints"), on_target=True, target_world_size=recipe.launch.training_processes
    )
    checkpoint = latest_checkpoint(run_dir / "checkpoints") if resume else None
    if checkpoint is not None:
        step = int(checkpoint.name.split("-")[1])
        kept = [row for row in read_jsonl(run_dir / "metrics.jsonl") if row.get("step", 0) <= step]
        (run_dir / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in kept))
        record.resumed_from_step = step
        write_record(run_dir, record)
        print(f"resuming from {checkpoint.name}", flush=True)
    callback = _make_callback(run_dir, max_steps)
    trainer = GRPOTrainer(
        model=resolve_model_path(recipe.model.name),
        reward_funcs=build_reward_functions(recipe.rewards),
        args=config,
        train_dataset=Dataset.from_list(rows),
        peft_config=recipe.peft.to_peft_config() if recipe.peft else None,
        callbacks=[callback],
    )
    callback.trainer = trainer
    trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    final = run_dir / "final"
    trainer.save_model(str(final))
    trainer.processing_class.save_pretrained(str(final))
    if recipe.peft is not None:
        merged = trainer.model.merge_and_unload()
        merged.save_pretrained(str(run_dir / "final-merged"))
        trainer.processing_class.save_pretrained(str(run_dir / "final-merged"))
    metrics = read_jsonl(run_dir / "metrics.jsonl")
    (final / "README.md").write_text(model_card(recipe, read_record(run_dir), metrics))
    plot_reward_curve(run_dir)


def main(argv: list[str]) -> int:
    run_dir = Path(argv[0])
    resume = "--resume" in argv[1:]
    record = read_record(run_dir)
    record.state, record.started_at = "running", record.started_at or time.time()
    write_record(run_dir, record)
    try:
        recipe = GRPORecipe.model_validate_json((run_dir / "recipe.json").read_text())
        train(run_dir, recipe, resume)
    except BaseException as exc:  # record why, then exit non-zero: the job store reads run.json
        traceback.print_exc()
        record = read_record(run_dir)
        if record.state != "cancelled":
            record.state, record.exit_code = "failed", 1
            record.reason = f"{type(exc).__name__}: {exc}"[:2000]
        record.ended_at = time.time()
        write_record(run_dir, record)
        return 1
    record = read_record(run_dir)
    record.state, record.exit_code, record.ended_at = "succeeded", 0, time.time()
    write_record(run_dir, record)
    print("run succeeded", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
