"""Known model sizes, and the size of a local model read from its config.json.

Parameter counts are the publishers' stated totals (model cards), in billions.
"""

from __future__ import annotations

import json
from pathlib import Path

from skill.errors import SkillError

# Keys are lower-cased Hugging Face ids without the organisation.
KNOWN_PARAMETERS_B: dict[str, float] = {
    "smollm2-135m-instruct": 0.135,  # HuggingFaceTB/SmolLM2-135M-Instruct model card: 135M
    "smollm2-135m": 0.135,
    "qwen2.5-0.5b-instruct": 0.49,  # Qwen/Qwen2.5-0.5B model card: 0.49B
    "qwen2.5-0.5b": 0.49,
    "qwen2.5-1.5b-instruct": 1.54,  # Qwen/Qwen2.5-1.5B: 1.54B
    "qwen2.5-1.5b": 1.54,
    "qwen2.5-3b-instruct": 3.09,  # Qwen/Qwen2.5-3B: 3.09B
    "qwen2.5-3b": 3.09,
    "qwen2.5-7b-instruct": 7.61,  # Qwen/Qwen2.5-7B: 7.61B
    "qwen2.5-7b": 7.61,
    "qwen2.5-math-7b": 7.61,
    "qwen2.5-14b-instruct": 14.7,  # Qwen/Qwen2.5-14B: 14.7B
    "qwen2.5-14b": 14.7,
    "qwen2.5-32b-instruct": 32.5,  # Qwen/Qwen2.5-32B: 32.5B
    "qwen2.5-32b": 32.5,
    "qwen3-0.6b": 0.6,  # Qwen/Qwen3-0.6B: 0.6B
    "qwen3-1.7b": 1.7,  # Qwen/Qwen3-1.7B: 1.7B
    "qwen3-4b": 4.0,  # Qwen/Qwen3-4B: 4.0B
    "qwen3-8b": 8.2,  # Qwen/Qwen3-8B: 8.2B
    "llama-3.2-1b-instruct": 1.24,  # meta-llama/Llama-3.2-1B: 1.23B
    "llama-3.2-1b": 1.24,
    "llama-3.2-3b-instruct": 3.21,  # meta-llama/Llama-3.2-3B: 3.21B
    "llama-3.2-3b": 3.21,
    "llama-3.1-8b-instruct": 8.03,  # meta-llama/Llama-3.1-8B: 8.03B
    "llama-3.1-8b": 8.03,
    "llama-3.1-70b-instruct": 70.6,  # meta-llama/Llama-3.1-70B: 70.6B
    "llama-3.1-70b": 70.6,
}


def known_parameters_b(model: str) -> float | None:
    """The stated parameter count (billions) of a known model id, or None.

    >>> known_parameters_b("Qwen/Qwen2.5-7B-Instruct")
    7.61
    >>> known_parameters_b("acme/mystery-model") is None
    True
    """
    return KNOWN_PARAMETERS_B.get(model.rsplit("/", 1)[-1].lower())


def parameters_from_config(config: dict) -> float:
    """Approximate parameter count (billions) of a dense decoder from its config.json fields.

    Counts embeddings (once when tied), attention with grouped KV heads, a gated MLP and norms.

    >>> round(parameters_from_config({"vocab_size": 49152, "hidden_size": 576, "num_hidden_layers": 30,
    ...     "num_attention_heads": 9, "num_key_value_heads": 3, "intermediate_size": 1536,
    ...     "tie_word_embeddings": True}), 3)
    0.135
    """
    try:
        vocab = int(config["vocab_size"])
        hidden = int(config["hidden_size"])
        layers = int(config["num_hidden_layers"])
        heads = int(config["num_attention_heads"])
        ffn = int(config["intermediate_size"])
    except (KeyError, TypeError, ValueError) as exc:
        raise SkillError(
            f"config.json lacks a field needed to size the model ({exc}).",
            "Send model.parameters_billions explicitly.",
        ) from None
    kv_heads = int(config.get("num_key_value_heads") or heads)
    head_dim = int(config.get("head_dim") or hidden // heads)
    attention = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2
    mlp = 3 * hidden * ffn
    per_layer = attention + mlp + 2 * hidden
    embeddings = vocab * hidden * (1 if config.get("tie_word_embeddings", False) else 2)
    return (layers * per_layer + embeddings + hidden) / 1e9


def parameters_from_local_dir(path: Path) -> float | None:
    """Size a local model directory from its config.json, or None when there is no config.json."""
    config_file = path / "config.json"
    if not config_file.is_file():
        return None
    return parameters_from_config(json.loads(config_file.read_text()))
