"""The training process of one run: ``python -m skill.runs.worker RUN_DIR [--resume]``.

It runs in its own OS process (and process group), so a crash never takes the caller down. It
builds the rewards from the registry, the model (a path, the embedded SmolLM2, with PEFT when the
recipe asks), a real ``trl.GRPOConfig`` from the recipe and ``GRPOTrainer``; every logged step goes
to metrics.jsonl and a few sampled completions to completions.jsonl; checkpoints are kept (the last
few), and at the end the reward curve, the final model or adapter (and a merged model with PEFT)
and a model card holding the recipe and its provenance are written. run.json says how it ended.

Under ``accelerate launch`` (the ``accelerate`` engine, ``skill.runs.engines``) every rank trains, but only
rank 0 writes run.json, metrics, completions, the final model, the card and the plot: each file keeps one
writer. accelerate's torchrun starts each rank in a session of its own, out of reach of a signal to the
launcher's process group, so each rank asks the kernel to kill it when its launcher dies
(PR_SET_PDEATHSIG): a SIGKILLed launcher leaves no rank behind.

On-policy by construction: the world a rank builds its GRPOConfig for is the world that was launched
(``WORLD_SIZE``, 1 for a single process), never the recipe's target layout, so TRL's own arithmetic gives
``generation_batch_size = per_device_train_batch_size x world x steps_per_generation`` and one generation
batch feeds exactly the optimizer steps the recipe planned (``steps_per_generation /
gradient_accumulation_steps``, 1 unless the recipe says otherwise).

SIGUSR1 (Slurm's notice before a time limit) saves a checkpoint at the next step (``runs.checkpoint_request``).

Debugging aid: GRPO_RLVR_DUMP_RANK_STATE=DIR makes every rank report itself at the end (``runs.rank_state``).

With a colocated vLLM engine, rank 0 writes vllm_engine.json (the settings vLLM was built with, read back);
on a CPU the weight sync is skill.runs.vllm_cpu's (GRPO_RLVR_VLLM_SYNC_CHECK=1 also verifies every sync). Against
a vLLM server, rank 0 first checks the server serves this run (skill.runs.vllm_server_check).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from skill.inspection.gate import open_gate
from skill.models.sources import resolve_model_path
from skill.recipe.checking.trl_contract import build_grpo_config
from skill.recipe.launching.launch_commands import (
    VLLM_GROUP_PORT_ENV,
    VLLM_PORT_ENV,
    starts_vllm_server,
    uses_vllm_server,
)
from skill.recipe.schema import GRPORecipe
from skill.rewards.registry import build_reward_functions
from skill.runs import checkpoint_request
from skill.runs.held_out import (
    held_out_changes,
    held_out_scores,
    is_evaluation,
    prompt_scores,
    record_held_out_prompts,
    score_evaluation,
    summary_line,
)
from skill.runs.model_card import model_card
from skill.runs.plots import plot_reward_curve
from skill.runs.rank_state import dump_rank_state, rank
from skill.runs.rehearsal import held_out_tally, install_fsdp_on_cpu, install_server_sync_replacement
from skill.runs.store import (
    KEEP_CHECKPOINTS,
    METRICS_HEADER,
    append_jsonl,
    checkpoint_every,
    checkpoint_step,
    keep_steps_up_to,
    latest_checkpoint,
    read_jsonl,
    read_recipe,
    read_record,
    write_record,
)
from skill.runs.tracking import make_alert_callback, start_tracking
from skill.runs.vllm_cpu import install_cpu_weight_sync, write_engine_settings
from skill.runs.vllm_server_check import check_vllm_server
from skill.state import write_atomically

COMPLETIONS_PER_STEP = 4
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def launched_world_size() -> int:
    """The number of training processes actually launched: torchrun's WORLD_SIZE, 1 for a single process.

    >>> launched_world_size() == int(os.environ.get("WORLD_SIZE", "1"))
    True
    """
    return int(os.environ.get("WORLD_SIZE", "1"))


def engine_settings(environ: Mapping[str, str], server: bool) -> dict[str, Any]:
    """GRPOConfig values the engine decided for this attempt: the vLLM server's port and the weight-sync group's it
    picked (which the accelerate engine sets and slurm.sbatch picks on node 0), for a plan that starts its server.

    >>> picked = {"GRPO_RLVR_VLLM_PORT": "40002", "GRPO_RLVR_VLLM_GROUP_PORT": "40003"}
    >>> engine_settings(picked, server=True), engine_settings(picked, server=False)
    ({'vllm_server_port': 40002, 'vllm_group_port': 40003}, {})
    """
    if not server:
        return {}
    named = {"vllm_server_port": VLLM_PORT_ENV, "vllm_group_port": VLLM_GROUP_PORT_ENV}
    return {field: int(environ[variable]) for field, variable in named.items() if environ.get(variable)}


def _die_with_launcher() -> None:
    """Under torchrun (accelerate launch), die when the launcher dies (see the module docstring)."""
    if "TORCHELASTIC_RUN_ID" not in os.environ or not sys.platform.startswith("linux"):
        return
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() == 1:  # torchrun died before the request took effect
        os._exit(1)


def evaluation_line(step: int, logs: dict[str, Any]) -> str:
    """The progress line of one held-out evaluation.

    >>> evaluation_line(5, {"eval_reward": 0.5, "eval_rewards/exact_match/mean": 0.25})
    'held-out eval at step 5: reward=0.500 exact_match=0.250'
    """
    scores = " ".join(
        f"{k.split('/')[1]}={v:.3f}"
        for k, v in logs.items()
        if k.startswith("eval_rewards/") and k.endswith("/mean") and isinstance(v, int | float)
    )
    return f"held-out eval at step {step}: reward={logs.get('eval_reward', float('nan')):.3f} {scores}".rstrip()


def completion_rows(logs_store: dict[str, Any] | None, step: int) -> list[dict[str, Any]]:
    """The step's last completions as TRL keeps them for its own logging (prompt, completion, each reward)."""
    if not logs_store or not logs_store.get("completion"):
        return []
    completions = list(logs_store["completion"])[-COMPLETIONS_PER_STEP:]
    prompts = list(logs_store["prompt"])[-COMPLETIONS_PER_STEP:]
    rewards = {name: list(values)[-COMPLETIONS_PER_STEP:] for name, values in logs_store["rewards"].items()}
    return [
        {
            "step": step,
            "prompt": prompt,
            "completion": completion,
            "rewards": {name: values[index] for name, values in rewards.items() if index < len(values)},
        }
        for index, (prompt, completion) in enumerate(zip(prompts, completions, strict=False))
    ]


def _make_callback(run_dir: Path, max_steps: int, recipe: GRPORecipe, heldout_prompts: int):
    from transformers import TrainerCallback

    generations = recipe.evaluation.generations if recipe.evaluation else 0

    class RunLogger(TrainerCallback):
        """metrics.jsonl, completions.jsonl and one progress line per logged step."""

        def __init__(self) -> None:
            self.trainer: Any = None
            self.started = time.time()
            self.max_steps = max_steps

        def on_train_begin(self, args, state, control, **kwargs):
            """The planned length (from max_steps or the epochs) into the metrics header: run_status reads it."""
            self.max_steps = state.max_steps
            header = run_dir / METRICS_HEADER
            if state.is_world_process_zero and state.max_steps > 0 and header.is_file():
                write_atomically(
                    header, json.dumps({**json.loads(header.read_text()), "max_steps": state.max_steps}, indent=1)
                )

        def log_evaluation(self, step: int, logs: dict[str, Any]) -> None:
            """TRL's held-out evaluation (eval_* keys) as its own row of metrics.jsonl, with each correctness reward's
            score and interval (``held_out``), and one progress line."""
            scores = score_evaluation(step, logs, recipe.rewards, heldout_prompts, generations)
            row = {"step": step, "time": time.time(), **logs, "held_out": [score.model_dump() for score in scores]}
            # every rank scored its share before TRL gathered the means this log holds: their files are complete
            row["held_out_prompts"] = prompt_scores(run_dir, step, heldout_prompts)
            append_jsonl(run_dir / "metrics.jsonl", row)
            print(evaluation_line(step, logs), flush=True)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and is_evaluation(logs) and state.is_world_process_zero:
                self.log_evaluation(state.global_step, logs)
                return
            if not logs or "loss" not in logs or not state.is_world_process_zero:
                return
            row = {"step": state.global_step, "time": time.time(), **logs}
            append_jsonl(run_dir / "metrics.jsonl", row)
            rows = completion_rows(getattr(self.trainer, "_logs", None), state.global_step)
            if rows:
                append_jsonl(run_dir / "completions.jsonl", *rows)
            per_reward = " ".join(
                f"{k.split('/')[1]}={v:.3f}"
                for k, v in logs.items()
                if k.startswith("rewards/") and k.endswith("/mean") and isinstance(v, int | float)
            )
            elapsed = time.time() - self.started
            print(
                f"step {state.global_step}/{self.max_steps} reward={logs.get('reward', float('nan')):.3f} {per_reward} "
                f"({elapsed:.0f} s)",
                flush=True,
            )

    return RunLogger()


def trim_to_checkpoint(run_dir: Path, checkpoint: Path | None) -> str:
    """Make a resume exact: drop the metrics and completions of the steps the resumed run trains again (those
    after the checkpoint; all of them when there is none and training starts over), and say so in run.json and
    the log. Returns the note.

    >>> import tempfile
    >>> from skill.runs.store import RunRecord, append_jsonl
    >>> run = Path(tempfile.mkdtemp())
    >>> write_record(run, RunRecord(run_id="r"))
    >>> append_jsonl(run / "metrics.jsonl", {"step": 1}, {"step": 2})
    >>> note = trim_to_checkpoint(run, None)  # doctest: +ELLIPSIS
    resume: no checkpoint: started over from step 0; the killed attempt's 2 metric row(s) and 0 completion row(s) ...
    >>> read_jsonl(run / "metrics.jsonl"), read_record(run).resume_note == note
    ([], True)
    """
    step = checkpoint_step(checkpoint)
    dropped = {name: keep_steps_up_to(run_dir / name, step) for name in ("metrics.jsonl", "completions.jsonl")}
    gone = f"{dropped['metrics.jsonl']} metric row(s) and {dropped['completions.jsonl']} completion row(s)"
    if checkpoint is None:
        note = f"no checkpoint: started over from step 0; the killed attempt's {gone} were dropped"
    else:
        note = f"resumed from {checkpoint.name} (step {step}); {gone} after it were dropped"
    record = read_record(run_dir)
    record.resumed_from_step, record.resume_note = step, note
    record.checks.append(f"Resume: {note}.")
    write_record(run_dir, record)
    print(f"resume: {note}", flush=True)
    return note


def heldout_sample(run_dir: Path, recipe: GRPORecipe, trl: dict[str, Any], world_size: int) -> list[dict[str, Any]]:
    """The fixed held-out sample the run evaluates on: the first rows of heldout.jsonl (the split is already shuffled
    by the seed), as many as the world size scores each exactly ``generations`` times (``EvaluationPlan.even_split``);
    [] when the recipe plans no evaluation or too little was held out."""
    plan = recipe.evaluation
    if plan is None or not plan.every_steps:
        return []
    rows = read_jsonl(run_dir / "heldout.jsonl")
    kept, _per_batch = plan.even_split(trl, world_size, len(rows))
    return rows[:kept]


def _prepare_vllm(trainer: Any, run_dir: Path, writer: bool) -> None:
    """Record what a colocated vLLM engine was built with; on a CPU, sync weights the way vLLM's CPU backend
    takes them (skill.runs.vllm_cpu; TRL's own sync is left alone on a GPU)."""
    settings = write_engine_settings(trainer, run_dir) if writer else None
    if settings is not None:
        print(f"vLLM colocated engine: {json.dumps(settings, default=str)}", flush=True)
    if install_cpu_weight_sync(trainer, run_dir if writer else None):
        print(
            "vLLM on CPU: weights sync through model_runner.reload_weights (vLLM's CPU backend repacks linear "
            "weights, which TRL's per-parameter load_weights cannot write)",
            flush=True,
        )


def stamp_reward_review(run_dir: Path, recipe: GRPORecipe, writer: bool) -> str:
    """The gate once more, in this training process (fresh imports: the code it is about to train on), and its
    stamp where the run's metrics are read: metrics.header.json beside metrics.jsonl, and the log. The inspection
    the run started on answers while it still opens the gate (another one may have passed since)."""
    gate = open_gate(
        recipe.rewards,
        recipe.trl,
        preferred=read_record(run_dir).inspection_id,
        policy_model=recipe.provenance.policy_samples_of,
    )
    if writer:
        header = {"run_id": run_dir.name, "reward_review": gate.stamp, **gate.model_dump(exclude={"stamp"})}
        write_atomically(run_dir / METRICS_HEADER, json.dumps(header, indent=1))
    print(f"reward review: {gate.stamp}", flush=True)
    return gate.stamp


def train(run_dir: Path, recipe: GRPORecipe, resume: bool) -> None:
    writer = rank() == 0
    tracking = start_tracking(run_dir, recipe.trl, writer)  # before TRL's trainer imports the tracker
    from datasets import Dataset
    from trl import GRPOTrainer

    stamp_reward_review(run_dir, recipe, writer)
    rows = read_jsonl(run_dir / "train.jsonl")
    max_steps = recipe.grpo.max_steps
    kwargs = dict(recipe.trl)
    kwargs.update(
        save_strategy="steps",
        save_total_limit=KEEP_CHECKPOINTS,
        save_steps=checkpoint_every(recipe.grpo),
    )
    kwargs.update(engine_settings(os.environ, starts_vllm_server(recipe)), **tracking)  # a remote server's ports stay
    world_size = launched_world_size()  # on-policy: see the module docstring
    evaluation_rows = heldout_sample(run_dir, recipe, kwargs, world_size)
    if evaluation_rows:  # TRL scores them with the run's rewards every evaluation.every_steps (and before step 1)
        kwargs.update(recipe.evaluation.grpo_kwargs(kwargs, world_size, len(evaluation_rows)))
        # A resume keeps the killed attempt's score before step 1 (a trim never drops step 0): not scored again.
        # Every rank reads the same answer, whenever rank 0 trims.
        if any(is_evaluation(row) and row["step"] == 0 for row in read_jsonl(run_dir / "metrics.jsonl")):
            kwargs["eval_on_start"] = False
    config, _ = build_grpo_config(kwargs, str(run_dir / "checkpoints"), on_target=True, target_world_size=world_size)
    checkpoint = latest_checkpoint(run_dir / "checkpoints") if resume else None
    if resume and writer:
        trim_to_checkpoint(run_dir, checkpoint)
    callback = _make_callback(run_dir, max_steps, recipe, len(evaluation_rows))
    if writer and uses_vllm_server(recipe) and rows:  # before the model loads: a wrong server costs no load
        check_vllm_server(run_dir, recipe, rows[0]["prompt"], kwargs)
    # the dataset's columns: a user reward requiring one the data lacks is refused now, not NaN every step
    rewards = build_reward_functions(recipe.rewards, columns=set(rows[0]) if rows else None)
    record_held_out_prompts(rewards, recipe.rewards, evaluation_rows, run_dir, rank())  # for the paired change
    tally = held_out_tally(run_dir, evaluation_rows)  # a rehearsal counts how often each held-out prompt is scored
    if tally is not None:
        rewards[0] = tally.counting(rewards[0])
    trainer = GRPOTrainer(
        model=resolve_model_path(recipe.model.name),
        reward_funcs=rewards,
        args=config,
        train_dataset=Dataset.from_list(rows),
        eval_dataset=Dataset.from_list(evaluation_rows) if evaluation_rows else None,
        peft_config=recipe.peft.to_peft_config() if recipe.peft else None,
        callbacks=[callback, *filter(None, [make_alert_callback(run_dir, recipe)])],  # alerts read what it logged
    )
    trainer.add_callback(checkpoint_request.make_callback(trainer.accelerator.device))
    callback.trainer = trainer
    _prepare_vllm(trainer, run_dir, writer)
    trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    dump_rank_state(trainer, tally.counts if tally is not None else None)
    final = run_dir / "final"
    trainer.save_model(str(final))  # every rank calls it (sharded engines gather); only rank 0 writes
    if not writer:
        return
    trainer.processing_class.save_pretrained(str(final))
    if recipe.peft is not None:
        save_merged(run_dir, recipe)
        trainer.processing_class.save_pretrained(str(run_dir / "final-merged"))
    metrics = read_jsonl(run_dir / "metrics.jsonl")
    (final / "README.md").write_text(model_card(recipe, read_record(run_dir), metrics))
    plot_reward_curve(run_dir)
    print(summary_line(held_out_scores(metrics), held_out_changes(metrics)), flush=True)


def save_merged(run_dir: Path, recipe: GRPORecipe) -> None:
    """final-merged/: the adapter as saved in final/ (gathered whatever the sharding: under ZeRO-3 or FSDP the
    trainer's own model holds only this rank's shard) merged into a fresh copy of the base, in the precision the
    base trained in (an NF4 base is merged unquantized): a model that loads alone."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    dtype = torch.bfloat16 if recipe.grpo.bf16 else torch.float16 if recipe.grpo.fp16 else torch.float32
    base = AutoModelForCausalLM.from_pretrained(resolve_model_path(recipe.model.name), dtype=dtype)
    merged = PeftModel.from_pretrained(base, str(run_dir / "final")).merge_and_unload()
    merged.save_pretrained(str(run_dir / "final-merged"))


def main(argv: list[str]) -> int:
    _die_with_launcher()
    checkpoint_request.listen()  # Slurm's notice before the time limit: a checkpoint at the next step
    run_dir = Path(argv[0])
    resume = "--resume" in argv[1:]
    writer = rank() == 0  # run.json has one writer; a rank > 0 that fails makes torchrun exit non-zero
    if writer:
        record = read_record(run_dir)
        record.state, record.started_at = "running", record.started_at or time.time()
        write_record(run_dir, record)
    try:
        recipe = read_recipe(run_dir)
        install_server_sync_replacement(run_dir, recipe)  # a rehearsal of a server plan: before TRL opens NCCL
        install_fsdp_on_cpu(run_dir, recipe)  # a rehearsal of an FSDP2 plan: before the Accelerator is built
        train(run_dir, recipe, resume)
    except BaseException as exc:  # record why, then exit non-zero: the job store reads run.json
        traceback.print_exc()
        if not writer:
            return 1
        record = read_record(run_dir)
        if record.state != "cancelled":
            record.state, record.exit_code = "failed", 1
            record.reason = f"{type(exc).__name__}: {exc}"[:2000]
        record.ended_at = time.time()
        write_record(run_dir, record)
        return 1
    if not writer:
        return 0
    record = read_record(run_dir)
    record.state, record.exit_code, record.ended_at = "succeeded", 0, time.time()
    write_record(run_dir, record)
    print("run succeeded", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
