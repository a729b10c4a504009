"""Where ``rubric_judge``'s verdicts come from: a local model, an OpenAI-compatible endpoint, and a server of that
protocol around a local model.

- ``TransformersJudge``: a causal LM loaded once per process; each response's prompt runs once and its
  rubric questions continue from the cached prefix, in left-padded batches.
- ``OpenAIJudge``: ``POST {base_url}/chat/completions`` (stdlib urllib), one token with ``top_logprobs``.
- ``LocalJudgeServer``: the subset of ``POST /v1/chat/completions`` a judge needs (greedy decoding,
  ``max_tokens``, ``logprobs``, ``top_logprobs``) plus ``GET /v1/models``, in a thread; for the tests, or to
  serve the embedded SmolLM2 judge to another process with ``python -m skill.rewards.judge.backends``.

The local backend and the server share the loading, the chat rendering and the next-token log-probabilities,
and both backends read verdicts with ``verdict_from_top_logprobs``, so a local and a served copy of one model
give the same reward (within float rounding).

It has no authentication and binds 127.0.0.1 by default; do not expose it on a network.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from skill.errors import SkillError
from skill.rewards.judge.reward import TOP_LOGPROBS, Verdict, verdict_from_top_logprobs, yes_no_word, yes_probability

MAX_BODY_BYTES = 4 << 20
MAX_NEW_TOKENS = 512


@dataclass
class LoadedJudge:
    """A model loaded once per (path, device), with the ids of its yes/no token spellings."""

    model: Any
    tokenizer: Any
    yes_ids: list[int]
    no_ids: list[int]
    lock: threading.Lock = field(default_factory=threading.Lock)  # one forward at a time per model


_LOADED: dict[tuple[str, str], LoadedJudge] = {}
_LOAD_LOCK = threading.Lock()


def yes_no_token_ids(tokenizer: Any) -> tuple[list[int], list[int]]:
    """Ids of every vocabulary token whose text is yes or no in any case, with or without a leading space."""
    yes_ids, no_ids = [], []
    for token, token_id in tokenizer.get_vocab().items():
        if len(token) <= 8 and ("yes" in token.lower() or "no" in token.lower()):  # cheap filter before decoding
            word = yes_no_word(tokenizer.decode([token_id]))
            (yes_ids if word == "yes" else no_ids if word == "no" else []).append(token_id)
    if not yes_ids or not no_ids:
        raise SkillError("The judge's tokenizer has no single token for yes or no.", "Use another judge model.")
    return sorted(yes_ids), sorted(no_ids)


def load_judge(path: str, device: str = "auto") -> LoadedJudge:
    """Load a causal LM and its tokenizer for judging, once per process and (path, device), in eval mode."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    key = (str(path), device)
    with _LOAD_LOCK:
        if key not in _LOADED:
            tokenizer = AutoTokenizer.from_pretrained(path)
            model = AutoModelForCausalLM.from_pretrained(path, dtype="auto").to(device).eval()
            _LOADED[key] = LoadedJudge(model, tokenizer, *yes_no_token_ids(tokenizer))
        return _LOADED[key]


def chat_text(tokenizer: Any, messages: list[dict[str, str]]) -> str:
    """The prompt as text: the chat template with the assistant turn opened, or plain text without a template."""
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return "\n\n".join(str(message.get("content", "")) for message in messages) + "\n\nAnswer:"


def shared_prefix_groups(encoded: list[list[int]], min_shared: int = 16) -> list[tuple[list[int], int]]:
    """Runs of consecutive token sequences sharing a prefix (one response asked several questions), as
    (indices, shared length); a sequence sharing nothing with its neighbours stands alone with length 0.

    >>> shared_prefix_groups([[1, 2, 3, 4], [1, 2, 3, 5], [1, 2, 3, 6, 7], [1, 9]], min_shared=2)
    [([0, 1, 2], 3), ([3], 0)]
    """
    groups: list[tuple[list[int], int]] = []
    for index, ids in enumerate(encoded):
        if groups:
            members, shared = groups[-1]
            reference = encoded[members[0]][:shared] if len(members) > 1 else encoded[members[0]]
            common = next((k for k, (a, b) in enumerate(zip(reference, ids, strict=False)) if a != b), None)
            common = min(len(reference) if common is None else common, len(ids) - 1, len(encoded[members[0]]) - 1)
            if common >= min_shared and (len(members) == 1 or common == shared):
                groups[-1] = (members + [index], common)
                continue
        groups.append(([index], 0))
    return groups


def _left_pad(rows: list[list[int]], pad_id: int) -> tuple[Any, Any]:
    import torch

    width = max(len(row) for row in rows)
    ids = torch.tensor([[pad_id] * (width - len(row)) + row for row in rows])
    mask = torch.tensor([[0] * (width - len(row)) + [1] * len(row) for row in rows])
    return ids, mask


def next_token_logprobs(judge: LoadedJudge, texts: list[str], max_batch_tokens: int = 8192) -> Any:
    """Log-probabilities of the next token after each text, shape (len(texts), vocab), float32 on CPU.

    Consecutive texts with a common token prefix (the rubric's questions about one response) run the
    prefix once and only their different endings on its cached keys and values: the judge's cost is
    about one pass over each response, not one per criterion. Rows are left-padded in chunks of about
    ``max_batch_tokens`` tokens; explicit position ids and the attention mask make every row compute
    what it would alone, so batching and sharing change scores only by float rounding (~1e-6).
    """
    import torch

    encoded = [judge.tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]
    pad_id = judge.tokenizer.pad_token_id if judge.tokenizer.pad_token_id is not None else 0
    device = next(judge.model.parameters()).device
    result = torch.empty(len(texts), len(judge.tokenizer), dtype=torch.float32)

    def cost(group: tuple[list[int], int]) -> int:  # tokens a group feeds the model
        members, shared = group
        return shared + len(members) * max(len(encoded[i]) - shared for i in members)

    chunks: list[list[tuple[list[int], int]]] = []
    for group in sorted(shared_prefix_groups(encoded), key=cost):  # ascending: the last group bounds a chunk
        if chunks and (len(chunks[-1]) + 1) * cost(group) <= max_batch_tokens:
            chunks[-1].append(group)
        else:
            chunks.append([group])

    def forward(ids: Any, mask: Any, positions: Any, cache: Any = None, keep: bool = False) -> Any:
        inputs = {"input_ids": ids, "attention_mask": mask, "position_ids": positions}
        inputs = {key: value.to(device) for key, value in inputs.items()}
        return judge.model(**inputs, cache=cache, use_cache=keep, logits_to_keep=1)

    with judge.lock, torch.inference_mode():
        for chunk in chunks:
            rows = [i for members, _ in chunk for i in members]
            owners = torch.tensor([g for g, (members, _) in enumerate(chunk) for _ in members])
            lengths = torch.tensor([length for _, length in chunk])
            prefixes = [encoded[members[0]][:length] or [pad_id] for members, length in chunk]
            prefix_ids, prefix_mask = _left_pad(prefixes, pad_id)
            prefix_mask[lengths == 0] = 0  # a lone row shares nothing: its placeholder prefix is masked out
            cache = None
            if bool(prefix_mask.any()):
                prefix_positions = (prefix_mask.cumsum(-1) - 1).clamp(min=0)
                cache = forward(prefix_ids, prefix_mask, prefix_positions, keep=True).cache
                cache.reorder_cache(owners.to(device))  # one copy of its prefix's cache per row
            shared = lengths[owners]
            ids, mask = _left_pad([encoded[i][int(shared[k]) :] for k, i in enumerate(rows)], pad_id)
            positions = shared[:, None] + (mask.cumsum(-1) - 1).clamp(min=0)
            full_mask = mask if cache is None else torch.cat([prefix_mask[owners], mask], -1)
            logits = forward(ids, full_mask, positions, cache, keep=cache is not None).logits
            result[rows] = logits[:, -1, : len(judge.tokenizer)].float().log_softmax(-1).cpu()
    return result


def top_logprob_entries(tokenizer: Any, row: Any, count: int) -> list[dict[str, Any]]:
    """The ``count`` most likely tokens of one log-probability row, as OpenAI ``top_logprobs`` entries."""
    values, indices = row.topk(max(1, count))
    entries = []
    for token_id, logprob in zip(indices.tolist(), values.tolist(), strict=True):
        token = tokenizer.decode([token_id])
        entries.append({"token": token, "logprob": logprob, "bytes": list(token.encode("utf-8"))})
    return entries


@dataclass
class TransformersJudge:
    """The local backend: one batched forward, c from the yes/no spellings among the ``top_logprobs`` most likely
    next tokens (the same rule as the HTTP backend, so a local and a served copy of one model give one reward;
    ``top_logprobs=0`` sums every spelling in the vocabulary instead)."""

    model: str | None = None  # a local directory or the embedded id; None: the embedded SmolLM2
    device: str = "auto"
    max_batch_tokens: int = 8192
    top_logprobs: int = TOP_LOGPROBS

    def path(self) -> str:
        from skill.models.sources import embedded_model_dir, resolve_model_path

        return str(embedded_model_dir()) if self.model is None else resolve_model_path(self.model)

    def verdicts(self, conversations: list[list[dict[str, str]]]) -> list[Verdict | Exception]:
        if not conversations:
            return []
        judge = load_judge(self.path(), self.device)
        texts = [chat_text(judge.tokenizer, messages) for messages in conversations]
        logprobs = next_token_logprobs(judge, texts, self.max_batch_tokens)
        if self.top_logprobs <= 0:
            p = logprobs.exp()
            p_yes, p_no = p[:, judge.yes_ids].sum(-1).tolist(), p[:, judge.no_ids].sum(-1).tolist()
            return [Verdict(yes_probability(y, n), y + n) for y, n in zip(p_yes, p_no, strict=True)]
        verdicts: list[Verdict | Exception] = []
        for row in logprobs:
            top = top_logprob_entries(judge.tokenizer, row, self.top_logprobs)
            verdicts.append(verdict_from_top_logprobs(top, top[0]["token"]))
        return verdicts


@dataclass
class OpenAIJudge:
    """Chat completions over HTTP (stdlib urllib): one token, top-20 logprobs, parallel requests."""

    base_url: str  # ends in /v1, as for OpenAI's client
    model: str
    api_key_env: str | None = None
    timeout: float = 60.0
    max_concurrency: int = 8
    logprobs: bool = True
    top_logprobs: int = TOP_LOGPROBS

    def request(self, messages: list[dict[str, str]]) -> dict[str, Any]:
        """One chat-completions call; the parsed JSON body."""
        import urllib.parse
        import urllib.request

        body: dict[str, Any] = {"model": self.model, "messages": messages, "max_tokens": 1, "temperature": 0.0}
        if self.logprobs:
            body.update(logprobs=True, top_logprobs=self.top_logprobs)
        headers = {"Content-Type": "application/json"}
        if self.api_key_env:
            headers["Authorization"] = f"Bearer {os.environ[self.api_key_env]}"
        url = self.base_url.rstrip("/") + "/chat/completions"
        request = urllib.request.Request(url, json.dumps(body).encode(), headers, method="POST")
        # A loopback judge never goes through an HTTP(S)_PROXY from the environment.
        loopback = urllib.parse.urlsplit(url).hostname in ("127.0.0.1", "localhost", "::1")
        opener = urllib.request.build_opener(*([urllib.request.ProxyHandler({})] if loopback else []))
        with opener.open(request, timeout=self.timeout) as response:
            return json.loads(response.read())

    def verdict(self, messages: list[dict[str, str]]) -> Verdict:
        choice = self.request(messages)["choices"][0]
        text = (choice.get("message") or {}).get("content")
        entries = (choice.get("logprobs") or {}).get("content") or []
        top: list[dict[str, Any]] = []
        if entries:
            top = list(entries[0].get("top_logprobs") or []) + [entries[0]]
        return verdict_from_top_logprobs(top, text)

    def verdicts(self, conversations: list[list[dict[str, str]]]) -> list[Verdict | Exception]:
        from concurrent.futures import ThreadPoolExecutor

        def safe(messages: list[dict[str, str]]) -> Verdict | Exception:
            try:
                return self.verdict(messages)
            except Exception as exc:  # one failed request fails its completion, not the batch
                return exc

        if not conversations:
            return []
        with ThreadPoolExecutor(max_workers=max(1, min(self.max_concurrency, len(conversations)))) as pool:
            return list(pool.map(safe, conversations))


def chat_completion(judge: LoadedJudge, body: dict[str, Any], model_name: str) -> dict[str, Any]:
    """Answer one chat-completions request greedily, in OpenAI's response format."""
    import torch

    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages must be a non-empty list")
    max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
    if not 1 <= max_tokens <= MAX_NEW_TOKENS:
        raise ValueError(f"max_tokens must be between 1 and {MAX_NEW_TOKENS}")
    top_count = int(body.get("top_logprobs") or 0)
    text = chat_text(judge.tokenizer, messages)
    prompt_ids = judge.tokenizer(text, add_special_tokens=False)["input_ids"]
    rows = next_token_logprobs(judge, [text])  # the first token exactly as the batched backend computes it
    tokens = [int(rows[0].argmax())]
    if max_tokens > 1 and tokens[0] != judge.tokenizer.eos_token_id:
        with judge.lock, torch.inference_mode():
            out = judge.model.generate(
                torch.tensor([prompt_ids], device=judge.model.device),
                do_sample=False,
                max_new_tokens=max_tokens,
                output_logits=True,
                return_dict_in_generate=True,
                pad_token_id=judge.tokenizer.pad_token_id,
            )
        tokens = out.sequences[0, len(prompt_ids) :].tolist()
        rows = torch.cat(
            [
                rows,
                torch.stack([step[0, : len(judge.tokenizer)].float().log_softmax(-1).cpu() for step in out.logits[1:]]),
            ]
        )
    finish = "length"
    if judge.tokenizer.eos_token_id in tokens:
        tokens, finish = tokens[: tokens.index(judge.tokenizer.eos_token_id)], "stop"
    choice: dict[str, Any] = {
        "index": 0,
        "finish_reason": finish,
        "logprobs": None,
        "message": {"role": "assistant", "content": judge.tokenizer.decode(tokens)},
    }
    if body.get("logprobs"):
        content = []
        for token_id, row in zip(tokens, rows, strict=False):
            token = judge.tokenizer.decode([token_id])
            content.append(
                {
                    "token": token,
                    "logprob": float(row[token_id]),
                    "bytes": list(token.encode("utf-8")),
                    "top_logprobs": top_logprob_entries(judge.tokenizer, row, top_count) if top_count else [],
                }
            )
        choice["logprobs"] = {"content": content}
    usage = {"prompt_tokens": len(prompt_ids), "completion_tokens": len(tokens)}
    return {
        "id": f"chatcmpl-local-{time.time_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model_name,
        "choices": [choice],
        "usage": {**usage, "total_tokens": sum(usage.values())},
    }


class _Handler(BaseHTTPRequestHandler):
    server: _JudgeHTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # keep test and server output quiet
        pass

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str) -> None:
        self._send(status, {"error": {"message": message, "type": "invalid_request_error", "code": status}})

    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            self._send(200, {"object": "list", "data": [{"id": self.server.model_name, "object": "model"}]})
        else:
            self._error(404, f"no route {self.path}")

    def do_POST(self) -> None:
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            return self._error(404, f"no route {self.path}")
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            return self._error(413, "request body too large")
        try:
            body = json.loads(self.rfile.read(length))
            if not isinstance(body, dict):
                raise ValueError("the body must be a JSON object")
            payload = chat_completion(self.server.judge, body, self.server.model_name)
        except (ValueError, TypeError, KeyError) as exc:
            return self._error(400, str(exc))
        except Exception as exc:  # a model failure is the server's, not the request's
            return self._error(500, f"{type(exc).__name__}: {exc}")
        self._send(200, payload)


class _JudgeHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    judge: LoadedJudge
    model_name: str


class LocalJudgeServer:
    """The OpenAI-compatible judge endpoint in a background thread; ``base_url`` ends in ``/v1``.

    The model loads in the constructor, so a bad path fails here rather than on the first request.
    Use as a context manager, or call ``close()``.
    """

    def __init__(
        self,
        model: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        device: str = "cpu",
        model_name: str = "local-judge",
    ) -> None:
        from skill.models.sources import embedded_model_dir, resolve_model_path

        path = str(embedded_model_dir()) if model is None else resolve_model_path(model)
        self.httpd = _JudgeHTTPServer((host, port), _Handler)
        self.httpd.judge = load_judge(path, device)
        self.httpd.model_name = model_name
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), name="judge-server", daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)

    def __enter__(self) -> LocalJudgeServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def main(argv: list[str] | None = None) -> None:
    """``python -m skill.rewards.judge.backends [--model DIR] [--port N]``: serve a judge until interrupted."""
    parser = argparse.ArgumentParser(description="Serve a local judge model over OpenAI chat completions.")
    parser.add_argument("--model", default=None, help="local model directory (default: embedded SmolLM2)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--name", default="local-judge", help="the model name the server reports")
    args = parser.parse_args(argv)
    server = LocalJudgeServer(args.model, args.host, args.port, args.device, args.name)
    print(f"judge serving {args.name} at {server.base_url}", flush=True)
    try:
        server.thread.join()
    except KeyboardInterrupt:
        server.close()


if __name__ == "__main__":
    main()
