"""Where ``rubric_judge``'s verdicts come from: a local transformers model, or an OpenAI-compatible endpoint.

- ``TransformersJudge``: a causal LM loaded once per process; each response's prompt runs once and its
  rubric questions continue from the cached prefix, in left-padded batches.
- ``OpenAIJudge``: ``POST {base_url}/chat/completions`` (stdlib urllib), one token with ``top_logprobs``.

The loading, the chat rendering and the next-token log-probabilities here are shared with the loopback
server (``skill.rewards.judge.server``), and both backends read verdicts with ``verdict_from_top_logprobs``,
so a local and a served copy of one model give the same reward (within float rounding).

May import: ``skill.rewards.judge.verdict``, ``skill.models``, ``skill.errors``.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field
from typing import Any

from skill.errors import SkillError
from skill.models.sources import embedded_model_dir, resolve_model_path
from skill.rewards.judge.verdict import TOP_LOGPROBS, Verdict, verdict_from_top_logprobs, yes_no_word, yes_probability


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
