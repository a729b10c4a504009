"""The vLLM engine: vLLM's offline ``LLM``, the engine a run generates with, built once per model and process.

Prompts go in as token ids rendered by the model's own tokenizer (``sampling.prompts``), so vLLM applies no
template or special tokens of its own; it stops on the same end tokens as the other engines. On a GPU each
prompt has its own seed (the settings' seed + its index), so a prompt's completions do not depend on its batch;
vLLM's CPU build fails on per-request seeds ("CPU Generator does not use offset", 0.31), so there the engine is
built with the settings' seed and requests take its generator. On a GPU
vLLM takes GPU_MEMORY_SHARE of the device; on vLLM's CPU build the share is of host RAM (docs/architecture.md §7:
0.15 works on 24 GiB, the GPU default fails).
"""

from __future__ import annotations

import functools
from typing import Any

from skill.models.hub import LocalModel
from skill.sampling.progress import DecodingReport, Progress, ShouldStop, stop_if_asked
from skill.sampling.prompts import end_token_ids, load_tokenizer, prompt_ids
from skill.sampling.schema import Prompt, Sampled, SampledGroup, SamplingSettings, engine_record

GPU_MEMORY_SHARE = 0.85  # room beside vLLM for the caller's own tensors on the same GPU
CPU_MEMORY_SHARE = 0.15
SEQUENCES_PER_CALL = 512  # vLLM batches inside a call; calls this size keep progress and cancel within seconds


@functools.lru_cache(maxsize=1)
def load_engine(path: str, seed: int) -> Any:
    """vLLM's LLM for a local model directory (bf16); one per process, as each holds its memory."""
    from vllm import LLM

    on_gpu = _on_gpu()
    return LLM(
        model=path,
        seed=seed,
        dtype="bfloat16",
        gpu_memory_utilization=GPU_MEMORY_SHARE if on_gpu else CPU_MEMORY_SHARE,
        enable_prefix_caching=True,  # the n completions of a prompt share its prefix
        enforce_eager=not on_gpu,  # on a CPU, torch.compile's warm-up took 70-130 s of a start; eager starts in ~20 s
    )


def sample_vllm(
    copy: LocalModel,
    prompts: list[Prompt],
    settings: SamplingSettings,
    progress: Progress | None,
    should_stop: ShouldStop | None,
) -> Sampled:
    import vllm
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    tokenizer = load_tokenizer(copy.path)
    ends = end_token_ids(tokenizer, copy.path)
    llm = load_engine(copy.path, settings.seed)
    per_request_seed = _on_gpu()
    report = DecodingReport(len(prompts) * settings.n, settings.max_new_tokens, progress, should_stop)
    per_call = max(1, SEQUENCES_PER_CALL // settings.n)
    groups: list[SampledGroup] = []
    for start in range(0, len(prompts), per_call):
        stop_if_asked(should_stop, f"sampling stopped after {report.done}/{report.total} completions")
        chunk = prompts[start : start + per_call]
        inputs = [TokensPrompt(prompt_token_ids=prompt_ids(tokenizer, prompt)) for prompt in chunk]
        params = [
            sampling_params(SamplingParams, settings, ends, start + offset if per_request_seed else None)
            for offset in range(len(chunk))
        ]
        report.start_batch(len(chunk) * settings.n)
        outputs = llm.generate(inputs, params, use_tqdm=False)
        for offset, output in enumerate(outputs):
            samples = output.outputs
            groups.append(
                SampledGroup(
                    prompt_index=start + offset,
                    prompt=chunk[offset],
                    completions=[sample.text for sample in samples],
                    token_counts=[len(sample.token_ids) - (sample.finish_reason == "stop") for sample in samples],
                    truncated=[sample.finish_reason == "length" for sample in samples],
                )
            )
        report.end_batch()
    used = engine_record(
        "vllm",
        vllm.__version__,
        "cuda" if _on_gpu() else "cpu",
        str(llm.llm_engine.model_config.dtype).removeprefix("torch."),
        copy,
        settings,
        seeded=True,
    )
    return Sampled(groups=groups, sampled_with=used)


def sampling_params(factory: Any, settings: SamplingSettings, ends: list[int], index: int | None) -> Any:
    """vLLM's SamplingParams for one prompt: pure sampling at the temperature (greedy at 0), its own seed (none for
    ``index`` None: the engine's generator), the engines' common end tokens (vLLM's own eos is not trusted:
    docs/architecture.md §7)."""
    return factory(
        n=settings.n,
        temperature=settings.temperature,
        top_p=settings.top_p if settings.temperature > 0 else 1.0,
        top_k=0,
        max_tokens=settings.max_new_tokens,
        seed=None if index is None else settings.seed + index,
        stop_token_ids=ends,
        skip_special_tokens=True,
    )


def _on_gpu() -> bool:
    import torch

    return torch.cuda.is_available()
