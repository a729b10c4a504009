"""README.md of a run's exported model: what it is, how it was trained, its held-out result, and from what checks."""

from __future__ import annotations

from typing import Any

from skill.inspection.gate import NOT_REVIEWED
from skill.recipe.schema import GRPORecipe
from skill.runs.held_out import (
    HeldOutChange,
    HeldOutScore,
    held_out_changes,
    held_out_scores,
    summary_line,
    training_rows,
)


def model_card(recipe: GRPORecipe, record: Any, metrics: list[dict[str, Any]]) -> str:
    """README.md for the exported model: what it is, how it was trained, its held-out result, and from what checks.

    ``metrics`` are metrics.jsonl's rows: training rows give the first and last windows of the training rewards
    (10 steps each, or half the run when shorter: they never overlap), evaluation rows the held-out scores.
    """
    training = training_rows(metrics)
    window = max(1, min(10, len(training) // 2))
    first, last = training[:window], training[-window:]
    lines = [
        f"# {recipe.model.name} trained with GRPO (grpo-rlvr run {record.run_id})",
        "",
        *reward_review_lines(record),
        f"Method: {recipe.method}; steps: {training[-1]['step'] if training else 0}; "
        f"trl {recipe.provenance.trl_version}.",
        f"Inspection: {record.inspection_id} ({record.review}). Route: {recipe.provenance.route_decision}.",
        "",
        *held_out_lines(held_out_scores(metrics), held_out_changes(metrics)),
        f"| training reward | first-{window} steps mean | last-{window} steps mean |",
        "|---|---|---|",
    ]
    for key in sorted({k for row in training for k in row if k.startswith("rewards/") and k.endswith("/mean")}):
        before = [row[key] for row in first if isinstance(row.get(key), int | float)]
        after = [row[key] for row in last if isinstance(row.get(key), int | float)]
        if before and after:
            lines.append(f"| {key.split('/')[1]} | {sum(before) / len(before):.3f} | {sum(after) / len(after):.3f} |")
    lines += ["", "## Recipe", "", "```json", recipe.model_dump_json(indent=1), "```", ""]
    return "\n".join(lines)


def held_out_lines(scores: list[HeldOutScore], changes: list[HeldOutChange]) -> list[str]:
    """The card's held-out table: every evaluation of every correctness reward, on prompts never trained on, and
    each reward's paired change from the first to the last."""
    if not scores:
        return [summary_line(scores), ""]
    paired = [f"Paired over the same prompts: {change.describe()}." for change in changes]
    sample = scores[-1]
    return [
        f"Held-out: {sample.prompts} prompts never trained on x {sample.completions // max(1, sample.prompts)} "
        "completions, scored with the run's rewards (pass@1 for a 0/1 reward; Wilson 95% interval over the "
        "completions).",
        "",
        "| step | reward | held-out mean | 95% interval |",
        "|---|---|---|---|",
        *(f"| {s.step} | {s.reward} | {s.mean:.3f} | {s.interval_95[0]:.2f}-{s.interval_95[1]:.2f} |" for s in scores),
        "",
        *(line for change in paired for line in (change, "")),
    ]


def reward_review_lines(record: Any) -> list[str]:
    """The model card's warning when the rewards were trained on unread (accept_unread)."""
    review = record.review or ""
    if not review.startswith(NOT_REVIEWED):
        return []
    return [f"**{NOT_REVIEWED.capitalize()}.** {review}", ""]
