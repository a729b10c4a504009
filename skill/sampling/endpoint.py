"""The endpoint engine: an OpenAI-compatible ``/v1/completions`` server the user already runs.

Each prompt is one request for ``n`` completions, sent as token ids rendered by the model's own tokenizer
(``sampling.prompts``), with the engines' common end tokens (``stop_token_ids``, a vLLM extension other servers
ignore). No seed is sent: the server's own generator samples (vLLM's CPU build fails on per-request seeds,
"CPU Generator does not use offset", 0.31, and takes its server down), so an endpoint's samples are not
reproducible from the call. vLLM returns each completion's token ids (``return_token_ids``); from a server
that does not, a completion's length is its text re-tokenized. The server must serve the model the call names:
``/v1/models`` is asked first. The API key comes from the environment variable the engine names, never from a
request. Requests run a few at a time, so the server batches them.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from skill.errors import SkillError
from skill.models.hub import LocalModel
from skill.sampling.progress import DecodingReport, Progress, ShouldStop, stop_if_asked
from skill.sampling.prompts import end_token_ids, load_tokenizer, prompt_ids
from skill.sampling.schema import Prompt, Sampled, SampledGroup, SamplingEngine, SamplingSettings, engine_record

REQUESTS_AT_ONCE = 8
TIMEOUT_S = 600  # one request: n completions of one prompt on a busy server


def post(engine: SamplingEngine, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """One JSON call to the endpoint (GET without a body); a failure says what the server answered."""
    url = engine.base_url.rstrip("/") + path  # type: ignore[union-attr]  # an endpoint always has one
    headers = {"Content-Type": "application/json"}
    key = os.environ.get(engine.api_key_env)
    if key:
        headers["Authorization"] = f"Bearer {key}"
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers=headers, method="GET" if body is None else "POST")
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:
            return json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")[:400]
        raise SkillError(
            f"The endpoint {url} answered {exc.code}: {detail}",
            f"Check base_url (the API root, e.g. http://127.0.0.1:8000/v1), served_model, and the key in "
            f"${engine.api_key_env}.",
        ) from None
    except (urllib.error.URLError, OSError) as exc:
        raise SkillError(
            f"Cannot reach the endpoint {url}: {getattr(exc, 'reason', exc)}.",
            "Start the server (e.g. `vllm serve MODEL`), or send the base_url it listens on.",
        ) from None


def served_name(engine: SamplingEngine, copy: LocalModel) -> str:
    """The name to ask for, checked against what the server lists."""
    wanted = engine.served_model or copy.name
    listed = [entry.get("id") for entry in post(engine, "/models").get("data", [])]
    if wanted not in listed:
        raise SkillError(
            f"The endpoint {engine.base_url} serves {listed}, not {wanted!r}.",
            "Send served_model naming the model it serves (it must be the model route_check measures), or start "
            "the server on that model.",
        )
    return wanted


def sample_endpoint(
    copy: LocalModel,
    engine: SamplingEngine,
    prompts: list[Prompt],
    settings: SamplingSettings,
    progress: Progress | None,
    should_stop: ShouldStop | None,
) -> Sampled:
    tokenizer = load_tokenizer(copy.path)
    name = served_name(engine, copy)
    ends = end_token_ids(tokenizer, copy.path)
    report = DecodingReport(len(prompts) * settings.n, settings.max_new_tokens, progress, should_stop)

    def one(index: int) -> SampledGroup:
        body = {
            "model": name,
            "prompt": prompt_ids(tokenizer, prompts[index]),
            "n": settings.n,
            "max_tokens": settings.max_new_tokens,
            "temperature": settings.temperature,
            "top_p": settings.top_p if settings.temperature > 0 else 1.0,
            "stop_token_ids": ends,
            "return_token_ids": True,
        }
        choices = sorted(post(engine, "/completions", body)["choices"], key=lambda choice: choice["index"])
        return SampledGroup(
            prompt_index=index,
            prompt=prompts[index],
            completions=[choice["text"] for choice in choices],
            token_counts=[completion_tokens(tokenizer, choice, ends) for choice in choices],
            truncated=[choice.get("finish_reason") == "length" for choice in choices],
        )

    groups: list[SampledGroup] = []
    with ThreadPoolExecutor(REQUESTS_AT_ONCE) as pool:
        for start in range(0, len(prompts), REQUESTS_AT_ONCE):
            stop_if_asked(should_stop, f"sampling stopped after {report.done}/{report.total} completions")
            indices = range(start, min(start + REQUESTS_AT_ONCE, len(prompts)))
            report.start_batch(len(indices) * settings.n)
            groups.extend(pool.map(one, indices))
            report.end_batch()
    used = engine_record("endpoint", server_version(engine), engine.base_url or "", None, copy, settings, seeded=False)
    return Sampled(groups=groups, sampled_with=used)


def completion_tokens(tokenizer: Any, choice: dict[str, Any], ends: list[int]) -> int:
    """A completion's length in tokens, its end token aside: from the ids vLLM returns, else re-tokenized.

    >>> completion_tokens(None, {"token_ids": [5, 6, 2], "finish_reason": "stop"}, [2])
    2
    """
    ids = choice.get("token_ids")
    if ids is None:
        return len(tokenizer(choice["text"], add_special_tokens=False)["input_ids"])
    return len(ids) - (bool(ids) and ids[-1] in ends)


def server_version(engine: SamplingEngine) -> str:
    """What the server says its version is (vLLM answers ``/version`` beside the API root), else 'unknown'."""
    root = (engine.base_url or "").rstrip("/").removesuffix("/v1")
    try:
        return "vllm " + post(engine.model_copy(update={"base_url": root}), "/version").get("version", "unknown")
    except SkillError:
        return "unknown"
