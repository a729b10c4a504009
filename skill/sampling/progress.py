"""Progress and cancellation of a sampling call, the same for every engine.

Progress goes to a callback (the MCP server forwards it as progress notifications) after each batch and,
inside a batch, at least every PROGRESS_EVERY_S seconds of decoding (tokens done and the time left), so a
client never waits long without a word. A caller may pass ``should_stop``: it is asked before every batch and
at every report inside one, and when it answers True sampling stops with ``Cancelled`` (nothing is returned
half-done).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from skill.errors import SkillError

Progress = Callable[[float, float, str], None]
ShouldStop = Callable[[], bool]
# Under the 10 s a client should wait for a word, with room for one slow decoding step on a busy machine.
PROGRESS_EVERY_S = 5.0


class Cancelled(SkillError):
    """The caller asked the work to stop (e.g. an MCP client cancelled the request); nothing was saved."""


class DecodingReport:
    """Progress of a sampling call in completions (a batch counts by its tokens decoded so far), sent after every
    batch and at least every PROGRESS_EVERY_S inside one; inside a batch it also asks ``should_stop``.

    The time left is said once a whole batch has finished, at the rate of the batches decoded so far. A rate taken
    earlier misleads: the clock would include loading the model, and a batch that stops when its completions end
    is done long before its token budget (a 128-token probe said "about 2,737 s left" and took 190 s).

    >>> seen = []
    >>> report = DecodingReport(32, 8, lambda done, total, message: seen.append(message), None)
    >>> report.start_batch(16); report.send(8.0); report.end_batch()
    >>> "left" in seen[0], "s left" in seen[1]
    (False, True)
    """

    def __init__(self, total: int, max_new_tokens: int, progress: Progress | None, should_stop: ShouldStop | None):
        self.total, self.max_new_tokens = total, max_new_tokens
        self.progress, self.should_stop = progress, should_stop
        self.done, self.batch, self.tokens, self.stopped = 0, 0, 0, False
        self.started = self.last = time.perf_counter()
        self.decoding: float | None = None  # when the first batch started: the rate is decoding's, not loading's

    def start_batch(self, sequences: int) -> None:
        self.batch, self.tokens = sequences, 0
        if self.decoding is None:
            self.decoding = time.perf_counter()

    def end_batch(self) -> None:
        self.done += self.batch
        self.batch = 0
        self.send(float(self.done))

    def send(self, done: float) -> None:
        self.last = time.perf_counter()
        if self.progress is None:
            return
        elapsed = self.last - self.started
        decoded = self.last - (self.decoding or self.started)
        finished = self.done  # whole batches: the only rate that holds for the rest
        left = f", about {decoded / finished * (self.total - done):.0f} s left" if 0 < finished < self.total else ""
        tokens = f" (token {self.tokens}/{self.max_new_tokens} of this batch)" if self.batch else ""
        self.progress(done, self.total, f"sampled {done:.0f}/{self.total} completions in {elapsed:.0f} s{left}{tokens}")

    def step(self) -> bool:
        """One decoding step of the batch done: report when due, and answer whether to stop."""
        self.tokens += 1
        if time.perf_counter() - self.last >= PROGRESS_EVERY_S:
            self.send(self.done + self.batch * min(1.0, self.tokens / self.max_new_tokens))
            self.stopped = self.should_stop is not None and self.should_stop()
        return self.stopped

    def criterion(self) -> Any:
        """A transformers stopping criterion called after every decoding step: it reports and asks to stop."""
        from transformers import StoppingCriteria

        report = self

        class ReportEachStep(StoppingCriteria):
            def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
                import torch

                stop = report.step()
                return torch.full((input_ids.shape[0],), stop, dtype=torch.bool, device=input_ids.device)

        return ReportEachStep()


def stop_if_asked(should_stop: ShouldStop | None, where: str) -> None:
    """Raise ``Cancelled`` when the caller asked to stop; a no-op without a ``should_stop``.

    >>> stop_if_asked(None, "here"), stop_if_asked(lambda: False, "here")
    (None, None)
    >>> stop_if_asked(lambda: True, "sampling stopped after 8/64 completions")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    skill.sampling.progress.Cancelled: Cancelled by the caller: sampling stopped after 8/64 completions; ...
    """
    if should_stop is not None and should_stop():
        raise Cancelled(
            f"Cancelled by the caller: {where}; nothing was saved.",
            "Send the request again to start over (a smaller probe finishes sooner).",
        )
