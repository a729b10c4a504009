"""Every GRPOConfig field decided: set by the recipe (with why), or left to TRL's default (with why).

``seed_recipe.py`` holds the values; this table holds the decision for every field TRL 1.16's ``GRPOConfig`` adds over
``TrainingArguments`` (trl/trainer/grpo_config.py), plus the ``TrainingArguments`` fields that change a GRPO run
(precision, checkpointing, logging, seed, schedule). A new TRL release that adds a field fails
``undecided_fields()`` (tests/test_field_decisions.py), so what it added is read before a recipe ships it; one
reason per field, never one text shared by several (``shared_reasons()``), so each decision is argued on its own.
Imports nothing from the project.
"""

from __future__ import annotations

import dataclasses

# Fields the recipe writes (the seed, emit's hardware / method / task / vLLM decisions, the evaluation plan, or the
# runner at run time), each with why it is set rather than left to TRL.
SET: dict[str, str] = {
    # the model and reference model
    "model_init_kwargs": "load dtype per method (fp32 master weights for a full fine-tune, half base for LoRA, NF4 "
    "for QLoRA): skill.recipe.precision",
    "disable_dropout": "policy and reference log-probs must agree on identical tokens; TRL's default False keeps "
    "dropout noise in the ratio",
    # data and generation
    "num_generations": "group size floor 8 (seed): fewer samples make the group baseline too noisy",
    "max_completion_length": "sized from the task's measured completions (skill.recipe.completion_budget)",
    "temperature": "1.0, stated: groups need varied outcomes sampled from the model's own distribution",
    "top_p": "1.0, stated: no nucleus truncation, so exploration keeps the whole distribution",
    "generation_batch_size": "derived by TRL from batch x processes x steps_per_generation; group arithmetic checks "
    "it divides by num_generations on the target's world size (skill.recipe.group_arithmetic)",
    "use_vllm": "hardware: vLLM on GPUs (several times faster sampling), transformers on CPU and for QLoRA",
    "vllm_mode": "hardware: colocate on one GPU, a separate `trl vllm-serve` on several",
    "vllm_gpu_memory_utilization": "colocated vLLM's share of the one GPU: 0.3, leaving 70% to training",
    "vllm_max_model_length": "longest prompt + completion budget: vLLM otherwise reserves KV for the full context",
    "vllm_tensor_parallel_size": "colocate only: the smallest power of two whose weight shard fits vLLM's share "
    "(skill.recipe.vllm_decisions); a server's size comes from the launch planner",
    "vllm_enable_sleep_mode": "colocate only: on when the estimate does not fit awake and fits asleep, with its "
    "per-step cost (skill.recipe.vllm_decisions)",
    "vllm_importance_sampling_correction": "vLLM path: vLLM's bf16 sampler and the fp32/autocast trainer disagree "
    "on log-probs; the correction reweights that gap (skill.recipe.vllm_decisions)",
    "vllm_importance_sampling_mode": "vLLM path: token_truncate for every loss, TRL's sequence_mask drops long "
    "answers whole (skill.recipe.vllm_decisions)",
    "vllm_importance_sampling_clip_max": "vLLM path: cap 2.0 for truncated ratios (TIS), 3.0 (TRL's) where a "
    "caller picks a mask mode",
    "vllm_server_port": "run_grpo picks a free port per run (skill.runs.worker.engine_settings)",
    # the objective
    "beta": "KL anchor 0.01 on GPU (with its memory price in a full fine-tune), 0 on CPU short runs",
    "num_iterations": "1: on-policy, one optimizer pass per generation batch, no ratio drift",
    "epsilon": "0.2, the PPO/GRPO clip range, stated",
    "epsilon_high": "variants only (DAPO 0.28, GSPO 4e-4, CISPO 5.0); symmetric clip otherwise",
    "importance_sampling_level": "token (stated); sequence through the GSPO and LUSPO variants",
    "reward_weights": "one weight per reward spec, in order",
    "multi_objective_aggregation": "weighted sum then group normalisation; normalize_then_sum through its variant",
    "scale_rewards": "group std scaling (stated); none through the Dr. GRPO variant",
    "loss_type": "dapo (TRL's default, stated); every other TRL 1.16 loss through its variant",
    "mask_truncated_completions": "False: truncated answers still count; the overlong and DAPO variants mask them",
    "use_bias_correction_kl": "True, stated: multiplies the KL by the ratio so its gradient is the unbiased "
    "reverse-KL one when beta > 0 (DeepSeek-V3.2, arXiv:2512.02556)",
    "log_completions": "False: the runner samples and stores completions itself",
    # tracking (skill.recipe.tracking; the runner's side: skill.runs.tracking)
    "report_to": "the request's tracker; by default trackio where it is installed (local, free, takes the health "
    "warnings as alerts), else none: metrics.jsonl is always written",
    "trackio_space_id": "None, stated with trackio: a Space id deploys a Hub dashboard, public by default; only on "
    "the caller's request",
    "project": "runner: the run's id, so each run is its own trackio project (transformers' default 'huggingface' "
    "would pool every run)",
    "run_name": "runner: the run's id, the name trackio and W&B show the run under",
    # TrainingArguments fields that change a GRPO run
    "learning_rate": "5e-7 seed (x10 for adapters, 1e-5 on CPU short runs): small steps near the inspected reward",
    "per_device_train_batch_size": "one group of 8 completions per device step",
    "gradient_accumulation_steps": "4 groups per optimizer step (2 on CPU); also TRL's steps_per_generation",
    "lr_scheduler_type": "constant with warm-up: rewards are non-stationary, no decay schedule to tune",
    "warmup_steps": "3% warm-up ratio against a large first step (none on CPU short runs)",
    "max_grad_norm": "clip at 1.0 against reward spikes",
    "optim": "adamw_torch with fp32 states; adamw_8bit only as a memory remedy",
    "weight_decay": "0: updates are small and the KL term regularises",
    "num_train_epochs": "one pass over the prompts unless max_steps says otherwise",
    "max_steps": "the requested run length, when sent",
    "seed": "3407: reproducible sampling and initialisation",
    "logging_steps": "every 10 steps on GPU, every step on CPU so short runs have a curve",
    "bf16": "bf16 autocast on Ampere or newer GPUs; off on CPU (skill.recipe.precision)",
    "fp16": "fp16 autocast only on GPUs without bf16",
    "use_cpu": "the target's device, so a CPU recipe never looks for CUDA",
    "gradient_checkpointing": "recompute activations on GPUs and big CPU models (named activation_checkpointing "
    "from transformers 5.23)",
    "gradient_checkpointing_kwargs": "reentrant checkpointing for PEFT under ZeRO-3, added by the launch plan",
    "save_strategy": "runner: checkpoints by steps, so a killed run resumes",
    "save_steps": "runner: a few checkpoints per run, at least MIN_STEPS_PER_CHECKPOINT apart",
    "save_total_limit": "runner: keeps the last KEEP_CHECKPOINTS checkpoints, bounding disk use",
    "eval_strategy": "held-out evaluation by steps when the evaluation plan has one",
    "eval_steps": "the evaluation plan's interval, from run length and cost",
    "eval_on_start": "the base model's held-out score before step 1, the baseline every later score compares to",
    "per_device_eval_batch_size": "whole evaluation groups per process (evaluation plan)",
    "num_generations_eval": "fewer samples per held-out prompt than training, sized by the evaluation plan",
}

# Fields left to TRL's (or transformers') default, each with why the default is right for these recipes.
LEFT: dict[str, str] = {
    "trust_remote_code": "False: remote model code is not run; architectures transformers ships need none",
    "router_aux_loss_coef": "None: an MoE model's own config coefficient; TRL refuses a value on dense models",
    "cast_lm_head_to_fp32": "False: the head's matmul stays bf16 under autocast (TRL's chunked log-prob takes the "
    "softmax in float32); ScaleRL's fp32 head narrows the vLLM/trainer log-prob gap for an fp32 head copy and "
    "matmul, a gap the recipe's importance-sampling correction already reweights",
    "remove_unused_columns": "False (TRL's GRPO default): rewards read the answer columns",
    "ds3_gather_for_generation": "True: gathering ZeRO-3 weights for generation is required by vLLM; False is a "
    "memory remedy (generate_layer_by_layer)",
    "shuffle_dataset": "True: prompts in random order each epoch",
    "pad_to_multiple_of": "'auto': pads only on Neuron devices, which compile per shape",
    "steps_per_generation": "None: TRL derives it from gradient_accumulation_steps, one generation per step",
    "top_k": "0: no top-k truncation, matching top_p 1.0",
    "min_p": "None: no min-p truncation of the sampling distribution",
    "generation_kwargs": "None: the sampling fields above say everything the recipe decides",
    "chat_template_kwargs": "None: the dataset spec renders prompts; a model switch such as Qwen3's "
    "enable_thinking is the caller's override",
    "repetition_penalty": "1.0: a penalty changes the distribution the ratios are computed under",
    "cache_implementation": "None: transformers' default KV cache for non-vLLM generation",
    "vllm_model_impl": "'vllm': vLLM's own kernels, faster than the transformers backend",
    "vllm_structured_outputs_regex": "None: constrained decoding would hide format errors the rewards must see",
    "vllm_server_base_url": "None: the recipe's server runs on node 0 where rank 0, the only client, runs; a "
    "remote server's URL is the caller's override, checked by emit",
    "vllm_server_host": "'0.0.0.0': TRL's client on rank 0 reaches the server started on its own node",
    "vllm_server_timeout": "240 s: covers engine start on GPUs; the node script waits for /health before training",
    "vllm_group_port": "51216: the weight-sync group port, changed only when occupied",
    "vllm_importance_sampling_clip_min": "None: small sampling ratios are kept (truncate) or kept with small "
    "weight (mask); only the upper tail is clipped",
    "delta": "None: INTELLECT-2's two-sided clip is for far off-policy data; runs here are on-policy",
    "sapo_temperature_neg": "1.05: the SAPO paper's value, used only by the sapo variant",
    "sapo_temperature_pos": "1.0: the SAPO paper's value for positive advantages, sapo variant only",
    "vespo_k_pos": "2.0: VESPO's power exponent for positive advantages, vespo variant only",
    "vespo_lambda_pos": "3.0: VESPO's decay factor for positive advantages, vespo variant only",
    "vespo_k_neg": "3.0: VESPO's power exponent for negative advantages, vespo variant only",
    "vespo_lambda_neg": "2.0: VESPO's decay factor for negative advantages, vespo variant only",
    "sync_ref_model": "False: a TR-DPO moving reference weakens the anchor beta buys; TRL refuses it at beta 0 "
    "and under PEFT",
    "ref_model_mixup_alpha": "0.6: inert without sync_ref_model",
    "ref_model_sync_steps": "512: inert without sync_ref_model",
    "top_entropy_quantile": "1.0: every token trains; the 80/20 paper's 0.2 is a research setting, not a default",
    "entropy_coef": "0.0: no entropy bonus; entropy collapse is met by the DAPO variant's clip-higher",
    "use_adaptive_entropy": "False: Skywork-OR1's controller needs an entropy target per model",
    "entropy_coef_min": "0.0: inert without adaptive entropy",
    "entropy_coef_max": "1.0: inert without adaptive entropy",
    "entropy_coef_delta": "0.005: inert without adaptive entropy",
    "entropy_target": "0.2 nats: the adaptive controller's target, unread while use_adaptive_entropy is off",
    "max_tool_calling_iterations": "None: no tools in these recipes",
    "off_policy_mask_threshold": "None: DeepSeek-V3.2's off-policy mask targets stale data; on-policy runs have none",
    "log_multimodal": "True: no images in these recipes, so nothing to log",
    "num_completions_to_print": "None: completions are not printed (log_completions False)",
    "log_unique_prompts": "False: completions are not logged by TRL",
    "log_completions_hub_repo": "None: nothing is pushed to the Hub",
    "use_transformers_continuous_batching": "False: plain generate on CPU; vLLM on GPUs",
    "transformers_continuous_batching_config": "None: continuous batching is off",
    "use_transformers_paged": "False: deprecated alias of continuous batching",
    "vllm_importance_sampling_cap": "None: deprecated alias of vllm_importance_sampling_clip_max, which is set",
    # TrainingArguments
    "tf32": "None: PyTorch's matmul precision default; bf16 autocast already sets the GPU math",
    "logging_first_step": "False: logging_steps already logs step 1 on CPU",
    "data_seed": "None: data order follows seed",
    "full_determinism": "False: deterministic kernels cost speed and vLLM sampling is not deterministic anyway",
    "trackio_static_space_id": "None: acts only on a Hub push or after a Space run, and these recipes do neither",
    "trackio_bucket_id": "None: a bucket only backs a trackio Space",
}

# TrainingArguments fields that change a GRPO run: these must be decided too (present in every transformers the
# project supports; activation_checkpointing is gradient_checkpointing's name from 5.23). The tracker's: report_to,
# and the fields TrackioCallback reads (project, run_name, trackio_*; transformers 5.x has no logging_dir: TensorBoard
# reads TENSORBOARD_LOGGING_DIR, which the runner sets).
TRAINING_ARGUMENTS = (
    "learning_rate",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "lr_scheduler_type",
    "warmup_steps",
    "max_grad_norm",
    "optim",
    "weight_decay",
    "num_train_epochs",
    "max_steps",
    "seed",
    "data_seed",
    "full_determinism",
    "logging_steps",
    "logging_first_step",
    "report_to",
    "project",
    "run_name",
    "trackio_space_id",
    "trackio_static_space_id",
    "trackio_bucket_id",
    "bf16",
    "fp16",
    "tf32",
    "use_cpu",
    "gradient_checkpointing",
    "gradient_checkpointing_kwargs",
    "save_strategy",
    "save_steps",
    "save_total_limit",
    "eval_strategy",
    "eval_steps",
    "eval_on_start",
    "per_device_eval_batch_size",
)


def grpo_added_fields() -> set[str]:
    """The fields the installed ``GRPOConfig`` adds over the installed ``TrainingArguments``."""
    from transformers import TrainingArguments
    from trl import GRPOConfig

    base = {field.name for field in dataclasses.fields(TrainingArguments)}
    return {field.name for field in dataclasses.fields(GRPOConfig)} - base


def undecided_fields() -> list[str]:
    """Fields that need a decision and have none: GRPOConfig's additions and the run-changing TrainingArguments.

    >>> undecided_fields()
    []
    """
    needed = grpo_added_fields() | set(TRAINING_ARGUMENTS)
    return sorted(needed - set(SET) - set(LEFT))


def shared_reasons() -> list[str]:
    """Reasons given to more than one field, and fields both set and left (each must be argued once).

    >>> shared_reasons()
    []
    """
    reasons = [*SET.values(), *LEFT.values()]
    repeated = sorted({reason for reason in reasons if reasons.count(reason) > 1})
    return repeated + [f"{name} is both set and left" for name in sorted(set(SET) & set(LEFT))]
