"""Issue 14: seven ways the gate opened without a read, each refused with the message a user sees; then an
agent that never reads the samples tries the public calls to open it, and fails.

Reward modules are written to a temporary directory (allowlisted through GRPO_RLVR_REWARD_PATHS, on the
Python path of this process, of the scoring process and of the training process) and edited in place,
as a user would.
"""

from __future__ import annotations

import importlib
import json
import random
import re
import string
import sys
from pathlib import Path

import pytest
from new_answers import no_answer_reply, real_scores
from pydantic import ValidationError
from test_inspection import SOUND, honest_labels, tagged_samples
from test_mcp_surface import assert_project_error, call
from test_runs import pass_inspection, recipe
from test_runs import wait as wait_for

from skill.data import addition_rows
from skill.errors import SkillError
from skill.inspection.gate import NOT_REVIEWED, GateClosed, open_gate, record_review
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
    first = inspect_rewards(InspectionRequest(rewards=rewards, samples=tagged_samples()))
    assert first.stats["score"].distinct_values == 2
    write(reward_dir / "stale_reward.py", SAYS_THE_ANSWER.format(imports="", body="1.0"))
    assert stale.score(["p"], ["no"], answer=["3"]) == [0.0]  # the imported module is still the old one
    edited = inspect_rewards(InspectionRequest(rewards=rewards, samples=tagged_samples()))
    assert set(real_scores(edited, "score")) == {1.0} and edited.reward_fingerprint == reward_fingerprint(rewards)[0]
    review = record_review(ReviewRequest(report_id=edited.id, reviewer="ana", labels=honest_labels(edited)))
    assert review.verdict == "failed"
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


# ---- 5. attention checks -------------------------------------------------------------------------


def reworded(samples):
    return [
        s.model_copy(update={"prompt": [{"role": "user", "content": s.prompt[0]["content"] + " "}]}) for s in samples
    ]


def rescored_labels(report, other):
    """Disagree where the same sample shows a different score in another report (the order is kept)."""
    return {s.id: s.scores == other.samples[s.id].scores for s in report.samples}


def test_5_attention_checks_cannot_be_derived_from_the_request_the_report_or_the_api():
    with pytest.raises(ValidationError, match="planted"):
        InspectionRequest(rewards=SOUND, samples=tagged_samples(), planted=0)
    assert_project_error(
        call(
            "inspect_rewards",
            {"request": {"rewards": [{"name": "format", "role": "format"}], "samples": [], "planted": 0}},
        ),
        "inspect_rewards",
    )
    samples = tagged_samples()
    report = inspect_rewards(InspectionRequest(rewards=SOUND, samples=samples))
    shown = [(json.dumps(s.prompt), s.completion) for s in report.samples]
    assert shown == [(json.dumps(s.prompt), s.completion) for s in samples]  # no duplicate, no added item
    # Re-scoring through the API (again, a subset, a superset, reworded prompts) shows the same checks.
    for variant in (samples, samples[:55], samples + tagged_samples(120, seed=5)[:40], reworded(samples)):
        other = inspect_rewards(InspectionRequest(rewards=SOUND, samples=variant))
        same = [s for s in report.samples if s.id < len(other.samples)]
        assert all(s.scores == other.samples[s.id].scores for s in same)
    # Answers are read once: the report whose samples were inspected again takes no read (not counted).
    stale = record_review(ReviewRequest(report_id=report.id, reviewer="bot", labels=honest_labels(report)))
    assert stale.verdict == "failed" and stale.review_attempts == 0
    assert "shown again in a later inspection" in " ".join(stale.verdict_reasons)
    # A failed review reveals nothing: its reasons name only the reader's own disagreements.
    report = inspect_rewards(InspectionRequest(rewards=SOUND, samples=tagged_samples()))
    everything_wrong = {s.id: False for s in report.samples}
    failed = record_review(ReviewRequest(report_id=report.id, reviewer="bot", labels=everything_wrong))
    assert failed.verdict == "failed" and failed.review_attempts == 1
    reasons = " ".join(failed.verdict_reasons)
    assert f"You disagreed with samples {sorted(everything_wrong)}" in reasons and "is not said" in reasons
    # What the first call could have shown does not pass a second one.
    guess = {s.id: True for s in report.samples}
    second = record_review(ReviewRequest(report_id=report.id, reviewer="bot", labels=guess))
    assert second.verdict == "failed" and second.review_attempts == 2
    assert "Reviews that did not match a read: 2" in Path(second.paths["markdown"]).read_text()


# ---- 6. accept-all ---------------------------------------------------------------------------------


def number_samples():
    """Bare-number answers to the addition task, right two times in three (the rewards of test_runs fit them)."""
    return [
        SuppliedSample(
            prompt=row["prompt"],
            completion=row["answer"] if i % 3 else "no idea",
            columns={"answer": row["answer"]},
            group=i // 6,
        )
        for i, row in enumerate(addition_rows(60))
    ]


def test_6_accept_all_never_passes_and_unread_training_is_stamped(tiny_model_dir, dataset):
    from test_cli import grpo_rlvr
    from test_runs import REWARDS

    rewards = [REWARDS[0].model_copy(update={"weight": 0.22}), REWARDS[1]]
    report = inspect_rewards(InspectionRequest(rewards=rewards, samples=number_samples()))
    cli = grpo_rlvr("review", report.id, "--reviewer", "bot", "--agent", "--yes")
    assert cli.returncode == 0 and f"{report.id}: verdict failed" in cli.stdout
    assert "An accept-all review (non_interactive / --yes) never opens the gate" in cli.stdout
    with pytest.raises(GateClosed):
        open_gate(rewards)
    with pytest.raises(SkillError, match="accept_unread needs a reason"):
        record_review(ReviewRequest(report_id=report.id, reviewer="bot", accept_unread=True))
    cli = grpo_rlvr("review", report.id, "--reviewer", "bot", "--agent", "--accept-unread", "a smoke test")
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
    report = inspect_rewards(InspectionRequest(rewards=rewards, samples=number_samples()))
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


# ---- the adversary --------------------------------------------------------------------------------


class Agent:
    """An agent that never reads a sample: it only calls the public functions (the ones the MCP tools and the
    command line adapt) and looks at ids, scores, verdicts and other reports; every call is counted."""

    def __init__(self, limit: int) -> None:
        self.calls, self.limit, self.reports = 0, limit, []

    def __call__(self, function, *args, **kwargs):
        assert self.calls < self.limit, "the agent's budget of calls is spent"
        self.calls += 1
        try:
            result = function(*args, **kwargs)
        except (SkillError, ValidationError) as exc:
            return exc
        if hasattr(result, "verdict"):
            self.reports.append(result)
        return result


def _twins(report, key):
    """Samples whose score differs from the majority of their twins (same key), to disagree with."""
    groups = {}
    for sample in report.samples:
        groups.setdefault(key(sample), []).append(sample)
    odd = set()
    for group in groups.values():
        values = [s.scores["exact_match"] for s in group]
        odd |= {s.id for s in group if values.count(s.scores["exact_match"]) * 2 < len(values)}
    return odd


def test_an_agent_that_never_reads_cannot_open_the_gate(tiny_model_dir, dataset):
    def reward_set(index):  # reward sets no other test passes; one per strategy, so each has its own tries
        return [SOUND[0].model_copy(update={"weight": round(0.17 + index / 1000, 3)}), SOUND[1]]

    rewards = reward_set(0)
    current = {"rewards": rewards}
    agent = Agent(limit=100)
    sent = {}  # report id -> the samples it was made from (what the agent sent)

    def fresh(samples=None):
        samples = samples or tagged_samples()  # new answers each time: a report a read could pass
        report = agent(inspect_rewards, InspectionRequest(rewards=current["rewards"], samples=samples))
        sent[getattr(report, "id", None)] = samples
        return report

    def review(report, labels=None, **extra):
        request = {"report_id": report.id, "reviewer": "agent", "reviewer_kind": "agent", "labels": labels or {}}
        return agent(lambda: record_review(ReviewRequest(**request, **extra)))

    def rescored(variant):  # re-inspect (a variant of) the samples the report was made from, then compare
        def labels(report):
            request = InspectionRequest(rewards=current["rewards"], samples=variant(sent[report.id]))
            other = agent(inspect_rewards, request)
            return {s.id: s.id >= len(other.samples) or s.scores == other.samples[s.id].scores for s in report.samples}

        return labels

    def from_failure(report):  # fail once on purpose, then take the complement of what the failure says
        first = review(report, {s.id: False for s in report.samples})
        listed = {int(n) for n in re.findall(r"\b\d+\b", " ".join(getattr(first, "verdict_reasons", [])))}
        return {s.id: s.id not in listed for s in report.samples}

    def decided_among_nonsense():  # three new answers the gold decides (wrong numbers), the rest no answer at all
        base = tagged_samples(6)
        wrong = [f"<answer>{random.randint(10**6, 10**7)}</answer>" for _ in range(3)]
        decided = [s.model_copy(update={"completion": text}) for s, text in zip(base, wrong, strict=False)]
        return fresh(decided + [base[3].model_copy(update={"completion": no_answer_reply()}) for _ in range(57)])

    def evidence(report):  # whatever the report points at: flag evidence, probe results
        pointed = {i for f in report.flags for i in f.evidence}
        return {s.id: s.id not in pointed for s in report.samples}

    strategies = {
        "agree with all": lambda r: {s.id: True for s in r.samples},
        "disagree with all": lambda r: {s.id: False for s in r.samples},
        "label only 50": lambda r: {s.id: True for s in r.samples[:50]},
        "re-score the same samples": rescored(lambda sent: sent),
        "re-score a subset": rescored(lambda sent: sent[:55]),
        "re-score a superset": rescored(lambda sent: sent + tagged_samples(120, seed=9)[:40]),
        "re-score reworded prompts": rescored(reworded),
        "twins by text": lambda r: {
            s.id: s.id not in _twins(r, lambda x: (json.dumps(x.prompt), x.completion)) for s in r.samples
        },
        "twins by answer": lambda r: {
            s.id: s.id not in _twins(r, lambda x: (x.columns["answer"], x.extracted["exact_match"])) for s in r.samples
        },
        "complement of a failure": from_failure,
        "what the report points at": evidence,
        "disagree with the shown extremes": lambda r: {s.id: s.total not in (0.0, 1.2) for s in r.samples},
    }
    verdicts = {}

    def verdict(outcome):
        return "refused" if isinstance(outcome, SkillError) else outcome.verdict

    for index, (name, strategy) in enumerate(strategies.items(), start=1):
        current["rewards"] = reward_set(index)
        report = fresh()
        verdicts[name] = verdict(review(report, strategy(report)))
    current["rewards"] = reward_set(len(strategies) + 1)
    built = decided_among_nonsense()
    verdicts["disagree with the three decided answers"] = verdict(
        review(built, {s.id: s.id >= 3 for s in built.samples})
    )
    # One answer sent sixty times, worded sixty ways: every copy is a check or none is, so "disagree with all"
    # would pass whenever it is one; a report without ten new answers takes no read.
    one = tagged_samples(6, seed=3)[0]
    gold = one.columns["answer"]
    worded = [f"<think>Way {w}.</think><answer>{gold}</answer>" for w in string.ascii_letters[:60]]
    current["rewards"] = reward_set(len(strategies) + 2)
    copies = fresh([one.model_copy(update={"completion": text}) for text in worded])
    verdicts["copies of one answer"] = verdict(review(copies, {s.id: False for s in copies.samples}))
    current["rewards"] = rewards
    report = fresh()
    verdicts["accept-all"] = verdict(review(report, non_interactive=True))
    for _ in range(6):  # retry one report until it takes no more reviews
        outcome = review(report, {s.id: s.id % 2 == 0 for s in report.samples})
    verdicts["retries"] = "refused" if isinstance(outcome, SkillError) else outcome.verdict
    agent(lambda: InspectionRequest(rewards=rewards, samples=tagged_samples(), planted=0))
    agent(run_grpo, RunRequest(recipe=recipe(tiny_model_dir, dataset, rewards), force=True, force_reason="looks fine"))

    print(f"\nthe non-reading agent made {agent.calls} public calls: {verdicts}")
    assert set(verdicts.values()) <= {"failed", "refused"}, verdicts
    assert not [r.id for r in agent.reports if r.verdict in ("passed", "accepted_unread")]
    for index in range(len(strategies) + 3):
        with pytest.raises(GateClosed):
            open_gate(reward_set(index))
    assert recipe(tiny_model_dir, dataset, rewards).provenance.inspection_id is None
    # The only door left is the named one, and it says what it is everywhere.
    unread = record_review(
        ReviewRequest(
            report_id=report.id,
            reviewer="agent",
            reviewer_kind="agent",
            accept_unread=True,
            accept_unread_reason="never read",
        )
    )
    assert unread.verdict == "accepted_unread" and not open_gate(rewards).reviewed
    assert recipe(tiny_model_dir, dataset, rewards).provenance.reward_review.startswith(NOT_REVIEWED)
