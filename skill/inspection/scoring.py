"""Scoring in a fresh process: an inspection scores the reward code on disk, the code it fingerprints.

A long-running server that imported a reward module earlier would otherwise score the stale module
while fingerprinting the edited file. ``score_fresh`` runs ``python -m skill.inspection.scoring JOB OUT``:
the child fingerprints the rewards, imports and runs them on the samples and the hack probes, then
fingerprints them again and refuses when a file changed in between. The server itself never imports a
user's reward module for an inspection, and a reward that exits the process (``sys.exit``, ``os._exit``
on model output) ends the child, not the server.

The child's import path is the parent's (``absolute_paths``), so both find the same modules.

Owns: ``score_fresh`` and the child's ``main``. May import: ``inspection`` (fingerprint, hack_probes,
schema), ``rewards``, ``errors``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from skill.absolute_paths import child_environment
from skill.errors import SkillError
from skill.inspection.hack_probes import probe_rewards
from skill.inspection.schema import Flag, ProbeResult, SampleResult, SuppliedSample
from skill.models.hub import local_copy
from skill.rewards.base import call_reward
from skill.rewards.fingerprint import reward_fingerprint
from skill.rewards.registry import build_reward_functions
from skill.rewards.spec import RewardSpec
from skill.rewards.trl_inputs import PSEUDO_CHARS_PER_TOKEN, pseudo_token_ids, reward_columns
from skill.sampling.prompts import load_tokenizer


class Scored(BaseModel):
    """What the child measured: every sample as each reward judged it, timings, probes, the fingerprint."""

    results: list[SampleResult]
    timing: dict[str, float]
    probes: list[ProbeResult]
    fingerprint: str
    fingerprint_parts: dict[str, str]
    completion_ids: str = Field(description="Where the completion_ids the rewards were given came from.")
    flags: list[Flag] = Field(default_factory=list, description="What the reader must know about the scoring.")


class ObservedIds(list[list[int]]):
    """Token-id lists that note whether a reward read them (pseudo-ids are flagged only where one did)."""

    read = False

    def __iter__(self) -> Iterator[list[int]]:
        self.read = True
        return super().__iter__()

    def __getitem__(self, index: Any) -> Any:
        self.read = True
        return super().__getitem__(index)

    def __len__(self) -> int:
        self.read = True
        return super().__len__()


def completion_token_ids(model: str | None, completions: list[str]) -> tuple[list[list[int]], str]:
    """The completions' token ids from ``model``'s tokenizer (its files fetched from the Hub when needed), else
    :func:`pseudo_token_ids` when it cannot be had; and a sentence saying which. TRL's ids are the sampled
    tokens; re-tokenizing the text gives the same count up to merges at the edges (and without the end-of-turn
    token TRL keeps).
    """
    reason = "no model was named (send tokenizer: the model you train)"
    if model is not None:
        try:
            tokenizer = load_tokenizer(local_copy(model, "tokenizer").path)
            ids = tokenizer(completions, add_special_tokens=False)["input_ids"]
            return [list(map(int, row)) for row in ids], f"tokenized with {model}'s tokenizer"
        except SkillError as exc:  # unreachable, gated, not a tokenizer: say so, approximate
            reason = f"{model}'s tokenizer could not be had ({exc.problem.rstrip('.')})"
    return [pseudo_token_ids(text) for text in completions], (
        f"pseudo-ids, one per {PSEUDO_CHARS_PER_TOKEN} characters: {reason}"
    )


def pseudo_ids_flag(origin: str, readers: list[str]) -> list[Flag]:
    """A warning when a reward read pseudo-ids: its scores rest on approximate token counts."""
    if not readers or not origin.startswith("pseudo-ids"):
        return []
    return [
        Flag(
            code="pseudo_completion_ids",
            severity="warning",
            reward=readers[0] if len(readers) == 1 else None,
            message=f"{', '.join(readers)} read completion_ids, which here are {origin}; in training they are "
            "the policy's sampled token ids, so length-based scores can differ.",
            fix="Send tokenizer (the model you train, on this machine) with the inspection, or inspect with "
            "generate: its model's tokenizer gives real ids.",
        )
    ]


def score_samples(
    specs: list[RewardSpec], functions: list[Any], samples: list[SuppliedSample], model: str | None = None
) -> tuple[list[SampleResult], dict[str, float], list[Flag], str]:
    """Each reward on every sample (one batch per reward, called as TRL calls it: by keyword, the dataset columns
    TRL passes, chat prompts' completions as assistant messages, ``completion_ids`` from
    :func:`completion_token_ids`, async rewards awaited), with errors, extracted answers, the pseudo-id flag and
    where the ids came from.
    """
    prompts = [sample.prompt for sample in samples]
    completions = [sample.completion for sample in samples]
    keys = sorted({key for sample in samples for key in sample.columns})
    columns = reward_columns({key: [sample.columns.get(key) for sample in samples] for key in keys})
    token_ids, origin = completion_token_ids(model, completions)
    timing: dict[str, float] = {}
    readers: list[str] = []
    results = [
        SampleResult(
            id=i, prompt=s.prompt, completion=s.completion, columns=s.columns, group=s.group, scores={}, total=None
        )
        for i, s in enumerate(samples)
    ]
    for function in functions:
        name = function.__name__
        started = time.perf_counter()
        observed = ObservedIds(token_ids)
        scores = call_reward(function, prompts, completions, completion_ids=observed, **columns)
        timing[name] = time.perf_counter() - started
        readers += [name] if observed.read else []
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
    return results, timing, pseudo_ids_flag(origin, readers), origin


def _child(job: dict[str, Any]) -> Scored:
    specs = [RewardSpec.model_validate(spec) for spec in job["rewards"]]
    samples = [SuppliedSample.model_validate(sample) for sample in job["samples"]]
    before = reward_fingerprint(specs)
    columns = {key for sample in samples for key in sample.columns}
    functions = build_reward_functions(specs, columns=columns)  # a user reward needing a missing column: refused
    results, timing, flags, origin = score_samples(specs, functions, samples, job.get("model"))
    probes = probe_rewards(specs, {f.__name__: f for f in functions}, results)
    after = reward_fingerprint(specs)
    if after != before:
        changed = [name.split(":", 1)[1] for name, part in after[1].items() if before[1].get(name) != part]
        raise SkillError(
            f"Reward {', '.join(changed)} changed on disk while it was being inspected.",
            "Inspect again once the files stop changing.",
        )
    return Scored(
        results=results,
        timing=timing,
        probes=probes,
        fingerprint=after[0],
        fingerprint_parts=after[1],
        completion_ids=origin,
        flags=flags,
    )


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


def score_fresh(specs: list[RewardSpec], samples: list[SuppliedSample], model: str | None = None) -> Scored:
    """Score the samples and probe the rewards in a fresh Python process (see the module docstring); ``model``'s
    tokenizer, when on this machine, gives the rewards their ``completion_ids``."""
    with tempfile.TemporaryDirectory(prefix="grpo-rlvr-score-") as folder:
        job, out = Path(folder) / "job.json", Path(folder) / "out.json"
        payload = {
            "rewards": [s.model_dump(mode="json") for s in specs],
            "samples": [s.model_dump() for s in samples],
            "model": model,
        }
        job.write_text(json.dumps(payload, default=str))
        run = subprocess.run(
            [sys.executable, "-m", "skill.inspection.scoring", str(job), str(out)],
            capture_output=True,
            text=True,
            env=child_environment(whole_import_path=True),
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
