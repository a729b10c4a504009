"""The estimator against one real GRPO step on CPU, component by component.

The estimate is computed from the model's shape and the batch's token counts alone; the
measurement reads live tensors and the allocator (skill/memory/measurement.py). Targets: weights,
gradients and optimizer states within 5%; saved activations and the log-prob peak within 30%.
"""

from __future__ import annotations

import pytest

from skill.data import addition_rows
from skill.memory.measurement import compare_with_estimate, measure_grpo_step

pytestmark = pytest.mark.slow

BASE = {
    "use_cpu": True,
    "bf16": False,
    "per_device_train_batch_size": 8,
    "gradient_accumulation_steps": 1,
    "num_generations": 8,
    "max_completion_length": 8,
    "report_to": "none",
    "logging_steps": 1,
    "learning_rate": 1e-5,
}
CASES = {
    "plain": {"beta": 0.0, "activation_checkpointing": False},
    "reference_and_checkpointing": {"beta": 0.04, "activation_checkpointing": True},
}


def measure(model_dir, changes, tmp_path):
    from datasets import Dataset
    from rewards_for_tests import just_a_number, says_the_answer

    return measure_grpo_step(
        model_dir,
        {**BASE, **changes},
        [just_a_number, says_the_answer],
        Dataset.from_list(addition_rows(32)),
        tmp_path,
    )


def compare(model_dir, changes, measured):
    """(component, estimated bytes, measured bytes, tolerance) for every validated component."""
    comparisons = compare_with_estimate(model_dir, {**BASE, **changes}, measured)
    return [(c.component, c.estimated_bytes, c.measured_bytes, c.tolerance) for c in comparisons]


def assert_within(rows):
    errors = []
    for name, estimated, measured, tolerance in rows:
        if measured == 0:
            assert estimated == 0, name
            continue
        error = (estimated - measured) / measured
        print(f"{name:18s} estimated {estimated:14.0f} measured {measured:14.0f} error {error:+.1%}")
        if abs(error) > tolerance:
            errors.append(f"{name}: {error:+.1%} (tolerance {tolerance:.0%})")
    assert not errors, errors


@pytest.mark.parametrize("case", CASES)
def test_tiny_model_components_match_a_real_step(case, tiny_model_dir, tmp_path):
    measured = measure(tiny_model_dir, CASES[case], tmp_path)
    assert_within(compare(tiny_model_dir, CASES[case], measured))


def test_smollm2_135m_components_match_a_real_step(tmp_path):
    from skill.models.sources import embedded_model_dir

    model_dir = embedded_model_dir()
    changes = CASES["plain"]
    measured = measure(model_dir, changes, tmp_path)
    assert_within(compare(model_dir, changes, measured))
