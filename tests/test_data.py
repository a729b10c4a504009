"""The one dataset loader on datasets as users have them, and the prompt budget emit measures from them.

tests/data/gsm8k_sample.jsonl holds the first five rows of openai/gsm8k (config ``main``, split ``train``) as
published: columns ``question`` and ``answer``, the answer a worked solution with ``<<calc>>`` annotations
ending in ``#### N``. tests/data/mbpp_sample.jsonl holds rows 11, 12, 14 and 17 of
google-research-datasets/mbpp (config ``full``, split ``test``) as published: ``task_id``, ``text`` (the
task), ``code`` (the reference solution, CRLF line ends), ``test_list`` (three assert strings),
``test_setup_code`` and ``challenge_test_list``.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from skill.data import (
    DatasetSpec,
    gsm8k_answer,
    load_rows,
    load_training_dataset,
    prompt_token_counts,
    within_prompt_budget,
)
from skill.errors import SkillError
from skill.hardware.specs import HardwareSpec
from skill.models.sources import EMBEDDED_MODEL_ID, embedded_tokenizer_dir
from skill.recipe.deciding.memory_request import memory_request
from skill.recipe.deciding.prompts import BUDGET_STEP, SAMPLE_ROWS, percentile
from skill.recipe.emit import RecipeRequest, emit_grpo_config
from skill.recipe.schema import ModelSpec
from skill.rewards.registry import build_reward_function
from skill.rewards.spec import RewardSpec

DATA = Path(__file__).resolve().parent / "data"
GSM8K = DatasetSpec(
    name=str(DATA / "gsm8k_sample.jsonl"),
    prompt_template="Solve: {question}",
    answer_column="answer",
    answer_extractor="gsm8k",
)
MBPP = DatasetSpec(
    name=str(DATA / "mbpp_sample.jsonl"),
    prompt_template="{text}\nYour code should pass these tests:\n{test_list}",
)


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(embedded_tokenizer_dir())


def published_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_gsm8k_rows_get_a_chat_prompt_from_the_template_and_the_number_after_the_hashes():
    rows = load_rows(GSM8K)
    published = published_rows(DATA / "gsm8k_sample.jsonl")
    assert [row["answer"] for row in rows] == ["72", "10", "5", "42", "624"]
    assert [row["question"] for row in rows] == [row["question"] for row in published]  # the source stays
    assert rows[0]["prompt"] == [{"role": "user", "content": "Solve: " + published[0]["question"]}]


def test_gsm8k_answers_drop_thousands_separators_as_gsm8ks_own_grader_does():
    # openai/grade-school-math's grader reads "#### (-?[0-9.,]+)" and drops the commas, gold and model alike.
    assert gsm8k_answer("She pays 1,000 + 234 = <<1000+234=1234>>1,234\n#### 1,234") == "1234"
    assert gsm8k_answer("#### -3") == "-3" and gsm8k_answer("#### 0.5") == "0.5"
    assert gsm8k_answer("The answer is 7") is None
    reward = build_reward_function(
        RewardSpec(name="exact_match", role="correctness", params={"extract": "regex", "regex": "#### (.+)"})
    )
    gold = gsm8k_answer("1,000 + 234\n#### 1,234")
    assert reward(["p"] * 3, ["so\n#### 1,234", "so\n#### 1234", "so\n#### 234"], answer=[gold] * 3) == [1.0, 1.0, 0.0]


def test_text_prompt_format_and_a_plain_answer_column():
    spec = GSM8K.model_copy(update={"prompt_format": "text", "answer_extractor": None})
    row = load_rows(spec, limit=1)[0]
    assert row["prompt"].startswith("Solve: Natalia") and row["answer"].endswith("#### 72")


def test_the_training_dataset_holds_the_same_rows_as_load_rows():
    for spec in (GSM8K, MBPP, DatasetSpec(name=str(DATA / "gsm8k_sample.jsonl"), prompt_column="question")):
        assert list(load_training_dataset(spec)) == load_rows(spec)


def test_mbpp_rows_feed_the_unit_tests_reward_their_assert_list():
    rows = load_rows(MBPP)
    published = published_rows(DATA / "mbpp_sample.jsonl")
    assert [row["test_list"] for row in rows] == [row["test_list"] for row in published]
    first = rows[0]["prompt"][0]["content"]
    assert first.startswith(published[0]["text"]) and first.endswith("\n".join(published[0]["test_list"]))
    reward = build_reward_function(
        RewardSpec(name="unit_tests", role="correctness", params={"tests_column": "test_list"})
    )
    solutions = [f"```python\n{row['code']}\n```" for row in rows]
    columns = {"test_list": [row["test_list"] for row in rows]}
    assert reward([row["prompt"] for row in rows], solutions, **columns) == [1.0] * len(rows)
    wrong = ["def remove_Occ(s,ch):\n    return s", "def sort_matrix(M):\n    return M"]
    assert reward([rows[0]["prompt"], rows[1]["prompt"]], wrong, test_list=columns["test_list"][:2]) == [0.0, 0.0]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"prompt_template": "Solve: {}"}, "must name columns"),
        ({"prompt_template": "Solve: {row.question}"}, "must name columns"),
        ({"prompt_template": "no fields"}, "must name columns"),
        ({"prompt_template": "Solve: {question}", "prompt_column": "question"}, "not both"),
        ({"answer_extractor": "gsm8k"}, "needs answer_column"),
        ({"answer_extractor": "boxed", "answer_column": "answer"}, "answer_extractor"),
    ],
)
def test_malformed_specs_are_refused(fields, message):
    with pytest.raises(ValidationError, match=message):
        DatasetSpec(name="rows.jsonl", **fields)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"prompt_template": "Solve: {problem}"}, r"Row 0 .* lacks column\(s\) \['problem'\]"),
        ({"prompt_column": "problem"}, "lacks the prompt column 'problem'"),
        ({"prompt_column": "question", "answer_column": "solution"}, "lacks the answer column 'solution'"),
        ({"prompt_column": "question", "answer_column": "question", "answer_extractor": "gsm8k"}, "no gsm8k answer"),
        ({"prompt_column": "question", "config": "main"}, "local file and has no config 'main'"),
    ],
)
def test_rows_that_do_not_fit_the_spec_say_what_to_send(fields, message):
    spec = DatasetSpec(name=str(DATA / "gsm8k_sample.jsonl"), **fields)
    with pytest.raises(SkillError, match=message):
        load_rows(spec)
    with pytest.raises(SkillError, match=message):
        load_training_dataset(spec)


def test_prompt_tokens_are_counted_as_trl_tokenizes_them(tokenizer):
    prompts = [row["prompt"] for row in load_rows(GSM8K)] + ["What is 2 + 2?"]
    counts = prompt_token_counts(tokenizer, prompts)
    # transformers 5: apply_chat_template(tokenize=True) is a BatchEncoding; its len is its number of keys.
    assert len(tokenizer.apply_chat_template(prompts[0], tokenize=True)) == 2
    rendered = [tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True) for p in prompts[:-1]]
    expected = [len(tokenizer(text, add_special_tokens=False)["input_ids"]) for text in rendered]
    assert counts[:-1] == expected and min(expected) > 50
    assert counts[-1] == len(tokenizer("What is 2 + 2?")["input_ids"])
    with pytest.raises(SkillError, match="neither text nor"):
        prompt_token_counts(tokenizer, [{"role": "user"}])


def test_prompts_over_the_budget_are_dropped_from_the_training_dataset(tokenizer):
    dataset = load_training_dataset(GSM8K)
    counts = prompt_token_counts(tokenizer, dataset["prompt"])
    budget = sorted(counts)[2]
    kept = within_prompt_budget(dataset, tokenizer, budget)
    assert kept["answer"] == [row["answer"] for row, n in zip(dataset, counts, strict=True) if n <= budget]
    assert len(kept) == 3


def emit(dataset: DatasetSpec, model: str = EMBEDDED_MODEL_ID, **hardware):
    return emit_grpo_config(
        RecipeRequest(
            model=ModelSpec(name=model, parameters_billions=0.135),
            hardware=HardwareSpec(**(hardware or {"gpu_model": "H100"})),
            method="full",
            rewards=[RewardSpec(name="exact_match", role="correctness")],
            dataset=dataset,
        )
    )


def reason_for(recipe, field: str) -> str:
    return next(reason.reason for reason in recipe.reasons if reason.field == field)


def test_emit_sizes_the_prompt_budget_and_vllm_context_from_measured_prompts(tokenizer):
    longest = max(prompt_token_counts(tokenizer, [row["prompt"] for row in load_rows(GSM8K)]))
    recipe = emit(GSM8K)
    budget = math.ceil(longest / BUDGET_STEP) * BUDGET_STEP
    assert recipe.dataset.max_prompt_tokens == budget
    assert recipe.trl["vllm_max_model_length"] == budget + recipe.trl["max_completion_length"]
    reason = reason_for(recipe, "dataset.max_prompt_tokens")
    assert "measured on 5 prompts" in reason and f"max {longest}" in reason and "longer" not in reason
    assert memory_request(recipe).prompt_length == budget  # the memory estimate follows the measured budget


def test_a_stated_budget_is_kept_and_longer_prompts_are_announced(tokenizer):
    longer = sum(n > 64 for n in prompt_token_counts(tokenizer, [row["prompt"] for row in load_rows(GSM8K)]))
    recipe = emit(GSM8K.model_copy(update={"max_prompt_tokens": 64}), accelerator="cpu")
    assert recipe.dataset.max_prompt_tokens == 64 and longer > 0
    reason = reason_for(recipe, "dataset.max_prompt_tokens")
    assert "kept the stated 64" in reason and f"{longer} of 5 sampled prompts are longer" in reason


def test_an_outlier_prompt_sizes_the_budget_from_the_p99(tmp_path, tokenizer):
    rows = [{"prompt": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(299)]
    rows.insert(7, {"prompt": "Add these numbers. " + " + ".join(map(str, range(300))), "answer": "44850"})
    path = tmp_path / "outlier.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    counts = prompt_token_counts(tokenizer, [row["prompt"] for row in rows[:SAMPLE_ROWS]])
    recipe = emit(DatasetSpec(name=str(path)), accelerator="cpu")
    assert recipe.dataset.max_prompt_tokens == math.ceil(percentile(counts, 0.99) / BUDGET_STEP) * BUDGET_STEP
    reason = reason_for(recipe, "dataset.max_prompt_tokens")
    assert f"measured on {SAMPLE_ROWS} prompts" in reason and "1 of 256 sampled prompts are longer" in reason


def offline(monkeypatch, cache) -> None:
    """What HF_HUB_OFFLINE=1 and HF_HUB_CACHE / HF_DATASETS_CACHE set when the libraries import (they read the
    environment once): the settings a user's shell gives, put into this process."""
    import datasets
    from huggingface_hub import constants

    for module in (datasets.config, constants):
        monkeypatch.setattr(module, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache / "hub"))
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(cache / "datasets"))


def test_data_or_tokenizer_that_cannot_be_had_keeps_the_default_and_says_why(tmp_path, monkeypatch):
    offline(monkeypatch, tmp_path)  # and nothing in the caches
    hub = emit(DatasetSpec(name="openai/gsm8k", config="main", prompt_column="question"))
    assert hub.dataset.max_prompt_tokens == 512 and hub.trl["vllm_max_model_length"] == 512 + 256
    reason = reason_for(hub, "dataset.max_prompt_tokens")
    assert "not measured (HF_HUB_OFFLINE is set and dataset 'openai/gsm8k' is not in the Hub cache" in reason
    assert "kept the default 512" in reason
    model = emit(GSM8K, model="no-such-org/no-such-model-7b")
    assert "HF_HUB_OFFLINE is set and model 'no-such-org/no-such-model-7b' is not in the Hub cache" in reason_for(
        model, "dataset.max_prompt_tokens"
    )


def cache_gsm8k_sample(tmp_path: Path) -> Path:
    """datasets keeps a downloaded hub dataset as Arrow under ``<cache>/<namespace>___<name>/<config>/<version>/
    <hash>/``; datasets' own json builder writes the sample there (under the hub name). Returns the cache."""
    from datasets.data_files import DataFilesDict
    from datasets.packaged_modules.json.json import Json

    files = DataFilesDict.from_patterns({"train": [str(DATA / "gsm8k_sample.jsonl")]})
    builder = Json(
        cache_dir=str(tmp_path / "build"), dataset_name="gsm8k", config_name="main", hash="0a1b2c3d", data_files=files
    )
    builder.download_and_prepare()
    built = next(path for path in (tmp_path / "build" / "gsm8k").glob("*/*/0a1b2c3d") if path.is_dir())
    hub_layout = tmp_path / "cache" / "datasets" / "openai___gsm8k" / "main" / "0.0.0"
    hub_layout.mkdir(parents=True)
    built.rename(hub_layout / "0a1b2c3d")
    return tmp_path / "cache"


def test_a_hub_dataset_in_the_local_cache_is_read_without_the_network(tmp_path, monkeypatch):
    """With HF_HUB_OFFLINE set as a user sets it, the loader and emit read the cached dataset: datasets' own
    offline path, no switch of ours."""
    cache_gsm8k_sample(tmp_path)
    offline(monkeypatch, tmp_path / "cache")
    spec = GSM8K.model_copy(update={"name": "openai/gsm8k", "config": "main"})
    assert [row["answer"] for row in load_rows(spec)] == ["72", "10", "5", "42", "624"]
    assert "measured on 5 prompts" in reason_for(emit(spec), "dataset.max_prompt_tokens")
    with pytest.raises(SkillError) as refused:
        load_rows(spec.model_copy(update={"config": "socratic"}))
    assert "'openai/gsm8k'" in str(refused.value), str(refused.value)


def test_an_unreachable_hub_fails_fast_and_a_cached_dataset_still_loads(tmp_path, monkeypatch):
    """No network and HF_HUB_OFFLINE unset (a laptop on a plane): one connection attempt decides, the cache answers
    at once, and a dataset it lacks is one message, not tens of seconds of retries."""
    import datasets
    from huggingface_hub import constants

    cache = cache_gsm8k_sample(tmp_path)
    for module in (datasets.config, constants):
        monkeypatch.setattr(module, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")  # the discard port: nothing listens
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache / "hub"))
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(cache / "datasets"))
    spec = GSM8K.model_copy(update={"name": "openai/gsm8k", "config": "main"})
    started = time.perf_counter()
    assert [row["answer"] for row in load_rows(spec)] == ["72", "10", "5", "42", "624"]
    with pytest.raises(SkillError, match=r"Cannot reach the Hugging Face Hub \(http://127.0.0.1:9\) to fetch dataset"):
        load_rows(DatasetSpec(name="acme/not-cached"))
    assert time.perf_counter() - started < 15  # huggingface_hub's own retries took 24 s for the second alone
    assert (constants.HF_HUB_OFFLINE, datasets.config.HF_HUB_OFFLINE) == (False, False)  # the switch is undone
