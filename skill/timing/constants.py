"""The step-time estimate's constants, each with its source, fixed before any comparison with a published step time
(``published_step_times.json`` rows are never used to set one).

GPU peaks and bandwidths are the datasheets' (``skill.hardware.throughput``); what a run reaches of them is here.
"""

from __future__ import annotations

import math
from typing import Literal, NamedTuple

End = Literal["fast", "slow"]


class Span(NamedTuple):
    """A constant known to lie between two published figures: the fast end and the slow end of a step. The estimate
    is computed at both ends; its point is the range's geometric middle."""

    fast: float
    slow: float
    what: str  # how the range reads in the estimate's "largest uncertainty"

    def at(self, end: End) -> float:
        return self.fast if end == "fast" else self.slow

    @property
    def middle(self) -> float:
        return math.sqrt(self.fast * self.slow)


# --- Utilisation of the GPU ------------------------------------------------------------------------------------
# Model FLOPs utilisation of a training step (model FLOPs only; recomputation is counted as extra FLOPs below).
# Source: "The Llama 3 Herd of Models" (arXiv:2407.21783), Table 4: 38-43% BF16 MFU on H100 for well-tuned
# large-scale training; the two ends of that table are the two ends here.
TRAINING_MFU = Span(0.43, 0.38, "training MFU 38-43%")
# A mixture of experts trains far below a dense model's MFU (routing, all-to-all dispatch, small expert matmuls).
# Megatron MoE Model Zoo (github.com/yanring/Megatron-MoE-ModelZoo, best_practice/Qwen3/readme.md @c1ad0b5c),
# Qwen3-235B-A22B in BF16 on 256 H100s: 276 TFLOP/s a GPU with DeepEP and overlap, 200 with plain all-to-all,
# of the 989 dense BF16 peak. Expert-balanced pretraining: an RL step's routing is no better.
MOE_TRAINING_MFU = Span(0.28, 0.20, "MoE training MFU 20-28%")
# Prefill and the compute-bound part of decode: assumed equal to TRAINING_MFU (no separate source).
GENERATION_MFU = TRAINING_MFU
# Memory-bandwidth utilisation of a decode iteration (weights and KV cache read once per generated token).
# Slow end: NVIDIA's NeMo Framework inference table for Llama-2-7B on one H100 80GB, batch 1, 128 input and 20 output
# tokens: 153.8 ms, about 7.7 ms a token against 13.5 GB of bf16 weights / 3.35 TB/s = 4.0 ms: ~0.52
# (docs.nvidia.com/nemo-framework/user-guide/latest/performance/llama.html, "Llama-2 Results, Inference").
# Fast end: "Accelerating Generative AI with PyTorch II: GPT, Fast" (pytorch.org/blog/accelerating-generative-ai-2),
# Llama-2-7B with CUDA graphs on an A100-80GB, batch 1: "we get 72% MBU".
DECODE_BANDWIDTH_UTILISATION = Span(0.72, 0.52, "decode bandwidth 52-72%")
# A decode iteration of eager PyTorch (transformers' generate: no CUDA graphs) is bound by launching its kernels
# from the CPU, about the same time per layer whatever the model's width. Fast end: transformers' nightly benchmark,
# google/gemma-2b (18 layers) on an A10, batch 1, fp16, plain generate: "per_token.latency.mean": 0.0192 s
# (hf-internal-testing/benchmark_results, 2024-06-18 summary.json) = 1.07 ms a layer. Slow end: the same blog's
# eager starting point, Llama-2-7B (32 layers) on an A100, batch 1: 25.5 tokens/s, "heavily CPU overhead bound"
# = 1.23 ms a layer.
EAGER_DECODE_LAYER_S = Span(1.07e-3, 1.23e-3, "eager launches 1.07-1.23 ms a layer")
# What a vLLM decode iteration (CUDA graphs on, as TRL and Unsloth start it) costs beyond reading its weights:
# scheduling, sampling, detokenising. vLLM PR #20059 (2025-06-29): Qwen2.5-1.5B-Instruct, median TPOT at 1 QPS
# 5.09 ms (full CUDA graph) to 5.42 ms (piecewise), on the A100 40G the author's previous PR names; less its
# 3.09 GB of bf16 weights read at the two bandwidth ends above (1.555 TB/s: 2.8-3.8 ms) = 1.3-2.6 ms.
VLLM_DECODE_ITERATION_OVERHEAD_S = Span(1.3e-3, 2.6e-3, "vLLM scheduling 1.3-2.6 ms an iteration")
# Tensor parallel decode all-reduces twice a layer (after attention and after the MLP), a few KB each: latency, not
# bandwidth. Within a node, vLLM's and SGLang's custom all-reduce on H100 at TP 2-8 for 0.5-32 KB: 3.7-11.8 us
# (sgl-project/sglang PR #2904's tables), so 6-12 us at TP8. Across nodes (TP larger than a node's GPUs): NCCL
# all-reduce of 4 B-512 B over InfiniBand NDR between two 8-GPU Hopper nodes, 46.3-47.5 us (NVIDIA/nccl #1244).
TP_ALLREDUCE_IN_NODE_S = Span(6e-6, 12e-6, "TP all-reduce 6-12 us")
TP_ALLREDUCE_ACROSS_NODES_S = Span(46e-6, 48e-6, "TP all-reduce across nodes 46-48 us")

# --- How many sequences a vLLM engine decodes at once -------------------------------------------------------------
# `vllm serve`, which TRL 1.16's `trl vllm-serve` starts without --max-num-seqs, takes max_num_seqs by the GPU (vLLM
# 0.31, engine/arg_utils.py, get_batch_defaults): 1024 on a GPU of at least 160 GiB, or of at least 70 GiB other than
# an A100; 256 otherwise. TRL's colocated engine sets max_num_seqs to its own share of a generation
# (per_device_train_batch_size x TP x steps_per_generation: trl/trainer/grpo_trainer.py), so there only its KV cache
# can hold fewer.
VLLM_SERVE_MAX_NUM_SEQS = 256
VLLM_SERVE_MAX_NUM_SEQS_LARGE_GPU = 1024
VLLM_LARGE_GPU_GIB = 70
VLLM_VERY_LARGE_GPU_GIB = 160
# A running sequence holds KV blocks for its prompt and what it has generated so far (vLLM allocates blocks as a
# sequence grows), so over a decode the cache holds a sequence's prompt and on average half its completion (fast
# end), at worst all of it (slow end: vLLM then preempts a sequence and recomputes it later). vLLM's own iteration
# counter, with its KV cache cut to hold a third to a fifth of the sequences sent, lay inside the two ends
# (bench/vllm_decode_waves.py, 2026-12-06): a check of the waves more than of the span, since vLLM 0.31's CPU build
# allocates blocks of 128 tokens (a GPU's are 16), so there a sequence holds whole 128-token blocks.
KV_HELD_SHARE_OF_COMPLETION = Span(0.5, 1.0, "KV held per running sequence: prompt + 0.5-1 x its completion")

# --- Links that move weights -----------------------------------------------------------------------------------
# Within a node: the GPU table's link (skill.hardware.throughput, NVLink or PCIe by card). Between nodes: one
# 400 Gb/s InfiniBand NDR link per GPU (DGX H100 reference architecture) = 50 GB/s. A point-to-point transfer (the
# broadcast to a vLLM server on another node) has one such link; NCCL's all-gathers and reduce-scatters run one ring
# per link, so together they reach the node's links, up to the in-node link.
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
# What ZeRO-3 / FSDP all-gathers and reduce-scatters (large, bucketed) reach of their links: at most the datasheet
# bandwidth (fast end), at least the share per-tensor broadcasts reach (slow end).
SHARDED_COLLECTIVE_LINK_SHARE = Span(1.0, LINK_UTILISATION, "ZeRO-3/FSDP collectives at 50-100% of the link")

# --- Fixed costs of a run (stated estimates; amortised over the planned steps) ---------------------------------
PROCESS_START_S = 30.0  # Python, torch, transformers and TRL imported, data loaded, trainer built
WEIGHT_LOAD_BYTES_PER_S = 1.0e9  # safetensors from a local disk or the Hub cache
VLLM_START_S = 60.0  # vLLM engine init (profiling run, KV cache allocation, CUDA graph capture) on a GPU
CHECKPOINT_WRITE_BYTES_PER_S = 1.0e9  # weights + optimizer state to local disk
ADAM_STATE_BYTES_PER_PARAMETER = 8  # two float32 moments
# AdamW's step reads each trained float32 parameter, its gradient and its two moments and writes the parameter and
# the moments back: 7 passes of 4 bytes (torch.optim.AdamW's foreach / fused update is one memory-bound sweep), at
# the decode's share of HBM bandwidth.
OPTIMIZER_STEP_BYTES_PER_PARAMETER = 28

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
