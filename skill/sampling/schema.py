"""The sampling contracts: what to sample, with which engine, and what came back (every engine's shape)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Prompt = str | list[dict[str, Any]]
API_KEY_ENV = "OPENAI_API_KEY"


class SamplingSettings(BaseModel):
    """How to sample: like training (temperature, completion budget), seeded."""

    n: int = Field(default=8, ge=1, description="Completions per prompt.")
    temperature: float = Field(default=1.0, ge=0, description="0 means greedy.")
    top_p: float = Field(default=1.0, gt=0, le=1)
    max_new_tokens: int = Field(default=256, gt=0)
    seed: int = 3407
    batch_sequences: int = Field(default=64, gt=0, description="Sequences generated per forward batch.")


class SamplingEngine(BaseModel):
    """Which engine samples the model.

    Every engine applies the same chat template, end tokens and sampling settings (the sampling module)."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["auto", "transformers", "vllm", "endpoint"] = Field(
        default="auto",
        description="'auto': vLLM when installed with a CUDA GPU present, else transformers (GPU in bf16 when "
        "present). 'endpoint': an OpenAI-compatible completions server you run (base_url).",
    )
    base_url: str | None = Field(default=None, description="An endpoint's API root: 'http://127.0.0.1:8000/v1'.")
    served_model: str | None = Field(default=None, description="Its name for the model (default: the model).")
    api_key_env: str = Field(
        default=API_KEY_ENV, description="Environment variable holding the endpoint's API key (none needed if unset)."
    )

    @model_validator(mode="after")
    def _endpoint_has_url(self) -> SamplingEngine:
        if (self.kind == "endpoint") != (self.base_url is not None):
            raise ValueError("kind='endpoint' needs base_url, and base_url belongs to kind='endpoint' only")
        return self


class SampledGroup(BaseModel):
    """The completions of one prompt."""

    prompt_index: int
    prompt: Prompt
    completions: list[str]
    token_counts: list[int] = Field(description="Each completion's length in tokens, its end-of-sequence token aside.")
    truncated: list[bool] = Field(description="Whether each completion was cut at max_new_tokens, unfinished.")


class SampledWith(BaseModel):
    """Which engine sampled which weights, and how: enough to sample the same way again."""

    engine: Literal["transformers", "vllm", "endpoint"]
    version: str = Field(description="The engine's version (for an endpoint, what its /version says, if anything).")
    device: str = Field(description="cuda, cpu, or the endpoint's URL.")
    dtype: str | None = None
    model: str
    model_revision: str | None = Field(description="The hub snapshot's commit hash (None for a local directory).")
    seed: int | None = Field(description="The seed sampling started from (None: an endpoint's own generator).")
    temperature: float
    max_new_tokens: int


def engine_record(
    engine: str, version: str, device: str, dtype: str | None, model: Any, settings: SamplingSettings, seeded: bool
) -> SampledWith:
    """What an engine records of a call: itself, the model's name and revision (a ``models.hub.LocalModel``), and
    the settings it sampled with (the seed only where the engine took it)."""
    return SampledWith(
        engine=engine,  # type: ignore[arg-type]  # one of the three engines
        version=version,
        device=device,
        dtype=dtype,
        model=model.name,
        model_revision=model.revision,
        seed=settings.seed if seeded else None,
        temperature=settings.temperature,
        max_new_tokens=settings.max_new_tokens,
    )


class Sampled(BaseModel):
    groups: list[SampledGroup]
    sampled_with: SampledWith
