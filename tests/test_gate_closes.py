"""The ways the gate once opened on rewards other than the ones read, each refused with the message a user
sees (a resumed run, an edited helper module, a module the server imported before the edit, weights overridden
after the read, a module off the allowlist), and the one door left without a read, stamped everywhere. Readers
who do not read are tests/test_blind_read.py's.

Reward modules are written to a temporary directory (allowlisted through GRPO_RLVR_REWARD_PATHS, on the
Python path of this process, of the scoring process and of the training process) and edited in place,
as a user would.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest
from blind_reader import addition_samples, read_blind
from test_inspection import tagged_samples
from test_mcp_surface import assert_project_error, call
from test_runs import pass_inspection, recipe
from test_runs import wait as wait_for

from skill.data import addition_rows
from skill.errors import SkillError
from skill.inspection.gate import NOT_REVIEWED, GateClosed, open_gate, record_review
from skill.inspection.reports import load_report
from skill.inspection.run import inspect_rewards
from skill.inspection.schema import InspectionRequest, ReviewRequest, SuppliedSample
from skill.rewards.fingerprint import reward_fingerprint
from skill.runs.jobs import RunRequest, cancel_run, list_runs, run_grpo, run_status
from skill.runs.store import read_record, run_dir

SAYS_THE_ANSWER = (
    "import re\n"
    "{imports}\n"
    "def score(prompts, completions, answer, **kwargs):\n"
    "    out = []\n"
    "    for completion, expected in zip(completions, answer):\n"
    "        text = completion if isinstance(completion, str) else completion[-1]['content']\n"
    "        numbers = re.findall(r'-?\\d+', text)\n"
    "        out.append({body})\n"
    "    return out\n"
)
RIGHT = "1.0 if numbers and numbers[-1] == str(expected) else 0.0"


@pytest.fixture
def reward_dir(tmp_path, monkeypatch):
    """A directory of user reward modules, allowlisted and importable here, in scoring and in training."""
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("GRPO_RLVR_REWARD_PATHS", str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    return tmp_path


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    path = tmp_path_factory.mktemp("bypass-data") / "addition.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in addition_rows(64)))
    return path


def user_pair(module: str, weight: float = 0.2):
    from skill.rewards.spec import RewardSpec

    return [
        RewardSpec(name="format", role="format", weight=weight, params={"pattern": "number"}),
        RewardSpec(name=f"{module}:score", role="correctness"),
    ]


def write(path: Path, text: str) -> None:
    path.write_text(text)
    importlib.invalidate_caches()


# ---- 1. resume ----------------------------------------------------------------------------------


def test_1_a_resumed_run_is_gated_on_the_reward_code_as_it_is_now(reward_dir, tiny_model_dir, dataset):
    write(reward_dir / "resumed_reward.py", SAYS_THE_ANSWER.format(imports="", body=RIGHT))
    rewards = user_pair("resumed_reward")
    pass_inspection(rewards)
    run_grpo(RunRequest(recipe=recipe(tiny_model_dir, dataset, rewards, steps=50), run_id="bypass-resume"))
    assert cancel_run("bypass-resume").state == "cancelled"
    write(reward_dir / "resumed_reward.py", SAYS_THE_ANSWER.format(imports="", body="1.0"))
    with pytest.raises(SkillError) as refused:
        run_grpo(RunRequest(resume_run_id="bypass-resume"))
    assert str(refused.value).startswith(
        "Run bypass-resume cannot resume: Reward function resumed_reward:score changed since inspection insp-"
    )
    assert "Inspect again" in str(refused.value)
    assert read_record(run_dir("bypass-resume")).state == "cancelled"  # nothing was started


# ---- 2. helper modules --------------------------------------------------------------------------


def test_2_an_edited_helper_module_closes_the_gate(reward_dir, tiny_model_dir, dataset):
    """The reward imports a helper that imports another: editing the innermost one changes the fingerprint."""
    write(reward_dir / "inner_check.py", "def same(a, b):\n    return a == b\n")
    write(
        reward_dir / "outer_check.py",
        "from inner_check import same\n\ndef right(numbers, expected):\n"
        "    return 1.0 if numbers and same(numbers[-1], str(expected)) else 0.0\n",
    )
    write(
        reward_dir / "helped_reward.py",
        SAYS_THE_ANSWER.format(imports="from outer_check import right", body="right(numbers, expected)"),
    )
    rewards = user_pair("helped_reward")
    pass_inspection(rewards)
    recipe_before = recipe(tiny_model_dir, dataset, rewards)
    assert recipe_before.provenance.inspection_id
    write(reward_dir / "inner_check.py", "def same(a, b):\n    return True\n")  # every answer now scores 1.0
    with pytest.raises(SkillError) as refused:
        run_grpo(RunRequest(recipe=recipe_before))
    assert "Reward function helped_reward:score changed since inspection insp-" in str(refused.value)
    assert "a module it imports" in str(refused.value)
    assert recipe(tiny_model_dir, dataset, rewards).provenance.inspection_id is None


# ---- 3. stale module in a long-running server -----------------------------------------------------


def test_3_inspection_scores_the_code_on_disk_not_a_module_the_server_imported(reward_dir):
    write(reward_dir / "stale_reward.py", SAYS_THE_ANSWER.format(imports="", body=RIGHT))
    stale = importlib.import_module("stale_reward")  # the server imported it earlier (a route check, say)
    rewards = user_pair("stale_reward")
    first = load_report(inspect_rewards(InspectionRequest(rewards=rewards, samples=tagged_samples())).id)
    assert first.stats["score"].distinct_values == 2
    write(reward_dir / "stale_reward.py", SAYS_THE_ANSWER.format(imports="", body="1.0"))
    assert stale.score(["p"], ["no"], answer=["3"]) == [0.0]  # the imported module is still the old one
    edited = load_report(inspect_rewards(InspectionRequest(rewards=rewards, samples=tagged_samples())).id)
    assert {s.scores["score"] for s in edited.samples} == {1.0}
    assert edited.reward_fingerprint == reward_fingerprint(rewards)[0]
    review = record_review(ReviewRequest(report_id=edited.id, reviewer="ana", labels=read_blind(edited)))
    assert review.verdict != "passed"
    assert any(r.startswith("Fix the reward: score gives the same value (1.0)") for r in review.verdict_reasons)
    sys.modules.pop("stale_reward", None)


# ---- 4. weights swapped after inspection ------------------------------------------------------------


def test_4_reward_weights_overridden_after_inspection_close_the_gate(tiny_model_dir, dataset):
    from test_runs import REWARDS

    rewards = [REWARDS[0].model_copy(update={"weight": 0.21}), REWARDS[1]]
    pass_inspection(rewards)
    assert recipe(tiny_model_dir, dataset, rewards).provenance.inspection_id
    swapped = recipe(tiny_model_dir, dataset, rewards, reward_weights=[1.0, 0.0])
    assert swapped.trl["reward_weights"] == [1.0, 0.0] and swapped.provenance.inspection_id is None
    assert any("are not the inspected [0.21, 1.0]" in line for line in swapped.provenance.validation)
    with pytest.raises(SkillError) as refused:
        run_grpo(RunRequest(recipe=swapped))
    assert "The weights TRL will use, [1.0, 0.0], are not the inspected [0.21, 1.0]." in str(refused.value)


# ---- 6. accept-all ---------------------------------------------------------------------------------


def number_samples(seed):
    """Bare-number answers to the addition task, right, wrong or missing (the rewards of test_runs fit them); each
    test its own seed, so labels recorded on them are carried into no other test's inspection."""
    return [SuppliedSample(**sample) for sample in addition_samples(seed=seed)]


def test_6_accept_all_never_passes_and_unread_training_is_stamped(tiny_model_dir, dataset, tmp_path):
    from test_cli import grpo_rlvr
    from test_runs import REWARDS

    rewards = [REWARDS[0].model_copy(update={"weight": 0.22}), REWARDS[1]]
    report = inspect_rewards(InspectionRequest(rewards=rewards, samples=number_samples(seed=61)))
    accept_all = tmp_path / "labels.json"
    accept_all.write_text(
        json.dumps({"labels": {s.id: {"format": "pass", "correctness": "pass"} for s in report.samples}})
    )
    cli = grpo_rlvr("review", report.id, "--reviewer", "bot", "--kind", "agent", "--labels", str(accept_all))
    assert cli.returncode == 0 and f"{report.id}: verdict failed" in cli.stdout, cli.stdout + cli.stderr
    assert "Your labels for correctness are all 'pass' on 60 samples" in cli.stdout
    assert "labels with one outcome cannot show a reading" in cli.stdout
    with pytest.raises(GateClosed):
        open_gate(rewards)
    with pytest.raises(SkillError, match="accept_unread needs a reason"):
        record_review(ReviewRequest(report_id=report.id, reviewer="bot", accept_unread=True))
    refused = grpo_rlvr("review", report.id, "--reviewer", "bot", "--kind", "agent", "--accept-unread", "a smoke test")
    assert refused.returncode == 2 and "blind labels: it was read" in refused.stderr, refused.stdout + refused.stderr
    # Training unread is said on an inspection nobody labelled: the same samples, inspected again.
    again = inspect_rewards(InspectionRequest(rewards=rewards, samples=number_samples(seed=63)))
    cli = grpo_rlvr("review", again.id, "--reviewer", "bot", "--kind", "agent", "--accept-unread", "a smoke test")
    assert cli.returncode == 0 and "verdict accepted_unread" in cli.stdout, cli.stdout + cli.stderr
    gate = open_gate(rewards)
    assert not gate.reviewed and gate.stamp.startswith(f"{NOT_REVIEWED}: accepted unread by agent bot (a smoke test)")
    emitted = recipe(tiny_model_dir, dataset, rewards, steps=50)
    assert emitted.provenance.reward_review == gate.stamp
    assert any(line.startswith("Reward not reviewed") for line in emitted.provenance.validation)
    started = run_grpo(RunRequest(recipe=emitted, run_id="bypass-unread"))
    try:
        for status in (started, run_status("bypass-unread"), *list_runs().runs):
            if status.run_id == "bypass-unread":
                assert status.reward_review.startswith(NOT_REVIEWED), status
        assert f"reward review: {NOT_REVIEWED}" in grpo_rlvr("status", "bypass-unread").stdout
    finally:
        cancel_run("bypass-unread")


@pytest.mark.slow
def test_6_an_unread_run_stamps_its_metrics_header_and_model_card(tiny_model_dir, dataset):
    from test_runs import REWARDS

    rewards = [REWARDS[0].model_copy(update={"weight": 0.23}), REWARDS[1]]
    report = inspect_rewards(InspectionRequest(rewards=rewards, samples=number_samples(seed=62)))
    unread = ReviewRequest(report_id=report.id, reviewer="ci", accept_unread=True, accept_unread_reason="test")
    assert record_review(unread).verdict == "accepted_unread"
    run_grpo(RunRequest(recipe=recipe(tiny_model_dir, dataset, rewards, steps=2), run_id="bypass-unread-card"))
    status = wait_for("bypass-unread-card")
    assert status.state == "succeeded" and status.reward_review.startswith(NOT_REVIEWED)
    directory = run_dir("bypass-unread-card")
    header = json.loads((directory / "metrics.header.json").read_text())
    assert header["reward_review"].startswith(NOT_REVIEWED) and header["reviewed"] is False
    assert (
        "**Reward not reviewed.** reward not reviewed: accepted unread by human ci (test)"
        in (directory / "final" / "README.md").read_text()
    )


# ---- 7. the allowlist before any import -------------------------------------------------------------


SENTINEL = (
    "from pathlib import Path\nPath(__file__).with_suffix('.imported').touch()\n\n"
    "def score(prompts, completions, **kwargs):\n    return [1.0 for _ in completions]\n"
)


def test_7_the_allowlist_is_checked_before_anything_is_imported(reward_dir, tiny_model_dir, dataset, monkeypatch):
    from test_runs import REWARDS

    marker = reward_dir / "sentinel_reward.imported"
    write(reward_dir / "sentinel_reward.py", SENTINEL)
    monkeypatch.delenv("GRPO_RLVR_REWARD_PATHS")
    for module in ("sentinel_reward", "os"):
        rewards = [
            REWARDS[0],
            REWARDS[1].model_copy(update={"name": f"{module}:score" if module != "os" else "os:system"}),
        ]
        with pytest.raises(SkillError, match=f"Reward module '{module}' is not on the allowlist"):
            recipe(tiny_model_dir, dataset, rewards)
        with pytest.raises(SkillError, match="not on the allowlist"):
            inspect_rewards(InspectionRequest(rewards=rewards, samples=tagged_samples()))
        request = {
            "model": {"name": str(tiny_model_dir)},
            "hardware": {"accelerator": "cpu"},
            "method": "full",
            "dataset": {"name": str(dataset)},
            "rewards": [r.model_dump() for r in rewards],
        }
        text = assert_project_error(call("emit_grpo_config", {"request": request}), "emit_grpo_config")
        assert "not on the allowlist" in text and "internal error" not in text
    assert not marker.exists() and "sentinel_reward" not in sys.modules
    # Allowed: a read-only tool still imports nothing of it; an allowed name that does not exist is a clear error.
    monkeypatch.setenv("GRPO_RLVR_REWARD_PATHS", str(reward_dir))
    emitted = recipe(
        tiny_model_dir, dataset, [REWARDS[0], REWARDS[1].model_copy(update={"name": "sentinel_reward:score"})]
    )
    assert emitted.provenance.inspection_id is None and not marker.exists()
    monkeypatch.setenv("GRPO_RLVR_REWARD_MODULES", "rewards_for_tests,flawed_rewards,nowhere_rewards")
    with pytest.raises(SkillError, match=r"'nowhere_rewards' is on the allowlist \(\w+\) but cannot be found"):
        open_gate([REWARDS[0], REWARDS[1].model_copy(update={"name": "nowhere_rewards:score"})])
