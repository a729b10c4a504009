"""grpo-rlvr: the domain core. Plain functions, Pydantic in and out; no MCP here.

Heavy libraries (torch, transformers, trl, datasets) are imported inside the functions
that need them, so the MCP server can import this package and start fast.
"""

from importlib.metadata import PackageNotFoundError, version

from skill.errors import SkillError

try:
    __version__ = version("grpo-rlvr")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+source"

__all__ = ["SkillError", "__version__"]
