"""Routing: is GRPO the right tool? ``route_check`` samples the base model and decides.

Owns: ``route`` (the request, the decision and ``route_check``), ``probe`` (sampling the base model and scoring
it), ``probe_time`` (how long a probe takes here), ``evidence`` (what a probe measured), ``declared`` (a pass
rate the caller measured), ``interval_rule`` (the rule, read through 95% intervals), ``handover`` (where a task
GRPO does not fit goes) and ``subject`` (what a route was measured on). May import: building blocks (``data``,
``sampling``, ``models``, ``rewards``, ``state``, ``errors``).
"""
