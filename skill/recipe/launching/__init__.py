"""Launching a recipe: the files a user runs, as text.

``script`` (the training script), ``launch_commands`` (the command lines by role and node), ``node_script``
(``launch_node.sh``), ``slurm_script`` (``slurm.sbatch``), ``launch`` (the launch files for GPUs and nodes, with
the sharding they use).
"""
