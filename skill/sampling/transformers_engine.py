"""The transformers engine: ``generate`` in batches on this machine's GPU (bf16) when there is one, else the CPU.

Models load once per process and stay cached, so a route check followed by an inspection does not load twice.
Inside a batch a stopping criterion reports progress and asks whether to stop (``progress.DecodingReport``).
"""

from __future__ import annotations

import functools
from typing import Any

from skill.errors import SkillError
from skill.models.hub import LocalModel
from skill.sampling.progress import DecodingReport, Progress, ShouldStop, stop_if_asked
from skill.sampling.prompts import load_tokenizer, render_prompt
from skill.sampling.schema import Prompt, Sampled, SampledGroup, SamplingSettings, engine_record


@functools.lru_cache(maxsize=2)
def load_policy(path: str) -> tuple[Any, Any]:
    """Model and tokenizer from a local directory (``models.hub.local_copy`` fetched it): on a CUDA GPU in bf16,
    on the CPU in the dtype the weights were saved in; cached per process."""
    import torch
    from transformers import AutoModelForCausalLM

    tokenizer = load_tokenizer(path)
    on_gpu = torch.cuda.is_available()
    try:
        policy = AutoModelForCausalLM.from_pretrained(
            path, dtype=torch.bfloat16 if on_gpu else "auto", device_map="cuda" if on_gpu else None
        )
    except (OSError, ValueError) as exc:
        raise SkillError(
            f"Cannot load the model in {path}: {exc}", "Send a causal language model (one transformers loads)."
        ) from None
    policy.eval()
    return policy, tokenizer


def sample_transformers(
    copy: LocalModel,
    prompts: list[Prompt],
    settings: SamplingSettings,
    progress: Progress | None,
    should_stop: ShouldStop | None,
) -> Sampled:
    """``settings.n`` completions for every prompt, in prompt order; ``should_stop`` is asked before each batch."""
    import torch
    import transformers

    policy, tokenizer = load_policy(copy.path)
    texts = [render_prompt(tokenizer, prompt) for prompt in prompts]
    prompts_per_batch = max(1, settings.batch_sequences // settings.n)
    groups: list[SampledGroup] = []
    report = DecodingReport(len(prompts) * settings.n, settings.max_new_tokens, progress, should_stop)
    for start in range(0, len(texts), prompts_per_batch):
        stop_if_asked(should_stop, f"sampling stopped after {report.done}/{report.total} completions")
        chunk = texts[start : start + prompts_per_batch]
        encoded = tokenizer(chunk, return_tensors="pt", padding=True, add_special_tokens=False).to(policy.device)
        torch.manual_seed(settings.seed + start)
        report.start_batch(len(chunk) * settings.n)
        with torch.no_grad():
            output = policy.generate(**encoded, **generate_settings(settings, tokenizer, report))
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
    used = engine_record(
        "transformers",
        transformers.__version__,
        policy.device.type,
        str(policy.dtype).removeprefix("torch."),
        copy,
        settings,
        seeded=True,
    )
    return Sampled(groups=groups, sampled_with=used)


def generate_settings(settings: SamplingSettings, tokenizer: Any, report: DecodingReport) -> dict[str, Any]:
    """``generate``'s keyword arguments: pure sampling at the temperature (no top-k), or greedy at 0."""
    sampling = settings.temperature > 0
    return {
        "do_sample": sampling,
        "temperature": settings.temperature if sampling else None,
        "top_p": settings.top_p if sampling else None,
        "top_k": 0 if sampling else None,
        "max_new_tokens": settings.max_new_tokens,
        "num_return_sequences": settings.n,
        "pad_token_id": tokenizer.pad_token_id,
        "stopping_criteria": [report.criterion()],
    }


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
