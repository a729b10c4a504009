"""Checking a recipe against what will run it.

``stack`` (the target stack, ``target_stack.txt``), ``trl_contract`` (what the installed TRL accepts, and a
recipe's real GRPOConfig), ``field_values`` (the values a field may take), ``group_arithmetic`` (TRL's
generation-batch arithmetic), ``compatibility`` (cross-field refusals), ``plan_checks`` (what a sharding
demands), ``answer_form`` (whether the prompts ask for the form the rewards read), ``validation`` (a recipe as
run_grpo receives it).
"""
