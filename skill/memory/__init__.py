"""Memory: the per-GPU (or CPU RAM) footprint of the whole GRPO stack, and remedies when it does not fit.

Owns: ``schema`` (request, estimate, shared constants), ``precision`` (the dtypes a step computes in),
``placement`` (where weights, gradients, optimizer states and the reference live per backend), ``gather``
(whole parameters materialised outside the step when sharded), ``components`` (each component in bytes and
the estimate without remedies), ``remedies`` (the cheapest changes that fit), ``search`` (the smallest
configuration that fits when no single change does), ``estimate`` (``estimate_memory``), ``measurement`` (a
real CPU step to validate against) with its ``instruments``, and ``validation`` (against published reports).
May import: ``models`` (shapes), ``hardware`` (specs and the process layout), ``errors``.
"""
