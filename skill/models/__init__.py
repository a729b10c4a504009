"""Models: where a model comes from (hub id, local directory, the embedded SmolLM2) and its shape.

Owns: ``sources`` (resolving and converting model weights, tiny test models), ``hub`` (a model's files fetched
the way huggingface_hub fetches them), ``shapes`` (the decoder shape the memory estimate reads, dense or a mixture
of experts, and a table of checked rows), ``size`` (one answer for a model's shape and parameter count: the table,
else its config.json) and ``miniature`` (a model's architecture at 2 layers with random weights, for rehearsals).
May import: ``skill.errors``, ``skill.state``, ``skill.hub_errors``.
"""
