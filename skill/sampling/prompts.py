"""What every engine sends: the model's own tokenizer, its chat template, and the tokens that end a completion."""

from __future__ import annotations

import functools
from typing import Any

from skill.errors import SkillError


@functools.lru_cache(maxsize=4)
def load_tokenizer(path: str) -> Any:
    """The tokenizer of a local model directory, padding on the left (decoder-only batches), cached per process."""
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError) as exc:
        raise SkillError(f"Cannot load the tokenizer in {path}: {exc}", "Send a model with its tokenizer.") from None
    if len(tokenizer) == 0:  # transformers builds an empty tokenizer from a config.json without tokenizer files
        raise SkillError(
            f"{path} holds no tokenizer files (tokenizer.json, tokenizer_config.json, ...): prompts cannot be counted "
            "or rendered.",
            "Send the model directory with its tokenizer (save_pretrained of the tokenizer too), or its hub id.",
        )
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def render_prompt(tokenizer: Any, prompt: Any) -> str:
    """Conversational prompts go through the chat template (with the generation prompt); text stays text."""
    if isinstance(prompt, str):
        return prompt
    if not isinstance(prompt, list) or not all(isinstance(m, dict) and "content" in m for m in prompt):
        raise SkillError(f"Prompt {prompt!r} is neither text nor a list of chat messages.", "Send one of those.")
    return tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)


def prompt_ids(tokenizer: Any, prompt: Any) -> list[int]:
    """The prompt's token ids as the transformers engine feeds them: the rendered text, no special tokens added
    (a chat template writes its own)."""
    return tokenizer(render_prompt(tokenizer, prompt), add_special_tokens=False)["input_ids"]


def end_token_ids(tokenizer: Any, path: str) -> list[int]:
    """The ids that end a completion: the tokenizer's eos and the generation config's (one id or a list)."""
    from transformers import GenerationConfig

    ends = {tokenizer.eos_token_id} - {None}
    try:
        configured = GenerationConfig.from_pretrained(path).eos_token_id
    except OSError:  # no generation_config.json: the tokenizer's eos is the end
        configured = None
    ends |= set(configured if isinstance(configured, list) else [configured]) - {None}
    return sorted(int(token) for token in ends)
