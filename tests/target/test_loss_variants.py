"""Every loss variant trains through the runner on its recipe's generation path: colocated vLLM on CPU.

A full fine-tune on one GPU generates with colocated vLLM, so each loss variant (luspo, vespo, sapo, cispo, bnpo)
is emitted for that path and run by run_grpo for 2 steps, with the CPU weight sync (skill.runs.vllm_cpu). Each
run's trainer really used the variant's loss (read back from the arguments it saved) and logged the metric that
loss computes (recipe_matrix.LOSS_METRICS). vespo is the one TRL refuses at build with vLLM's default
sequence-level correction; its recipe carries the token-level mode that lets it start.
"""

from __future__ import annotations

import math

import pytest
from cpu_vllm import addition_file, pass_inspection, vllm_recipe
from recipe_matrix import LOSS_METRICS

from skill.runs.held_out import training_rows
from skill.runs.jobs import RunRequest, run_grpo, run_logs, run_status
from skill.runs.store import read_jsonl, run_dir

STEPS = 2


@pytest.mark.slow
@pytest.mark.host_memory(5)
@pytest.mark.parametrize("variant", sorted(LOSS_METRICS))
def test_each_loss_variant_trains_two_steps_on_colocated_vllm(variant, vllm_model_dir, tmp_path):
    import torch

    pass_inspection()
    recipe = vllm_recipe(vllm_model_dir, addition_file(tmp_path), STEPS, variant=variant, lean=True)
    assert recipe.trl["loss_type"] == variant and recipe.trl["use_vllm"] is True
    run_id = f"loss-{variant}"
    run_grpo(RunRequest(recipe=recipe, run_id=run_id))
    status = run_status(run_id, wait_seconds=600)
    assert status.state == "succeeded", "\n".join(run_logs(run_id, 2000).lines[-60:])  # a str prints whole

    directory = run_dir(run_id)
    rows = training_rows(read_jsonl(directory / "metrics.jsonl"))
    assert [row["step"] for row in rows] == list(range(1, STEPS + 1))
    assert all(math.isfinite(row["loss"]) for row in rows), rows[-1]
    metric = LOSS_METRICS[variant]
    if metric is None:  # SAPO's soft gate logs no clip metric of its own
        assert not any(key.startswith(("clip_ratio", "cispo", "vespo")) for key in rows[-1]), rows[-1]
    else:
        assert all(math.isfinite(row[metric]) for row in rows), rows[-1]
    args = torch.load(directory / "final" / "training_args.bin", weights_only=False)
    assert (args.loss_type, args.use_vllm, args.vllm_mode) == (variant, True, "colocate")
