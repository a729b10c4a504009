"""The seed recipe: the reference GRPO values every emitted recipe starts from, each with its reason.

Owns the values only; ``emit`` decides when hardware, method, variants or overrides change them.
Imports nothing from the project.
"""

from __future__ import annotations

from typing import Any

GROUP_SIZE_FLOOR = 8

# The seed recipe: every value the emitter relies on, with the reason it has that value. TRL's own
# defaults differ (beta 0.0, lr 1e-6, loss_type "dapo", bf16 True, gradient_checkpointing True), so
# nothing is left to them.
SEED: dict[str, tuple[Any, str]] = {
    "num_generations": (8, "group size floor: the group-relative baseline is too noisy with fewer samples"),
    "learning_rate": (5e-7, "seed recipe: small steps keep the policy near what the reward was inspected on"),
    "beta": (0.01, "seed recipe: a light KL anchor to the reference model"),
    "per_device_train_batch_size": (8, "seed recipe: one group of 8 completions per device step"),
    "gradient_accumulation_steps": (4, "seed recipe: 4 groups per optimizer step; also sets steps_per_generation"),
    "logging_steps": (10, "seed recipe: log every 10 steps"),
    "seed": (3407, "seed recipe: fixed seed for reproducible sampling and init"),
    "loss_type": ("dapo", "token-level normalisation (TRL 1.16 default, stated): no per-sequence length bias"),
    "scale_rewards": ("group", "standard GRPO advantage: (r - group mean) / group std"),
    "importance_sampling_level": ("token", "standard GRPO token-level ratios"),
    "epsilon": (0.2, "standard PPO/GRPO clip range"),
    "num_iterations": (1, "one optimizer pass per generation batch: on-policy, no ratio drift"),
    "temperature": (1.0, "sample at the model's own distribution so groups have varied outcomes"),
    "top_p": (1.0, "no nucleus truncation: keep the full distribution for exploration"),
    "max_completion_length": (256, "room for short reasoning plus an answer; raise for long chains of thought"),
    "mask_truncated_completions": (False, "truncated completions still count; the overlong variant changes this"),
    "multi_objective_aggregation": ("sum_then_normalize", "weighted sum of rewards, then group normalisation"),
    "lr_scheduler_type": ("constant_with_warmup", "RL rewards are non-stationary; no decay schedule to tune"),
    "warmup_steps": (0.03, "3% warm-up (a float below 1 is a ratio) avoids a large first step"),
    "max_grad_norm": (1.0, "clip gradient norm at 1.0 against reward spikes"),
    "optim": ("adamw_torch", "AdamW with fp32 states"),
    "weight_decay": (0.0, "no weight decay: RL updates are small and regularised by the KL term"),
    "num_train_epochs": (1, "one pass over the prompts unless max_steps says otherwise"),
    "report_to": ("none", "no external tracker; metrics are logged by the trainer and the runner"),
    "log_completions": (False, "the runner samples completions itself"),
    "disable_dropout": (True, "dropout makes policy and reference log-probs disagree on the same tokens"),
}
