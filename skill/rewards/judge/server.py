"""A loopback judge server: the OpenAI chat-completions protocol around a local model.

``LocalJudgeServer`` answers the subset of ``POST /v1/chat/completions`` a judge needs (greedy decoding,
``max_tokens``, ``logprobs``, ``top_logprobs``) plus ``GET /v1/models``, in a thread: for the tests, or to
serve the embedded SmolLM2 judge to another process with ``python -m skill.rewards.judge.server``. The first
token's log-probabilities are computed exactly as the transformers backend computes them, so the ``openai``
backend pointed at this server gives the same reward as the local one.

It has no authentication and binds 127.0.0.1 by default; do not expose it on a network.

May import: ``skill.rewards.judge.backends``, ``skill.models``.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from skill.models.sources import embedded_model_dir, resolve_model_path
from skill.rewards.judge.backends import LoadedJudge, chat_text, load_judge, next_token_logprobs, top_logprob_entries

MAX_BODY_BYTES = 4 << 20
MAX_NEW_TOKENS = 512


def _generation_limits(body: dict[str, Any]) -> tuple[list[dict[str, str]], int, int]:
    """The messages, the token limit and the top log-probability count of a request; ValueError if bad."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages must be a non-empty list")
    max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
    if not 1 <= max_tokens <= MAX_NEW_TOKENS:
        raise ValueError(f"max_tokens must be between 1 and {MAX_NEW_TOKENS}")
    return messages, max_tokens, int(body.get("top_logprobs") or 0)


def _greedy_tokens(judge: LoadedJudge, text: str, prompt_ids: list[int], max_tokens: int) -> tuple[list[int], Any]:
    """Greedy tokens after the prompt and one log-probability row per token (the first exactly as the
    batched backend computes it)."""
    import torch

    rows = next_token_logprobs(judge, [text])
    tokens = [int(rows[0].argmax())]
    if max_tokens == 1 or tokens[0] == judge.tokenizer.eos_token_id:
        return tokens, rows
    with judge.lock, torch.inference_mode():
        out = judge.model.generate(
            torch.tensor([prompt_ids], device=judge.model.device),
            do_sample=False,
            max_new_tokens=max_tokens,
            output_logits=True,
            return_dict_in_generate=True,
            pad_token_id=judge.tokenizer.pad_token_id,
        )
    later = [step[0, : len(judge.tokenizer)].float().log_softmax(-1).cpu() for step in out.logits[1:]]
    return out.sequences[0, len(prompt_ids) :].tolist(), torch.cat([rows, torch.stack(later)])


def _logprobs_content(judge: LoadedJudge, tokens: list[int], rows: Any, top_count: int) -> list[dict[str, Any]]:
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
    return content


def chat_completion(judge: LoadedJudge, body: dict[str, Any], model_name: str) -> dict[str, Any]:
    """Answer one chat-completions request greedily, in OpenAI's response format."""
    messages, max_tokens, top_count = _generation_limits(body)
    text = chat_text(judge.tokenizer, messages)
    prompt_ids = judge.tokenizer(text, add_special_tokens=False)["input_ids"]
    tokens, rows = _greedy_tokens(judge, text, prompt_ids, max_tokens)
    finish = "length"
    if judge.tokenizer.eos_token_id in tokens:
        tokens, finish = tokens[: tokens.index(judge.tokenizer.eos_token_id)], "stop"
    choice: dict[str, Any] = {
        "index": 0,
        "finish_reason": finish,
        "logprobs": {"content": _logprobs_content(judge, tokens, rows, top_count)} if body.get("logprobs") else None,
        "message": {"role": "assistant", "content": judge.tokenizer.decode(tokens)},
    }
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
    """``python -m skill.rewards.judge.server [--model DIR] [--port N]``: serve a judge until interrupted."""
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
