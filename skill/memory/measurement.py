"""Measure the memory of each part of the GRPO stack from one real ``trl.GRPOTrainer`` step on CPU.

A shape-only estimator predicts weights, gradients, optimizer state, the reference model, saved
activations and the log-prob head's workspace from the model config and the batch shapes. This
module produces the ground truth it is validated against: one real optimizer step, with every
quantity read from live tensors or from the allocator, never computed from shapes.

How each quantity is read (all in bytes; tensors are deduplicated by storage, so a tied
embedding/LM head counts once and a view counts the whole storage it keeps alive):

* weights, gradients, optimizer state: the storages of ``model.parameters()``, of their ``.grad``
  just before ``optimizer.step()`` (``on_pre_optimizer_step``) and of every tensor in
  ``optimizer.state`` just after it (``on_optimizer_step``).
* saved activations: ``torch.autograd.graph.saved_tensors_hooks`` around the policy's loss forward
  (``compute_loss``: the model forward and the loss math after it). Each packed tensor is wrapped
  in a holder whose finaliser runs when autograd drops it, so the ledger tracks what is *live*, and
  the peak is its maximum. Parameters are left out (a saved weight is not an activation); what
  TRL's chunked log-prob function saves is kept apart (``logprob_saved_bytes``). Non-reentrant
  checkpointing saves each layer's inputs through the same hooks and keeps the layer's internals
  under its own inner hooks, so with checkpointing the figure is the layer-boundary tensors,
  exactly what stays alive.
* log-prob head: ``torch.profiler`` with ``profile_memory=True`` runs only inside the forward and
  the backward of ``ChunkedLogProbFunction`` for the policy's training pass; the raw ``[memory]``
  allocator records (signed ``nbytes``, frees negative) are summed in time order and the maximum
  of that running sum, relative to the call's start, is the peak. The backward's peak includes the
  fp32 LM-head weight gradient it returns. Raw records are read because the parsed ``[memory]``
  events only keep allocations no op claimed. Not seen: scratch that BLAS/oneDNN allocate outside
  PyTorch's allocator.

Caveats: on CPU, TRL's head scores every position with torch tile ops; with Triton (CUDA/XPU) it
scores only completion tokens and folds tiles in-kernel, so the CPU log-prob peak overstates a
GPU's at the same shapes. The function swap is process-global while a step runs, and a profiler
already running in the process would clash with the one started here.

The instruments live in ``memory.instruments``. May import: ``memory`` (the estimate to compare with),
``hardware.specs``, ``models.shapes``, ``models.size``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from skill.grpo_fields import GRPOFields
from skill.hardware.specs import HardwareSpec
from skill.memory.components import (
    attention_mask_bytes,
    estimate_components,
    logprob_peak_bytes,
    saved_activation_bytes_per_token,
)
from skill.memory.instruments import SavedLedger, StepRecorder, measured_logprob_function, storage_bytes
from skill.memory.schema import GIB, MemoryRequest
from skill.models.size import resolve_shape


class MeasuredStep(BaseModel):
    """Memory of each component of one GRPO optimizer step, as measured (bytes unless stated)."""

    parameter_bytes: int = Field(description="Policy parameters, all of them, unique storages.")
    trainable_parameter_bytes: int = Field(description="Policy parameters with requires_grad.")
    gradient_bytes: int = Field(description=".grad storages just before the optimizer step.")
    optimizer_state_bytes: int = Field(description="Every tensor in optimizer.state after the step.")
    reference_parameter_bytes: int = Field(description="Separate reference model weights; 0 when there is none.")
    saved_activation_bytes: int = Field(
        description="Peak live storage saved for backward in the policy's loss forward, parameters and the "
        "log-prob function's own saves excluded; max over micro-batches."
    )
    logprob_saved_bytes: int = Field(description="What the chunked log-prob function saves for backward (no weights).")
    logprob_peak_bytes: int = Field(description="Max of the log-prob function's forward and backward allocator peaks.")
    logprob_forward_peak_bytes: int = Field(description="Allocator peak during its forward, relative to its start.")
    logprob_backward_peak_bytes: int = Field(description="Allocator peak during its backward, relative to its start.")
    tokens_per_micro_batch: int = Field(description="Sequences x padded prompt+completion tokens, as run.")
    micro_batch_sequences: int
    micro_batches: int = Field(description="Training forwards in the step (gradient accumulation).")
    sequence_length: int = Field(description="Padded prompt+completion length of the training forward.")
    vocab_size: int
    notes: list[str] = Field(default_factory=list)


def _measuring_trainer(recorder: StepRecorder) -> Any:
    """A GRPOTrainer subclass whose policy loss forward runs under the recorder's saved-tensor ledger."""
    import torch
    from trl import GRPOTrainer

    ledger = recorder.ledger

    class MeasuringTrainer(GRPOTrainer):
        """GRPOTrainer whose policy loss forward runs under the saved-tensor ledger."""

        def compute_loss(
            self, model: Any, inputs: dict[str, Any], return_outputs: bool = False, num_items_in_batch: Any = None
        ) -> Any:
            sequences = inputs["prompt_ids"].shape[0]
            length = inputs["prompt_ids"].shape[1] + inputs["completion_ids"].shape[1]
            recorder.shapes.append((sequences, length))
            ledger.reset_peaks()
            recorder.in_training_forward = True
            try:
                with torch.autograd.graph.saved_tensors_hooks(ledger.pack, lambda held: held.tensor):
                    loss = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            finally:
                recorder.in_training_forward = False
            recorder.saved_peaks.append((ledger.peak["model"], ledger.peak["logprob"]))
            return loss

    return MeasuringTrainer


def _memory_callback(recorder: StepRecorder) -> Any:
    """A TrainerCallback that reads gradients before the optimizer step and optimizer state after it."""
    import torch
    from transformers import TrainerCallback

    class MemoryCallback(TrainerCallback):
        """Reads gradients before the optimizer step and optimizer state after it."""

        def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
            recorder.gradient_bytes = storage_bytes(p.grad for p in model.parameters() if p.grad is not None)

        def on_optimizer_step(self, args: Any, state: Any, control: Any, optimizer: Any = None, **kwargs: Any) -> None:
            inner = getattr(optimizer, "optimizer", optimizer)
            recorder.optimizer_name = type(inner).__name__
            recorder.optimizer_state_bytes = storage_bytes(
                value for slot in inner.state.values() for value in slot.values() if isinstance(value, torch.Tensor)
            )

    return MemoryCallback()


def measure_grpo_step(
    model_dir: str | Path,
    trl_kwargs: dict[str, Any],
    reward_funcs: list[Any],
    train_dataset: Any,
    output_dir: str | Path,
    peft_config: Any = None,
) -> MeasuredStep:
    """Run exactly one real GRPOTrainer optimizer step on CPU (max_steps=1, use_cpu=True forced) and measure.

    ``model_dir`` must be a directory on disk: with ``beta > 0`` and no PEFT, TRL rebuilds the
    reference model from the policy's ``name_or_path``. ``trl_kwargs`` are GRPOConfig keyword
    arguments; ``max_steps``, ``save_strategy``, ``use_cpu`` and ``output_dir`` are overridden.
    """
    from trl import GRPOConfig

    kwargs = {**trl_kwargs, "max_steps": 1, "save_strategy": "no", "use_cpu": True, "output_dir": str(output_dir)}
    recorder = StepRecorder(SavedLedger(parameter_keys=set()))
    trainer = _measuring_trainer(recorder)(
        model=str(model_dir),
        reward_funcs=reward_funcs,
        args=GRPOConfig(**kwargs),
        train_dataset=train_dataset,
        peft_config=peft_config,
        callbacks=[_memory_callback(recorder)],
    )
    recorder.ledger.parameter_keys = {p.untyped_storage().data_ptr() for p in trainer.model.parameters()}
    with measured_logprob_function(recorder):
        trainer.train()

    if trainer.state.global_step != 1 or recorder.gradient_bytes is None or recorder.optimizer_state_bytes is None:
        raise RuntimeError(f"Expected one optimizer step, got global_step={trainer.state.global_step}.")
    if not recorder.shapes or not recorder.forward_peaks or not recorder.backward_peaks:
        raise RuntimeError("The policy's training forward or the chunked log-prob function was never seen.")
    return _measured_step(trainer, recorder)


def _step_notes(trainer: Any, recorder: StepRecorder, sequences: int, length: int) -> list[str]:
    """How the step ran and how each figure was read, for a reader of the result."""
    model, args = trainer.model, trainer.args
    notes = [
        f"activation_checkpointing={args.activation_checkpointing}, bf16={args.bf16}, "
        f"dtype={next(model.parameters()).dtype}, optimizer={recorder.optimizer_name}, "
        f"micro-batches={len(recorder.shapes)}.",
        f"Training forward shapes (sequences, length): {recorder.shapes}; saved-for-backward peaks (model, log-prob) "
        f"per micro-batch: {recorder.saved_peaks}; the largest of each is reported.",
        f"Log-prob function allocator peaks per micro-batch: forward {recorder.forward_peaks}, "
        f"backward {recorder.backward_peaks} (the backward holds the fp32 LM-head weight gradient it returns).",
        "Saved activations: storages held for backward by the whole loss forward (model and loss math; views count "
        "their whole storage); parameters are excluded, autocast weight copies would be included.",
        f"On CPU TRL's log-prob head scores every position ({sequences} x {length - 1} tokens, prompt included) with "
        "torch tile ops; with Triton (CUDA/XPU) it scores only completion tokens and folds tiles in-kernel, so this "
        "peak overstates the GPU workspace at the same shapes.",
    ]
    if args.beta > 0 and trainer.ref_model is None:
        notes.append("beta > 0 with PEFT: the reference is the policy with adapters disabled, no extra weights.")
    return notes


def _measured_step(trainer: Any, recorder: StepRecorder) -> MeasuredStep:
    """The step's figures, read from the trained model and what the recorder collected."""
    model, reference = trainer.model, trainer.ref_model
    sequences, length = max(recorder.shapes, key=lambda shape: shape[0] * shape[1])
    forward_peak, backward_peak = max(recorder.forward_peaks), max(recorder.backward_peaks)
    assert recorder.gradient_bytes is not None and recorder.optimizer_state_bytes is not None  # checked by the caller
    return MeasuredStep(
        parameter_bytes=storage_bytes(model.parameters()),
        trainable_parameter_bytes=storage_bytes(p for p in model.parameters() if p.requires_grad),
        gradient_bytes=recorder.gradient_bytes,
        optimizer_state_bytes=recorder.optimizer_state_bytes,
        reference_parameter_bytes=0 if reference is None else storage_bytes(reference.parameters()),
        saved_activation_bytes=max(model_peak for model_peak, _ in recorder.saved_peaks),
        logprob_saved_bytes=max(logprob_peak for _, logprob_peak in recorder.saved_peaks),
        logprob_peak_bytes=max(forward_peak, backward_peak),
        logprob_forward_peak_bytes=forward_peak,
        logprob_backward_peak_bytes=backward_peak,
        tokens_per_micro_batch=sequences * length,
        micro_batch_sequences=sequences,
        micro_batches=len(recorder.shapes),
        sequence_length=length,
        vocab_size=model.config.get_text_config().vocab_size,
        notes=_step_notes(trainer, recorder, sequences, length),
    )


class ComponentComparison(BaseModel):
    """The estimator's figure next to the measured one, for one component."""

    component: str
    estimated_bytes: float
    measured_bytes: int
    tolerance: float

    @property
    def error(self) -> float | None:
        return None if self.measured_bytes == 0 else (self.estimated_bytes - self.measured_bytes) / self.measured_bytes


def compare_with_estimate(
    model_dir: str | Path, trl_kwargs: dict[str, Any], measured: MeasuredStep
) -> list[ComponentComparison]:
    """Estimate the measured step from the model's shape and the step's token counts alone, component by component.

    Tolerances: weights, gradients, optimizer and reference 5%; saved activations and the log-prob peak 30%.
    """
    shape = resolve_shape(str(model_dir))
    fields = GRPOFields(trl_kwargs)  # the measured step ran GRPOConfig's own default for every field left out
    checkpointing = bool(fields.activation_checkpointing)
    sequences, length = measured.micro_batch_sequences, measured.sequence_length
    completion = int(fields.max_completion_length)
    components = estimate_components(
        MemoryRequest(
            shape=shape,
            hardware=HardwareSpec(accelerator="cpu", memory_gib_per_gpu=24),
            method="full",
            dtype="float32",
            beta=float(fields.beta),
            per_device_train_batch_size=sequences,
            prompt_length=max(1, length - completion),
            completion_length=completion,
            activation_checkpointing=checkpointing,
            use_vllm=False,
        )
    )[0]
    saved = sequences * length * saved_activation_bytes_per_token(shape, 4, checkpointing)
    if not checkpointing:
        saved += attention_mask_bytes(shape, sequences, length, 4)
    scored_tokens = sequences * (length - 1)  # without Triton every position is scored
    rows = [
        ("weights", components.weights * GIB, measured.parameter_bytes, 0.05),
        ("gradients", components.gradients * GIB, measured.gradient_bytes, 0.05),
        ("optimizer", components.optimizer * GIB, measured.optimizer_state_bytes, 0.05),
        ("reference", components.reference * GIB, measured.reference_parameter_bytes, 0.05),
        ("saved activations", saved, measured.saved_activation_bytes, 0.30),
        ("log-prob peak", logprob_peak_bytes(shape, scored_tokens, 4, True, False), measured.logprob_peak_bytes, 0.30),
    ]
    return [ComponentComparison(component=c, estimated_bytes=e, measured_bytes=m, tolerance=t) for c, e, m, t in rows]
