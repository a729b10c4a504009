"""Code rewards: the ``unit_tests`` reward, its test harness, and the sandbox that runs model-written code.

May import: ``skill.rewards`` (base, registry), ``skill.errors``.
"""
