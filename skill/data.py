"""The one dataset loader: a local file, a Hugging Face hub dataset or a built-in dataset, as rows.

Routing, inspection, runs and the rendered training script all load data here, so a dataset name
means the same thing everywhere. A dataset is described by a ``DatasetSpec``; what it names:

- a local ``.jsonl`` / ``.json`` / ``.csv`` / ``.parquet`` file;
- a built-in dataset id (``embedded:addition``, generated here, nothing to download);
- anything else: a Hugging Face dataset id (or a dataset directory), loaded with its split.

Loading goes through one reading step (``_read``) and one shaping step (``_shape``); a dataset config
name would be a ``DatasetSpec`` field used by ``_read``, an answer extractor one used by ``_shape``.

Owns: ``DatasetSpec``, ``load_rows``, ``load_training_dataset`` and the built-in datasets. May import:
``errors`` (and ``datasets``, inside the functions that need it).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from skill.errors import SkillError

LOCAL_FORMATS = {".jsonl": "json", ".json": "json", ".csv": "csv", ".parquet": "parquet"}
ADDITION_DATASET_ID = "embedded:addition"
ADDITION_QUESTION = "What is {a} + {b}? Answer with just the number."
BUILTIN_ROWS = 200  # rows a built-in dataset yields when the caller sets no limit


class DatasetSpec(BaseModel):
    """The training prompts."""

    model_config = ConfigDict(extra="forbid")  # a misspelled field is an error, not silently dropped

    name: str = Field(
        description="Hugging Face dataset id, a local .jsonl/.json/.csv/.parquet file, or 'embedded:addition'."
    )
    split: str = Field(default="train", description="Split to train on.")
    prompt_column: str = Field(default="prompt", description="Column holding the prompt (text or chat messages).")
    columns: list[str] = Field(default_factory=list, description="Other columns the rewards read (e.g. 'answer').")
    max_prompt_tokens: int = Field(
        default=512,
        gt=0,
        description="Longest prompt in tokens; sizes memory. TRL 1.16 does not truncate prompts.",
    )


def addition_rows(count: int = BUILTIN_ROWS, seed: int = 3407) -> list[dict[str, Any]]:
    """The ``embedded:addition`` rows: "What is a + b?" (a, b in 1..20) as a chat prompt, with the answer.

    Measured on the embedded SmolLM2-135M-Instruct: right in about 9% of samples, with mixed outcomes
    on 5 of 12 prompts over 8 samples (it succeeds sometimes, inconsistently: the case GRPO is for).

    >>> addition_rows(1)[0]["prompt"][0]["role"], addition_rows(1) == addition_rows(1)
    ('user', True)
    """
    rng = random.Random(seed)
    rows = []
    for _ in range(count):
        a, b = rng.randint(1, 20), rng.randint(1, 20)
        question = ADDITION_QUESTION.format(a=a, b=b)
        rows.append({"prompt": [{"role": "user", "content": question}], "answer": str(a + b)})
    return rows


def addition_dataset(count: int = BUILTIN_ROWS, seed: int = 3407) -> Any:
    """The ``embedded:addition`` rows as a ``datasets.Dataset`` (what a training script trains on)."""
    from datasets import Dataset

    return Dataset.from_list(addition_rows(count, seed))


BUILTIN_DATASETS: dict[str, Callable[[int], list[dict[str, Any]]]] = {ADDITION_DATASET_ID: addition_rows}


def load_rows(spec: DatasetSpec, limit: int | None = None) -> list[dict[str, Any]]:
    """The first ``limit`` rows (all without one; a built-in dataset yields 200), prompt column named 'prompt'.

    >>> rows = load_rows(DatasetSpec(name="embedded:addition"), limit=3)
    >>> len(rows), sorted(rows[0])
    (3, ['answer', 'prompt'])
    >>> load_rows(DatasetSpec(name="/nonexistent/rows.jsonl"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    skill.errors.SkillError: Dataset '/nonexistent/rows.jsonl' is not a readable .jsonl/.json/.csv/.parquet file. ...
    """
    builtin = BUILTIN_DATASETS.get(spec.name)
    if builtin is not None:
        rows = builtin(BUILTIN_ROWS if limit is None else limit)
    else:
        dataset = _read(spec)
        if limit is not None:
            dataset = dataset.select(range(min(limit, len(dataset))))
        rows = list(dataset)
    return _shape(rows, spec)


def load_training_dataset(spec: DatasetSpec) -> Any:
    """The whole dataset as a ``datasets.Dataset`` (Arrow-backed, not copied into Python rows), prompt column
    named 'prompt'."""
    if spec.name in BUILTIN_DATASETS:
        from datasets import Dataset

        return Dataset.from_list(load_rows(spec))
    dataset = _read(spec)
    if spec.prompt_column != "prompt":
        dataset = dataset.rename_column(spec.prompt_column, "prompt")
    return dataset


def _read(spec: DatasetSpec) -> Any:
    """A local file or a hub dataset as a ``datasets.Dataset``; every failure is a SkillError saying what to send."""
    path = Path(spec.name)
    local_format = LOCAL_FORMATS.get(path.suffix)
    missing_file = local_format is not None and not path.is_file()
    other_file = local_format is None and path.is_file()
    if missing_file or other_file:
        raise SkillError(
            f"Dataset {spec.name!r} is not a readable .jsonl/.json/.csv/.parquet file.",
            f"Send the path of an existing file, a cached Hugging Face dataset id, or {ADDITION_DATASET_ID!r}.",
        )
    from datasets import load_dataset

    try:
        if local_format is not None:
            return load_dataset(local_format, data_files=spec.name, split="train")
        return load_dataset(spec.name, split=spec.split)
    except Exception as exc:  # network, unknown id, bad format: all refused the same way
        raise SkillError(
            f"Cannot load dataset {spec.name!r}: {exc}", "Send a local file or a cached dataset."
        ) from None


def _shape(rows: list[dict[str, Any]], spec: DatasetSpec) -> list[dict[str, Any]]:
    """Rows as the callers read them: the prompt under 'prompt'."""
    if spec.prompt_column != "prompt":
        for row in rows:
            row["prompt"] = row.pop(spec.prompt_column, None)
    return rows
