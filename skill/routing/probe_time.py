"""How long a route_check probe takes on this machine's CPU, before it runs and from a probe that ran.

Sampling with transformers on CPU costs more per token as completions grow (the attention over a
longer cache, a batch of 64 sequences), so the time of a probe is modelled as
``sequences x tokens x (1 + tokens / LENGTH_SCALE) / RATE``. Fitted to the embedded
SmolLM2-135M on 2 CPU cores shared with other work (load average 2-4), sampling the addition
prompts: 8 prompts x 8 x 16 tokens took 10.6 s, 16 x 8 x 32 took 62 s, 8 x 8 x 64 took 79 s.
Other models scale by their parameter count (a rough guide: compute per token grows with it).
A probe that ran measures its own rate, and estimates for larger probes scale from that.
"""

from __future__ import annotations

import os

from pydantic import BaseModel, Field

from skill.errors import SkillError
from skill.models.size import parameters_billions
from skill.models.sources import is_embedded

EMBEDDED_PARAMETERS_B = 0.135  # the size of the model the rate was fitted on
FITTED_LOAD_PER_CORE = 1.5  # the 1-minute load average the rate was fitted under: 2-4 on 2 cores
RATE = 136.0  # budget tokens per second at short lengths, embedded model, 2 busy cores (see the docstring)
LENGTH_SCALE = 39.5  # tokens: where the per-token cost has doubled
DEFAULT_PROBE = (8, 8, 32)  # prompts x samples x tokens: about 30 s a round for the embedded model on 2 CPU cores
LARGER_PROBES = ((32, 8, 256), (32, 8, 64))  # a probe for long answers, and one with short answers


class ProbeEstimate(BaseModel):
    """The expected wall time of one probe size on this machine."""

    num_prompts: int
    n: int
    max_new_tokens: int
    seconds: float = Field(description="One sampling round; a probe where nothing passes samples a second round.")
    basis: str = Field(description="Where the rate comes from.")


def length_cost(max_new_tokens: int) -> float:
    """Relative cost of a completion budget: tokens, weighted by the growing per-token cost.

    >>> round(length_cost(64) / length_cost(16), 1)
    7.5
    """
    return max_new_tokens * (1.0 + max_new_tokens / LENGTH_SCALE)


def parameters_b(model: str) -> float | None:
    """The model's size in billions (``models.size``: the shape table, else its config.json, read or fetched), or
    None when it cannot be read: the time estimate is advice, and its absence never stops a route."""
    try:
        return parameters_billions(model)
    except SkillError:
        return None


def estimate_before(model: str, num_prompts: int, n: int, max_new_tokens: int) -> ProbeEstimate | None:
    """The time of one sampling round, from the fitted rate of the embedded model scaled by size; None when the
    model's size is unknown here.

    >>> estimate = estimate_before("embedded:SmolLM2-135M-Instruct", 8, 8, 32)
    >>> 20 < estimate.seconds < 40
    True
    >>> estimate_before("embedded:SmolLM2-135M-Instruct", 32, 8, 256).seconds > 3000
    True
    """
    size = parameters_b(model)
    if size is None:
        return None
    seconds = num_prompts * n * length_cost(max_new_tokens) / RATE * max(size, 0.01) / EMBEDDED_PARAMETERS_B
    basis = "fitted on the embedded 135M model on 2 busy CPU cores" + (
        "" if is_embedded(model) else f", scaled to {size:.2g}B parameters (rough)"
    )
    return ProbeEstimate(
        num_prompts=num_prompts, n=n, max_new_tokens=max_new_tokens, seconds=round(seconds), basis=basis
    )


def estimate_from(
    measured_seconds: float, prompts: int, n: int, max_new_tokens: int, target: tuple[int, int, int]
) -> ProbeEstimate:
    """Scale a measured sampling round to another probe size.

    >>> estimate_from(30.0, 8, 8, 32, (32, 8, 32)).seconds
    120.0
    """
    to_prompts, to_n, to_tokens = target
    ratio = (to_prompts * to_n * length_cost(to_tokens)) / (prompts * n * length_cost(max_new_tokens))
    return ProbeEstimate(
        num_prompts=to_prompts,
        n=to_n,
        max_new_tokens=to_tokens,
        seconds=round(measured_seconds * ratio),
        basis=f"scaled from this probe's own sampling time ({measured_seconds:.0f} s for {prompts} x {n} x "
        f"{max_new_tokens} tokens)",
    )


def machine_load() -> tuple[float, int]:
    """This machine's 1-minute load average and the cores this process may run on ((0, 1) where unknown)."""
    try:
        load = os.getloadavg()[0]
    except (OSError, AttributeError):  # not every platform reports one
        return 0.0, 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return load, cores


def busy_factor(load: float, cores: int) -> float:
    """How many times longer than at the fitted rate sampling takes at this load, at the least: a process gets
    about its share of a busy machine's cores (threads contending for them can make it several times worse: an
    8 x 8 x 32 probe estimated at 30 s took 611 s at load average 5-8 on 2 cores).

    >>> busy_factor(3.0, 2), busy_factor(9.0, 2), busy_factor(9.0, 16)
    (1.0, 3.0, 1.0)
    """
    return max(1.0, load / cores / FITTED_LOAD_PER_CORE)


def describe(estimate: ProbeEstimate) -> str:
    """One line an agent can plan with.

    >>> describe(ProbeEstimate(num_prompts=32, n=8, max_new_tokens=256, seconds=3720, basis="b"))
    '32 prompts x 8 x 256 tokens: about 62 min per sampling round here (b)'
    """
    seconds = estimate.seconds
    when = f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"
    return (
        f"{estimate.num_prompts} prompts x {estimate.n} x {estimate.max_new_tokens} tokens: about {when} per "
        f"sampling round here ({estimate.basis})"
    )


def probe_advice(model: str) -> tuple[str, list[ProbeEstimate]]:
    """How to measure, with the time the default probe and larger ones take here (when the model's size is known).

    >>> advice, estimates = probe_advice("embedded:SmolLM2-135M-Instruct")
    >>> [(e.num_prompts, e.max_new_tokens) for e in estimates], "Expected here: 8 prompts x 8 x 32 tokens" in advice
    ([(8, 32), (32, 256), (32, 64)], True)
    """
    estimates = [e for e in (estimate_before(model, *size) for size in (DEFAULT_PROBE, *LARGER_PROBES)) if e]
    timing = f" Expected here: {'; '.join(describe(e) for e in estimates[:2])}." if estimates else ""
    return "Probe the base model: send probe with a verifier to measure its success rate." + timing, estimates
