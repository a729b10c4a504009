"""Recipe: the validated GRPO recipe (``GRPORecipe``), how it is made and how it is rendered.

Owns ``schema`` (``GRPORecipe``, data only) and ``emit`` (``emit_grpo_config``, which decides every field and
checks the result), and three subpackages by concept:

- ``deciding/``: what each field's value is and why (the field rules, precision, budgets, vLLM, variants,
  evaluation, tracking, and the estimates a decision reads);
- ``checking/``: what TRL, the target stack and a launch plan accept, and a recipe as run_grpo receives it;
- ``launching/``: the files a user runs: the training script, the launch commands, ``launch_node.sh``,
  ``slurm.sbatch`` and the launch plan that holds them.

May import: ``hardware``, ``memory``, ``models``, ``rewards``, ``inspection`` (the gate), ``routing``
(stored routes), ``data``, ``timing``, ``grpo_fields``, ``errors``.
"""
