"""Hardware: GPU specs and the one launch planner (processes, accelerate/DeepSpeed/FSDP2, vLLM, SLURM).

Owns: ``specs`` (GPU table and ``HardwareSpec``) and ``launch`` (who trains and who generates, and
the files that start them). May import: ``memory``, ``models``, ``errors``.
"""
