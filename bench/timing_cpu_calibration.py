"""Measures the CPU constants of skill/timing/constants.py on a calibration model that is none of the validated
ones: a random-init Llama shape (hidden 512, ffn 1536, 8 heads / 4 KV heads, SmolLM2's vocabulary size), at 4
and 8 layers, in float32 on this machine's CPU threads.

What it measures: matmul FLOP rate and memory read rate (micro-benchmarks); the decode iteration of
``model.generate`` at 4 and 8 layers (the per-layer slope and the intercept, less their roofline share, are the
per-layer and per-iteration dispatch overheads); a training step (forward, token log-probs, backward, AdamW) of
the same model (the effective training FLOP rate). Run: ``python bench/timing_cpu_calibration.py``; it prints
the constants as JSON. The validation rows (SmolLM2-135M runs) are never used here.
"""

from __future__ import annotations

import json
import time

HIDDEN, FFN, HEADS, KV_HEADS, VOCAB = 512, 1536, 8, 4, 49152
BATCH, PROMPT, NEW_TOKENS = 16, 32, 24


def _best(run, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def micro_benchmarks() -> dict[str, float]:
    import torch

    left, right = torch.randn(2048, 1024), torch.randn(1024, 1024)
    flops = 2 * 2048 * 1024 * 1024 / _best(lambda: left @ right, 5)
    data = torch.randn(64 * 2**20)  # 256 MiB
    read = data.numel() * 4 / _best(lambda: data.sum(), 5)
    return {"matmul_flops": flops, "read_bytes_per_s": read}


def _model(layers: int):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        hidden_size=HIDDEN,
        intermediate_size=FFN,
        num_hidden_layers=layers,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        vocab_size=VOCAB,
        tie_word_embeddings=True,
    )
    return LlamaForCausalLM(config).eval()


def decode_iteration_seconds(layers: int) -> float:
    import torch

    model = _model(layers)
    prompt = torch.randint(0, VOCAB, (BATCH, PROMPT))
    with torch.no_grad():

        def generate(tokens: int) -> None:
            model.generate(prompt, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=True, pad_token_id=0)

        long, short = _best(lambda: generate(NEW_TOKENS)), _best(lambda: generate(4))
    return (long - short) / (NEW_TOKENS - 4)  # the prefill and setup cancel


def training_seconds(layers: int) -> float:
    import torch

    model = _model(layers).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)
    ids = torch.randint(0, VOCAB, (BATCH, PROMPT + NEW_TOKENS))

    def step() -> None:
        logits = model(ids).logits[:, :-1].float()
        logps = torch.log_softmax(logits, -1).gather(-1, ids[:, 1:, None]).sum()
        (-logps).backward()
        optimizer.step()
        optimizer.zero_grad()

    return _best(step)


def main() -> None:
    rates = micro_benchmarks()
    layer_matmul = 2 * HIDDEN * HIDDEN + 2 * HIDDEN * (HIDDEN * KV_HEADS // HEADS) + 3 * HIDDEN * FFN
    decode = {layers: decode_iteration_seconds(layers) for layers in (4, 8)}
    slope = (decode[8] - decode[4]) / 4
    read, flops = rates["read_bytes_per_s"], rates["matmul_flops"]
    layer_roofline = max(layer_matmul * 4 / read, 2 * layer_matmul * BATCH / flops)
    head_roofline = max(VOCAB * HIDDEN * 4 / read, 2 * VOCAB * HIDDEN * BATCH / flops)
    train = training_seconds(8)
    tokens = BATCH * (PROMPT + NEW_TOKENS)
    matmul_parameters = 8 * layer_matmul + VOCAB * HIDDEN
    print(
        json.dumps(
            {
                **rates,
                "decode_seconds_per_iteration": decode,
                "decode_layer_overhead_s": slope - layer_roofline,
                "decode_iteration_overhead_s": decode[4] - 4 * slope - head_roofline,
                "training_seconds": train,
                "training_flops_per_s": 6 * matmul_parameters * tokens / train,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
