"""What a training rank reports about itself, to show that a distributed run's ranks agree.

With GRPO_RLVR_DUMP_RANK_STATE=DIR set, every rank writes DIR/rank-<R>.json at the end of training: a digest of
its parameters (``parameter_digest``), to show that the ranks ended in sync, and the batch values TRL built in that
rank (world size, steps_per_generation, generation_batch_size), to show the run was on-policy in its launched world.
It imports nothing of the project's: it reads the trainer it is given.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

DUMP_RANK_STATE_ENV = "GRPO_RLVR_DUMP_RANK_STATE"


def rank() -> int:
    """This process's global rank: torchrun's RANK, 0 for a single process.

    >>> rank() == int(os.environ.get("RANK", "0"))
    True
    """
    return int(os.environ.get("RANK", "0"))


def parameter_digest(model: Any) -> dict[str, Any]:
    """An exact fingerprint of a model's parameters, small enough to write per rank: a SHA-256 over every
    parameter's float32 bytes in name order, plus each parameter's sum and L2 norm (to see how far apart).

    >>> import torch
    >>> layer = torch.nn.Linear(2, 1, bias=False)
    >>> _ = torch.nn.init.ones_(layer.weight)
    >>> digest = parameter_digest(layer)
    >>> digest["count"], digest["parameters"]["weight"]["sum"], digest["sha256"] == parameter_digest(layer)["sha256"]
    (2, 2.0, True)
    """
    import hashlib

    import torch

    sha = hashlib.sha256()
    parameters: dict[str, dict[str, float]] = {}
    count = 0
    for name, parameter in sorted(model.named_parameters()):
        tensor = parameter.detach().to("cpu", torch.float32).contiguous()
        sha.update(name.encode() + tensor.numpy().tobytes())
        parameters[name] = {"sum": float(tensor.double().sum()), "norm": float(tensor.double().norm())}
        count += tensor.numel()
    return {"sha256": sha.hexdigest(), "count": count, "parameters": parameters}


def gathered_digest(model: Any) -> dict[str, Any]:
    """``parameter_digest`` of the whole parameters: under ZeRO-3 each rank holds only its partition (empty tensors
    outside a gather), so they are gathered first; every rank must call it (the gather is a collective)."""
    if not any(hasattr(parameter, "ds_id") for parameter in model.parameters()):
        return parameter_digest(model)
    import deepspeed

    with deepspeed.zero.GatheredParameters(list(model.parameters()), modifier_rank=None):
        return parameter_digest(model)


def dump_rank_state(trainer: Any) -> None:
    """With GRPO_RLVR_DUMP_RANK_STATE=DIR, this rank's parameter digest and the batch values TRL built in it."""
    dump = os.environ.get(DUMP_RANK_STATE_ENV)
    if not dump:
        return
    Path(dump).mkdir(parents=True, exist_ok=True)
    model = trainer.accelerator.unwrap_model(trainer.model)
    digest = gathered_digest(model)
    accelerator, args = trainer.accelerator, trainer.args
    where = {
        "rank": rank(),
        "node": os.environ.get("SLURMD_NODENAME"),  # the Slurm node this rank ran on (None off a cluster)
        "world_size": accelerator.num_processes,
        "distributed": accelerator.distributed_type,
        "env_world_size": os.environ.get("WORLD_SIZE"),
        "steps_per_generation": args.steps_per_generation,
        "generation_batch_size": args.generation_batch_size,
        "gradient_accumulation_steps": args.gradient_accumulation_steps,
        "per_device_train_batch_size": args.per_device_train_batch_size,
    }
    (Path(dump) / f"rank-{rank()}.json").write_text(json.dumps({**where, **digest}, default=str))
