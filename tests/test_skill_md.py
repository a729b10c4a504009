"""SKILL.md follows the skill format: frontmatter keys and limits, a short body, links that resolve."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
ALLOWED_KEYS = {"name", "description", "license", "allowed-tools", "metadata", "compatibility"}


def frontmatter_and_body() -> tuple[dict, str]:
    text = (ROOT / "SKILL.md").read_text()
    match = re.match(r"^---\n(.*?)\n---\n(.*)$", text, re.DOTALL)
    assert match, "SKILL.md must open with a --- delimited YAML frontmatter"
    return yaml.safe_load(match.group(1)), match.group(2)


def test_frontmatter_follows_the_skill_rules():
    meta, _ = frontmatter_and_body()
    assert set(meta) <= ALLOWED_KEYS, f"unexpected keys: {set(meta) - ALLOWED_KEYS}"
    assert meta["name"] == "grpo-rlvr-training"
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", meta["name"]) and len(meta["name"]) <= 64
    assert not any(word in meta["name"] for word in ("anthropic", "claude"))
    description = meta["description"]
    assert isinstance(description, str) and 0 < len(description) <= 1024
    assert "<" not in description and ">" not in description
    assert "Use after" in description or "Use when" in description, "the description must say when to use it"


def test_body_is_short_and_points_at_files_that_exist():
    _, body = frontmatter_and_body()
    assert len(body.splitlines()) < 500
    for reference in set(re.findall(r"`((?:references|schemas)/[\w./-]*)`", body)):
        assert (ROOT / reference).exists(), reference


def test_body_names_every_registered_tool():
    import asyncio

    from mcp import Client

    from server.mcp_server import build_server

    async def tool_names() -> list[str]:
        async with Client(build_server()) as client:
            return [tool.name for tool in (await client.list_tools()).tools]

    _, body = frontmatter_and_body()
    for name in asyncio.run(tool_names()):
        assert f"`{name}`" in body, name
