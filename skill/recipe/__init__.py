"""Recipe: the validated GRPO recipe (``GRPORecipe``), how it is made and how it is rendered.

Owns, by concept:

- the contract and its maker: ``schema`` (``GRPORecipe``, data only), ``emit`` (``emit_grpo_config``);
- deciding the fields: ``field_rules`` (one rule per GRPOConfig field in ``field_rules.toml``: the seed value or
  TRL's default, the reason, the range), ``field_values`` (the values a field may take), ``precision`` (load
  dtype and mixed precision), ``prompts`` (the prompt budget), ``completion_budget`` (``max_completion_length``),
  ``group_arithmetic`` (TRL's generation-batch arithmetic), ``evaluation_plan`` (held-out scoring),
  ``vllm_decisions`` (the vLLM path's numbers), ``reference_price`` (what beta > 0 costs), ``tracking``
  (``report_to``), ``variants`` (Dr. GRPO, DAPO, GSPO, ...), ``step_time`` (the recipe's time estimate);
- checking: ``stack`` (the target stack), ``trl_contract`` (what the installed TRL accepts, and a recipe's
  real GRPOConfig), ``memory_request`` (the memory request a recipe implies),
  ``compatibility`` (cross-field refusals), ``plan_checks`` (what a sharding demands), ``validation`` (a recipe
  as run_grpo receives it);
- rendering and launching: ``script`` (the training script), ``launch_commands`` (the command lines by role
  and node), ``node_script`` (``launch_node.sh``), ``slurm_script`` (``slurm.sbatch``), ``launch`` (the launch
  files for GPUs and nodes).
May import: ``hardware``, ``memory``, ``models``, ``rewards``, ``inspection`` (the gate), ``routing``
(stored routes), ``data``, ``errors``.
"""
