"""Routing: is GRPO the right tool? ``route_check`` samples the base model and decides.

Owns: the route request, evidence and decision (``route``). May import: building blocks (``data``,
``sampling``, ``models``, ``rewards``, ``state``, ``errors``).
"""
