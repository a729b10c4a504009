"""Inspection: the mandatory reward read and the gate in front of every training run.

Owns: ``schema`` (request, report, review, gate decision), ``run`` (``inspect_rewards``), ``scoring``
(rewards scored and probed in a fresh process; the reward fingerprint is ``skill.rewards.fingerprint``),
``hack_probes`` (known reward hacks, judged by role and on the weighted total), ``flags`` (statistics and flags),
``draw`` (the balanced draw a reader reads), ``fresh_samples`` (more samples of the policy when the revealed
ones leave too few unseen), ``agreement`` (the blind read's rule), ``revealed`` (the samples
whose scores a reader has seen, never blind again), ``gate`` (the one gate policy: ``record_review``,
``open_gate``), ``seal`` (what must not be read before the labels, encrypted), ``reports`` (report storage),
``render`` (Markdown, and what a reader may see), ``reading_page`` (the HTML reading page), ``digest`` (the
compact view an agent pages through), ``quick`` (a quick check on a handful of samples, every score shown: not a
read).
May import: ``rewards``, ``routing``, ``data``, ``sampling``, ``state``, ``errors``.
"""
