"""An inspection report as a reader meets it: what may be seen now (``visible``), as Markdown (agents,
terminals) and the HTML reading page (``inspection.reading_page``). Until a sample is labelled it is shown blind
(``shown``): prompt, completion and reference columns, no score; after its labels, every score, what each reward
extracted, and each disagreement. The statistics, the hack probes' figures and the samples a flag names are
shown once every sample is labelled: each of them tells scores."""

from __future__ import annotations

import json
from typing import Any

from skill.inspection.agreement import describe, summarize
from skill.inspection.schema import InspectionReport, ProbeResult, SampleResult

TRUNCATE = 600


def prompt_text(prompt: Any) -> str:
    if isinstance(prompt, list):
        return "\n".join(f"{m.get('role', '?')}: {m.get('content', '')}" for m in prompt if isinstance(m, dict))
    return str(prompt)


def short(text: str, limit: int = TRUNCATE) -> str:
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more characters]"


def is_revealed(report: InspectionReport, sample: SampleResult) -> bool:
    """Whether a sample's scores may be shown: it carries a label for every read role, the rewards were accepted
    unread, no reward of the report is one a person judges, or the report is a quick check (no read)."""
    review = report.review
    if report.quick or (review is not None and review.accept_unread):
        return True
    labels = review.labels.get(sample.id, {}) if review else {}
    return all(role in labels for role in report.read_roles)


def shown(report: InspectionReport, sample: SampleResult) -> SampleResult:
    """A sample as a reader may see it now: blind (no score, no extracted answer, no error) until revealed, then
    whole. Shaping rewards are not labelled, but their scores can hint at the others': they are hidden too."""
    if is_revealed(report, sample):
        return sample
    return sample.model_copy(update={"scores": {}, "total": None, "extracted": {}, "errors": {}})


def withheld(probe: ProbeResult) -> ProbeResult:
    """A probe that did not beat its reward, without its figures: that it ran is known, what the reward gave is not."""
    hidden = {"score": None, "reference_score": None, "total": None, "total_bar": None}
    return probe.model_copy(update={**hidden, "expected": "shown after the labels"})  # it names the top score


def visible(report: InspectionReport) -> InspectionReport:
    """The report as a reader may see it now: samples as ``shown``; until every sample is revealed, no
    statistics, every probe that ran but without the figures of those that did not beat a reward, and no sample
    ids on the flags. A hack a reward pays for is shown whole: it blocks the gate until the reward is fixed.

    >>> sample = SampleResult(id=0, prompt="p", completion="c", scores={"r": 0.7316}, total=0.7316)
    >>> blind = visible(InspectionReport(id="insp-x", created_at="", rewards=[], reward_fingerprint="", source="",
    ...                                  samples=[sample], stats={}, flags=[], probe_results=[], read_roles=["format"]))
    >>> "0.7316" in blind.model_dump_json()
    False
    """
    samples = [shown(report, sample) for sample in report.samples]
    if all(is_revealed(report, sample) for sample in report.samples):
        return report.model_copy(update={"samples": samples})
    return report.model_copy(
        update={
            "samples": samples,
            "stats": {},
            "probe_results": [probe if probe.hacked else withheld(probe) for probe in report.probe_results],
            "flags": [flag.model_copy(update={"evidence": []}) for flag in report.flags],
        }
    )


def samples_origin(report: InspectionReport) -> str:
    """Whose samples the read was on: the policy's, or supplied by hand.

    >>> samples_origin(InspectionReport(id="i", created_at="", rewards=[], reward_fingerprint="", source="",
    ...                                 samples=[], stats={}, flags=[], probe_results=[], policy_model="m"))
    'on policy samples of m'
    """
    if report.policy_model is None:
        return "on supplied samples, not sampled from the policy"
    return f"on policy samples of {report.policy_model}"


def render_markdown(report: InspectionReport) -> str:
    """The report for an agent or a terminal, as ``visible``: verdict, flags, probes, statistics, then every
    sample."""
    names = list(report.stats)
    report = visible(report)
    lines = _markdown_summary(report) + _markdown_tables(report)
    lines += [
        "",
        "## Samples",
        "",
        f"Label each sample by your own judgment, before any score, for {', '.join(report.read_roles) or 'nothing'}: "
        "pass, fail or unsure (record_review). The scores appear once a sample is labelled.",
        "",
    ]
    for sample in report.samples:
        lines += _markdown_sample(sample, names)
    return "\n".join(lines)


def _markdown_summary(report: InspectionReport) -> list[str]:
    """The title, verdict and its reasons, the rewards, and the flags."""
    lines = [
        f"# Reward inspection {report.id}",
        "",
        f"Verdict: **{report.verdict}**. Samples: {len(report.samples)} ({report.source}; {samples_origin(report)}). "
        f"Fingerprint: `{report.reward_fingerprint[:16]}`.",
        "",
        f"Drawn: {report.draw} Labelled for: {', '.join(report.read_roles) or '-'}.",
        "",
        "Rewards: " + ", ".join(f"`{s.name}` ({s.role}, weight {s.weight:g})" for s in report.rewards),
        "",
    ]
    lines += [f"- {reason}" for reason in report.verdict_reasons]
    review = report.review
    if review is not None and review.agreement:
        lines += ["", "## Agreement with your first labels", ""]
        lines += [f"- {summarize(a)}" for a in review.agreement]
        lines += [f"- {describe(d)}{' (amended)' if d.resolved else ''}" for d in review.disagreements]
    lines += ["", "## Flags", ""]
    lines += [
        f"- **{f.severity}** `{f.code}`{f' ({f.reward})' if f.reward else ''}: {f.message}"
        + (f" Samples: {f.evidence}." if f.evidence else "")
        + (f" **Change:** {f.fix}" if f.fix else "")
        for f in report.flags
    ] or ["- none"]
    return lines


def _figure(value: float | None) -> str:
    """A figure as a reader wants it: 3 significant digits.

    >>> _figure(0.28618176042508353), _figure(None), _figure(1.0)
    ('0.286', '-', '1')
    """
    return "-" if value is None else f"{value:.3g}"


def _markdown_tables(report: InspectionReport) -> list[str]:
    """The hack probes and the per-reward statistics, as tables."""
    lines = [
        "",
        "## Hack probes",
        "",
        "| reward | probe | completion | score | honest reward gives | total (bar) | hacked |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {p.reward} | {p.probe} | `{short(p.completion, 80).replace('|', '/')}` | {_figure(p.score)} | "
        f"{p.expected} | {_figure(p.total)} ({_figure(p.total_bar)}) | {f'**yes**: {p.why}' if p.hacked else 'no'} |"
        for p in report.probe_results
    ]
    lines += [
        "",
        "## Statistics",
        "",
        "| reward | mean | std | min | max | None | failures | r(length) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, s in report.stats.items():
        corr = "-" if s.length_correlation is None else f"{s.length_correlation:.2f}"
        lines.append(
            f"| {name} | {_figure(s.mean)} | {_figure(s.std)} | {_figure(s.minimum)} | {_figure(s.maximum)} | "
            f"{s.none_rate:.0%} | {s.failure_rate:.0%} | {corr} |"
        )
    return lines


def _markdown_sample(sample: SampleResult, names: list[str]) -> list[str]:
    """One sample: its scores (once labelled), what was extracted, its columns, the prompt and the completion."""
    scores = ", ".join(f"{name}={_figure(sample.scores.get(name))}" for name in names)
    lines = [f"### Sample {sample.id}", "", f"Scores: {scores}; total {_figure(sample.total)}" if sample.scores else ""]
    if sample.extracted:
        lines.append("Extracted: " + ", ".join(f"{k}={v!r}" for k, v in sample.extracted.items()))
    if sample.columns:
        lines.append("Columns: " + short(json.dumps(sample.columns, default=str), 300))
    return lines + [
        "",
        "Prompt:",
        "",
        "```",
        short(prompt_text(sample.prompt)),
        "```",
        "",
        "Completion:",
        "",
        "```",
        short(sample.completion),
        "```",
        "",
    ]
