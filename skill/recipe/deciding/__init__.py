"""Deciding a recipe's fields: each value with the reason it has it.

``field_rules`` (one rule per GRPOConfig field, in ``field_rules.toml``: the seed value or TRL's default, the
reason, the range), ``precision`` (load dtype and mixed precision), ``prompts`` (the prompt budget),
``completion_budget`` (``max_completion_length``), ``evaluation_plan`` (held-out scoring), ``vllm_decisions``
(the vLLM path's numbers), ``reference_price`` (what beta > 0 costs), ``tracking`` (``report_to``),
``variants`` (Dr. GRPO, DAPO, GSPO, ...), ``memory_fit`` (a recipe that does not fit, fixed or refused),
``base_config`` (a user's own run, and what the recipe changes in it), and the estimates a decision reads:
``memory_request`` (the memory request a recipe implies) and ``step_time`` (the recipe's time estimate).
"""
