"""Recipe: the validated GRPO recipe (``GRPORecipe``), how it is made and how it is rendered.

Owns: ``schema`` (the contract), ``seed`` (the reference values), ``emit`` (``emit_grpo_config``),
``variants`` (Dr. GRPO, DAPO, GSPO, ...), ``trl_contract`` (what the installed TRL accepts),
``script`` (the rendered training script), ``plan_checks`` (what a sharding demands: refusals with the
alternative, reentrant checkpointing) and ``launch`` (the launch files for GPUs and nodes).
May import: ``hardware``, ``memory``, ``models``, ``rewards``, ``inspection`` (the gate), ``routing``
(stored routes), ``data``, ``errors``.
"""
