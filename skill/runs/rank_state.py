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
    return named_tensor_digest(model.named_parameters())


def named_tensor_digest(named: Any) -> dict[str, Any]:
    """``parameter_digest`` of (name, tensor) pairs: parameters gathered into whole tensors."""
    import hashlib

    import torch

    sha = hashlib.sha256()
    parameters: dict[str, dict[str, float]] = {}
    count = 0
    for name, parameter in sorted(named, key=lambda pair: pair[0]):
        tensor = parameter.detach().to("cpu", torch.float32).contiguous()
        sha.update(name.encode() + tensor.numpy().tobytes())
        parameters[name] = {"sum": float(tensor.double().sum()), "norm": float(tensor.double().norm())}
        count += tensor.numel()
    return {"sha256": sha.hexdigest(), "count": count, "parameters": parameters}


def local_count(model: Any) -> int:
    """How many parameter values this rank holds: its shard under ZeRO-3 (``ds_tensor``) or FSDP2 (a DTensor's local
    part), everything otherwise.

    >>> import torch
    >>> local_count(torch.nn.Linear(2, 1))
    3
    """
    count = 0
    for parameter in model.parameters():
        if hasattr(parameter, "ds_tensor"):
            count += parameter.ds_tensor.numel()
        elif hasattr(parameter, "to_local"):
            count += parameter.to_local().numel()
        else:
            count += parameter.numel()
    return count


def gathered_digest(model: Any) -> dict[str, Any]:
    """``parameter_digest`` of the whole parameters, with ``local_count``: under ZeRO-3 each rank holds only its
    partition (empty tensors outside a gather) and under FSDP2 a shard of each DTensor, so they are gathered first;
    every rank must call it (the gather is a collective)."""
    local = local_count(model)
    parameters = list(model.parameters())
    if any(hasattr(parameter, "ds_id") for parameter in parameters):
        import deepspeed

        with deepspeed.zero.GatheredParameters(parameters, modifier_rank=None):
            return {**parameter_digest(model), "local_count": local}
    if any(hasattr(parameter, "full_tensor") for parameter in parameters):
        whole = [(name, parameter.full_tensor()) for name, parameter in sorted(model.named_parameters())]
        return {**named_tensor_digest(whole), "local_count": local}
    return {**parameter_digest(model), "local_count": local}


def dump_rank_state(trainer: Any, held_out_scored: list[int] | None = None) -> None:
    """With GRPO_RLVR_DUMP_RANK_STATE=DIR, this rank's parameter digest and the batch values TRL built in it, with
    how many completions of each held-out prompt it scored (``runs.rehearsal.HeldOutTally``)."""
    dump = os.environ.get(DUMP_RANK_STATE_ENV)
    if not dump:
        return
    Path(dump).mkdir(parents=True, exist_ok=True)
    model = trainer.accelerator.unwrap_model(trainer.model)
    digest = gathered_digest(model)
    reference = getattr(trainer, "ref_model", None)  # a full fine-tune with beta > 0: the model TRL built apart
    reference_digest = gathered_digest(reference) if reference is not None else None
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
        "reference_sha256": reference_digest["sha256"] if reference_digest else None,
        "held_out_scored": held_out_scored,
    }
    (Path(dump) / f"rank-{rank()}.json").write_text(json.dumps({**where, **digest}, default=str))
