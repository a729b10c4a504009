"""Fraction of weights that a few optimizer steps at the seed's learning rate (5e-7) actually change:
fp32 master weights under bf16 autocast (what a full fine-tune recipe emits) vs pure bf16 weights (what it
emitted before: ``model_init_kwargs.dtype="bfloat16"`` with ``bf16=True``).

Both train through the real transformers ``Trainer`` (GRPOTrainer's base: the same accelerate autocast, the
recipe's ``adamw_torch``, constant learning rate, gradient clipping at 1.0, no weight decay) on CPU, on the
same seeded next-token batches. A weight counts as moved when its value after training differs from its
value before. The share is reported over the decoder layers (every weight there gets a gradient) and over
all parameters (embedding rows of tokens absent from the batches get none, so they stay put in any dtype).

Run: python bench/weights_moved.py [--model DIR] [--steps N]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path


def _batches(vocab: int, rows: int, length: int, seed: int) -> list[dict]:
    import torch

    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (rows, length), generator=generator)
    return [{"input_ids": row, "attention_mask": torch.ones_like(row), "labels": row.clone()} for row in ids]


def train_and_compare(model_dir: str, dtype: str, steps: int, learning_rate: float, batch: int, length: int) -> dict:
    """Load in ``dtype``, train ``steps`` optimizer steps under bf16 autocast, and count the weights that moved."""
    import torch
    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=getattr(torch, dtype))
    before = {name: parameter.detach().clone() for name, parameter in model.named_parameters()}
    with tempfile.TemporaryDirectory() as output:
        args = TrainingArguments(
            output_dir=output,
            use_cpu=True,
            bf16=True,
            learning_rate=learning_rate,
            lr_scheduler_type="constant",
            optim="adamw_torch",
            weight_decay=0.0,
            max_grad_norm=1.0,
            per_device_train_batch_size=batch,
            max_steps=steps,
            report_to="none",
            save_strategy="no",
            logging_strategy="no",
            disable_tqdm=True,
            seed=0,
        )
        dataset = _batches(model.config.vocab_size, batch * steps, length, seed=0)
        Trainer(model=model, args=args, train_dataset=dataset).train()
    moved = total = layer_moved = layer_total = 0
    for name, parameter in model.named_parameters():
        changed = int((parameter.detach() != before[name]).sum())
        moved, total = moved + changed, total + parameter.numel()
        if ".layers." in name:
            layer_moved, layer_total = layer_moved + changed, layer_total + parameter.numel()
    return {
        "dtype": dtype,
        "moved_fraction": moved / total,
        "layer_moved_fraction": layer_moved / layer_total,
        "parameters": total,
        "layer_parameters": layer_total,
    }


def measure(
    model_dir: str | None = None, steps: int = 10, learning_rate: float = 5e-7, batch: int = 4, length: int = 64
):
    """Both precisions on the same model and batches: {"fp32_master": ..., "pure_bf16": ..., settings}."""
    if model_dir is None:
        from skill.models.sources import embedded_model_dir

        model_dir = str(embedded_model_dir())
    started = time.perf_counter()
    result = {
        "model": Path(model_dir).name,
        "steps": steps,
        "learning_rate": learning_rate,
        "fp32_master": train_and_compare(model_dir, "float32", steps, learning_rate, batch, length),
        "pure_bf16": train_and_compare(model_dir, "bfloat16", steps, learning_rate, batch, length),
    }
    result["seconds"] = time.perf_counter() - started
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="a local model directory (default: the embedded SmolLM2-135M-Instruct)")
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    print(json.dumps(measure(args.model, steps=args.steps), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
