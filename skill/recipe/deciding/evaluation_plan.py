"""The recipe's held-out evaluation: when a run scores a fixed sample of its held-out prompts.

TRL's own evaluation loop does the scoring (``eval_strategy="steps"``): it samples
``num_generations_eval`` completions per held-out prompt with the run's generation settings, scores
them with the run's reward functions and logs ``eval_reward``, ``eval_rewards/<name>/mean`` (for a 0/1
correctness reward: pass@1 at the training temperature), ``eval_completions/mean_length`` and the
rest; the worker writes those rows to metrics.jsonl beside the training rows with each correctness
reward's score and interval (skill.runs.held_out), where run_status, the card and the health checks
read them (skill.runs.reward_checks compares training with held-out).

Every run is scored before its first step (``eval_on_start``) and after its last (transformers' Trainer
evaluates a last step off the interval itself). Default (``plan_evaluation``): runs of at least 16 steps
also score every max_steps // 8 steps (fewer points cannot show a held-out peak and fall), on 16 prompts x 2
completions on a CPU (32 completions, two CPU demo steps' worth of generation, no backward pass: about a tenth
of the run)
and 32 x 4 on GPUs.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from skill.grpo_fields import GRPOFields

EVALUATIONS_PER_RUN = 8
MIN_STEPS_FOR_EVALUATION = 16
CPU_SAMPLE = (16, 2)  # (prompts, completions per prompt)
GPU_SAMPLE = (32, 4)
# A CPU evaluates up to this many sequences a batch, whatever training's batch: 160 completions of 32 tokens from the
# embedded 135M model took 24 s at 64 a batch against 35 s at 16 on 2 cores (2026-12-03); RAM is no constraint there.
CPU_EVAL_BATCH = 64


class EvaluationPlan(BaseModel):
    """When and on how much held-out data a run scores itself while it trains.

    >>> EvaluationPlan(every_steps=5, prompts=16, generations=2, reason="r").grpo_kwargs({}, 1)["eval_steps"]
    5
    """

    model_config = ConfigDict(extra="forbid")

    every_steps: int = Field(
        ge=0,
        description="Held-out scoring every this many steps, and before the first and after the last; 0: none.",
    )
    prompts: int = Field(default=16, ge=1, le=4096, description="Held-out prompts in the fixed sample.")
    generations: int = Field(default=2, ge=1, le=64, description="Completions per held-out prompt.")
    reason: str = Field(default="", description="Why this interval and sample size.")

    def even_split(self, trl: dict[str, Any], world_size: int, available: int) -> tuple[int, int]:
        """(prompts scored, prompts per device in an eval batch): the held-out prompts a run of ``world_size``
        trainers scores so that every one is scored exactly ``generations`` times.

        accelerate's eval dataloader (``even_batches``) pads the last global batch with repeated samples, and TRL
        gathers the rewards with ``gather``, not ``gather_for_metrics``: a sample that is not a whole number of global
        batches counts some prompts twice (32 prompts on 7 trainers: 3 of them). And TRL's logged mean is the mean of
        its batches' means (``GRPOTrainer.log``), so a short last batch weighs as much as a full one, one process
        too (20 prompts in batches of 8, 8 and 4: the last 4 count for a third). So the sample is the largest
        multiple of one global batch (``world_size`` x the per-device prompts) within ``prompts`` and ``available``:
        equal batches, none padded. The per-device batch is at most the training generation batch (what training
        already generates at once; evaluation keeps no gradients), or CPU_EVAL_BATCH on a CPU when that is larger;
        among batch sizes that keep as many prompts, the largest. (0, 1): fewer held-out prompts than trainers, no
        evaluation.

        >>> plan = EvaluationPlan(every_steps=5, prompts=32, generations=4)
        >>> plan.even_split({"per_device_train_batch_size": 8, "steps_per_generation": 4}, 7, 100)
        (28, 4)
        >>> plan.even_split({"per_device_train_batch_size": 8}, 1, 100), plan.even_split({}, 15, 10)
        ((32, 2), (0, 1))
        >>> EvaluationPlan(every_steps=5, prompts=20, generations=8).even_split({"use_cpu": True}, 1, 100)
        (20, 5)
        """
        fields = GRPOFields(trl)
        per_device = int(fields.per_device_train_batch_size)
        per_generation = int(fields.steps_per_generation or fields.gradient_accumulation_steps)
        generated = per_device * per_generation
        sequences = max(generated, CPU_EVAL_BATCH) if fields.use_cpu else generated
        prompts, world = min(self.prompts, available), max(1, world_size)
        most = max(1, sequences // self.generations)
        best = (0, 1)
        for per_batch in range(1, most + 1):
            kept = prompts // (world * per_batch) * world * per_batch
            if kept == 0:
                break
            if kept >= best[0]:  # a tie goes to the larger batch: fewer passes
                best = (kept, per_batch)
        return best

    def grpo_kwargs(self, trl: dict[str, Any], world_size: int, available: int | None = None) -> dict[str, Any]:
        """GRPOConfig kwargs that make TRL evaluate on this plan ({} when it is off, or when fewer held-out prompts
        than trainers are ``available``): the per-device eval batch of ``even_split`` (a multiple of the generations,
        as TRL requires of the global eval batch).

        >>> EvaluationPlan(every_steps=5, prompts=16, generations=2).grpo_kwargs(
        ...     {"per_device_train_batch_size": 8, "gradient_accumulation_steps": 2}, 1)["per_device_eval_batch_size"]
        16
        """
        kept, per_batch = self.even_split(trl, world_size, self.prompts if available is None else available)
        if not self.every_steps or not kept:
            return {}
        return {
            "eval_strategy": "steps",
            "eval_steps": self.every_steps,
            "eval_on_start": True,
            "num_generations_eval": self.generations,
            "per_device_eval_batch_size": per_batch * self.generations,
        }


def plan_evaluation(trl: dict[str, Any], accelerator: str) -> EvaluationPlan:
    """The default plan for a recipe's GRPOConfig kwargs on ``accelerator`` ('cpu' or 'gpu').

    >>> plan_evaluation({"max_steps": 40}, "cpu").every_steps
    5
    >>> plan_evaluation({"max_steps": 10}, "cpu").every_steps  # before the first step and after the last
    10
    """
    steps = max(0, int(GRPOFields(trl).max_steps))
    prompts, generations = CPU_SAMPLE if accelerator == "cpu" else GPU_SAMPLE
    if 0 < steps < MIN_STEPS_FOR_EVALUATION:
        return EvaluationPlan(
            every_steps=steps,
            prompts=prompts,
            generations=generations,
            reason=f"{steps} steps are too few for a held-out trend: {prompts} held-out prompts x {generations} "
            "completions are scored before the first step and after the last",
        )
    every = max(1, steps // EVALUATIONS_PER_RUN) if steps else 100
    return EvaluationPlan(
        every_steps=every,
        prompts=prompts,
        generations=generations,
        reason=f"{EVALUATIONS_PER_RUN} held-out points over {steps or 'an open-ended run of'} steps (and one before "
        f"the first step and after the last) show a held-out peak and fall; {prompts} prompts x {generations} "
        f"completions on {accelerator.upper()} keep each evaluation near two steps' generation without a backward "
        "pass",
    )
