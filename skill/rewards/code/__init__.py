"""Code rewards: the ``unit_tests`` reward, the tests it reads, its harness, and the sandbox that runs model code.

Owns: ``unit_tests`` (the reward), ``cases`` (a row's tests as a suite with its own namespace), ``grading``
(the child's reports against the expected values, in bounded time), ``harness`` (the test runner inside the
sandbox), ``sandbox`` (running one program), ``isolation`` (the confining command and the per-run uid) and
``cgroup`` (one memory cap over a whole run). May import: ``skill.rewards`` (base, params, registry),
``skill.errors``.
"""
