"""Hardware: GPU specs and the one launch planner (processes, accelerate/DeepSpeed/FSDP2, vLLM, SLURM).

Owns: ``specs`` (GPU table and ``HardwareSpec``), ``layout`` (who trains and who generates, on which
GPUs: ``layout_processes``, ``node_layouts``) and ``launch`` (the files and commands that start them:
``launch_files``). ``layout`` imports only ``specs`` and ``errors``, so ``memory`` can use it;
``launch`` may import ``memory``, ``models`` and ``errors``, and knows the recipe only as a type.
"""
