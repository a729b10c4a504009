"""Sample completions from a policy model: the one generation module route_check and inspect_rewards share.

Three engines, one contract: the same prompts rendered by the model's own tokenizer (chat messages through
its chat template with the generation prompt, as TRL renders conversational data; plain text as is), the same
end-of-completion tokens (the generation config's and the tokenizer's eos), the same sampling settings, seeded.

- ``transformers``: ``generate`` on this machine's GPU when there is one (bf16), else the CPU (the weights'
  own dtype);
- ``vllm``: vLLM's offline ``LLM``, the engine a run generates with;
- ``endpoint``: an OpenAI-compatible completions API the user already runs (``vllm serve``, ``trl
  vllm-serve``'s OpenAI server, any server with ``/v1/completions``), sent token ids; its key is read from an
  environment variable, never from a request.

``auto`` takes vLLM when it is installed and a CUDA GPU is present, else transformers: on a CPU vLLM's engine
start (70-130 s on 2 cores, docs/architecture.md §7) outweighs its speed for a probe of a few hundred samples. Every
result names its engine, version, device, seed and the model's revision (``Sampled.sampled_with``).

Modules: ``schema`` (the contracts), ``engines`` (``sample_completions`` and the choice), ``progress`` (progress and
cancellation), ``prompts`` (the tokenizer, template and end tokens every engine shares), and one module per engine:
``transformers_engine``, ``vllm_engine``, ``endpoint``.
May import: ``models``, ``errors``.
"""
