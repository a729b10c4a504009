"""GRPO training script emitted by grpo-rlvr 0.1.0 (trl <installed trl>).

Model: Qwen/Qwen2.5-1.5B-Instruct (full); dataset: openai/gsm8k.
Launch:
  vllm (node 0): CUDA_VISIBLE_DEVICES=0 trl vllm-serve --model Qwen/Qwen2.5-1.5B-Instruct --tensor-parallel-size 1 --port 8000 --max-model-len 768
  train (node 0): CUDA_VISIBLE_DEVICES=1,2,3,4,5,6,7 accelerate launch --config_file accelerate_config.yaml --num_processes 7 --main_process_port 29500 train_grpo.py --output-dir grpo-output
  every node, in order (server, health wait, trainers): bash launch_node.sh
"""

import argparse
import os

from transformers import AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

from skill.data import DatasetSpec, load_training_dataset, within_prompt_budget
from skill.rewards.registry import build_reward_functions
from skill.rewards.spec import RewardSpec

# max_prompt_tokens=512: not measured (HF_HUB_OFFLINE is set and dataset 'openai/gsm8k' is not in the Hub cache (<HF cache>)); kept the default 512
DATASET = DatasetSpec.model_validate({'name': 'openai/gsm8k', 'config': None, 'split': 'train', 'prompt_column': 'prompt', 'prompt_template': None, 'prompt_format': 'chat', 'answer_column': None, 'answer_extractor': None, 'columns': ['answer'], 'max_prompt_tokens': 512})


def training_dataset(tokenizer):
    """The rows to train on: loaded and shaped by skill.data, prompts over the token budget dropped (TRL
    does not truncate prompts, and vLLM's context is sized to the budget), as run_grpo does."""
    dataset = load_training_dataset(DATASET)
    kept = within_prompt_budget(dataset, tokenizer, DATASET.max_prompt_tokens)
    if len(kept) < len(dataset):
        print(f"dropped {len(dataset) - len(kept)} prompt(s) over {DATASET.max_prompt_tokens} tokens")
    return kept


# Packages this recipe needs beyond trl (module -> what installs it), checked before the model is loaded.
NEEDS = {'vllm': 'grpo-rlvr[vllm]', 'trackio': 'grpo-rlvr[tracking]'}


def check_needs() -> None:
    """Stop at once, naming what to install, when a package the recipe needs is missing."""
    import importlib.util

    missing = [module for module in NEEDS if importlib.util.find_spec(module) is None]
    if missing:
        installs = " ".join(sorted({repr(NEEDS[module]) for module in missing}))
        raise SystemExit(f"this recipe needs {', '.join(missing)}: pip install {installs}")


def main() -> None:
    check_needs()
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--output-dir", default="grpo-output")
    args = parser.parse_args()

    reward_funcs = build_reward_functions([
        RewardSpec.model_validate({'name': 'exact_match', 'role': 'correctness', 'weight': 1.0, 'params': {}})
    ])
    peft_config = None  # full fine-tune
    config = GRPOConfig(
        output_dir=args.output_dir,
        vllm_server_port=int(os.environ.get("GRPO_RLVR_VLLM_PORT", 8000)),  # the port launch_node.sh started the server on
        vllm_group_port=int(os.environ.get("GRPO_RLVR_VLLM_GROUP_PORT", 51216)),  # the weight-sync group's, picked with it
        beta=0.01,  # seed recipe: a light KL anchor to the reference model; beta > 0 in a full fine-tune loads a frozen float32 reference copy (GRPOTrainer builds it in the policy's dtype): 5.8 GiB per GPU under DDP (sharded like the policy under ZeRO-3/FSDP), plus its forward pass every step. The alternative is beta=0 (TRL 1.16's default; DAPO trains without a KL term): no reference, cheaper steps, and the policy is held only by the clip and a small learning rate; keep beta when the reward is not fully trusted or the run is long
        bf16=True,  # bf16 autocast: matmuls run in bf16 (Ampere or newer); weights keep their load dtype
        disable_dropout=True,  # dropout makes policy and reference log-probs disagree on the same tokens
        epsilon=0.2,  # standard PPO/GRPO clip range
        fp16=False,  # bf16 is used instead
        gradient_accumulation_steps=4,  # seed recipe: 4 groups per optimizer step
        gradient_checkpointing=True,  # recompute activations: GPU memory is the bottleneck (named as transformers 5.17 reads it)
        importance_sampling_level='token',  # standard GRPO token-level ratios
        learning_rate=5e-07,  # seed recipe: small steps keep the policy near what the reward was inspected on
        log_completions=False,  # the runner samples completions itself
        logging_steps=10,  # seed recipe: log every 10 steps
        loss_type='dapo',  # token-level normalisation (TRL 1.16 default, stated): no per-sequence length bias
        lr_scheduler_type='constant_with_warmup',  # RL rewards are non-stationary
        mask_truncated_completions=False,  # truncated completions still count
        max_completion_length=256,  # sized from the task, the largest of: no probe measured the model's own lengths (route_check's probe would): the seed's 256; rounded up to a multiple of 16 = 256
        max_grad_norm=1.0,  # clip gradient norm at 1.0 against reward spikes
        model_init_kwargs={'dtype': 'float32'},  # fp32 master weights trained under bfloat16 autocast: AdamW moves a weight by about the learning rate per step, which a bf16 weight of magnitude 0.02 (spacing 1.2e-4) rounds away at lr 5e-7, so pure-bf16 weights barely train (measured: in 10 steps at lr 5e-7, 0.1% of bf16 weights moved, 99.8% of fp32 ones); costs fp32 weights, gradients and Adam states
        multi_objective_aggregation='sum_then_normalize',  # weighted sum of rewards, then group normalisation
        num_generations=8,  # group size floor: the group-relative baseline is too noisy with fewer samples
        num_iterations=1,  # one optimizer pass per generation batch: on-policy, no ratio drift
        num_train_epochs=1,  # one pass over the prompts unless max_steps says otherwise
        optim='adamw_torch',  # AdamW with fp32 states
        per_device_train_batch_size=8,  # seed recipe: one group of 8 completions per device step
        report_to='trackio',  # trackio, the local-first tracker TRL recommends, is installed here; send report_to to choose
        reward_weights=[1.0],  # weights from the reward specs, in order
        scale_rewards='group',  # standard GRPO advantage: (r - group mean) / group std
        seed=3407,  # seed recipe: fixed seed for reproducible sampling and init
        temperature=1.0,  # sample at the model's own distribution so groups have varied outcomes
        top_p=1.0,  # no nucleus truncation: keep the full distribution for exploration
        trackio_space_id=None,  # None, stated: metrics stay on this machine; a Space id makes trackio deploy a dashboard Space to the Hub (public unless hub_private_repo), so one is set only when the caller asks (override)
        use_bias_correction_kl=True,  # TRL 1.16's default, stated: with beta > 0 the KL term is multiplied by the importance ratio, so its gradient is the unbiased reverse-KL gradient (DeepSeek-V3.2, arXiv:2512.02556)
        use_cpu=False,  # GPU target
        use_vllm=True,  # vLLM generation is several times faster than transformers
        vllm_importance_sampling_clip_max=2.0,  # truncate each ratio at 2 (the TIS authors' C, Yao et al. 2025): bounds the variance a rare mismatched token adds and keeps every token in the loss
        vllm_importance_sampling_correction=True,  # vLLM samples with bf16 weights and its own kernels while the trainer recomputes log-probs with fp32 master weights under autocast, so the samples are slightly off-policy; TRL reweights each by exp(trainer - vLLM log-prob) (grpo_trainer.py, _generate_and_score_completions)
        vllm_importance_sampling_mode='token_truncate',  # truncated IS per token (TIS) for every loss (vespo accepts only token_* modes, grpo_trainer.py __init__): TRL's default sequence_mask multiplies the per-token ratios over the whole completion (their product, not GSPO's length-normalised mean): if vLLM and the trainer differ by 0.05 rms per token, 256 tokens sum to 0.8 rms in log space and about 1 sequence in 12 passes the cap of 3 and is masked whole
        vllm_max_model_length=768,  # longest prompt (512, dataset.max_prompt_tokens: see its reason) + completion (256): vLLM otherwise reserves KV cache for the model's full context and refuses to start when one such sequence does not fit
        vllm_mode='server',  # several GPUs: vLLM on its own GPU(s) via `trl vllm-serve`
        warmup_steps=0.03,  # 3% warm-up (a float below 1 is a ratio) avoids a large first step
        weight_decay=0.0,  # no weight decay: RL updates are small and regularised by the KL term
    )
    model = 'Qwen/Qwen2.5-1.5B-Instruct'
    dataset = training_dataset(AutoTokenizer.from_pretrained(model))
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=reward_funcs,
        args=config,
        train_dataset=dataset,
        peft_config=peft_config,
    )
    trainer.train()
    trainer.save_model(args.output_dir)


if __name__ == "__main__":
    main()
