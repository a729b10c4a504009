"""How big a model is: its decoder shape and its parameter count, from the checked table or from the model's
own config.json.

The shape table (``shapes.KNOWN_MODELS``) is a cache of checked rows: a name there is sized with no file and no
network. Any other model is sized from its config.json, read through ``hub.local_copy(name, "config")``: a local
directory, the user's Hub cache, or config.json alone fetched from the Hub (``HF_HUB_OFFLINE``, ``HF_HOME``,
``HF_TOKEN`` honoured there). Its parameter count is transformers' own: the model built from that config on the
meta device (no weights, no memory), so it is exact for every causal LM the installed transformers knows,
mixture-of-experts included; where transformers cannot build it, the shape's own count stands in.

The memory estimate needs more than a count: the decoder shape (``shapes.shape_from_config``, experts and
multi-head latent attention included). It is accepted only when its own count is within ``SHAPE_TOLERANCE`` of
transformers' count, so a model the estimator's formulas do not describe (a non-gated MLP as in GPT-NeoX or Phi-2)
is refused with the reason instead of estimated wrongly; the recipe is still emitted, and a forced run skips the
memory check.
May import: ``models.shapes``, ``models.hub``, ``errors``.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import NamedTuple

from skill.errors import SkillError
from skill.models.hub import local_copy
from skill.models.shapes import ModelShape, known_model, shape_from_config

SHAPE_TOLERANCE = 0.02  # the table's own check: a shape's count within 2% of the stated one


class Sizing(NamedTuple):
    """What a config.json says about a model's size."""

    parameters: int
    shape: ModelShape | None
    refusal: SkillError | None  # why there is no shape for the memory estimate


def resolve_shape(model: str) -> ModelShape:
    """The decoder shape of a model named by hub id, local directory or the embedded default's id: the
    table's row, else its config.json's (see the module docstring).

    >>> resolve_shape("embedded:SmolLM2-135M-Instruct").hidden
    576
    >>> resolve_shape("Qwen/Qwen2.5-7B-Instruct").kv_heads  # a table row: no file, no network
    4
    """
    entry = known_model(model)
    if entry is not None:
        return entry.shape
    sizing = _sizing(model)
    if sizing.shape is None:
        refusal = sizing.refusal or SkillError("its config.json gives no decoder shape.")
        raise SkillError(f"Model {model!r}: {refusal.problem}", refusal.fix)
    return sizing.shape


def parameters_billions(model: str, given: float | None = None) -> float:
    """A model's parameter count in billions: ``given`` when the caller sent one (their number wins, and no file is
    read), else the table's row, else its config.json's; an unreadable config's error says the count can be sent.

    >>> round(parameters_billions("Qwen/Qwen2.5-7B-Instruct"), 2)
    7.62
    >>> parameters_billions("acme/private-model", given=3.0)
    3.0
    """
    if given is not None:
        return given
    entry = known_model(model)
    if entry is not None:
        return entry.shape.parameters() / 1e9
    try:
        return _sizing(model).parameters / 1e9
    except SkillError as exc:
        raise SkillError(exc.problem, f"{exc.fix} Or send model.parameters_billions.".strip()) from None


def _sizing(model: str) -> Sizing:
    """The sizing of a model outside the table, from its config.json."""
    path = Path(_config_dir(model)) / "config.json"
    if not path.is_file():
        raise SkillError(
            f"Model directory {model!r} has no config.json, which says the model's size.",
            "Send the directory save_pretrained wrote (it holds config.json), or the model's hub id.",
        )
    text = path.read_text()
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SkillError(f"{path} is not valid JSON ({exc}).", "Send a model whose config.json loads.") from None
    if not isinstance(config, dict):
        raise SkillError(f"{path} holds no JSON object.", "Send a model whose config.json is a transformers config.")
    return _sized(text)


def _config_dir(model: str) -> str:
    """Where config.json lies: a local directory as it is now (the user's files may change), a hub id's once."""
    local = Path(model).expanduser()
    return str(local) if local.is_dir() else _hub_config_dir(model)


@functools.lru_cache(maxsize=64)
def _hub_config_dir(model: str) -> str:
    """The Hub snapshot holding config.json (cached: an emit asks several times; a failure is not kept, so it is
    retried on the next call)."""
    return local_copy(model, "config").path


@functools.lru_cache(maxsize=32)
def _sized(config_text: str) -> Sizing:
    """The count and the shape of one config.json's text (cached: building the model on the meta device takes a
    second or two)."""
    config = json.loads(config_text)
    try:
        shape, refusal = shape_from_config(config), None
    except SkillError as exc:
        shape, refusal = None, exc
    counted = transformers_count(config)
    if counted is not None and shape is not None and abs(shape.parameters() - counted) > SHAPE_TOLERANCE * counted:
        kind = (config.get("text_config") or config).get("model_type", "unnamed")
        refusal = SkillError(
            f"transformers counts {counted / 1e9:.4g}B parameters in its config.json, the decoder shape the "
            f"memory estimator reads {shape.parameters() / 1e9:.4g}B: the estimator's formulas (decoders with "
            f"gated MLPs, dense or experts: Llama, Qwen, Mistral, Gemma, DeepSeek families) do not describe "
            f"model_type {kind!r}.",
            "Send estimate_memory a shape that describes it, or send method 'full', 'lora' or 'qlora' (not 'auto') "
            "and check memory on the target; a forced run_grpo skips the memory check.",
        )
        shape = None
    if counted is not None:
        return Sizing(counted, shape, refusal)
    if shape is not None:  # transformers cannot build it here (a model_type newer than it): the shape's own count
        return Sizing(shape.parameters(), shape, None)
    problem = refusal.problem if refusal else "it gives no decoder shape."
    raise SkillError(
        f"transformers cannot build this model from its config.json, and {problem[0].lower()}{problem[1:]}",
        refusal.fix if refusal else "Send model.parameters_billions.",
    )


def transformers_count(config: dict) -> int | None:
    """The parameters of the causal LM transformers builds from ``config`` (a multimodal config: its language
    model) on the meta device, tied weights once; None when the installed transformers cannot build it.

    >>> transformers_count({"model_type": "llama", "vocab_size": 100, "hidden_size": 16, "intermediate_size": 32,
    ...     "num_hidden_layers": 2, "num_attention_heads": 4, "tie_word_embeddings": True})
    6800
    >>> transformers_count({"model_type": "no-such-architecture"}) is None
    True
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.utils import logging

    fields = {key: value for key, value in config.items() if key != "model_type"}
    verbosity = logging.get_verbosity()
    logging.set_verbosity_error()  # from_config's notes on unused or defaulted fields say nothing about the size
    try:
        built = AutoConfig.for_model(config.get("model_type", ""), **fields).get_text_config()
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(built)
        return sum(parameter.numel() for parameter in model.parameters())
    except Exception:  # an unknown model_type, remote code, a config transformers refuses: no count from it
        return None
    finally:
        logging.set_verbosity(verbosity)
