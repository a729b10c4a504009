"""A checkpoint on request: SIGUSR1 makes every rank save one at the next optimizer step.

Slurm sends it before a job's time limit (``slurm.sbatch``'s ``--signal=USR1@S``), so a run the scheduler stops
resumes from a recent step instead of the last periodic save. The signal reaches the ranks at slightly different
moments, and a sharded save is collective, so the ranks agree on the step: each step ends with a max-reduction of
"asked?" over the ranks (one integer), and all save together when any was asked. (``launch_node.sh`` makes its own
shell, accelerate's launcher and the vLLM server ignore the signal, so only the trainers act on it.)

May import: nothing of the project's.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

REQUESTED = threading.Event()


def listen() -> None:
    """Catch SIGUSR1 in this process (a request noted, never an interruption)."""
    signal.signal(signal.SIGUSR1, lambda _signum, _frame: REQUESTED.set())


def agreed(asked: bool, device: Any) -> bool:
    """True on every rank when any rank was asked (one max all-reduce when distributed).

    >>> agreed(True, "cpu"), agreed(False, "cpu")
    (True, False)
    """
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return asked
    import torch

    flag = torch.tensor([int(asked)], device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())


def make_callback(device: Any) -> Any:
    from transformers import TrainerCallback

    class SaveOnRequest(TrainerCallback):
        """Every rank saves at the step where any rank had been asked."""

        def on_step_end(self, args, state, control, **kwargs):
            if agreed(REQUESTED.is_set(), device):
                REQUESTED.clear()
                control.should_save = True
                if state.is_world_process_zero:
                    print(f"checkpoint requested (SIGUSR1): saving at step {state.global_step}", flush=True)
            return control

    return SaveOnRequest()
