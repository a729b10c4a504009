"""The instruments that read live memory during a real GRPO step: the saved-for-backward ledger, the
allocator peak of a call, the bytes behind a set of tensors, and the swap that profiles TRL's chunked
log-prob function. ``measurement`` runs the step with them; how each reading works is described there.

May import: nothing of the project (torch and trl are imported inside the functions that need them).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any


def running_peak(deltas: Iterable[tuple[int, int]]) -> int:
    """Peak of the running sum of ``(time, signed bytes)`` allocator records, taken in time order, never below 0.

    >>> running_peak([(2, -4), (0, 10), (1, 8), (3, -14)])
    18
    >>> running_peak([])
    0
    """
    total = peak = 0
    for _, change in sorted(deltas, key=lambda record: record[0]):
        total += change
        peak = max(peak, total)
    return peak


def storage_bytes(tensors: Iterable[Any]) -> int:
    """Bytes of the distinct storages behind ``tensors`` (tied weights and views count once)."""
    seen: dict[int, int] = {}
    for tensor in tensors:
        storage = tensor.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
    return sum(seen.values())


class HeldTensor:
    """What autograd keeps instead of a saved tensor; dropping it releases the tensor in the ledger."""

    __slots__ = ("tensor", "key", "ledger")

    def __init__(self, tensor: Any, key: int | None, ledger: SavedLedger) -> None:
        self.tensor, self.key, self.ledger = tensor, key, ledger

    def __del__(self) -> None:
        if self.key is not None:
            self.ledger.release(self.key)


class SavedLedger:
    """Live bytes saved for backward, per bucket ("model" or "logprob"), refcounted by storage."""

    def __init__(self, parameter_keys: set[int]) -> None:
        self.parameter_keys = parameter_keys
        self.bucket = "model"
        self.refs: dict[int, int] = {}
        self.owner: dict[int, tuple[str, int]] = {}
        self.live = {"model": 0, "logprob": 0}
        self.peak = {"model": 0, "logprob": 0}

    def pack(self, tensor: Any) -> HeldTensor:
        """The pack hook: count the tensor's storage once (parameters and empty storages not at all)."""
        storage = tensor.untyped_storage()
        key = storage.data_ptr()
        if key in self.parameter_keys or storage.nbytes() == 0:
            return HeldTensor(tensor, None, self)
        if key not in self.refs:
            self.refs[key] = 0
            self.owner[key] = (self.bucket, storage.nbytes())
            self.live[self.bucket] += storage.nbytes()
            self.peak[self.bucket] = max(self.peak[self.bucket], self.live[self.bucket])
        self.refs[key] += 1
        return HeldTensor(tensor, key, self)

    def release(self, key: int) -> None:
        """One holder of a storage is gone; the last one takes its bytes off the live count."""
        self.refs[key] -= 1
        if self.refs[key] == 0:
            del self.refs[key]
            bucket, nbytes = self.owner.pop(key)
            self.live[bucket] -= nbytes

    def reset_peaks(self) -> None:
        """Start a new peak from what is live now (one per training forward)."""
        self.peak = dict(self.live)


def allocator_peak(run: Any) -> tuple[Any, int]:
    """Run ``run()`` under the CPU profiler and return its result and the allocator peak it caused."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=False) as prof:
        result = run()
    records = [
        (event.start_ns(), event.nbytes())
        for event in prof.profiler.kineto_results.events()
        if event.name() == "[memory]" and event.device_type() == DeviceType.CPU
    ]
    return result, running_peak(records)


class StepRecorder:
    """Everything the hooks collect during the step."""

    def __init__(self, ledger: SavedLedger) -> None:
        self.ledger = ledger
        self.in_training_forward = False
        self.shapes: list[tuple[int, int]] = []
        self.saved_peaks: list[tuple[int, int]] = []
        self.forward_peaks: list[int] = []
        self.backward_peaks: list[int] = []
        self.gradient_bytes: int | None = None
        self.optimizer_state_bytes: int | None = None
        self.optimizer_name = ""


@contextlib.contextmanager
def measured_logprob_function(recorder: StepRecorder) -> Iterator[None]:
    """Swap TRL's chunked log-prob function for a subclass that profiles the policy's training calls.

    ``add_fused_lm_head`` looks the function up in ``trl.trainer.utils`` at call time, so the swap
    reaches the policy and the reference model alike; only calls made inside the policy's loss
    forward (and their backward, marked on ``ctx``) are profiled. The swap is process-global while
    it lasts, so concurrent training in the same process would be measured too.
    """
    import trl.trainer.utils as trl_utils

    original = trl_utils._ChunkedLogProbFunction

    class MeasuredChunkedLogProb(original):  # type: ignore[misc, valid-type]
        @classmethod
        def apply(cls, *args: Any) -> Any:
            # Tensors saved inside apply are packed after forward returns, still inside apply.
            measuring = recorder.in_training_forward
            previous = recorder.ledger.bucket
            recorder.ledger.bucket = "logprob" if measuring else previous
            try:
                return super().apply(*args)
            finally:
                recorder.ledger.bucket = previous

        @staticmethod
        def forward(ctx: Any, *args: Any) -> Any:
            ctx.measured = recorder.in_training_forward
            if not ctx.measured:
                return original.forward(ctx, *args)
            result, peak = allocator_peak(lambda: original.forward(ctx, *args))
            recorder.forward_peaks.append(peak)
            return result

        @staticmethod
        def backward(ctx: Any, *grads: Any) -> Any:
            if not getattr(ctx, "measured", False):
                return original.backward(ctx, *grads)
            result, peak = allocator_peak(lambda: original.backward(ctx, *grads))
            recorder.backward_peaks.append(peak)
            return result

    trl_utils._ChunkedLogProbFunction = MeasuredChunkedLogProb
    try:
        yield
    finally:
        trl_utils._ChunkedLogProbFunction = original
