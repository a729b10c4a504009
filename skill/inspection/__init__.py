"""Inspection: the mandatory reward read and the gate in front of every training run.

Owns: ``schema`` (request, report, review), ``run`` (``inspect_rewards``: score, flag, plant checks),
``hack_probes`` (known reward hacks), ``gate`` (the one gate policy: fingerprints, ``record_review``,
``require_passed_inspection``), ``reports`` (report storage), ``render`` (HTML and Markdown).
May import: ``rewards``, ``routing``, ``data``, ``sampling``, ``state``, ``errors``.
"""
