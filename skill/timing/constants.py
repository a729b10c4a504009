"""The step-time estimate's constants, each with its source, fixed before any comparison with a published step time
(``published_step_times.json`` rows are never used to set one).

GPU peaks and bandwidths are the datasheets' (``skill.hardware.throughput``); what a run reaches of them is here.
"""

from __future__ import annotations

# --- Utilisation of the GPU ------------------------------------------------------------------------------------
# Model FLOPs utilisation of a training step (model FLOPs only; recomputation is counted as extra FLOPs below).
# Source: "The Llama 3 Herd of Models" (arXiv:2407.21783), Table 4: 38-43% BF16 MFU on H100 for well-tuned
# large-scale training. A padded HF/TRL step is not better tuned than that, so the upper end is not assumed.
TRAINING_MFU = 0.40
# Prefill and the compute-bound part of decode: assumed equal to TRAINING_MFU (no separate source).
GENERATION_MFU = TRAINING_MFU
# Memory-bandwidth utilisation of a decode iteration (weights and KV cache read once per generated token).
# Derived from NVIDIA's NeMo Framework inference table for Llama-2-7B on one H100 80GB, batch 1, 128 input and
# 20 output tokens: 153.8 ms, about 7.7 ms a token against 13.5 GB of bf16 weights / 3.35 TB/s = 4.0 ms: ~0.52
# (docs.nvidia.com/nemo-framework/user-guide/latest/performance/llama.html, "Llama-2 Results, Inference").
DECODE_BANDWIDTH_UTILISATION = 0.52

# --- Links that move weights -----------------------------------------------------------------------------------
# NVLink 4 (H100): 900 GB/s bidirectional per GPU, 450 GB/s each way (NVIDIA H100 datasheet). Used for every
# same-node transfer (NCCL broadcast to a server on the node, ZeRO-3 all-gathers).
NVLINK_BYTES_PER_S = 450e9
# Between nodes: one 400 Gb/s InfiniBand NDR link per GPU (DGX H100 reference architecture) = 50 GB/s.
INTER_NODE_BYTES_PER_S = 50e9
# vLLM sleep mode as TRL 1.16 drives it (trl/generation/vllm_generation.py): each step it wakes vLLM's weights before
# the weight sync it makes anyway and the KV cache before generating, then sleeps at level 2, which discards both.
# Memory is re-mapped; nothing comes back from the host. Per step, the line through vLLM's published level-1 wake
# times on an A100 (vLLM 0.11): Qwen3-0.6B, 1.2 GB of bf16 weights, 0.26 s; Phi-3-vision-128k, 4.2B, 8.4 GB, 0.82 s
# ("Zero-Reload Model Switching with vLLM Sleep Mode", blog.vllm.ai, 2025-10-26). A level-1 wake re-maps the same
# memory and also copies the weights back from the host, which level 2 skips, so this is an upper estimate; the
# sleep itself is not in it. CUDA only: not measured here.
SLEEP_WAKE_FIXED_S = 0.17
SLEEP_WAKE_S_PER_GB = 0.078
# Achieved share of a link's bandwidth by NCCL broadcasts of per-tensor weight updates (TRL sends one tensor at a
# time): stated estimate, not measured here.
LINK_UTILISATION = 0.5

# --- Fixed costs of a run (stated estimates; amortised over the planned steps) ---------------------------------
PROCESS_START_S = 30.0  # Python, torch, transformers and TRL imported, data loaded, trainer built
WEIGHT_LOAD_BYTES_PER_S = 1.0e9  # safetensors from a local disk or the Hub cache
VLLM_START_S = 60.0  # vLLM engine init (profiling run, KV cache allocation, CUDA graph capture) on a GPU
CHECKPOINT_WRITE_BYTES_PER_S = 1.0e9  # weights + optimizer state to local disk
ADAM_STATE_BYTES_PER_PARAMETER = 8  # two float32 moments

# --- This project's CPU measurements (bench/timing_cpu_calibration.py, 2 CPU threads, float32) -----------------
# Measured on the calibration model (random-init Llama, hidden 512, 4 and 8 layers), never on a validated run;
# the figures of one run on an idle machine (a busy one halves them), rounded.
CPU_MEASURED = "2026-12-05 on this project's 2-core development machine (Intel Xeon, AVX-512)"
CPU_MATMUL_FLOPS = 2.9e11  # float32 matmul, 2048x1024 @ 1024x1024, 2 threads
CPU_READ_BYTES_PER_S = 3.2e10  # a 256 MiB float32 sum
CPU_DECODE_LAYER_OVERHEAD_S = 1.7e-3  # per layer per decode iteration of model.generate, beyond its roofline
CPU_DECODE_ITERATION_OVERHEAD_S = 0.028  # per decode iteration (sampling, stopping checks, cache update)
CPU_TRAINING_FLOPS = 1.6e11  # model FLOPs of forward + log-probs + backward + AdamW, per second
# TRL's own work per CPU step besides the model (rewards, advantages, logging, data collation): the bare
# GRPOTrainer step of the test suite's tiny model (2 layers, hidden 32), whose model compute is negligible:
# 0.548 s (bench/RESULTS.md, "runner s/step ... bare GRPOTrainer 0.548 s").
CPU_TRL_STEP_OVERHEAD_S = 0.548
