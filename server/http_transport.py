"""Streamable HTTP transport: loopback by default, a bearer token for anything else.

The server starts training processes and runs reward code on the machine it serves, so an
unauthenticated listener on a network address would hand that machine to anyone who can reach the
port. Binding 127.0.0.1 (or ::1, localhost) needs nothing; binding any other address needs a token
in ``GRPO_RLVR_MCP_TOKEN`` and the server refuses to start without one. When a token is set, every
request must carry ``Authorization: Bearer <token>``, on any address, or gets 401.

Imported only by ``grpo-rlvr serve --http``; stdio start-up never reads it.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import os
from typing import Any

from skill.errors import SkillError

TOKEN_ENV = "GRPO_RLVR_MCP_TOKEN"
MIN_TOKEN_CHARS = 16
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
MCP_PATH = "/mcp"

logger = logging.getLogger("grpo_rlvr.server.http")


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the server on this machine.

    >>> [is_loopback(h) for h in ("127.0.0.1", "::1", "localhost", "0.0.0.0", "192.168.1.5", "example.org")]
    [True, True, True, False, False, False]
    """
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name other than localhost may resolve anywhere
        return False


def configured_token() -> str | None:
    """The bearer token from the environment, or None when unset or empty."""
    return os.environ.get(TOKEN_ENV) or None


def check_binding(host: str, token: str | None) -> None:
    """Refuse a non-loopback bind without a token, a token a header cannot carry as set (blank, or with spaces or
    control characters: it could never match, so every request would get 401), and one too short to resist guessing.

    >>> check_binding("127.0.0.1", " " * 20)
    Traceback (most recent call last):
    ...
    skill.errors.SkillError: GRPO_RLVR_MCP_TOKEN is blank or holds whitespace or control characters, which ...
    """
    if token is not None and (not token.strip() or any(ch.isspace() or not ch.isprintable() for ch in token)):
        raise SkillError(
            f"{TOKEN_ENV} is blank or holds whitespace or control characters, which an Authorization header cannot "
            "carry as set: every request would be refused.",
            f"Set {TOKEN_ENV} to printable characters without spaces, e.g. "
            "\"$(python -c 'import secrets; print(secrets.token_urlsafe(32))')\".",
        )
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise SkillError(
            f"{TOKEN_ENV} is {len(token)} characters; a bearer token needs at least {MIN_TOKEN_CHARS}.",
            f"Set e.g. {TOKEN_ENV}=\"$(python -c 'import secrets; print(secrets.token_urlsafe(32))')\".",
        )
    if token is None and not is_loopback(host):
        raise SkillError(
            f"Refusing to serve on {host!r} without a bearer token: anyone who reaches the port could start "
            "training runs and run reward code on this machine.",
            f"Set {TOKEN_ENV} to a secret of at least {MIN_TOKEN_CHARS} characters (clients then send "
            f"'Authorization: Bearer <token>'), or bind {DEFAULT_HOST}.",
        )


class BearerTokenMiddleware:
    """ASGI middleware: every HTTP request needs ``Authorization: Bearer <token>``, else 401.

    Lifespan events pass through untouched so the MCP session manager still starts and stops.
    """

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._expected = token.encode()

    def _authorized(self, headers: list[tuple[bytes, bytes]]) -> bool:
        for name, value in headers:
            if name.lower() == b"authorization":
                scheme, _, credentials = value.partition(b" ")
                return scheme.lower() == b"bearer" and hmac.compare_digest(credentials.strip(), self._expected)
        return False

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or self._authorized(scope.get("headers", [])):
            await self.app(scope, receive, send)
            return
        logger.warning("401 for %s %s from %s", scope.get("method"), scope.get("path"), scope.get("client"))
        body = json.dumps(
            {
                "error": "invalid_token",
                "error_description": f"Send 'Authorization: Bearer <token>' with the server's {TOKEN_ENV}.",
            }
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b'Bearer realm="grpo-rlvr", error="invalid_token"'),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def http_app(server: Any, host: str, token: str | None) -> Any:
    """The ASGI app: the SDK's streamable HTTP app at /mcp, behind the token when one is set.

    The SDK turns on DNS-rebinding protection (Host and Origin checks) for loopback hosts by itself.
    """
    app = server.streamable_http_app(streamable_http_path=MCP_PATH, host=host)
    return BearerTokenMiddleware(app, token) if token else app


def run_http(server: Any, host: str, port: int) -> None:
    """Check the binding, then serve until interrupted; uvicorn logs through the root logger (stderr)."""
    import uvicorn

    token = configured_token()
    check_binding(host, token)
    shown_host = f"[{host}]" if ":" in host else host
    logger.info(
        "MCP over streamable HTTP at http://%s:%d%s (%s)",
        shown_host,
        port,
        MCP_PATH,
        f"bearer token from {TOKEN_ENV} required" if token else "loopback only, no token",
    )
    config = uvicorn.Config(http_app(server, host, token), host=host, port=port, log_config=None, lifespan="on")
    uvicorn.Server(config).run()
