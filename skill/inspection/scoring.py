"""Scoring in a fresh process: an inspection scores the reward code on disk, the code it fingerprints.

A long-running server that imported a reward module earlier would otherwise score the stale module
while fingerprinting the edited file. ``score_fresh`` runs ``python -m skill.inspection.scoring JOB OUT``:
the child fingerprints the rewards, imports and runs them on the samples and the hack probes, then
fingerprints them again and refuses when a file changed in between. The server itself never imports a
user's reward module for an inspection, and a reward that exits the process (``sys.exit``, ``os._exit``
on model output) ends the child, not the server.

The child's import path is the parent's (``PYTHONPATH``), so both find the same modules.

Owns: ``score_fresh`` and the child's ``main``. May import: ``inspection`` (fingerprint, hack_probes,
schema), ``rewards``, ``errors``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from skill.errors import SkillError
from skill.inspection.fingerprint import reward_fingerprint
from skill.inspection.hack_probes import probe_rewards
from skill.inspection.schema import ProbeResult, SampleResult, SuppliedSample
from skill.rewards.registry import build_reward_functions
from skill.rewards.spec import RewardSpec


class Scored(BaseModel):
    """What the child measured: every sample as each reward judged it, timings, probes, the fingerprint."""

    results: list[SampleResult]
    timing: dict[str, float]
    probes: list[ProbeResult]
    fingerprint: str
    fingerprint_parts: dict[str, str]


def score_samples(
    specs: list[RewardSpec], functions: list[Any], samples: list[SuppliedSample]
) -> tuple[list[SampleResult], dict[str, float]]:
    """Each reward on every sample (one batch per reward, as TRL calls it), with errors and extracted answers."""
    prompts = [sample.prompt for sample in samples]
    completions = [sample.completion for sample in samples]
    keys = sorted({key for sample in samples for key in sample.columns})
    columns = {key: [sample.columns.get(key) for sample in samples] for key in keys}
    timing: dict[str, float] = {}
    results = [
        SampleResult(
            id=i, prompt=s.prompt, completion=s.completion, columns=s.columns, group=s.group, scores={}, total=None
        )
        for i, s in enumerate(samples)
    ]
    for function in functions:
        name = function.__name__
        started = time.perf_counter()
        scores = function(prompts, completions, **columns)
        timing[name] = time.perf_counter() - started
        errors = getattr(function, "last_item_errors", [None] * len(samples))
        extract = getattr(function, "extract", None)
        for result, score, error in zip(results, scores, errors, strict=True):
            result.scores[name] = score
            if error:
                result.errors[name] = error
            if extract is not None:
                result.extracted[name] = extract(result.completion)
    for result in results:
        values = [result.scores[f.__name__] for f in functions]
        if all(value is not None for value in values):
            result.total = sum(spec.weight * value for spec, value in zip(specs, values, strict=True))
    return results, timing


def _child(job: dict[str, Any]) -> Scored:
    specs = [RewardSpec.model_validate(spec) for spec in job["rewards"]]
    samples = [SuppliedSample.model_validate(sample) for sample in job["samples"]]
    before = reward_fingerprint(specs)
    functions = build_reward_functions(specs)
    results, timing = score_samples(specs, functions, samples)
    probes = probe_rewards(specs, {f.__name__: f for f in functions}, results)
    after = reward_fingerprint(specs)
    if after != before:
        changed = [name.split(":", 1)[1] for name, part in after[1].items() if before[1].get(name) != part]
        raise SkillError(
            f"Reward {', '.join(changed)} changed on disk while it was being inspected.",
            "Inspect again once the files stop changing.",
        )
    return Scored(results=results, timing=timing, probes=probes, fingerprint=after[0], fingerprint_parts=after[1])


def main(argv: list[str]) -> int:
    job_path, out_path = Path(argv[0]), Path(argv[1])
    try:
        answer: dict[str, Any] = {"scored": _child(json.loads(job_path.read_text())).model_dump(mode="json")}
    except SkillError as exc:
        answer = {"error": {"problem": exc.problem, "fix": exc.fix}}
    except Exception:  # ours, not the caller's: the parent raises it as an internal error with this traceback
        answer = {"internal": traceback.format_exc()}
    out_path.write_text(json.dumps(answer, default=str))
    return 0


def _import_path() -> str:
    return os.pathsep.join(os.path.abspath(entry or os.curdir) for entry in sys.path)


def score_fresh(specs: list[RewardSpec], samples: list[SuppliedSample]) -> Scored:
    """Score the samples and probe the rewards in a fresh Python process (see the module docstring)."""
    with tempfile.TemporaryDirectory(prefix="grpo-rlvr-score-") as folder:
        job, out = Path(folder) / "job.json", Path(folder) / "out.json"
        payload = {"rewards": [s.model_dump(mode="json") for s in specs], "samples": [s.model_dump() for s in samples]}
        job.write_text(json.dumps(payload, default=str))
        run = subprocess.run(
            [sys.executable, "-m", "skill.inspection.scoring", str(job), str(out)],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": _import_path()},
            stdin=subprocess.DEVNULL,
            check=False,
        )
        if not out.is_file():
            tail = (run.stderr or run.stdout or "").strip().splitlines()[-5:]
            raise SkillError(
                f"The scoring process ended (exit status {run.returncode}) before the rewards returned: "
                f"{' | '.join(tail) or 'no output'}.",
                "A reward must not exit the process or crash the interpreter on model output; fix it and inspect "
                "again.",
            )
        answer = json.loads(out.read_text())
    if "error" in answer:
        raise SkillError(answer["error"]["problem"], answer["error"]["fix"])
    if "internal" in answer:
        raise RuntimeError(f"the scoring process failed:\n{answer['internal']}")
    return Scored.model_validate(answer["scored"])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
