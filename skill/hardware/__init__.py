"""Hardware: GPU specs and the one process layout (who trains and who generates, on which GPUs).

Owns: ``specs`` (GPU table and ``HardwareSpec``), ``throughput`` (each card's tensor-core peak and memory
bandwidth, from datasheets) and ``layout`` (``layout_processes``, ``node_layouts``: trainers and the vLLM
server on disjoint GPUs). The files that start a recipe on that layout
(accelerate/DeepSpeed/FSDP2 configs, node and SLURM scripts) are rendered by ``skill.recipe.launching.launch``.
May import: ``errors`` only, so every package above can use it.
"""
