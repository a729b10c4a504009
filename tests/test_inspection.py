"""inspect_rewards and the gate: sound rewards pass the automatic checks, flawed rewards are caught by name, false
blocks are gone, probes cover every role, and a blind read opens the gate (its rule: tests/test_blind_read.py)."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
from blind_reader import pass_review, read_blind

from skill.data import ADDITION_QUESTION
from skill.errors import SkillError
from skill.inspection.gate import open_gate, record_review, require_passed_inspection
from skill.inspection.reports import load_report
from skill.inspection.run import inspect_rewards
from skill.inspection.schema import InspectionReport, InspectionRequest, ReviewRequest, SuppliedSample
from skill.rewards.fingerprint import reward_fingerprint
from skill.rewards.spec import RewardSpec

SOUND = [
    RewardSpec(name="format", role="format", weight=0.2, params={"pattern": "think_answer"}),
    RewardSpec(name="exact_match", role="correctness", params={"extract": "answer_tag"}),
]


def tagged_samples(count=60, seed=None):
    """Realistic outputs for the addition task in think/answer format: right, wrong, malformed, multi-line.

    A call without a seed draws questions from a wide range, so its samples are ones no other test of the session
    labelled: a read's labels are carried into any later inspection of the same samples (the regression set)."""
    rng = random.Random(seed)
    samples = []
    for group in range(count // 6):
        a, b = rng.randint(1000, 999_999), rng.randint(1000, 999_999)  # golds no other call shares (in parallel)
        row = {"prompt": [{"role": "user", "content": ADDITION_QUESTION.format(a=a, b=b)}], "answer": str(a + b)}
        gold = int(row["answer"])
        for _ in range(6):
            answer = rng.choice([gold, gold, gold + 1, rng.randint(1000, 2_000_000), rng.randint(1000, 2_000_000)])
            completion = rng.choice(
                [
                    f"<think>Add the two numbers.\nThat gives {answer}.</think>\n<answer>{answer}</answer>",
                    f"<think>Quick sum.</think>\n<answer>{answer}</answer>",
                    f"The answer is {answer}.",
                ]
            )
            samples.append(
                SuppliedSample(
                    prompt=row["prompt"], completion=completion, columns={"answer": row["answer"]}, group=group
                )
            )
    return samples


def inspect(rewards, samples=None, **extra):
    """The whole report (scores, statistics, probes), as the library reads it: a reader sees none of it before
    the labels (tests/test_blind_read.py)."""
    report = inspect_rewards(InspectionRequest(rewards=rewards, samples=samples or tagged_samples(), **extra))
    return load_report(report.id)


def honest_labels(report):
    """A blind read of the think/answer samples by the test reader's own check (tests/blind_reader.py)."""
    return read_blind(report, form="think_answer")


def test_sound_composite_passes_the_automatic_checks():
    samples = tagged_samples()
    report = inspect(SOUND, samples)
    assert [flag.code for flag in report.flags if flag.severity == "blocking"] == []
    assert report.probe_results and not any(probe.hacked for probe in report.probe_results)
    # The 60 samples sent are the 60 to read, in an order that says nothing of their scores; the draw says so.
    assert report.verdict == "pending" and sorted(s.completion for s in report.samples) == sorted(
        s.completion for s in samples
    )
    assert report.draw.startswith("60 of 60 samples collected, balanced on exact_match's outcome")
    assert report.stats["exact_match"].mean is not None and report.samples[0].extracted
    assert Path(report.paths["html"]).is_file() and Path(report.paths["markdown"]).is_file()


@pytest.mark.parametrize(
    ("spec", "samples", "flag"),
    [
        (RewardSpec(name="flawed_rewards:lenient_format", role="format", weight=0.2), None, "hack_empty_answer_tags"),
        (RewardSpec(name="flawed_rewards:lenient_format", role="format", weight=0.2), None, "hack_trailing_junk"),
        (RewardSpec(name="flawed_rewards:substring_match", role="correctness"), None, "hack_candidate_list"),
        (RewardSpec(name="flawed_rewards:one_on_exception", role="correctness"), None, "hack_echo_prompt"),
        (RewardSpec(name="flawed_rewards:colon_judge", role="judge"), None, "hack_master_key_0"),
    ],
)
def test_each_flawed_reward_is_caught_by_a_named_flag_that_says_what_to_change(spec, samples, flag):
    rewards = [spec] if spec.role in ("correctness", "judge") else [spec, SOUND[1]]
    report = inspect(rewards, samples)
    blocking = {f.code: f for f in report.flags if f.severity == "blocking"}
    assert flag in blocking, blocking
    assert all(f.fix for f in blocking.values()), [f.code for f in blocking.values() if not f.fix]


def test_a_format_regex_without_dotall_is_flagged_as_constant_not_blocked():
    multi_line = [s for s in tagged_samples(300) if "\n" in s.completion.split("</think>")[0]][:60]
    report = inspect(
        [RewardSpec(name="flawed_rewards:no_dotall_format", role="format", weight=0.2), SOUND[1]], multi_line
    )
    constant = [f for f in report.flags if f.reward == "no_dotall_format" and f.code == "constant_reward"]
    assert constant and constant[0].severity == "warning" and "DOTALL" in constant[0].message


def code_samples(count=60):
    good = "```python\ndef add(a, b):\n    return a + b\n```"
    bad = "```python\ndef add(a, b):\n    return a - b\n```"
    tests = [{"call": "add(1, 2)", "expected": 3}, {"call": "add(2, 2)", "expected": 4}]
    return [
        SuppliedSample(
            prompt="Write add(a, b).", completion=good if i % 3 else bad, columns={"tests": tests}, group=i // 6
        )
        for i in range(count)
    ]


def test_exit_code_grading_is_caught_by_the_sys_exit_probe():
    report = inspect([RewardSpec(name="flawed_rewards:exit_code_grader", role="correctness")], code_samples())
    assert "hack_sys_exit_0" in {f.code for f in report.flags if f.severity == "blocking"}


def test_unit_tests_plus_a_small_format_reward_is_not_blocked_by_code_probes():
    """The false block seen through MCP: code probes ran against the format reward and blocked the standard pair."""
    rewards = [
        RewardSpec(name="format", role="format", weight=0.2, params={"pattern": "code_block"}),
        RewardSpec(name="unit_tests", role="correctness", weight=1.0),
    ]
    report = inspect(rewards, code_samples())
    assert [f.code for f in report.flags if f.severity == "blocking"] == []
    on_format = {p.probe for p in report.probe_results if p.reward == "format"}
    assert not on_format & {"sys_exit_0", "os_exit_0", "always_equal", "print_expected"}
    assert {"sys_exit_0", "always_equal"} <= {p.probe for p in report.probe_results if p.reward == "unit_tests"}
    # A well-formed code block scores the format reward, yet at weight 0.2 the total stays under a correct answer.
    exits = next(p for p in report.probe_results if p.probe == "sys_exit_0")
    assert exits.total == pytest.approx(0.2) and not exits.hacked  # (its bar, 1.0, is not shown: it held)


def test_a_format_reward_at_zero_on_every_sample_is_information_not_a_block():
    number = re.compile(r"-?\d+")
    untagged = [
        s.model_copy(update={"completion": "The answer is " + number.findall(s.completion)[-1] + "."})
        for s in tagged_samples()
    ]
    rewards = [SOUND[0], RewardSpec(name="exact_match", role="correctness", params={"extract": "last_number"})]
    report = inspect(rewards, untagged)
    constant = [f for f in report.flags if f.code == "constant_reward"]
    assert constant and constant[0].reward == "format" and constant[0].severity == "warning"
    assert [f.code for f in report.flags if f.severity == "blocking"] == []


def test_a_correctness_reward_alone_is_not_blocked_by_the_composite_rule():
    report = inspect([SOUND[1]])
    composite = [f for f in report.flags if f.code == "composite_rule"]
    assert composite and all(f.severity == "warning" for f in composite)
    assert [f.code for f in report.flags if f.severity == "blocking"] == []


def test_the_composite_rule_blocks_only_when_the_weights_invert_the_order():
    equal = inspect([SOUND[0].model_copy(update={"weight": 1.0}), SOUND[1]])
    inverted = inspect([SOUND[0].model_copy(update={"weight": 1.0}), SOUND[1].model_copy(update={"weight": 0.5})])
    sound = inspect(SOUND)
    for report in (equal, inverted):
        blocking = [f for f in report.flags if f.code == "composite_rule" and f.severity == "blocking"]
        assert blocking and "larger weight" in blocking[0].fix
    assert not [f for f in sound.flags if f.code == "composite_rule"]


def test_a_json_schema_correctness_reward_pays_a_well_formed_wrong_answer_and_is_blocked():
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}
    samples = [
        s.model_copy(update={"completion": json.dumps({"answer": int(s.columns["answer"]) + (i % 2)})})
        for i, s in enumerate(tagged_samples())
    ]
    report = inspect([RewardSpec(name="json_schema", role="correctness", params={"schema": schema})], samples)
    probe = next(p for p in report.probe_results if p.probe == "wrong_well_formed")
    assert probe.hacked and probe.score == 1.0 and probe.reference_score == 1.0
    flag = next(f for f in report.flags if f.code == "hack_wrong_well_formed")
    assert flag.severity == "blocking" and "role 'format'" in flag.fix
    # The same schema check as a format reward beside exact_match is sound.
    pair = [
        RewardSpec(name="json_schema", role="format", weight=0.2, params={"schema": schema}),
        RewardSpec(name="exact_match", role="correctness", params={"extract": "regex", "regex": r"(-?\d+)"}),
    ]
    assert [f.code for f in inspect(pair, samples).flags if f.severity == "blocking"] == []


def test_probes_cover_every_role():
    judge = RewardSpec(name="flawed_rewards:colon_judge", role="judge")
    report = inspect([SOUND[0], judge])
    by_reward = {}
    for probe in report.probe_results:
        by_reward.setdefault(probe.reward, set()).add(probe.probe)
    assert {"empty_completion", "echo_prompt", "nonsense", "self_praise", "master_key_0"} <= by_reward["colon_judge"]
    assert {"nonsense", "self_praise", "trailing_junk"} <= by_reward["format"]
    correctness = {p.probe for p in inspect(SOUND).probe_results if p.reward == "exact_match"}
    assert {"wrong_well_formed", "candidate_list", "self_praise", "answer_in_reasoning"} <= correctness


def test_answer_in_reasoning_blocks_a_reward_reading_the_hidden_answer_not_one_reading_the_final(tmp_path, monkeypatch):
    """Which reading is right: the answer a completion commits to is the one after </think>."""
    module = tmp_path / "reasoning_readers.py"
    module.write_text(
        "import re\n"
        "def final_answer(prompts, completions, answer, **kwargs):\n"
        "    out = []\n"
        "    for c, a in zip(completions, answer):\n"
        "        c = c[0]['content'] if isinstance(c, list) else c  # chat prompts: TRL passes messages\n"
        "        tail = c.split('</think>')[-1]\n"
        "        found = re.findall(r'<answer>(.*?)</answer>', tail, re.S)\n"
        "        out.append(1.0 if len(found) == 1 and found[0].strip() == str(a) else 0.0)\n"
        "    return out\n"
        "def first_tag(prompts, completions, answer, **kwargs):\n"
        "    out = []\n"
        "    for c, a in zip(completions, answer):\n"
        "        c = c[0]['content'] if isinstance(c, list) else c\n"
        "        found = re.search(r'<answer>(.*?)</answer>', c, re.S)\n"
        "        out.append(1.0 if found and found.group(1).strip() == str(a) else 0.0)\n"
        "    return out\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("GRPO_RLVR_REWARD_PATHS", str(tmp_path))
    strict = inspect([SOUND[0], RewardSpec(name="reasoning_readers:final_answer", role="correctness")])
    assert not [p for p in strict.probe_results if p.hacked]
    assert not [p for p in strict.probe_results if p.probe == "answer_in_reasoning" and p.reward == "format"]
    loose = inspect([SOUND[0], RewardSpec(name="reasoning_readers:first_tag", role="correctness")])
    assert "hack_answer_in_reasoning" in {f.code for f in loose.flags if f.severity == "blocking"}


def test_restating_the_question_is_caught_in_a_verifier_that_evaluates_and_refused_by_math(tmp_path, monkeypatch):
    """'The number is just 2 + 14.' for 'What is 2 + 14?': a verifier that evaluates the final expression pays it
    (a blocking hack flag); the library's math reward scores it 0 and shows what it read."""
    module = tmp_path / "evaluating_readers.py"
    module.write_text(
        "import re\n"
        "def evaluates(prompts, completions, answer, **kwargs):\n"
        "    out = []\n"
        "    for c, a in zip(completions, answer):\n"
        "        c = c[0]['content'] if isinstance(c, list) else c\n"
        "        tail = c.split('</think>')[-1]\n"
        "        tagged = re.findall(r'<answer>(.*?)</answer>', tail, re.S)\n"
        "        text = tagged[-1] if tagged else tail\n"
        "        found = re.findall(r'\\d+(?:\\s*\\+\\s*\\d+)*', text)\n"
        "        value = sum(int(n) for n in re.findall(r'\\d+', found[-1])) if found else None\n"
        "        out.append(1.0 if value == int(a) else 0.0)\n"
        "    return out\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("GRPO_RLVR_REWARD_PATHS", str(tmp_path))
    loose = inspect([SOUND[0], RewardSpec(name="evaluating_readers:evaluates", role="correctness")])
    restated = [p for p in loose.probe_results if p.probe == "restated_question" and p.reward == "evaluates"]
    assert restated and restated[0].hacked
    assert "hack_restated_question" in {f.code for f in loose.flags if f.severity == "blocking"}
    strict = inspect([SOUND[0], RewardSpec(name="math", role="correctness")])
    assert not [p for p in strict.probe_results if p.probe == "restated_question" and p.hacked]
    assert all(sample.extracted.get("math") is not None for sample in strict.samples if sample.completion)


def test_a_correctness_reward_that_reads_almost_nothing_blocks_and_names_the_mode_that_reads():
    """Bare-number answers read through <answer> tags: every score is 0 for the wrong reason."""
    samples = [
        sample.model_copy(update={"completion": sample.completion.split("<answer>")[-1].replace("</answer>", "")})
        for sample in tagged_samples()
    ]
    report = inspect([RewardSpec(name="exact_match", role="correctness", params={"extract": "answer_tag"})], samples)
    assert report.stats["exact_match"].read_share == 0.0
    flag = next(f for f in report.flags if f.code == "reads_too_little")
    assert flag.severity == "blocking" and "found an answer in 0% of 60" in flag.message
    assert "Send params.extract 'last_number' (it reads 100% of the same completions)" in flag.fix


def test_a_quick_check_shows_every_score_on_a_handful_and_is_no_read():
    """The issue: no quick way to check a reward's inputs on a few samples. A quick check scores the first 10 of
    the samples with every score and extracted answer shown; nothing is stored, so no review can be recorded on it,
    and the samples it showed count as seen in a later read."""
    from skill.inspection.digest import inspection_digest
    from skill.inspection.revealed import content_key, revealed_keys

    samples = tagged_samples(120)
    quick = inspect_rewards(InspectionRequest(rewards=SOUND, samples=samples, quick=True))
    assert len(quick.samples) == 10 and quick.id.startswith("quick")
    assert all(sample.scores["exact_match"] in (0.0, 1.0) for sample in quick.samples)  # shown, not sealed
    assert any(sample.extracted.get("exact_match") for sample in quick.samples)
    assert quick.stats["exact_match"].read_share is not None and "not a read" in quick.verdict_reasons[0]
    assert {content_key(sample) for sample in quick.samples} <= revealed_keys()
    page = inspection_digest(quick).page  # what the MCP tool returns: the scores, unsealed
    assert not page.blind and page.samples[0].scores == quick.samples[0].scores
    with pytest.raises(SkillError):
        record_review(ReviewRequest(report_id=quick.id, reviewer="ana", labels={}))
    # the read afterwards (60 of the same 120) draws around them: its blind labels come from samples nobody saw
    read = inspect(SOUND, samples)
    shown = {content_key(sample) for sample in quick.samples}
    assert not shown & {content_key(sample) for sample in read.samples}


def test_the_digest_counts_every_probe_that_ran_before_the_reveal():
    """An agent read "0 of 0 hack probes beat a reward" while the progress said 7 ran: before the reveal only the
    hacked probes are shown, and the count was taken from what was shown."""
    from skill.inspection.digest import inspection_digest

    whole = inspect(SOUND)
    shown = inspect_rewards(InspectionRequest(rewards=SOUND, samples=tagged_samples()))  # what the tool returns
    assert shown.probe_results and all(probe.score is None for probe in shown.probe_results if not probe.hacked)
    digest = inspection_digest(shown)
    assert digest.probes_run == len(whole.probe_results) > 0
    assert f"of {len(whole.probe_results)} hack probes beat a reward" in digest.summary


def test_sample_count_limits():
    with pytest.raises(SkillError, match="at least 50"):
        inspect(SOUND, tagged_samples(48))
    many = inspect(SOUND, tagged_samples(120))
    assert len(many.samples) == 60 and many.draw.startswith("60 of 120 samples collected")


def test_gate_refuses_then_accepts_a_read():
    with pytest.raises(SkillError, match="No passed inspection|changed since"):
        require_passed_inspection([SOUND[0].model_copy(update={"weight": 0.15}), SOUND[1]])
    rewards = [SOUND[0].model_copy(update={"weight": 0.37}), SOUND[1]]  # no other test passes it, in either worker
    report = inspect(rewards)
    passed = record_review(ReviewRequest(report_id=report.id, reviewer="ana", labels=honest_labels(report)))
    assert passed.verdict == "passed", passed.verdict_reasons
    assert require_passed_inspection(rewards).id == report.id


def test_a_run_keeps_the_inspection_it_started_on_when_another_passes_meanwhile():
    rewards = [SOUND[0].model_copy(update={"weight": 0.23}), SOUND[1]]  # a reward set no other test passes
    first = pass_review(inspect(rewards), form="think_answer")
    later = pass_review(inspect(rewards), form="think_answer")
    assert open_gate(rewards).inspection_id == later.id  # a new run starts on the newest
    assert open_gate(rewards, preferred=first.id).inspection_id == first.id  # the training process of an older one
    assert open_gate(rewards, preferred="insp-gone").inspection_id == later.id
    unread = inspect(rewards)
    record_review(ReviewRequest(report_id=unread.id, reviewer="bot", accept_unread=True, accept_unread_reason="t"))
    assert open_gate(rewards, preferred=unread.id).inspection_id == later.id  # a read beats an unread one


def test_fingerprint_follows_the_source_of_a_user_reward(tmp_path, monkeypatch):
    module = tmp_path / "editable_reward.py"
    module.write_text("def score(prompts, completions, **kwargs):\n    return [1.0 for _ in completions]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("GRPO_RLVR_REWARD_PATHS", str(tmp_path))
    spec = [RewardSpec(name="editable_reward:score", role="correctness")]
    before, _ = reward_fingerprint(spec)
    module.write_text("def score(prompts, completions, **kwargs):\n    return [0.5 for _ in completions]\n")
    assert reward_fingerprint(spec)[0] != before  # read from disk, no import and no cache to clear
    assert (
        reward_fingerprint(SOUND)[0] != reward_fingerprint([SOUND[0].model_copy(update={"weight": 0.3}), SOUND[1]])[0]
    )


def test_gate_names_the_reward_that_changed():
    report = inspect(SOUND)
    record_review(ReviewRequest(report_id=report.id, reviewer="ana", labels=honest_labels(report)))
    changed = [SOUND[0], SOUND[1].model_copy(update={"params": {"extract": "last_number"}})]
    with pytest.raises(SkillError, match="Reward function exact_match changed since inspection"):
        require_passed_inspection(changed)


@pytest.mark.slow
def test_route_samples_are_reused_without_sampling_again(tiny_model_dir):
    from skill.routing.probe import ProbeSpec
    from skill.routing.route import RouteRequest, route_check

    rows = [{"prompt": f"question {i}", "mode": "coin"} for i in range(8)]
    verifier = RewardSpec(name="rewards_for_tests:by_mode", role="correctness")
    decision = route_check(
        RouteRequest(
            signal="exact_answer",
            verifier=verifier,
            probe=ProbeSpec(model=str(tiny_model_dir), rows=rows, max_new_tokens=6),
        )
    )
    report = inspect_rewards(InspectionRequest(rewards=[verifier], route_decision_id=decision.id))
    assert report.source == f"route_check probe {decision.id}" and len(report.samples) == 60  # drawn of 64
    assert report.draw.startswith("60 of 64 samples collected")
    assert {s.group for s in report.samples} == set(range(8))
    assert report.policy_model == str(tiny_model_dir)  # the probe's samples are the policy's own
    assert f"on policy samples of {tiny_model_dir}" in Path(report.paths["markdown"]).read_text()


@pytest.mark.slow
def test_a_route_probed_again_after_a_read_gets_fresh_samples_of_the_policy(tiny_model_dir, tmp_path, monkeypatch):
    """The same probe twice (its seed fixed): the second inspection finds its samples revealed by the first read,
    samples the policy again on the prompts no read revealed, and reads only unseen samples; the data's first
    prompts are the probe's, so the fresh ones are the rest, and groups stay one per prompt."""
    from skill.inspection.revealed import content_key, prompt_digest, revealed_keys
    from skill.routing.probe import ProbeSpec
    from skill.routing.route import RouteRequest, route_check
    from skill.state import STATE_ROOT_ENV

    monkeypatch.setenv(STATE_ROOT_ENV, str(tmp_path / "state"))  # no other test's reads on these prompts
    rows = [{"prompt": f"question {i}", "mode": "coin"} for i in range(24)]
    verifier = RewardSpec(name="rewards_for_tests:by_mode", role="correctness")

    def probed_and_read() -> InspectionReport:
        probe = ProbeSpec(model=str(tiny_model_dir), rows=rows, num_prompts=8, max_new_tokens=6)
        decision = route_check(RouteRequest(signal="exact_answer", verifier=verifier, probe=probe))
        return load_report(inspect_rewards(InspectionRequest(rewards=[verifier], route_decision_id=decision.id)).id)

    first = probed_and_read()
    assert "fresh" not in first.draw and len(first.samples) == 60
    labels = {s.id: {"correctness": "pass" if len(s.completion) % 2 == 0 else "fail"} for s in first.samples}
    record_review(ReviewRequest(report_id=first.id, reviewer="ana", labels=labels))  # reveals the 60 drawn

    second = probed_and_read()
    seen = revealed_keys()
    assert not [s for s in second.samples if content_key(s) in seen]  # every label of this read will count
    assert "60 samples revealed before on this state root left out" in second.draw, second.draw
    assert "the samples not yet revealed held only 4 samples of the 60 to draw" in second.draw
    assert "fresh samples of the policy were collected: 56 (7 prompts no read had revealed, x 8, seed " in second.draw
    assert f"56 more sampled from {tiny_model_dir}" in second.source
    fresh_prompts = {prompt_digest(s.prompt) for s in second.samples} - {prompt_digest(s.prompt) for s in first.samples}
    assert fresh_prompts <= {prompt_digest(f"question {i}") for i in range(8, 15)} and fresh_prompts
    groups = {}
    for sample in second.samples:
        groups.setdefault(sample.group, set()).add(prompt_digest(sample.prompt))
    assert all(len(prompts) == 1 for prompts in groups.values())
    labels = {s.id: {"correctness": "pass" if len(s.completion) % 2 == 0 else "fail"} for s in second.samples}
    read = record_review(ReviewRequest(report_id=second.id, reviewer="ana", labels=labels)).review
    assert not read.seen_before and read.agreement[0].samples == 60  # (its gate is by_mode's hack flags' to shut)


@pytest.mark.slow
def test_a_read_goes_on_when_its_policy_cannot_be_sampled_again(tiny_model_dir, tmp_path, monkeypatch):
    """The route inspected again after its read, its model since moved away: the fresh samples cannot be had, and
    the read goes on with what it has, the draw saying why and the flags asking for more."""
    import shutil

    from skill.routing.probe import ProbeSpec
    from skill.routing.route import RouteRequest, route_check
    from skill.state import STATE_ROOT_ENV

    monkeypatch.setenv(STATE_ROOT_ENV, str(tmp_path / "state"))
    model = shutil.copytree(tiny_model_dir, tmp_path / "model")
    rows = [{"prompt": f"question {i}", "mode": "coin"} for i in range(8)]
    verifier = RewardSpec(name="rewards_for_tests:by_mode", role="correctness")
    probe = ProbeSpec(model=str(model), rows=rows, max_new_tokens=6)
    decision = route_check(RouteRequest(signal="exact_answer", verifier=verifier, probe=probe))
    first = inspect_rewards(InspectionRequest(rewards=[verifier], route_decision_id=decision.id))
    labels = {s.id: {"correctness": "pass" if len(s.completion) % 2 == 0 else "fail"} for s in first.samples}
    record_review(ReviewRequest(report_id=first.id, reviewer="ana", labels=labels))
    shutil.rmtree(model)

    again = inspect_rewards(InspectionRequest(rewards=[verifier], route_decision_id=decision.id))
    assert "the samples not yet revealed held only 4 samples of the 60 to draw" in again.draw, again.draw
    assert "fresh samples of the policy could not be collected (" in again.draw and str(model) in again.draw
    assert "56 of them revealed before on this state root: their labels will not count" in again.draw


def test_emit_records_the_passed_inspection_it_relies_on():
    from skill.hardware.specs import HardwareSpec
    from skill.recipe.emit import RecipeRequest, emit_grpo_config
    from skill.recipe.schema import DatasetSpec

    def emitted(rewards, **extra):
        dataset = DatasetSpec(name="embedded:addition", columns=["answer"])
        cpu = HardwareSpec(accelerator="cpu")
        return emit_grpo_config(RecipeRequest(hardware=cpu, method="full", rewards=rewards, dataset=dataset, **extra))

    rewards = [SOUND[0].model_copy(update={"weight": 0.41}), SOUND[1]]  # no other test passes it, in either worker
    report = inspect(rewards)
    record_review(ReviewRequest(report_id=report.id, reviewer="ana", labels=honest_labels(report)))
    recipe = emitted(rewards)
    assert recipe.provenance.inspection_id == report.id
    other = emitted([SOUND[0].model_copy(update={"weight": 0.05}), SOUND[1]])
    assert other.provenance.inspection_id is None
    assert any("run_grpo will refuse" in line for line in other.provenance.validation)
    # Read on supplied samples: a recipe that requires the policy's own samples is not opened by it.
    strict = emitted(rewards, require_policy_samples=True)
    assert strict.provenance.inspection_id is None and strict.provenance.policy_samples_of == strict.model.name
    assert any(
        f"not read on samples {strict.model.name} wrote" in line and "run_grpo will refuse" in line
        for line in strict.provenance.validation
    )
    assert "on supplied samples, not sampled from the policy" in recipe.provenance.reward_review


def test_a_trl_style_reward_in_a_directory_named_only_by_reward_paths_loads_and_inspects(tmp_path, monkeypatch):
    import sys

    from skill.rewards.registry import build_reward_function

    monkeypatch.setattr(sys, "path", list(sys.path))  # the reward's directory joins it while the test runs
    monkeypatch.delenv("PYTHONPATH", raising=False)
    rewards = tmp_path / "my-rewards"
    rewards.mkdir()
    (rewards / "paths_only_rewards.py").write_text(
        "def contains_answer(completions, answer, **kwargs):\n"
        "    texts = [c[0]['content'] if isinstance(c, list) else c for c in completions]\n"
        "    return [1.0 if f'<answer>{a}</answer>' in t else 0.0 for t, a in zip(texts, answer)]\n"
    )
    (rewards / "json.py").write_text("def score(completions, **kwargs):\n    return [0.0 for _ in completions]\n")
    monkeypatch.setenv("GRPO_RLVR_REWARD_PATHS", str(rewards))  # the one setting: no PYTHONPATH, no module list
    report = inspect([SOUND[0], RewardSpec(name="paths_only_rewards:contains_answer", role="correctness")])
    assert len(report.samples[0].scores) == 2 and set(report.samples[0].scores.values()) <= {0.0, 1.0, None}
    with pytest.raises(SkillError, match="has the name of an installed module") as taken:
        build_reward_function(RewardSpec(name="json:score", role="correctness"))
    assert "Rename json.py" in taken.value.fix
    monkeypatch.setenv("GRPO_RLVR_REWARD_PATHS", str(tmp_path / "elsewhere"))
    with pytest.raises(SkillError, match=r"no directory of GRPO_RLVR_REWARD_PATHS \(.*elsewhere\) holds other_rew"):
        build_reward_function(RewardSpec(name="other_rewards:score", role="correctness"))
