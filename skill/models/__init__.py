"""Models: where a model comes from (hub id, local directory, the embedded SmolLM2) and its shape.

Owns: ``sources`` (resolving and converting model weights, tiny test models) and ``shapes`` (layer
counts and sizes that the memory estimate reads). May import: ``skill.errors``, ``skill.state``.
"""
