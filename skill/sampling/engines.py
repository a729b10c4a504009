"""Which engine samples, and the one call every caller makes: ``sample_completions``.

See the package docstring (``skill.sampling``) for the engines and how ``auto`` chooses.
"""

from __future__ import annotations

from skill.errors import SkillError
from skill.models.hub import local_copy
from skill.sampling.progress import Progress, ShouldStop
from skill.sampling.schema import Prompt, Sampled, SamplingEngine, SamplingSettings


def chosen_engine(engine: SamplingEngine) -> str:
    """The engine ``auto`` resolves to here (see the module docstring).

    >>> chosen_engine(SamplingEngine(kind="transformers"))
    'transformers'
    """
    if engine.kind != "auto":
        return engine.kind
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        return "transformers"
    import torch

    return "vllm" if torch.cuda.is_available() else "transformers"


def sample_completions(
    model: str,
    prompts: list[Prompt],
    settings: SamplingSettings,
    progress: Progress | None = None,
    should_stop: ShouldStop | None = None,
    engine: SamplingEngine | None = None,
) -> Sampled:
    """``settings.n`` completions for every prompt, in prompt order, through the chosen engine.

    >>> SamplingSettings(n=4, temperature=0.7).max_new_tokens
    256
    """
    if not prompts:
        raise SkillError("No prompts to sample from.", "Send at least one prompt.")
    engine = engine or SamplingEngine()
    kind = chosen_engine(engine)
    if kind == "endpoint":
        from skill.sampling.endpoint import sample_endpoint  # lazy: only an endpoint needs its HTTP client

        copy = local_copy(model, "tokenizer", progress)
        return sample_endpoint(copy, engine, prompts, settings, progress, should_stop)
    copy = local_copy(model, "model", progress)
    if kind == "vllm":
        from skill.sampling.vllm_engine import sample_vllm  # lazy: vLLM is an extra

        return sample_vllm(copy, prompts, settings, progress, should_stop)
    from skill.sampling.transformers_engine import sample_transformers  # lazy: torch only when sampling

    return sample_transformers(copy, prompts, settings, progress, should_stop)
