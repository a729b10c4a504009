"""Memory: the per-GPU (or CPU RAM) footprint of the whole GRPO stack, and remedies when it does not fit.

Owns: ``schema`` (request, estimate, shared constants), ``components`` (each component in bytes and the
estimate without remedies), ``remedies`` (the cheapest changes that fit), ``estimate``
(``estimate_memory``), ``measurement`` (a real CPU step to validate against). May import: ``models``
(shapes), ``hardware`` (specs and the process layout), ``errors``.
"""
