"""Memory measurement: the saved-tensor ledger on a toy graph, and one real GRPO step per configuration."""

from __future__ import annotations

import pytest

from skill.data import addition_rows
from skill.memory.measurement import MeasuredStep, measure_grpo_step

BASE = {
    "use_cpu": True,
    "bf16": False,
    "per_device_train_batch_size": 8,
    "gradient_accumulation_steps": 1,
    "num_generations": 8,
    "max_completion_length": 8,
    "beta": 0.0,
    "activation_checkpointing": False,
    "report_to": "none",
    "logging_steps": 1,
    "learning_rate": 1e-5,
}
# One training step each, about a second apiece on the tiny model.
CASES = {
    "plain": {},
    "checkpointed": {"activation_checkpointing": True},
    "reference": {"beta": 0.04},
    "lora": {"beta": 0.04},
    "longer": {"max_completion_length": 32, "gradient_accumulation_steps": 2},
}


def test_saved_ledger_excludes_weights_dedupes_storages_and_releases_after_backward():
    import torch

    from skill.memory.instruments import SavedLedger

    linear = torch.nn.Linear(4, 4, bias=False)
    ledger = SavedLedger({p.untyped_storage().data_ptr() for p in linear.parameters()})
    x = torch.randn(8, 4, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(ledger.pack, lambda held: held.tensor):
        h = linear(x)  # saves x and the weight (a parameter, not counted)
        loss = (h.sin() * h.cos()).sum()  # sin and cos both save h (one storage); mul saves their outputs
    assert ledger.live["model"] == ledger.peak["model"] == 4 * x.numel() * 4
    loss.backward()
    assert ledger.live["model"] == 0 and not ledger.refs


@pytest.fixture(scope="module")
def measured(tiny_model_dir, tmp_path_factory):
    """Measure each case once, on first use, and share the result across tests."""
    cache: dict[str, MeasuredStep] = {}

    def get(case: str) -> MeasuredStep:
        if case not in cache:
            from datasets import Dataset
            from peft import LoraConfig
            from rewards_for_tests import just_a_number, says_the_answer

            peft = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
            cache[case] = measure_grpo_step(
                tiny_model_dir,
                {**BASE, **CASES[case]},
                [just_a_number, says_the_answer],
                Dataset.from_list(addition_rows(32)),
                tmp_path_factory.mktemp(case),
                peft_config=peft if case == "lora" else None,
            )
        return cache[case]

    return get


@pytest.mark.slow
def test_full_finetune_weights_gradients_and_adamw_state(measured, tiny_model_dir):
    from safetensors.torch import load_file

    saved = load_file(tiny_model_dir / "model.safetensors")  # the tied LM head is stored once
    step = measured("plain")
    assert step.parameter_bytes == sum(t.numel() * 4 for t in saved.values())
    assert step.trainable_parameter_bytes == step.gradient_bytes == step.parameter_bytes
    # AdamW keeps exp_avg and exp_avg_sq per parameter, plus one scalar step tensor each.
    extra = step.optimizer_state_bytes - 2 * step.trainable_parameter_bytes
    assert 0 < extra <= 8 * len(saved)
    assert step.reference_parameter_bytes == 0
    assert step.vocab_size == 49152 and step.micro_batches == 1 and step.micro_batch_sequences == 8
    assert step.tokens_per_micro_batch == step.micro_batch_sequences * step.sequence_length


@pytest.mark.slow
def test_beta_builds_a_reference_model_the_size_of_the_policy(measured):
    step = measured("reference")
    assert step.reference_parameter_bytes == step.parameter_bytes
    # The KL term only adds a few per-token tensors to what the loss forward saves.
    assert step.saved_activation_bytes - measured("plain").saved_activation_bytes < 4096


@pytest.mark.slow
def test_checkpointing_keeps_far_fewer_activations_at_the_same_shapes(measured):
    plain, checkpointed = measured("plain"), measured("checkpointed")
    assert checkpointed.tokens_per_micro_batch == plain.tokens_per_micro_batch
    assert checkpointed.saved_activation_bytes * 4 < plain.saved_activation_bytes
    # At least one hidden state per layer boundary stays: 2 layers x tokens x hidden 32 x fp32.
    assert checkpointed.saved_activation_bytes >= 2 * checkpointed.tokens_per_micro_batch * 32 * 4
    assert checkpointed.gradient_bytes == plain.gradient_bytes


@pytest.mark.slow
def test_lora_trains_only_the_adapters_and_needs_no_reference_copy(measured):
    step = measured("lora")
    assert step.gradient_bytes == step.trainable_parameter_bytes
    assert step.gradient_bytes < 0.01 * step.parameter_bytes
    assert 2 * step.trainable_parameter_bytes < step.optimizer_state_bytes < 2.1 * step.trainable_parameter_bytes
    assert step.reference_parameter_bytes == 0
    assert any("adapters disabled" in note for note in step.notes)
    # Frozen projections need no saved inputs for weight gradients.
    assert step.saved_activation_bytes < measured("plain").saved_activation_bytes


@pytest.mark.slow
def test_logprob_peak_is_measured_and_grows_with_tokens(measured):
    plain, longer = measured("plain"), measured("longer")
    assert longer.micro_batches == 2 and longer.tokens_per_micro_batch > plain.tokens_per_micro_batch
    assert 0 < plain.logprob_peak_bytes < longer.logprob_peak_bytes
    assert plain.logprob_forward_peak_bytes < longer.logprob_forward_peak_bytes
    # The forward allocates at least its projection tile: (scored tokens) x (32768-wide vocab chunk) x fp32.
    scored = plain.micro_batch_sequences * (plain.sequence_length - 1)
    assert plain.logprob_forward_peak_bytes >= scored * 32768 * 4
    # It saves the hidden states it projects, apart from the model's own saved activations.
    assert plain.logprob_saved_bytes >= scored * 32 * 4
