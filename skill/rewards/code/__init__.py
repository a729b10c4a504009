"""Code rewards: the ``unit_tests`` reward, the tests it reads, its harness, and the sandbox that runs model code.

Owns: ``unit_tests`` (the reward; grading in the parent), ``cases`` (a row's tests as gradable cases),
``harness`` (the test runner inside the sandbox), ``sandbox`` (running one program) and ``isolation`` (the
confining command and the per-run uid). May import: ``skill.rewards`` (base, params, registry), ``skill.errors``.
"""
