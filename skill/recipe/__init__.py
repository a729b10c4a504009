"""Recipe: the validated GRPO recipe (``GRPORecipe``) and how it is made.

Owns: ``schema`` (the contract), ``seed`` (the reference values), ``emit`` (``emit_grpo_config``),
``variants`` (Dr. GRPO, DAPO, GSPO, ...), ``trl_contract`` (what the installed TRL accepts) and
``script`` (the rendered training script). May import: ``hardware``, ``memory``, ``models``,
``rewards``, ``inspection`` (the gate), ``routing`` (stored routes), ``data``, ``errors``.
"""
