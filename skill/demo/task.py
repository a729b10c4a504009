"""The demo task: "What is a + b? Answer with just the number.", a and b in 1..20.

Measured on the embedded SmolLM2-135M-Instruct: right in about 9% of samples, with mixed outcomes
on 5 of 12 prompts over 8 samples — the case GRPO is for (it succeeds sometimes, inconsistently).
"""

from __future__ import annotations

import random
from typing import Any

DEMO_DATASET_ID = "embedded:addition"
DEMO_QUESTION = "What is {a} + {b}? Answer with just the number."


def addition_rows(count: int = 200, seed: int = 3407) -> list[dict[str, Any]]:
    """Conversational prompts with their answers, reproducible for a seed.

    >>> addition_rows(1)[0]["prompt"][0]["role"], addition_rows(1) == addition_rows(1)
    ('user', True)
    """
    rng = random.Random(seed)
    rows = []
    for _ in range(count):
        a, b = rng.randint(1, 20), rng.randint(1, 20)
        rows.append({"prompt": [{"role": "user", "content": DEMO_QUESTION.format(a=a, b=b)}], "answer": str(a + b)})
    return rows


def addition_dataset(count: int = 200, seed: int = 3407) -> Any:
    """The demo rows as a ``datasets.Dataset``."""
    from datasets import Dataset

    return Dataset.from_list(addition_rows(count, seed))
