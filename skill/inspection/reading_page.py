"""The HTML reading page of an inspection: one self-contained file (no network, no external script or font) where
a person reads the samples blind, labels them and exports the JSON ``record_review`` takes (a ``ReviewRequest``);
once record_review has the labels, the page (written again) shows the reveal, where each disagreement is resolved
and the amendments exported the same way.

1. **Label**: each sample shows its prompt, completion and reference columns, no score and nothing a reward
   extracted. For every read role the reader picks pass, fail or unsure; keys ``p``/``1``, ``f``/``2``,
   ``u``/``3`` label the current role of the current sample and move on; ``j``/``k`` (or the arrow keys) move
   between samples, left/right between roles. The labels and the reviewer's name are kept across a reload
   (``localStorage``, keyed by the report id).
2. **Export**: the labels, shown and downloaded as ``<report id>.review.json``, sent to ``record_review``.
3. **Reveal**: ``record_review`` writes the page again with what it revealed (``inspection.render.visible``):
   reopened, it shows each labelled sample's scores (3 significant digits), what each reward extracted, the
   statistics, and every disagreement by sample id; recorded labels are locked.
4. **Resolve**: a disagreement is fixed in the reward (inspect again with ``samples_of``: the labels are
   re-scored) or, for a misread, amended here with the new label and the reason, and exported again.

No score is in the page before its sample is labelled and recorded: the page is written from what a reader may
see, never from the sealed report (``inspection.seal``).
"""

from __future__ import annotations

import html
import json
from typing import Any

from skill.inspection import agreement
from skill.inspection.render import prompt_text, short, visible
from skill.inspection.schema import InspectionReport, SampleResult

_STYLE = """
body{font:15px/1.45 system-ui,sans-serif;margin:0 auto;max-width:64rem;padding:0 1rem 40vh;color:#1d1d1f}
h1{font-size:1.4rem}h2{font-size:1.15rem;margin-top:2rem}table{border-collapse:collapse;margin:.5rem 0}
td,th{border:1px solid #ccc;padding:.25rem .5rem;text-align:left;vertical-align:top}
pre{white-space:pre-wrap;word-break:break-word;background:#f5f5f7;padding:.5rem;border-radius:4px;margin:.2rem 0}
pre.prompt{max-height:12rem;overflow:auto;color:#444}pre.completion{background:#eef4ff;font-size:1rem}
.bar{position:sticky;top:0;z-index:2;background:#fff;border-bottom:2px solid #ccc;padding:.5rem 0}
.bar input{width:12rem}.keys{color:#555;font-size:.85rem}#progress{font-weight:bold;margin:0 .6rem}
.sample{border:2px solid #ddd;border-radius:8px;padding:.6rem .8rem;margin:1rem 0;scroll-margin-top:7rem}
.sample.current{border-color:#2a62d8;box-shadow:0 0 0 3px #c9d8fb}.sample.disagree{background:#fff6f0}
.role{margin:.3rem 0}.role.current{outline:2px dashed #2a62d8;outline-offset:3px}
.role .name{display:inline-block;min-width:7rem;font-weight:bold}
button{font:inherit;padding:.1rem .6rem;border:1px solid #999;border-radius:4px;background:#fff;cursor:pointer}
button:disabled{cursor:default;opacity:.7}button.on[data-label=pass]{background:#2e8540;color:#fff}
button.on[data-label=fail]{background:#c0392b;color:#fff}button.on[data-label=unsure]{background:#777;color:#fff}
.cols code,.said{background:#fffbe6;padding:0 .3rem;border-radius:3px}.muted{color:#666}
.blocking{color:#a00;font-weight:bold}.warning{color:#a60}.mark{color:#c0392b;font-weight:bold}
.sample.done .check::after{content:'\\2713 labelled';color:#2e8540;margin-left:.5rem}
.verdict{font-weight:bold;padding:.1rem .5rem;border-radius:4px;background:#eee}
body:not(.revealed) .after{display:none}body.revealed .before{display:none}
#disagreements li{margin:.4rem 0}#disagreements input{width:24rem}
"""

_SCRIPT = r"""
const D=JSON.parse(document.getElementById('report-data').textContent);
const KEY='grpo-rlvr-read:'+D.id, ROLES=D.roles, N=D.order.length;
const given=(D.review&&D.review.labels)||{};
const $=s=>document.querySelector(s), card=i=>document.getElementById('s-'+D.order[i]);
let S={labels:{},amend:{},reviewer:''};
try{Object.assign(S,JSON.parse(localStorage.getItem(KEY)||'{}'))}catch(e){}
let cur=0, role=0;
const save=()=>{try{localStorage.setItem(KEY,JSON.stringify(S))}catch(e){}};
const label=(id,r)=>(given[id]&&given[id][r])||(S.labels[id]&&S.labels[id][r])||null;
const complete=id=>ROLES.every(r=>label(id,r));
const done=()=>D.order.filter(complete).length;
const revealed=()=>D.revealed;
function say(text){$('#status').textContent=text}
function paintCard(i){
  const id=D.order[i], el=card(i);
  el.classList.toggle('done',complete(id));
  el.querySelectorAll('.role').forEach((row,j)=>{
    const r=row.dataset.role, l=label(id,r);
    row.classList.toggle('current',i===cur&&j===role&&!revealed());
    row.querySelectorAll('button').forEach(b=>{b.classList.toggle('on',b.dataset.label===l);
      b.disabled=revealed()||Boolean(given[id]&&given[id][r])});
  });
}
function paint(){
  document.querySelectorAll('.sample.current').forEach(el=>el.classList.remove('current'));
  card(cur).classList.add('current');
  D.order.forEach((_,i)=>paintCard(i));
  const n=done();
  $('#progress').textContent=n+' of '+N+' labelled';
  $('#where').textContent='sample '+D.order[cur]+(ROLES.length&&!revealed()?' \u00b7 '+ROLES[role]:'');
  if(n===N&&!revealed())say('Every sample is labelled: export the review and send it to record_review; reopen this '+
    'page after it to see the scores.');
}
function go(i,r){cur=Math.max(0,Math.min(N-1,i));role=r||0;paint();card(cur).scrollIntoView({block:'start'})}
function give(value){
  const id=D.order[cur], r=ROLES[role];
  if(!r)return;
  if(revealed()){say('The scores are shown: labels are locked. Amend a disagreement instead.');return}
  if(given[id]&&given[id][r]){say('Sample '+id+' ('+r+') was recorded by record_review: locked.')}
  else{(S.labels[id]=S.labels[id]||{})[r]=value;save();say('')}
  if(role+1<ROLES.length)go(cur,role+1);else go(cur+1<N?cur+1:cur,cur+1<N?0:role);
}
function disagreements(){
  const out=[];
  D.read_rewards.forEach(w=>D.order.forEach(id=>{
    const first=given[id]&&given[id][w.role], said=D.samples[id].said[w.name];
    if((first==='pass'||first==='fail')&&said&&said!==first)out.push({id,first,said,name:w.name,role:w.role});
  }));
  return out;
}
function amendState(d){
  const k=d.id+'|'+d.role, rec=D.recorded[k], a=S.amend[k]||{};
  if(rec)return['resolved: amended to '+rec.label+' ('+rec.reason+'), recorded',true];
  if(!a.label)return['unresolved: fix the reward, then inspect_rewards with samples_of="'+D.id+'"',false];
  if(a.label===d.first||!(a.label===d.said||a.label==='unsure'))
    return['does not resolve it: amend to '+d.said+' or unsure',false];
  if(!(a.reason||'').trim())return['give the reason for the misread',false];
  return['resolved by this amendment (export it)',true];
}
function showReveal(){
  document.body.classList.add('revealed');
  D.order.forEach(id=>{
    const s=D.samples[id], el=document.querySelector('#s-'+id+' .scores');
    el.innerHTML='';
    D.rewards.forEach(w=>{const li=document.createElement('li');
      li.textContent=w.name+' ('+w.role+'): '+s.scores[w.name]+(s.said[w.name]?' \u2014 '+s.said[w.name]:'')+
        (s.read[w.name]?', read '+s.read[w.name]:'')+(s.errors[w.name]?', error: '+s.errors[w.name]:'');
      el.appendChild(li)});
    const t=document.createElement('li');t.textContent='total: '+s.total;el.appendChild(t);
    document.querySelector('#s-'+id+' .mark').textContent='';
    document.getElementById('s-'+id).classList.remove('disagree');
  });
  const list=$('#disagreements');list.innerHTML='';
  const found=disagreements();
  $('#disagree-count').textContent=found.length?found.length+' disagreement(s) between the rewards and your labels:'
    :'The rewards agree with every decided label.';
  found.forEach(d=>{
    const s=D.samples[d.id], k=d.id+'|'+d.role, li=document.createElement('li');
    const text='sample '+d.id+': '+d.name+' said '+d.said+' ('+s.scores[d.name]+
      (s.read[d.name]?', read '+s.read[d.name]:'')+'), you said '+d.first;
    li.innerHTML='<a href="#s-'+d.id+'"></a> <select data-k="'+k+'">'+
      '<option value="">keep my label (fix the reward)</option><option>pass</option><option>fail</option>'+
      '<option>unsure</option></select> '+
      '<input data-k="'+k+'" placeholder="reason: why my first label was a misread"> <span class="state"></span>';
    li.querySelector('a').textContent=text;
    li.querySelector('select').value=(S.amend[k]||{}).label||'';li.querySelector('input').value=(S.amend[k]||{}).reason||'';
    if(D.recorded[k])li.querySelectorAll('select,input').forEach(x=>x.disabled=true);
    li.querySelector('.state').textContent=amendState(d)[0];li.dataset.k=k;list.appendChild(li);
    document.querySelector('#s-'+d.id+' .mark').textContent+=' '+d.name+' said '+d.said+', you said '+d.first+'.';
    document.getElementById('s-'+d.id).classList.add('disagree');
  });
  paintAmendCount(found);
}
function paintAmendCount(found){
  const extra=Object.keys(S.amend).filter(k=>!D.recorded[k]&&S.amend[k].label&&(S.amend[k].reason||'').trim()).length;
  const n=Object.keys(D.recorded).length+extra, open=found.filter(d=>!amendState(d)[1]).length;
  $('#amend-count').textContent=open+' unresolved; '+n+' label(s) amended.';
}
function onAmend(e){
  const k=e.target.dataset.k;if(!k)return;
  const a=S.amend[k]=S.amend[k]||{label:'',reason:''};
  if(e.target.tagName==='SELECT')a.label=e.target.value;else a.reason=e.target.value;
  save();const found=disagreements();
  document.querySelectorAll('#disagreements li').forEach((li,i)=>{
    li.querySelector('.state').textContent=amendState(found[i])[0]});
  paintAmendCount(found);
}
function exportReview(){
  const reviewer=$('#reviewer').value.trim();
  if(!reviewer){say('Enter your name (reviewer) before exporting.');$('#reviewer').focus();return}
  const labels={};
  D.order.forEach(id=>ROLES.forEach(r=>{const l=label(id,r);if(l)(labels[id]=labels[id]||{})[r]=l}));
  const amendments=Object.entries(S.amend).filter(([k,a])=>!D.recorded[k]&&a.label&&(a.reason||'').trim())
    .map(([k,a])=>({sample_id:Number(k.split('|')[0]),role:k.split('|')[1],label:a.label,reason:a.reason.trim()}));
  const data={report_id:D.id,reviewer:reviewer,reviewer_kind:'human',labels:labels,amendments:amendments};
  const text=JSON.stringify(data,null,1);
  $('#exported').textContent=text;$('#exported').scrollIntoView({block:'nearest'});
  const a=document.createElement('a');
  a.href=URL.createObjectURL(new Blob([text],{type:'application/json'}));
  a.download=D.id+'.review.json';document.body.appendChild(a);a.click();a.remove();
  say('Exported '+Object.keys(labels).length+' labelled samples and '+amendments.length+
    ' amendment(s): send the file to record_review.');
}
const KEYS={p:'pass','1':'pass',f:'fail','2':'fail',u:'unsure','3':'unsure'};
document.addEventListener('keydown',e=>{
  if(e.ctrlKey||e.metaKey||e.altKey)return;
  if(e.target.closest&&e.target.closest('input,select,textarea')){if(e.key==='Escape')e.target.blur();return}
  const k=e.key;
  if(KEYS[k])give(KEYS[k]);else if(k==='j'||k==='ArrowDown')go(cur+1);else if(k==='k'||k==='ArrowUp')go(cur-1);
  else if(k==='l'||k==='ArrowRight')go(cur,Math.min(role+1,Math.max(0,ROLES.length-1)));
  else if(k==='h'||k==='ArrowLeft')go(cur,Math.max(role-1,0));else return;
  e.preventDefault();
});
document.addEventListener('click',e=>{
  const el=e.target.closest('.sample');if(!el)return;
  const i=D.order.indexOf(Number(el.dataset.id)), b=e.target.closest('button[data-label]');
  if(b){cur=i;role=ROLES.indexOf(b.closest('.role').dataset.role);give(b.dataset.label)}
  else if(i!==cur){cur=i;role=0;paint()}
});
$('#disagreements').addEventListener('change',onAmend);$('#disagreements').addEventListener('input',onAmend);
$('#reviewer').value=S.reviewer||(D.review&&D.review.reviewer)||'';
$('#reviewer').addEventListener('input',e=>{S.reviewer=e.target.value;save()});
$('#export').addEventListener('click',exportReview);
cur=Math.max(0,D.order.findIndex(id=>!complete(id)));role=Math.max(0,ROLES.findIndex(r=>!label(D.order[cur],r)));
if(revealed())showReveal();
paint();
"""


def _figure(value: float | None) -> str:
    """A figure as a reader wants it: 3 significant digits, '-' for none.

    >>> _figure(0.28618176042508353), _figure(None), _figure(1.0), _figure(-0.4666666)
    ('0.286', '-', '1', '-0.467')
    """
    return "-" if value is None else f"{value:.3g}"


def _script_json(data: Any) -> str:
    """JSON that is safe inside a <script> element (no '</script>' can close it early).

    >>> _script_json({"a": "</script>"})
    '{"a": "\\\\u003c/script>"}'
    """
    return json.dumps(data, default=str).replace("<", "\\u003c")


def _page_data(report: InspectionReport) -> dict[str, Any]:
    """What the page's script needs: the order, the revealed samples' scores and the review (``report`` is what a
    reader may see: no score of a sample not yet labelled is in it)."""
    read = [spec for spec in report.rewards if spec.role in agreement.READ_ROLES]
    samples = {
        s.id: {
            "scores": {spec.name: _figure(s.scores.get(spec.name)) for spec in report.rewards if s.scores},
            "said": {r.name: agreement.said(s.scores[r.name]) for r in read if s.scores.get(r.name) is not None},
            "read": {name: repr(value) for name, value in s.extracted.items() if value is not None},
            "errors": s.errors,
            "total": _figure(s.total),
        }
        for s in report.samples
    }
    review = report.review
    labels = review.labels if review else {}
    return {
        "id": report.id,
        "roles": report.read_roles,
        "order": [s.id for s in report.samples],
        "rewards": [{"name": spec.name, "role": spec.role} for spec in report.rewards],
        "read_rewards": [{"name": spec.name, "role": spec.role} for spec in read],
        "samples": samples,
        "review": None if review is None else {"reviewer": review.reviewer, "labels": labels},
        "revealed": review is not None
        and bool(labels)
        and all(role in labels.get(s.id, {}) for s in report.samples for role in report.read_roles),
        "recorded": {f"{a.sample_id}|{a.role}": {"label": a.label, "reason": a.reason} for a in review.amendments}
        if review
        else {},
    }


def _header(report: InspectionReport) -> str:
    e = html.escape
    reasons = "".join(f"<li>{e(reason)}</li>" for reason in report.verdict_reasons)
    rewards = ", ".join(f"<code>{e(s.name)}</code> ({e(s.role)}, weight {s.weight:g})" for s in report.rewards)
    roles = ", ".join(report.read_roles) or "nothing (no reward here judges what a person can)"
    return (
        f"<h1>Reward read {e(report.id)}</h1>"
        f"<p>Verdict: <span class='verdict'>{e(report.verdict)}</span></p><ul>{reasons}</ul>"
        f"<p>{len(report.samples)} samples from {e(report.source)}. Drawn: {e(report.draw)}</p>"
        f"<p>Rewards: {rewards}. You label: <b>{e(roles)}</b>; shaping rewards are shown after the reveal.</p>"
        f"<p class='muted'>{e(agreement.GATE_RULE)} Read each sample and judge it yourself, pass, fail or unsure, "
        "for each role, then export the file record_review takes. No score is in this page until record_review "
        "has your labels; reopen the page after it to see the scores, resolve each disagreement and export the "
        "amendments.</p>"
    )


def _bar() -> str:
    return (
        "<div class='bar'><label>Reviewer <input id='reviewer' placeholder='your name'></label>"
        "<span id='progress'></span><span id='where' class='muted'></span> "
        "<button id='export'>Export review</button>"
        " <span id='status'></span><div class='keys'>Keys: <kbd>p</kbd>/<kbd>1</kbd> pass · <kbd>f</kbd>/<kbd>2</kbd>"
        " fail · <kbd>u</kbd>/<kbd>3</kbd> unsure (then the next role, the next sample) · <kbd>j</kbd>/<kbd>k</kbd>"
        " or ↓/↑ next/previous sample · ←/→ role · Esc leaves a text field</div></div>"
    )


def _flags(report: InspectionReport) -> str:
    e = html.escape
    items = "".join(
        f"<li class='{f.severity}'>{e(f.severity)} <code>{e(f.code)}</code>"
        f"{f' ({e(f.reward)})' if f.reward else ''}: {e(f.message)}"
        + (f" <b>Change:</b> {e(f.fix)}" if f.fix else "")
        + (f"<span class='after'> Samples: {', '.join(map(str, f.evidence))}.</span>" if f.evidence else "")
        + "</li>"
        for f in report.flags
    )
    return f"<h2>Flags</h2><ul>{items or '<li>none</li>'}</ul>"


def _probes(report: InspectionReport) -> str:
    """Every hack probe: a made-up completion each reward should not pay for, beaten or not."""
    e = html.escape
    rows = "".join(
        f"<tr><td>{e(p.reward)}</td><td>{e(p.probe)}</td><td><pre>{e(short(p.completion, 400))}</pre></td>"
        f"<td>{_figure(p.score)}</td><td>{e(p.expected) or '-'}</td><td>{_figure(p.reference_score)}</td>"
        f"<td>{_figure(p.total)} ({_figure(p.total_bar)})</td>"
        f"<td>{f'<b>yes</b>: {e(p.why)}' if p.hacked else 'no'}</td></tr>"
        for p in report.probe_results
    )
    beaten = sum(p.hacked for p in report.probe_results)
    return (
        f"<details{' open' if beaten else ''}><summary><b>Hack probes</b>: {len(report.probe_results)} made-up "
        f"completions (not your samples), {beaten} beat a reward</summary><table><tr><th>reward</th><th>probe</th>"
        "<th>completion</th><th>score</th><th>an honest reward gives</th><th>correct answer's score</th>"
        f"<th>total (bar)</th><th>beats it</th></tr>{rows}</table></details>"
    )


def _after(report: InspectionReport) -> str:
    """The reveal's summary: disagreements to resolve, the recorded agreement, and the statistics."""
    e = html.escape
    roles = {spec.name: spec.role for spec in report.rewards}
    stats = "".join(
        f"<tr><td>{e(n)}</td><td>{e(roles.get(n, '-'))}</td><td>{_figure(s.mean)}</td><td>{_figure(s.std)}</td>"
        f"<td>{_figure(s.minimum)}</td><td>{_figure(s.maximum)}</td><td>{s.none_rate:.0%}</td>"
        f"<td>{s.failure_rate:.0%}</td><td>{_figure(s.length_correlation)}</td>"
        f"<td>{'-' if s.zero_variance_groups is None else f'{s.zero_variance_groups:.0%}'}</td></tr>"
        for n, s in report.stats.items()
    )
    recorded = report.review.agreement if report.review else []
    agreements = "".join(f"<li>{e(agreement.summarize(a))}</li>" for a in recorded)
    return (
        "<section class='after' id='reveal-summary'><h2>Disagreements</h2><p id='disagree-count'></p>"
        "<ol id='disagreements'></ol><p id='amend-count'></p>"
        + (f"<h2>Agreement recorded by record_review</h2><ul>{agreements}</ul>" if agreements else "")
        + "<h2>Statistics</h2><table><tr><th>reward</th><th>role</th><th>mean</th><th>std</th><th>min</th>"
        "<th>max</th><th>None</th><th>failures</th><th>r(length)</th><th>constant groups</th></tr>"
        f"{stats}</table></section>"
    )


def _sample(report: InspectionReport, sample: SampleResult) -> str:
    """One sample card, blind: columns, prompt, completion, a pass/fail/unsure row per read role."""
    e = html.escape
    columns = " ".join(
        f"<span><b>{e(str(k))}</b> <code>{e(_column(v))}</code></span>" for k, v in sample.columns.items()
    )
    roles = "".join(
        f"<div class='role' data-role='{e(role)}'><span class='name'>{e(role)}</span> "
        + " ".join(f"<button data-label='{v}'>{v} <kbd>{v[0]}</kbd></button>" for v in ("pass", "fail", "unsure"))
        + "</div>"
        for role in report.read_roles
    )
    carried = report.review.carried.get(sample.id) if report.review else None
    group = "" if sample.group is None else f" <span class='muted'>prompt group {sample.group}</span>"
    return (
        f"<section class='sample' id='s-{sample.id}' data-id='{sample.id}'><b>Sample {sample.id}</b>{group}"
        + (f" <span class='muted'>labelled in {e(carried)}</span>" if carried else "")
        + f"<span class='check before'></span> <span class='mark after'></span><div class='cols'>{columns}</div>"
        f"<pre class='prompt'>{e(prompt_text(sample.prompt))}</pre><pre class='completion'>{e(sample.completion)}</pre>"
        f"{roles}<ul class='scores after'></ul></section>"
    )


def _column(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def render_html(report: InspectionReport) -> str:
    """The reading page of a report as a reader may see it now (``render.visible``): label blind and export, then,
    once record_review revealed the scores, resolve and export (see the module's docstring)."""
    report = visible(report)
    e = html.escape
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>Reward read {e(report.id)}</title><style>{_STYLE}</style></head><body>"
        + _header(report)
        + _flags(report)
        + _probes(report)
        + _bar()
        + _after(report)
        + "<h2>Samples</h2>"
        + "".join(_sample(report, sample) for sample in report.samples)
        + "<h2>Export</h2><pre id='exported' class='muted'>Export review writes the JSON here too.</pre>"
        + f"<script type='application/json' id='report-data'>{_script_json(_page_data(report))}</script>"
        + f"<script>{_SCRIPT}</script></body></html>"
    )
