"""The embedded demo: SmolLM2-135M-Instruct learning to add small numbers with GRPO."""
