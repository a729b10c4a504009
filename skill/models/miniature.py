"""A miniature of a model: its architecture (``model_type``, module classes, attention layout, tied embeddings) at a
size a CPU trains in seconds, with random weights, for rehearsing a GPU plan (``skill.runs.rehearsal``).

The architecture comes from the model's own config.json where it can be read (a local directory, the Hub, the Hub
cache), shrunk: 2 layers, hidden 64, 2 attention heads of 32 (vLLM's CPU attention takes head sizes 32, 64, 80, ...),
grouped-query attention kept when the model has it, the feed-forward 128 wide. FSDP's wrap policy (the model's
``_no_split_modules``) and ZeRO-3's hooks then see the real decoder-layer classes. Without a readable config, the
family is inferred from the shape table (``models.shapes``: q/k norms → qwen3, attention biases → qwen2, else
llama) and the result says so. The tokenizer is the model's own where it can be loaded (its vocabulary with it),
else the embedded SmolLM2 tokenizer, also said.

May import: ``models``, ``errors``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from skill.errors import SkillError
from skill.models.hub import local_copy
from skill.models.shapes import known_model
from skill.models.sources import embedded_tokenizer_dir, publish_atomically

LAYERS, HIDDEN, HEADS, HEAD_DIM, FFN = 2, 64, 2, 32, 128
# Config keys the miniature sets (the rest of the real config stays: rope, norms, activation, biases, ...).
SHRUNK = {
    "num_hidden_layers": LAYERS,
    "hidden_size": HIDDEN,
    "num_attention_heads": HEADS,
    "head_dim": HEAD_DIM,
    "intermediate_size": FFN,
    "max_position_embeddings": 2048,
    "max_window_layers": LAYERS,
}
# Config keys that name the real checkpoint's files or its quantization: a miniature has neither.
DROPPED = ("quantization_config", "_name_or_path", "auto_map", "torch_dtype", "dtype", "layer_types", "rope_scaling")


class Miniature(BaseModel):
    """Where a model's miniature lies and what it kept of the model."""

    path: str = Field(description="The directory to hand from_pretrained (config, weights, tokenizer).")
    model_type: str
    architectures: list[str]
    config_source: str = Field(description="Where the architecture came from: config.json, or the shape table.")
    tokenizer_source: str = Field(description="The model's own tokenizer, or the embedded one (and why).")
    parameters: int


def real_config(name: str) -> tuple[dict[str, Any] | None, str]:
    """The model's config.json as a dict, and where it came from; None (with why) when it cannot be read here."""
    try:
        copy = local_copy(name, "config")
    except SkillError as exc:
        return None, exc.problem
    path = Path(copy.path) / "config.json"
    if not path.is_file():
        return None, f"{copy.path} has no config.json"
    return json.loads(path.read_text()), f"{name}'s config.json ({copy.source})"


def inferred_config(name: str) -> tuple[dict[str, Any], str]:
    """A config for the model's family from the shape table (no config.json here).

    >>> inferred_config("Qwen/Qwen2.5-7B-Instruct")[0]["model_type"]
    'qwen2'
    >>> inferred_config("acme/mystery")[0]["model_type"]
    'llama'
    """
    known = known_model(name)
    shape = known.shape if known else None
    model_type = "qwen3" if shape and shape.qk_norm else "qwen2" if shape and shape.attention_bias else "llama"
    config = {
        "model_type": model_type,
        "num_key_value_heads": 1 if shape is None or shape.kv_heads < shape.heads else HEADS,
        "tie_word_embeddings": bool(shape and shape.tied_embeddings),
    }
    where = "the shape table" if known else "no config.json or shape-table entry: a Llama"
    return config, f"{model_type} inferred from {where} (config.json not readable here)"


def miniature_config(config: dict[str, Any], vocab_size: int, special: dict[str, int | None]) -> Any:
    """The real config shrunk (``SHRUNK``), its vocabulary the tokenizer's, as a transformers config object."""
    from transformers import AutoConfig

    text = dict(config.get("text_config") or config)
    kept = {key: value for key, value in text.items() if key not in DROPPED and key not in SHRUNK}
    grouped = int(text.get("num_key_value_heads") or HEADS) < int(text.get("num_attention_heads") or HEADS)
    kept.update(SHRUNK, vocab_size=vocab_size, num_key_value_heads=1 if grouped else HEADS, **special)
    model_type = kept.pop("model_type", "llama")
    return AutoConfig.for_model(model_type, **kept)


# Fewer tokens than this is no vocabulary: transformers 5 builds an empty tokenizer (1 token) from a directory
# that holds a config.json and no tokenizer files, and a miniature sized to it cannot embed a single prompt.
MIN_VOCABULARY = 256


def _tokenizer(name: str, config_read: bool) -> tuple[Any, str]:
    """The model's own tokenizer where it loads with a vocabulary, else the embedded one, with why."""
    from transformers import AutoTokenizer

    embedded = AutoTokenizer.from_pretrained(embedded_tokenizer_dir())
    if not config_read:
        return embedded, "the embedded SmolLM2 tokenizer"
    try:
        own = AutoTokenizer.from_pretrained(local_copy(name, "tokenizer").path)
    except (SkillError, OSError, ValueError) as exc:
        why = exc.problem if isinstance(exc, SkillError) else str(exc).splitlines()[0]
        return embedded, f"the embedded SmolLM2 tokenizer ({why})"
    if len(own) < MIN_VOCABULARY:
        return embedded, f"the embedded SmolLM2 tokenizer ({name}'s tokenizer loads with {len(own)} token(s) here)"
    return own, f"{name}'s own tokenizer"


def save_miniature(name: str, directory: Path, seed: int = 0) -> Miniature:
    """Build (once: an existing miniature is reused) and describe the miniature of ``name`` in ``directory``."""
    config, config_source = real_config(name)
    if config is None:
        config, why = inferred_config(name)
        config_source = f"{why}: {config_source}"
    tokenizer, tokenizer_source = _tokenizer(name, config_read="inferred" not in config_source)

    def build(target: Path) -> None:
        import torch
        from transformers import AutoModelForCausalLM

        special = {
            "bos_token_id": tokenizer.bos_token_id,
            "eos_token_id": tokenizer.eos_token_id,
            "pad_token_id": tokenizer.pad_token_id,
        }
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(miniature_config(config, len(tokenizer), special))
        model.save_pretrained(target)
        tokenizer.save_pretrained(target)
        (target / "miniature.json").write_text(json.dumps({"config": config_source, "tokenizer": tokenizer_source}))

    path = publish_atomically(directory, build)
    saved = json.loads((path / "config.json").read_text())
    sources = json.loads((path / "miniature.json").read_text())
    from safetensors import safe_open

    with safe_open(str(path / "model.safetensors"), "pt") as weights:
        count = sum(_numel(weights, key) for key in weights.keys())  # noqa: SIM118 (safe_open has no __iter__)
    return Miniature(
        path=str(path),
        model_type=saved["model_type"],
        architectures=saved.get("architectures") or [],
        config_source=sources["config"],
        tokenizer_source=sources["tokenizer"],
        parameters=count,
    )


def _numel(weights: Any, key: str) -> int:
    size = 1
    for dimension in weights.get_slice(key).get_shape():
        size *= dimension
    return size
