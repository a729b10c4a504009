"""The prompt budget: ``dataset.max_prompt_tokens`` sized from the real prompts, measured with the model's tokenizer.

emit_grpo_config reads up to 256 rows through the one loader (``skill.data``; a hub dataset is downloaded when
needed), tokenizes their prompts with the model's tokenizer (``models.hub``: its files alone are fetched) as TRL
does (the chat template for conversational prompts) and sizes the budget from the p99 and the longest prompt.
The budget sizes the memory estimate and vLLM's ``max_model_len``, and run_grpo drops longer prompts. Only when
the data or the tokenizer cannot be read (the Hub unreachable and nothing cached, a gated model without a token)
the stated or default budget stays, and the reason says why.

May import: ``skill.data``, ``skill.models``, ``skill.sampling``, ``skill.errors``, ``skill.recipe.schema``.
"""

from __future__ import annotations

import math
from typing import Any

from skill.data import DatasetSpec, load_rows, prompt_token_counts
from skill.errors import SkillError
from skill.models.hub import local_copy
from skill.recipe.schema import RecipeReason
from skill.sampling.prompts import load_tokenizer

SAMPLE_ROWS = 256  # prompts measured: enough for a p99, cheap enough for every emit
BUDGET_STEP = 64  # the budget is rounded up to this, leaving room for unsampled prompts a little longer
OUTLIER_FACTOR = 2  # a longest prompt over twice the p99 is an outlier: size to the p99 and drop it
FIELD = "dataset.max_prompt_tokens"


def model_tokenizer(model: str) -> Any:
    """The model's tokenizer: its files fetched when needed (``models.hub``); a SkillError says why it cannot be."""
    return load_tokenizer(local_copy(model, "tokenizer").path)


def percentile(values: list[int], share: float) -> int:
    """The nearest-rank percentile.

    >>> percentile(list(range(1, 101)), 0.99), percentile([5], 0.99), percentile([1, 2, 3, 1000], 0.5)
    (99, 5, 2)
    """
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def measure_prompt_tokens(dataset: DatasetSpec, model: str, sample: int = SAMPLE_ROWS) -> list[int]:
    """The token lengths of the first ``sample`` prompts, as TRL will tokenize them for ``model``."""
    rows = load_rows(dataset, limit=sample)
    missing = [index for index, row in enumerate(rows) if "prompt" not in row]
    if not rows or missing:
        raise SkillError(
            f"the dataset has no prompts to measure (rows without 'prompt': {missing[:5]})",
            "Send dataset.prompt_column or dataset.prompt_template.",
        )
    return prompt_token_counts(model_tokenizer(model), [row["prompt"] for row in rows])


def size_prompt_budget(dataset: DatasetSpec, model: str) -> tuple[DatasetSpec, RecipeReason]:
    """The dataset with its measured budget (a stated one is kept), and the reason with the numbers."""
    stated = "max_prompt_tokens" in dataset.model_fields_set
    kept = f"kept the {'stated' if stated else 'default'} {dataset.max_prompt_tokens}"
    try:
        lengths = measure_prompt_tokens(dataset, model)
    except (SkillError, ValueError) as exc:  # ValueError: e.g. a chat prompt for a tokenizer without a template
        problem = (exc.problem if isinstance(exc, SkillError) else str(exc).splitlines()[0][:160]).rstrip(".")
        reason = f"not measured ({problem}); {kept}"
        return dataset, RecipeReason(field=FIELD, value=dataset.max_prompt_tokens, source="dataset", reason=reason)
    p99, longest, count = percentile(lengths, 0.99), max(lengths), len(lengths)
    measured = f"measured on {count} prompts with {model}'s tokenizer (as TRL tokenizes them): p99 {p99}, max {longest}"
    if stated:
        budget, how = dataset.max_prompt_tokens, kept
    elif longest > OUTLIER_FACTOR * p99:
        budget = math.ceil(p99 / BUDGET_STEP) * BUDGET_STEP
        how = f"sized to the p99 rounded up to a multiple of {BUDGET_STEP} (the longest is an outlier)"
    else:
        budget = math.ceil(longest / BUDGET_STEP) * BUDGET_STEP
        how = f"sized to the longest rounded up to a multiple of {BUDGET_STEP}"
    over = sum(length > budget for length in lengths)
    if over:
        how += f"; {over} of {count} sampled prompts are longer: run_grpo drops them"
        how += " (a larger max_prompt_tokens keeps them)"
    sized = dataset.model_copy(update={"max_prompt_tokens": budget})
    return sized, RecipeReason(field=FIELD, value=budget, source="dataset", reason=f"{measured}; {how}")
