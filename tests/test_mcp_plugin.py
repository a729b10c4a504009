"""The repository as a Claude Code plugin: manifests agree with pyproject.toml, Claude Code's own validator
accepts them, and Claude Code loads the skill and connects to the server from the documented install.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from server.mcp_server import SERVER_NAME

REPOSITORY = Path(__file__).resolve().parent.parent
CLAUDE_CODE = "@anthropic-ai/claude-code"
PYPROJECT = tomllib.loads((REPOSITORY / "pyproject.toml").read_text())["project"]
PLUGIN = json.loads((REPOSITORY / ".claude-plugin" / "plugin.json").read_text())
MARKETPLACE = json.loads((REPOSITORY / ".claude-plugin" / "marketplace.json").read_text())
MCP_JSON = json.loads((REPOSITORY / ".mcp.json").read_text())


def skill_frontmatter() -> dict[str, str]:
    text = (REPOSITORY / "SKILL.md").read_text()
    block = text.split("---\n")[1]
    return dict(re.findall(r"^[ \t]*([\w-]+):[ \t]*(.+)$", block, re.MULTILINE))


def test_manifests_agree_with_pyproject():
    assert PLUGIN["name"] == PYPROJECT["name"]
    assert PLUGIN["version"] == PYPROJECT["version"]
    assert PLUGIN["description"] == PYPROJECT["description"]
    assert PLUGIN["license"] == PYPROJECT["license"]
    assert PLUGIN["skills"] == ["./"] and (REPOSITORY / "SKILL.md").is_file()
    (entry,) = MARKETPLACE["plugins"]
    assert entry["name"] == PLUGIN["name"] and entry["version"] == PLUGIN["version"] and entry["source"] == "./"
    assert entry["description"] == PYPROJECT["description"]


def test_mcp_json_starts_the_projects_serve_command():
    (name,) = MCP_JSON["mcpServers"]
    server = MCP_JSON["mcpServers"][name]
    frontmatter = skill_frontmatter()
    assert name == SERVER_NAME == frontmatter["mcp-server"]
    assert frontmatter["version"] == PYPROJECT["version"]
    (script,) = PYPROJECT["scripts"]
    assert PYPROJECT["scripts"][script] == "server.cli:main"
    # A plugin is installed without pip: the server runs from the checkout's environment (make install).
    assert server["command"] == "${CLAUDE_PLUGIN_ROOT}/.venv/bin/" + script
    assert server["args"] == ["serve"]


def test_make_install_prints_the_command_that_registers_the_plugin():
    makefile = (REPOSITORY / "Makefile").read_text()
    recipe = makefile[makefile.index("\ninstall:") :].split("\n\n")[0]
    assert "ln -sfn '$(CURDIR)' ~/.claude/skills/" + PLUGIN["name"] in recipe
    assert "claude --plugin-dir '$(CURDIR)'" in recipe
    assert "~/.claude/skills/" + PLUGIN["name"] in (REPOSITORY / "README.md").read_text()


def claude(home: Path, *args: str) -> subprocess.CompletedProcess:
    """Run Claude Code's CLI with an empty home, or skip when npx cannot fetch it."""
    npx = shutil.which("npx")
    if npx is None:
        pytest.skip("npx is not installed; the Claude Code plugin checks need Node.js")
    environment = {key: value for key, value in os.environ.items() if not key.startswith(("CLAUDE", "ANTHROPIC"))}
    environment["HOME"] = str(home)
    environment.setdefault("npm_config_cache", str(Path.home() / ".npm"))  # reuse the fetched package
    try:
        result = subprocess.run(
            [npx, "-y", CLAUDE_CODE, *args], env=environment, capture_output=True, text=True, timeout=240
        )
    except subprocess.TimeoutExpired:
        pytest.skip(f"npx could not run {CLAUDE_CODE} within 240 s (offline?)")
    fetch_failed = ("ENOTFOUND", "EAI_AGAIN", "ETIMEDOUT", "ECONNREFUSED", "npm error code E404", "npm ERR!")
    if result.returncode != 0 and any(marker in result.stderr for marker in fetch_failed):
        pytest.skip(f"npx could not fetch {CLAUDE_CODE}: {result.stderr.strip().splitlines()[-1]}")
    return result


@pytest.mark.slow
@pytest.mark.parametrize("manifest", ["plugin.json", "marketplace.json"])
def test_claude_code_validator_accepts_the_manifests(tmp_path, manifest):
    result = claude(tmp_path, "plugin", "validate", "--strict", str(REPOSITORY / ".claude-plugin" / manifest))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Validation passed" in result.stdout


@pytest.mark.slow
def test_claude_code_finds_the_skill_and_the_server_in_the_plugin(tmp_path):
    details = claude(tmp_path, "--plugin-dir", str(REPOSITORY), "plugin", "details", PLUGIN["name"])
    assert details.returncode == 0, details.stdout + details.stderr
    assert re.search(r"Skills \(1\)\s+grpo-rlvr-training", details.stdout), details.stdout
    assert re.search(rf"MCP servers \(1\)\s+{SERVER_NAME}", details.stdout), details.stdout


@pytest.mark.slow
def test_the_documented_install_connects_claude_code_to_the_server(tmp_path):
    """`make install` prints a symlink into ~/.claude/skills/: Claude Code loads SKILL.md there as a skill and the
    directory's plugin manifest and .mcp.json as a plugin, in place; here it must connect to the server."""
    if not (REPOSITORY / ".venv" / "bin" / "grpo-rlvr").exists():
        pytest.skip("no .venv/bin/grpo-rlvr in this checkout: run `make install` first")
    skills = tmp_path / ".claude" / "skills"
    skills.mkdir(parents=True)
    (skills / PLUGIN["name"]).symlink_to(REPOSITORY)
    plugins = claude(tmp_path, "plugin", "list")
    assert f"{PLUGIN['name']}@skills-dir" in plugins.stdout and "loaded" in plugins.stdout, plugins.stdout
    listed = claude(tmp_path, "mcp", "list")
    assert f"plugin:{PLUGIN['name']}:{SERVER_NAME}" in listed.stdout and "Connected" in listed.stdout, listed.stdout
