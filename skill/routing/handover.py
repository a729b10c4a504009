"""Where route_check sends a task that GRPO does not fit, and a concrete starting point there.

A route away from GRPO hands over the essentials of the next method in structured form: the
trainer, its key config values for the model's size (each with a reason), the data shape it reads,
and the install and run commands. The values follow TRL 1.16's own documentation and example
scripts (``trl/scripts/dpo.py`` and ``sft.py``: full fine-tune DPO at lr 5e-7 and SFT at 2e-5, LoRA
r 32 / alpha 16 at 5e-6 and 2e-4, 2 sequences x 8 accumulation; ``DPOConfig`` defaults beta 0.1,
loss ``sigmoid``, max_length 1024). They are a start, not a tuned recipe: the sibling skill owns that.
"""

from __future__ import annotations

import statistics
from typing import Any, Literal

from pydantic import BaseModel, Field

from skill.intervals import MAX_DISAGREEING_SHARE
from skill.models.sources import is_embedded, resolve_model_path
from skill.routing.probe_time import parameters_b

LORA_ABOVE_B = 1.0  # parameters (billions) above which the starting point is LoRA rather than a full fine-tune
EMBEDDED_HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"  # the published model the embedded GGUF was made from
TRL_INSTALL = 'pip install "trl==1.16.0" peft'
MIN_DEMONSTRATIONS = 50
"""Fewer rows than this are too few to fine-tune on: OpenAI's fine-tuning guide requires at least 10 examples and
reports clear improvements from 50 to 100."""
WORKED_SOLUTION_WORDS = 8
"""A text column whose median cell has at least this many words holds worked solutions, not bare answers: a final
answer ('42', 'Paris', 'B') is a few words at most; a GSM8K solution is about 50."""
Accelerator = Literal["gpu", "cpu"]


class DataReading(BaseModel):
    """What the handover read of the task's data: how many rows, and whether a column already demonstrates."""

    source: str = Field(description="The dataset, or the probe's rows.")
    rows: int = Field(description="Rows in it.")
    too_few: bool = Field(description=f"Under {MIN_DEMONSTRATIONS} rows: too few to fine-tune on.")
    demonstrations_column: str | None = Field(
        default=None, description="A column of worked solutions: already demonstrations, the completions to train on."
    )
    median_words: int | None = Field(default=None, description="That column's median cell, in words.")
    prompt_columns: list[str] = Field(default_factory=list, description="The columns the prompts are built from.")


def read_demonstrations(
    rows: list[dict[str, Any]], total: int, source: str, prompt: set[str], preferred: str = "answer"
) -> DataReading:
    """Read a sample of the task's rows: the column of worked solutions besides the ``prompt`` columns, if one is
    there (``preferred`` first, else the wordiest), and whether ``total`` rows are enough.

    >>> solution = "She sold 48 / 2 = 24 clips in May, so 48 + 24 = 72 in all. #### 72"
    >>> read_demonstrations([{"question": "q", "answer": solution}] * 30, 30, "gsm8k.jsonl", {"question"})
    ... # doctest: +NORMALIZE_WHITESPACE
    DataReading(source='gsm8k.jsonl', rows=30, too_few=True, demonstrations_column='answer', median_words=20,
    prompt_columns=['question'])
    >>> read_demonstrations([{"prompt": "What is 2 + 2?", "answer": "4"}], 200, "a", {"prompt"}).demonstrations_column
    """
    found: dict[str, int] = {}
    for column in sorted({key for row in rows for key in row} - prompt):
        cells = [row[column] for row in rows if isinstance(row.get(column), str)]
        if len(cells) < len(rows) / 2:  # mostly not text: numbers, lists, chat messages
            continue
        words = int(statistics.median(len(cell.split()) for cell in cells))
        if words >= WORKED_SOLUTION_WORDS:
            found[column] = words
    column = preferred if preferred in found else max(found, key=lambda name: found[name], default=None)
    return DataReading(
        source=source,
        rows=total,
        too_few=total < MIN_DEMONSTRATIONS,
        demonstrations_column=column,
        median_words=found.get(column) if column else None,
        prompt_columns=sorted(prompt),
    )


class StartingValue(BaseModel):
    """One config field of the next method, with why it has this value."""

    field: str
    value: Any
    reason: str


class DataShape(BaseModel):
    """What one training row looks like for the next method."""

    columns: dict[str, str] = Field(description="Column name -> what it holds.")
    example: dict[str, Any]
    notes: list[str] = Field(default_factory=list)


class Handover(BaseModel):
    """A starting point in the skill route_check hands over to."""

    skill: str
    method: str
    trainer: str | None = Field(description="The TRL trainer class, or None when the next step is not training.")
    config_class: str | None = None
    fine_tune: str = Field(description="full, lora, or none.")
    config: list[StartingValue]
    data: DataShape
    data_read: DataReading | None = Field(
        default=None, description="What was read of your data: its rows, and a column that already demonstrates."
    )
    install: str | None = None
    command: str | None = Field(default=None, description="A TRL CLI command to start from.")
    steps: list[str] = Field(default_factory=list, description="What to do, in order.")
    source: str


def _size(model: str | None, given_b: float | None) -> tuple[float | None, str]:
    size = given_b if given_b is not None else (parameters_b(model) if model else None)
    if size is None:
        return None, "model size unknown: full fine-tune values; above 1B parameters use LoRA (lr x10, r 32)"
    return size, f"{size:.3g}B parameters"


def _common(lora: bool, size_note: str, accelerator: Accelerator) -> list[StartingValue]:
    values = [
        StartingValue(field="per_device_train_batch_size", value=2, reason="TRL's example scripts: 2 x 8 accumulation"),
        StartingValue(field="gradient_accumulation_steps", value=8, reason="16 sequences per optimizer step"),
        StartingValue(field="num_train_epochs", value=1, reason="one pass first; evaluate before a second"),
    ]
    if accelerator == "cpu":
        values.append(StartingValue(field="use_cpu", value=True, reason="the CPU you named: float32, no bf16"))
    else:
        values.append(StartingValue(field="bf16", value=True, reason="on a GPU with bf16 (Ampere or newer)"))
    if lora:
        values += [
            StartingValue(field="use_peft", value=True, reason=f"{size_note}: LoRA keeps optimizer state small"),
            StartingValue(field="lora_r", value=32, reason="TRL's LoRA example"),
            StartingValue(field="lora_alpha", value=16, reason="TRL's LoRA example"),
        ]
    return values


def _command(trainer: str, model_name: str, values: list[StartingValue]) -> str:
    flags = " ".join(
        f"--{v.field}" if v.value is True else f"--{v.field} {v.value}" for v in values if v.value is not False
    )
    return (
        f"trl {trainer} --model_name_or_path {model_name} --dataset_name <hub id or folder of .jsonl files> "
        f"{flags} --output_dir {trainer}-output"
    )


def _model_name(model: str | None, accelerator: Accelerator) -> str:
    """The model as the next trainer loads it: the embedded model's local copy on a CPU (no Hub needed), its
    published id on a GPU."""
    if model is None:
        return "<model>"
    if not is_embedded(model):
        return model
    return resolve_model_path(model) if accelerator == "cpu" else EMBEDDED_HUB_ID


def dpo_handover(model: str | None, given_b: float | None, accelerator: Accelerator = "gpu") -> Handover:
    """Preference pairs: TRL's DPOTrainer on prompt / chosen / rejected.

    >>> handover = dpo_handover("embedded:SmolLM2-135M-Instruct", None)
    >>> handover.trainer, handover.fine_tune, sorted(handover.data.columns)
    ('trl.DPOTrainer', 'full', ['chosen', 'prompt', 'rejected'])
    >>> {v.field: v.value for v in dpo_handover("Qwen/Qwen2.5-7B-Instruct", None).config}["learning_rate"]
    5e-06
    """
    size, note = _size(model, given_b)
    lora = size is not None and size > LORA_ABOVE_B
    values = [
        StartingValue(
            field="learning_rate",
            value=5e-6 if lora else 5e-7,
            reason=f"{note}: TRL's DPO example uses 5e-7 for a full fine-tune, 5e-6 with LoRA",
        ),
        StartingValue(
            field="beta",
            value=0.1,
            reason="DPOConfig's default: how far the policy may move from the reference; lower trusts the pairs more",
        ),
        StartingValue(field="loss_type", value="sigmoid", reason="the original DPO loss (DPOConfig's default)"),
        StartingValue(field="max_length", value=1024, reason="prompt + response tokens; longer pairs are truncated"),
        *_common(lora, note, accelerator),
    ]
    return Handover(
        skill="preference-optimization",
        method="DPO",
        trainer="trl.DPOTrainer",
        config_class="trl.DPOConfig",
        fine_tune="lora" if lora else "full",
        config=values,
        data=DataShape(
            columns={
                "prompt": "the input (text, or a list of chat messages)",
                "chosen": "the preferred response (text, or the assistant message)",
                "rejected": "the dispreferred response to the same prompt",
            },
            example={"prompt": "Summarise: ...", "chosen": "A short, faithful summary.", "rejected": "A rambling one."},
            notes=[
                "Conversational pairs use chat messages in all three columns; TRL applies the chat template.",
                "Start from a model that already writes in-distribution responses (an SFT model, or the instruct "
                "model itself): DPO reweights responses, it does not teach a new format.",
            ],
        ),
        install=TRL_INSTALL,
        command=_command("dpo", _model_name(model, accelerator), values),
        steps=[
            "Put the pairs in prompt/chosen/rejected columns.",
            "Hold out 5-10% of the pairs and watch rewards/accuracies (chosen scored above rejected) on them.",
            "Train; compare win rates against the base model on held-out prompts.",
        ],
        source="TRL 1.16 DPOConfig defaults and trl/scripts/dpo.py examples; dataset formats guide (preference)",
    )


def sft_handover(
    model: str | None,
    given_b: float | None,
    never_succeeded: bool,
    accelerator: Accelerator = "gpu",
    data: DataReading | None = None,
) -> Handover:
    """Demonstrations (or a model that never succeeds): TRL's SFTTrainer on prompt / completion pairs, fitted to
    the data it read (a column of worked solutions is the completions; too few rows are said) and the hardware.

    >>> sft_handover(None, 7.0, never_succeeded=True).fine_tune
    'lora'
    >>> reading = DataReading(source="gsm8k.jsonl", rows=30, too_few=True, demonstrations_column="answer",
    ...     prompt_columns=["question"])
    >>> steps = sft_handover(None, 7.0, True, "cpu", reading).steps
    >>> print(steps[0]); print(steps[1])  # doctest: +NORMALIZE_WHITESPACE
    gsm8k.jsonl's column 'answer' already holds worked solutions: they are your demonstrations (question -> prompt,
    answer -> completion).
    30 rows are too few to fine-tune on (under 50): collect more demonstrations first.
    """
    size, note = _size(model, given_b)
    lora = size is not None and size > LORA_ABOVE_B
    values = [
        StartingValue(
            field="learning_rate",
            value=2e-4 if lora else 2e-5,
            reason=f"{note}: SFTConfig's default 2e-5 for a full fine-tune; TRL's LoRA example uses 2e-4",
        ),
        StartingValue(field="max_length", value=1024, reason="SFTConfig's default; longer examples are truncated"),
        *_common(lora, note, accelerator),
    ]
    steps = ["Collect demonstrations of the target behaviour as prompt/completion rows."]
    if never_succeeded:
        steps = [
            "Write or collect correct outputs for the task's prompts (a stronger model's outputs that your verifier "
            "passes will do), as prompt/completion rows.",
            "Fine-tune on them, then run route_check again: GRPO starts once the model succeeds sometimes.",
        ]
    if data is not None and data.demonstrations_column:
        steps[0] = (
            f"{data.source}'s column {data.demonstrations_column!r} already holds worked solutions: they are your "
            f"demonstrations ({' + '.join(data.prompt_columns) or 'prompt'} -> prompt, {data.demonstrations_column} "
            "-> completion)."
        )
    if data is not None and data.too_few:
        few = f"{data.rows} rows are too few to fine-tune on (under {MIN_DEMONSTRATIONS})"
        steps.insert(1, f"{few}: collect more demonstrations first.")
    return Handover(
        skill="lora-qlora-recipes",
        method="SFT",
        trainer="trl.SFTTrainer",
        config_class="trl.SFTConfig",
        fine_tune="lora" if lora else "full",
        config=values,
        data=DataShape(
            columns={
                "prompt": "the input (text, or a list of chat messages)",
                "completion": "the demonstrated output (text, or the assistant message)",
            },
            example={"prompt": "What is 17 + 25?", "completion": "42"},
            notes=[
                "With prompt/completion rows TRL trains on the completion only; a single 'messages' column "
                "(a whole chat) also works.",
            ],
        ),
        data_read=data,
        install=TRL_INSTALL,
        command=_command("sft", _model_name(model, accelerator), values),
        steps=steps,
        source="TRL 1.16 SFTConfig defaults and trl/scripts/sft.py examples; dataset formats guide",
    )


def judge_handover() -> Handover:
    """Subjective grading: calibrate a judge against human labels before any RL.

    >>> judge_handover().trainer is None
    True
    """
    return Handover(
        skill="eval-harness-first",
        method="judge calibration",
        trainer=None,
        fine_tune="none",
        config=[
            StartingValue(field="labelled_samples", value=100, reason="enough to see agreement within about +-0.1"),
            StartingValue(
                field="agreement_to_reach",
                value=round(1 - MAX_DISAGREEING_SHARE, 2),
                reason="raw agreement, the share of outputs where judge and people agree: the blind read that opens "
                f"the gate for a judge reward lets it differ from the reader on at most {MAX_DISAGREEING_SHARE:.0%}",
            ),
        ],
        data=DataShape(
            columns={
                "prompt": "the input",
                "completion": "a model output",
                "human_label": "a person's grade of that output (pass/fail or a score)",
            },
            example={"prompt": "Write a polite refusal.", "completion": "I can't help with that.", "human_label": 1},
        ),
        steps=[
            "Sample outputs of the model on real prompts and have people grade them.",
            "Score the same outputs with the judge; measure agreement with the people.",
            "Only when it agrees: use it as a 'judge' reward here (role judge), inspected like any reward.",
        ],
        source="this skill's method: an uncalibrated judge is not a verifiable reward",
    )


def handover_for(
    route: str,
    model: str | None,
    given_b: float | None,
    never_succeeded: bool = False,
    accelerator: Accelerator = "gpu",
    data: DataReading | None = None,
) -> Handover | None:
    """The starting point for a route away from GRPO; None for grpo and not-worth-rl (they stay here).

    >>> handover_for("preference-optimization", None, None).method, handover_for("grpo", None, None)
    ('DPO', None)
    """
    if route == "preference-optimization":
        return dpo_handover(model, given_b, accelerator)
    if route == "lora-qlora-recipes":
        return sft_handover(model, given_b, never_succeeded, accelerator, data)
    if route == "eval-harness-first":
        return judge_handover()
    return None
