"""Sample completions from a policy model: the one generation module route_check and inspect_rewards share.

Prompts are chat messages (the chat template is applied, as TRL does for conversational data) or
plain text (used as is). Generation runs with transformers on this machine's device, in batches,
seeded, and reports progress through a callback (the MCP server forwards it as progress
notifications) after each batch and, inside a batch, at least every PROGRESS_EVERY_S seconds of
decoding (tokens done and the time left), so a client never waits long without a word.
Models load once per process and stay cached, so a route check followed by an inspection does not
load twice. A caller may pass ``should_stop``: it is asked before every batch and at every report
inside one, and when it answers True sampling stops with ``Cancelled`` (nothing is returned half-done).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field

from skill.errors import SkillError
from skill.models.sources import resolve_model_path

Prompt = str | list[dict[str, Any]]
Progress = Callable[[float, float, str], None]
ShouldStop = Callable[[], bool]
# Under the 10 s a client should wait for a word, with room for one slow decoding step on a busy machine.
PROGRESS_EVERY_S = 5.0


class Cancelled(SkillError):
    """The caller asked the work to stop (e.g. an MCP client cancelled the request); nothing was saved."""


class SamplingSettings(BaseModel):
    """How to sample: like training (temperature, completion budget), seeded."""

    n: int = Field(default=8, ge=1, description="Completions per prompt.")
    temperature: float = Field(default=1.0, ge=0, description="0 means greedy.")
    top_p: float = Field(default=1.0, gt=0, le=1)
    max_new_tokens: int = Field(default=256, gt=0)
    seed: int = 3407
    batch_sequences: int = Field(default=64, gt=0, description="Sequences generated per forward batch.")


class SampledGroup(BaseModel):
    """The completions of one prompt."""

    prompt_index: int
    prompt: Prompt
    completions: list[str]
    token_counts: list[int] = Field(description="Each completion's length in tokens, its end-of-sequence token aside.")
    truncated: list[bool] = Field(description="Whether each completion was cut at max_new_tokens, unfinished.")


@functools.lru_cache(maxsize=2)
def load_policy(model: str) -> tuple[Any, Any]:
    """Model and tokenizer for a hub id, local directory or the embedded default; cached per process."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = resolve_model_path(model)
    try:
        # Nothing is fetched at run time: a hub id works only when it is already in the local cache.
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        policy = AutoModelForCausalLM.from_pretrained(path, dtype="auto", local_files_only=True)
    except OSError as exc:
        raise SkillError(
            f"Cannot load model {model!r} here: {exc}",
            "Send a local model directory, a hub id already in the local cache, or the embedded default; nothing "
            "is downloaded at run time.",
        ) from None
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    policy.eval()
    return policy, tokenizer


def render_prompt(tokenizer: Any, prompt: Prompt) -> str:
    """Conversational prompts go through the chat template (with the generation prompt); text stays text."""
    if isinstance(prompt, str):
        return prompt
    if not isinstance(prompt, list) or not all(isinstance(m, dict) and "content" in m for m in prompt):
        raise SkillError(f"Prompt {prompt!r} is neither text nor a list of chat messages.", "Send one of those.")
    return tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)


def sample_completions(
    model: str,
    prompts: list[Prompt],
    settings: SamplingSettings,
    progress: Progress | None = None,
    should_stop: ShouldStop | None = None,
) -> list[SampledGroup]:
    """``settings.n`` completions for every prompt, in prompt order; ``should_stop`` is asked before each batch.

    >>> SamplingSettings(n=4, temperature=0.7).max_new_tokens
    256
    """
    import torch

    if not prompts:
        raise SkillError("No prompts to sample from.", "Send at least one prompt.")
    policy, tokenizer = load_policy(model)
    texts = [render_prompt(tokenizer, prompt) for prompt in prompts]
    prompts_per_batch = max(1, settings.batch_sequences // settings.n)
    groups: list[SampledGroup] = []
    report = DecodingReport(len(prompts) * settings.n, settings.max_new_tokens, progress, should_stop)
    for start in range(0, len(texts), prompts_per_batch):
        stop_if_asked(should_stop, f"sampling stopped after {report.done}/{report.total} completions")
        chunk = texts[start : start + prompts_per_batch]
        encoded = tokenizer(chunk, return_tensors="pt", padding=True, add_special_tokens=False).to(policy.device)
        torch.manual_seed(settings.seed + start)
        sampling = settings.temperature > 0
        report.start_batch(len(chunk) * settings.n)
        with torch.no_grad():
            output = policy.generate(
                **encoded,
                do_sample=sampling,
                temperature=settings.temperature if sampling else None,
                top_p=settings.top_p if sampling else None,
                top_k=0 if sampling else None,
                max_new_tokens=settings.max_new_tokens,
                num_return_sequences=settings.n,
                pad_token_id=tokenizer.pad_token_id,
                stopping_criteria=[report.criterion()],
            )
        stop_if_asked(lambda: report.stopped, f"sampling stopped during a batch, after {report.done} completions")
        generated = output[:, encoded["input_ids"].shape[1] :]
        completions = tokenizer.batch_decode(generated, skip_special_tokens=True)
        lengths = completion_lengths(generated, stop_token_ids(policy, tokenizer), settings.max_new_tokens)
        for offset in range(len(chunk)):
            index, group = start + offset, slice(offset * settings.n, (offset + 1) * settings.n)
            counts, cut = zip(*lengths[group], strict=True)
            groups.append(
                SampledGroup(
                    prompt_index=index,
                    prompt=prompts[index],
                    completions=completions[group],
                    token_counts=list(counts),
                    truncated=list(cut),
                )
            )
        report.end_batch()
    return groups


def stop_token_ids(policy: Any, tokenizer: Any) -> set[int]:
    """The ids that end a completion: the generation config's end-of-sequence id(s) and the padding id
    (generate pads a finished sequence with it)."""
    eos = policy.generation_config.eos_token_id
    ids = set(eos if isinstance(eos, list) else [eos]) | {tokenizer.pad_token_id}
    return {int(token) for token in ids if token is not None}


def completion_lengths(generated: Any, stops: set[int], max_new_tokens: int) -> list[tuple[int, bool]]:
    """(tokens before the first stop id, cut at the budget unfinished) for each generated row.

    >>> import torch
    >>> completion_lengths(torch.tensor([[5, 6, 2, 2], [5, 6, 7, 8], [2, 2, 2, 2]]), {2}, 4)
    [(2, False), (4, True), (0, False)]
    """
    lengths = []
    for row in generated.tolist():
        end = next((position for position, token in enumerate(row) if token in stops), None)
        lengths.append((len(row), len(row) >= max_new_tokens) if end is None else (end, False))
    return lengths


class DecodingReport:
    """Progress of a sampling call in completions (a batch counts by its tokens decoded so far), sent after every
    batch and at least every PROGRESS_EVERY_S inside one, with the time left at the rate so far; inside a batch it
    also asks ``should_stop``.

    >>> seen = []
    >>> report = DecodingReport(16, 8, lambda done, total, message: seen.append((done, total)), None)
    >>> report.start_batch(16); report.end_batch(); seen
    [(16.0, 16)]
    """

    def __init__(self, total: int, max_new_tokens: int, progress: Progress | None, should_stop: ShouldStop | None):
        self.total, self.max_new_tokens = total, max_new_tokens
        self.progress, self.should_stop = progress, should_stop
        self.done, self.batch, self.tokens, self.stopped = 0, 0, 0, False
        self.started = self.last = time.perf_counter()

    def start_batch(self, sequences: int) -> None:
        self.batch, self.tokens = sequences, 0

    def end_batch(self) -> None:
        self.done += self.batch
        self.batch = 0
        self.send(float(self.done))

    def send(self, done: float) -> None:
        self.last = time.perf_counter()
        if self.progress is None:
            return
        elapsed = self.last - self.started
        left = f", about {elapsed / done * (self.total - done):.0f} s left" if 0 < done < self.total else ""
        tokens = f" (token {self.tokens}/{self.max_new_tokens} of this batch)" if self.batch else ""
        self.progress(done, self.total, f"sampled {done:.0f}/{self.total} completions in {elapsed:.0f} s{left}{tokens}")

    def criterion(self) -> Any:
        """A transformers stopping criterion called after every decoding step: it reports and asks to stop."""
        from transformers import StoppingCriteria

        report = self

        class ReportEachStep(StoppingCriteria):
            def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
                import torch

                report.tokens += 1
                if time.perf_counter() - report.last >= PROGRESS_EVERY_S:
                    report.send(report.done + report.batch * min(1.0, report.tokens / report.max_new_tokens))
                    report.stopped = report.should_stop is not None and report.should_stop()
                return torch.full((input_ids.shape[0],), report.stopped, dtype=torch.bool, device=input_ids.device)

        return ReportEachStep()


def stop_if_asked(should_stop: ShouldStop | None, where: str) -> None:
    """Raise ``Cancelled`` when the caller asked to stop; a no-op without a ``should_stop``.

    >>> stop_if_asked(None, "here"), stop_if_asked(lambda: False, "here")
    (None, None)
    >>> stop_if_asked(lambda: True, "sampling stopped after 8/64 completions")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    skill.sampling.Cancelled: Cancelled by the caller: sampling stopped after 8/64 completions; nothing was saved. ...
    """
    if should_stop is not None and should_stop():
        raise Cancelled(
            f"Cancelled by the caller: {where}; nothing was saved.",
            "Send the request again to start over (a smaller probe finishes sooner).",
        )
