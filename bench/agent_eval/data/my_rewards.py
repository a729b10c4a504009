"""A user's own reward for the evaluation's user-reward task: 1.0 when the completion's last integer is the sum."""

import re


def last_integer_is_answer(prompts, completions, answer, **kwargs):
    scores = []
    for completion, gold in zip(completions, answer, strict=True):
        text = completion if isinstance(completion, str) else completion[-1]["content"]
        found = re.findall(r"-?\d+", text)
        scores.append(1.0 if found and found[-1] == str(gold).strip() else 0.0)
    return scores
