"""What a failed Hugging Face Hub access was, in words a user can act on.

transformers, datasets and huggingface_hub wrap one another's errors; the cause chain says which case it is:
a gated repository (accept the licence, set ``HF_TOKEN``), ``HF_HUB_OFFLINE`` with no cached copy, an id the Hub
does not have (or may not show), or a Hub that cannot be reached. Models (``models.hub``) and datasets
(``data``) report through the one function here. May import: ``errors``.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

from skill.errors import SkillError

REACH_TIMEOUT_S = 3.0  # a TCP connection to the Hub that takes longer is taken as no network
_OFFLINE_LOCK = threading.Lock()  # the offline switch is process-wide: one block at a time

# Raised by httpx, requests or huggingface_hub when no answer came (LocalEntryNotFoundError: no answer and no cache).
UNREACHABLE_ERRORS = {
    "ConnectError",
    "ConnectTimeout",
    "ConnectionError",
    "ReadTimeout",
    "Timeout",
    "LocalEntryNotFoundError",
}


def hub_failure(name: str, exc: BaseException, kind: str = "model") -> SkillError:
    """Which Hub failure this is, in words, with what to do (the cause chain decides: transformers and datasets
    wrap huggingface_hub's errors).

    >>> from huggingface_hub.errors import OfflineModeIsEnabled
    >>> print(hub_failure("acme/tiny", OfflineModeIsEnabled("offline")).problem)  # doctest: +ELLIPSIS
    HF_HUB_OFFLINE is set and model 'acme/tiny' is not in the Hub cache ...
    """
    from huggingface_hub import constants
    from huggingface_hub.errors import GatedRepoError, OfflineModeIsEnabled, RepositoryNotFoundError

    chain = _cause_chain(exc)
    text = " ".join(str(item) for item in chain)
    cache = constants.HF_HUB_CACHE if kind == "model" else os.environ.get("HF_DATASETS_CACHE") or constants.HF_HOME
    local = "a local directory" if kind == "model" else "a local .jsonl/.json/.csv/.parquet file"
    if any(isinstance(item, GatedRepoError) for item in chain) or " 403 " in f" {text} ":
        return SkillError(
            f"The {kind} {name!r} is gated: the Hub asks for an account that accepted its licence.",
            f"Accept its licence on https://huggingface.co/{'datasets/' if kind == 'dataset' else ''}{name} and set "
            "HF_TOKEN to a token of that account (or run `hf auth login`).",
        )
    offline = constants.HF_HUB_OFFLINE or any(isinstance(item, OfflineModeIsEnabled) for item in chain)
    if offline or "outgoing traffic has been disabled" in text:
        return SkillError(
            f"HF_HUB_OFFLINE is set and {kind} {name!r} is not in the Hub cache ({cache}).",
            f"Unset HF_HUB_OFFLINE to download it, point HF_HOME / HF_HUB_CACHE at a cache holding it, or send "
            f"{local}.",
        )
    if any(isinstance(item, RepositoryNotFoundError) for item in chain) or "404" in text:
        return SkillError(
            f"The Hub has no {kind} {name!r} this machine may read (a wrong id, or a private repository).",
            f"Check the id on https://huggingface.co; for a private one set HF_TOKEN; or send {local}.",
        )
    if _unreachable(chain):
        return unreachable_failure(name, kind)
    return SkillError(f"Cannot load {kind} {name!r}: {chain[-1]}", f"Send {local}, or a hub id that loads.")


def unreachable_failure(name: str, kind: str = "model") -> SkillError:
    """The Hub could not be reached and the cache does not hold ``name``."""
    from huggingface_hub import constants

    cache = constants.HF_HUB_CACHE if kind == "model" else os.environ.get("HF_DATASETS_CACHE") or constants.HF_HOME
    local = "a local directory" if kind == "model" else "a local .jsonl/.json/.csv/.parquet file"
    download = f"hf download {name}" + (" --repo-type dataset" if kind == "dataset" else "")
    return SkillError(
        f"Cannot reach the Hugging Face Hub ({constants.ENDPOINT}) to fetch {kind} {name!r}, and it is not in "
        f"the Hub cache ({cache}).",
        f"Download it where the network allows (`{download}`) into a cache HF_HOME / HF_HUB_CACHE points at, "
        f"or send {local}.",
    )


def hub_unreachable(timeout_s: float = REACH_TIMEOUT_S) -> bool:
    """Whether the Hub endpoint refuses or ignores a TCP connection within ``timeout_s`` (never asked when
    HF_HUB_OFFLINE is set). One connection attempt, where the libraries' own retries take tens of seconds.

    >>> import os
    >>> os.environ.get("HF_HUB_OFFLINE") == "1" or isinstance(hub_unreachable(0.5), bool)
    True
    """
    import socket
    from urllib.parse import urlsplit

    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return False
    endpoint = urlsplit(constants.ENDPOINT)
    port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    try:
        socket.create_connection((endpoint.hostname or "", port), timeout=timeout_s).close()
    except OSError:
        return True
    return False


@contextlib.contextmanager
def offline_hub() -> Iterator[None]:
    """huggingface_hub and datasets in offline mode for the block: the cache answers, nothing is retried."""
    import datasets.config
    from huggingface_hub import constants

    saved = constants.HF_HUB_OFFLINE, datasets.config.HF_HUB_OFFLINE
    with _OFFLINE_LOCK:
        constants.HF_HUB_OFFLINE = datasets.config.HF_HUB_OFFLINE = True
        try:
            yield
        finally:
            constants.HF_HUB_OFFLINE, datasets.config.HF_HUB_OFFLINE = saved


def _cause_chain(exc: BaseException) -> list[BaseException]:
    chain, seen = [], set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _unreachable(chain: list[BaseException]) -> bool:
    """A connection that failed or timed out, whichever HTTP library raised it."""
    if {type(item).__name__ for item in chain} & UNREACHABLE_ERRORS:
        return True
    return any(isinstance(item, ConnectionError | TimeoutError) for item in chain)
