"""Every reward set the docs show (SKILL.md, README.md, references/*.md) passes its own composite rule and
pays a realistic right answer in full, a wrong one less: an example a user copies must be able to train."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from skill.rewards.base import call_reward
from skill.rewards.composite import check_composite
from skill.rewards.registry import build_reward_functions
from skill.rewards.spec import RewardSpec

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "SKILL.md", ROOT / "README.md", *sorted((ROOT / "references").glob("*.md"))]
QUESTION = "Natalia sold 48 clips in April and half as many in May. How many clips did she sell altogether?"
# Ways a model realistically writes the right answer (72); each set must pay at least one of them in full.
RIGHT = [
    "72",
    "<answer>72</answer>",
    "<think>48 / 2 = 24 and 48 + 24 = 72</think>\n<answer>72</answer>",
    "She sold 48 + 24 = 72 clips.\n#### 72",
    "48 + 24 = 72, so the answer is \\boxed{72}.",
]


def _is_spec(value: object) -> bool:
    return isinstance(value, dict) and {"name", "role"} <= set(value)


def _json_sets(text: str) -> list[list[dict]]:
    sets = []
    for block in re.findall(r"```json\n(.*?)```", text, re.DOTALL):
        value = json.loads(block)
        if isinstance(value, dict) and "rewards" in value:
            sets.append(value["rewards"])
        elif isinstance(value, list) and value and all(_is_spec(item) for item in value):
            sets.append(value)
    return sets


def _cli_sets(text: str) -> list[list[dict]]:
    sets = []
    for command in re.sub(r"\\\n\s*", " ", text).splitlines():
        rewards = re.findall(r"--(?:reward|verifier) (\S+)", command)
        params = dict(re.findall(r"--param (\w+)=(\S+)", command))
        specs = []
        for item in rewards:
            name, role, *weight = item.split(",")
            specs.append({"name": name, "role": role, "weight": float(weight[0]) if weight else 1.0})
        if specs:
            if params and "--verifier" in command:
                specs[0]["params"] = params
            sets.append(specs)
    return sets


def doc_sets() -> list[tuple[str, list[dict]]]:
    found = []
    for path in DOCS:
        text = path.read_text()
        for index, specs in enumerate(_json_sets(text) + _cli_sets(text)):
            found.append((f"{path.name}#{index}", specs))
    return found


def test_the_docs_show_reward_sets():
    names = {label.split("#")[0] for label, _ in doc_sets()}
    assert {"SKILL.md", "README.md", "reward-functions.md"} <= names


@pytest.mark.parametrize(("label", "raw"), doc_sets(), ids=[label for label, _ in doc_sets()])
def test_a_doc_reward_set_can_train(label, raw):
    specs = [RewardSpec.model_validate(spec) for spec in raw]
    if any(spec.role == "format" for spec in specs):
        check = check_composite(specs)
        assert check.ok, (label, check.warnings)
    if any(":" in spec.name for spec in specs):  # a user function the page shows as a sketch: valid spec only
        return
    functions = build_reward_functions(specs)
    wrong = [text.replace("72", "71") for text in RIGHT]
    scores = [
        call_reward(function, [QUESTION] * len(RIGHT), RIGHT + wrong, answer=["72"] * 10) for function in functions
    ]
    earned = [s for s, spec in zip(scores, specs, strict=True) if spec.role != "shaping"]
    full = [i for i in range(len(RIGHT)) if all(values[i] == 1.0 for values in earned)]
    by_name = dict(zip([spec.name for spec in specs], scores, strict=True))
    assert full, f"{label}: no realistic right answer earns every reward: {by_name}"

    def total(index: int) -> float:
        return sum(spec.weight * (values[index] or 0.0) for spec, values in zip(specs, scores, strict=True))

    for index in full:
        correctness = [v[len(RIGHT) + index] for v, s in zip(scores, specs, strict=True) if s.role == "correctness"]
        assert all(value == 0.0 for value in correctness), (label, RIGHT[index])
        assert total(len(RIGHT) + index) < total(index), (label, RIGHT[index])


def test_the_mcp_tools_example_request_can_train():
    from server.mcp_tools import EXAMPLE_RECIPE_REQUEST  # the example emit_grpo_config shows to agents

    test_a_doc_reward_set_can_train("mcp_tools.EXAMPLE_RECIPE_REQUEST", EXAMPLE_RECIPE_REQUEST["rewards"])
