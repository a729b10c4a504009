"""The human read: an inspection report as Markdown (agents, terminals) and as one self-contained HTML page
(no network, no external scripts) with per-sample agree/disagree controls that export a labels file
``record_review`` accepts."""

from __future__ import annotations

import html
import json
from typing import Any

from skill.inspection.schema import InspectionReport, SampleResult

TRUNCATE = 600


def _prompt_text(prompt: Any) -> str:
    if isinstance(prompt, list):
        return "\n".join(f"{m.get('role', '?')}: {m.get('content', '')}" for m in prompt if isinstance(m, dict))
    return str(prompt)


def _short(text: str, limit: int = TRUNCATE) -> str:
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more characters]"


def render_markdown(report: InspectionReport) -> str:
    """The report for an agent or a terminal: verdict, flags, probes, statistics, then every sample."""
    lines = _markdown_summary(report) + _markdown_tables(report)
    lines += [
        "",
        "## Samples",
        "",
        "For each sample: do you agree with the rewards' judgment? Any disagreement "
        "means the reward function needs fixing first.",
        "",
    ]
    for sample in report.samples:
        lines += _markdown_sample(sample, list(report.stats))
    return "\n".join(lines)


def _markdown_summary(report: InspectionReport) -> list[str]:
    """The title, verdict and its reasons, the rewards, and the flags."""
    lines = [
        f"# Reward inspection {report.id}",
        "",
        f"Verdict: **{report.verdict}**. Samples: {len(report.samples)} ({report.source}). "
        f"Fingerprint: `{report.reward_fingerprint[:16]}`. {_attempts(report)}",
        "",
        "Rewards: " + ", ".join(f"`{s.name}` ({s.role}, weight {s.weight:g})" for s in report.rewards),
        "",
    ]
    lines += [f"- {reason}" for reason in report.verdict_reasons]
    lines += ["", "## Flags", ""]
    lines += [
        f"- **{f.severity}** `{f.code}`{f' ({f.reward})' if f.reward else ''}: {f.message}"
        + (f" Samples: {f.evidence}." if f.evidence else "")
        + (f" **Change:** {f.fix}" if f.fix else "")
        for f in report.flags
    ] or ["- none"]
    return lines


def _attempts(report: InspectionReport) -> str:
    """The review attempts so far, and a reminder of what passes (every sample read and labelled)."""
    return (
        f"Reviews that did not match a read: {report.review_attempts}. Label every sample; a few carry a "
        "deliberately wrong score (attention checks)."
    )


def _markdown_tables(report: InspectionReport) -> list[str]:
    """The hack probes and the per-reward statistics, as tables."""
    lines = [
        "",
        "## Hack probes",
        "",
        "| reward | probe | score | honest reward gives | total (bar) | hacked |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {p.reward} | {p.probe} | {p.score} | {p.expected} | {p.total} ({p.total_bar}) | "
        f"{f'**yes**: {p.why}' if p.hacked else 'no'} |"
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
            f"| {name} | {s.mean} | {s.std} | {s.minimum} | {s.maximum} | {s.none_rate:.0%} | "
            f"{s.failure_rate:.0%} | {corr} |"
        )
    return lines


def _markdown_sample(sample: SampleResult, names: list[str]) -> list[str]:
    """One sample: its scores, what was extracted, its columns, the prompt and the completion."""
    scores = ", ".join(f"{name}={sample.scores.get(name)}" for name in names)
    lines = [f"### Sample {sample.id}", "", f"Scores: {scores}; total {sample.total}"]
    if sample.extracted:
        lines.append("Extracted: " + ", ".join(f"{k}={v!r}" for k, v in sample.extracted.items()))
    if sample.columns:
        lines.append("Columns: " + _short(json.dumps(sample.columns, default=str), 300))
    return lines + [
        "",
        "Prompt:",
        "",
        "```",
        _short(_prompt_text(sample.prompt)),
        "```",
        "",
        "Completion:",
        "",
        "```",
        _short(sample.completion),
        "```",
        "",
    ]


_STYLE = """
body{font-family:system-ui,sans-serif;margin:2rem;max-width:70rem;color:#222}
table{border-collapse:collapse;margin:1rem 0}td,th{border:1px solid #ccc;padding:.3rem .5rem;text-align:left}
.sample{border:1px solid #ccc;border-radius:6px;padding:.8rem;margin:1rem 0}
pre{white-space:pre-wrap;background:#f6f6f6;padding:.5rem;border-radius:4px}
.blocking{color:#a00;font-weight:bold}.warning{color:#a60}
.bar{position:sticky;top:0;background:#fff;padding:.5rem 0;border-bottom:1px solid #ccc}
"""

_SCRIPT = """
function collect(){
  const labels={};let done=0;
  document.querySelectorAll('.sample').forEach(el=>{
    const id=el.dataset.id;const c=el.querySelector('input[name=s'+id+']:checked');
    if(c){labels[id]=(c.value==='agree');done++;}
  });
  document.getElementById('count').textContent=done+' / '+document.querySelectorAll('.sample').length+' labelled';
  return labels;
}
function exportLabels(){
  const reviewer=document.getElementById('reviewer').value.trim();
  if(!reviewer){alert('Enter your name first.');return;}
  const data={report_id:document.body.dataset.report,reviewer:reviewer,reviewer_kind:'human',labels:collect()};
  const text=JSON.stringify(data,null,1);
  document.getElementById('exported').textContent=text;
  const a=document.createElement('a');
  a.href=URL.createObjectURL(new Blob([text],{type:'application/json'}));
  a.download=data.report_id+'.labels.json';document.body.appendChild(a);a.click();a.remove();
}
document.addEventListener('change',collect);
"""


def render_html(report: InspectionReport) -> str:
    """One self-contained page: flags, probes, statistics and every sample with agree/disagree controls."""
    e = html.escape
    names = list(report.stats)
    flags = (
        "".join(
            f"<li class='{f.severity}'>{e(f.severity)} <code>{e(f.code)}</code> {e(f.message)}"
            + (f" <b>Change:</b> {e(f.fix)}" if f.fix else "")
            + "</li>"
            for f in report.flags
        )
        or "<li>none</li>"
    )
    probes = "".join(
        f"<tr><td>{e(p.reward)}</td><td>{e(p.probe)}</td><td>{p.score}</td><td>{e(p.expected)}</td>"
        f"<td>{f'<b>yes</b>: {e(p.why)}' if p.hacked else 'no'}</td></tr>"
        for p in report.probe_results
    )
    stats = "".join(
        f"<tr><td>{e(n)}</td><td>{s.mean}</td><td>{s.std}</td><td>{s.none_rate:.0%}</td>"
        f"<td>{s.failure_rate:.0%}</td></tr>"
        for n, s in report.stats.items()
    )
    samples = []
    for sample in report.samples:
        scores = ", ".join(f"{e(n)}={sample.scores.get(n)}" for n in names)
        extracted = ", ".join(f"{e(k)}={e(repr(v))}" for k, v in sample.extracted.items())
        samples.append(
            f"<div class='sample' data-id='{sample.id}'><b>Sample {sample.id}</b> — {scores}; total {sample.total}"
            + (f"<br>extracted: {extracted}" if extracted else "")
            + (
                f"<br>columns: <code>{e(_short(json.dumps(sample.columns, default=str), 300))}</code>"
                if sample.columns
                else ""
            )
            + f"<pre>{e(_short(_prompt_text(sample.prompt)))}</pre><pre>{e(_short(sample.completion))}</pre>"
            f"<label><input type='radio' name='s{sample.id}' value='agree'> agree with the judgment</label> "
            f"<label><input type='radio' name='s{sample.id}' value='disagree'> disagree</label></div>"
        )
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>Reward inspection {e(report.id)}</title><style>{_STYLE}</style></head>"
        f"<body data-report='{e(report.id)}'><h1>Reward inspection {e(report.id)}</h1>"
        f"<p>Verdict: <b>{e(report.verdict)}</b>. {len(report.samples)} samples from {e(report.source)}. "
        "Read each sample: do you agree with the rewards' judgment? Any disagreement means: fix the reward first. "
        f"{e(_attempts(report))}</p>"
        f"<h2>Flags</h2><ul>{flags}</ul>"
        "<h2>Hack probes</h2><table><tr><th>reward</th><th>probe</th><th>score</th><th>honest</th><th>hacked</th></tr>"
        f"{probes}</table><h2>Statistics</h2><table><tr><th>reward</th><th>mean</th><th>std</th><th>None</th>"
        f"<th>failures</th></tr>{stats}</table>"
        "<div class='bar'>Reviewer: <input id='reviewer' placeholder='your name'> "
        "<button id='export' onclick='exportLabels()'>Export labels</button> <span id='count'></span></div>"
        f"<h2>Samples</h2>{''.join(samples)}<h2>Exported labels</h2><pre id='exported'></pre>"
        f"<script>{_SCRIPT}</script></body></html>"
    )
