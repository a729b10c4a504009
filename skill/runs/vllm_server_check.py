"""Before a run's first step against a vLLM server: is it the server this run needs?

Rank 0 asks the server through TRL's own client (``VLLMClient``, the one its trainer then uses):

- it serves the recipe's model (the path or name the launch plan started it with);
- its context holds the recipe's prompt budget plus its completion budget (a shorter one fails mid-run, on the
  first long prompt);
- it samples one group for the first training prompt from the trainer's token ids, as TRL's server mode sends
  them (``num_generations`` completions, the recipe's temperature and completion budget). Every completion must
  fit the budget, and one that stops early must end on a token the trainer's tokenizer counts as the end: TRL
  masks a completion at the trainer's eos, so a server stopping on another token (the embedded GGUF tokenizer's
  eos is wrong for vLLM, docs/architecture.md §7) trains on completions it counts as cut off.

The answers go to ``vllm_server_check.json`` and the log; a mismatch stops the run before GRPOTrainer loads,
with what differs. May import: ``recipe``, ``models``, ``errors``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from skill.errors import SkillError
from skill.grpo_fields import GRPOFields
from skill.models.sources import resolve_model_path, resolve_tokenizer_path
from skill.recipe.schema import GRPORecipe
from skill.sampling.prompts import end_token_ids

SERVER_CHECK_FILE = "vllm_server_check.json"


def server_base_url(settings: dict[str, Any]) -> str:
    """Where TRL's trainer will look for the server, from the GRPOConfig values it is built with.

    >>> server_base_url({"vllm_server_port": 40002}), server_base_url({"vllm_server_base_url": "http://h:9"})
    ('http://0.0.0.0:40002', 'http://h:9')
    """
    fields = GRPOFields(settings)
    if fields.vllm_server_base_url:
        return fields.vllm_server_base_url
    return f"http://{fields.vllm_server_host}:{fields.vllm_server_port}"


def needed_context(recipe: GRPORecipe, settings: dict[str, Any]) -> int:
    """The context a server must hold: the longest prompt run_grpo keeps (``dataset.max_prompt_tokens``; TRL 1.16 no
    longer truncates prompts) plus the completion budget."""
    return recipe.dataset.max_prompt_tokens + int(GRPOFields(settings).max_completion_length)


def prompt_token_ids(tokenizer: Any, prompt: Any) -> list[int]:
    """The prompt as the trainer tokenizes it: a conversation through the chat template with the generation prompt,
    a plain string as it is."""
    if isinstance(prompt, list):
        text = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
        return tokenizer(text, add_special_tokens=False)["input_ids"]
    return tokenizer(prompt)["input_ids"]


def check_vllm_server(run_dir: Path, recipe: GRPORecipe, prompt: Any, settings: dict[str, Any]) -> dict[str, Any]:
    """Check the server against the recipe (see the module docstring); write and return what was found."""
    from transformers import AutoTokenizer
    from trl.generation.vllm_client import VLLMClient

    fields = GRPOFields(settings)
    base_url = server_base_url(settings)
    client = VLLMClient(base_url=base_url, connection_timeout=fields.vllm_server_timeout)
    model_config = client.get_server_info().get("model_config", {})
    model_path = str(resolve_model_path(recipe.model.name))
    budget = int(fields.max_completion_length)
    needed = needed_context(recipe, settings)
    tokenizer = AutoTokenizer.from_pretrained(resolve_tokenizer_path(recipe.model.name))
    ids = prompt_token_ids(tokenizer, prompt)
    started = time.time()
    output = client.generate(
        prompts=[ids],
        n=int(fields.num_generations),
        temperature=float(fields.temperature),
        max_tokens=budget,
    )
    completions = output["completion_ids"]
    ends = set(end_token_ids(tokenizer, model_path))
    early = [row for row in completions if len(row) < budget]
    found = {
        "base_url": base_url,
        "served_model": model_config.get("model"),
        "server_max_model_len": model_config.get("max_model_len"),
        "needed_context": needed,
        "prompt_tokens": len(ids),
        "server_prompt_ids_match": output["prompt_ids"] == [ids],
        "completion_tokens": [len(row) for row in completions],
        "stopped_early": len(early),
        "stopped_on_trainer_end": sum(1 for row in early if row and row[-1] in ends),
        "trainer_end_ids": sorted(ends),
        "seconds": round(time.time() - started, 2),
    }
    (run_dir / SERVER_CHECK_FILE).write_text(json.dumps(found, indent=1))
    print(f"vLLM server check: {json.dumps(found)}", flush=True)
    problems = server_problems(found, {recipe.model.name, model_path}, budget)
    if problems:
        raise SkillError(
            f"The vLLM server at {base_url} does not match this run: " + "; ".join(problems) + ".",
            "Start the server the run's launch plan starts (its vllm command in emit's launch commands), or point "
            "vllm_server_base_url at one serving the recipe's model.",
        )
    return found


def server_problems(found: dict[str, Any], model_names: set[str], budget: int) -> list[str]:
    """What differs between the server and the run, in words; [] when nothing does.

    >>> server_problems({"served_model": "a", "server_max_model_len": 100, "needed_context": 200,
    ...     "server_prompt_ids_match": True, "completion_tokens": [4, 9], "stopped_early": 1,
    ...     "stopped_on_trainer_end": 0}, {"a"}, budget=8)  # doctest: +NORMALIZE_WHITESPACE
    ['its context is 100 tokens, the run needs 200 (prompt budget + completion budget)',
     'a completion of 9 tokens, over the budget of 8',
     "1 completion(s) stopped before the budget on a token the trainer's tokenizer does not count as the end"]
    """
    problems = []
    if found["served_model"] not in model_names:
        problems.append(f"it serves {found['served_model']!r}, the recipe trains {sorted(model_names)[0]!r}")
    if found["server_max_model_len"] is not None and found["server_max_model_len"] < found["needed_context"]:
        problems.append(
            f"its context is {found['server_max_model_len']} tokens, the run needs {found['needed_context']} "
            "(prompt budget + completion budget)"
        )
    if not found["server_prompt_ids_match"]:
        problems.append("it echoed other prompt token ids than the trainer sent")
    longest = max(found["completion_tokens"], default=0)
    if longest > budget:
        problems.append(f"a completion of {longest} tokens, over the budget of {budget}")
    wrong_end = found["stopped_early"] - found["stopped_on_trainer_end"]
    if wrong_end:
        problems.append(
            f"{wrong_end} completion(s) stopped before the budget on a token the trainer's tokenizer does not count "
            "as the end"
        )
    return problems
