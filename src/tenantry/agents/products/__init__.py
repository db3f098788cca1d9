"""One module per agent product, each writing that agent's own config format.

Every module defines ``install(target) -> list[Change]`` and
``uninstall(target) -> list[Change]`` (plans only; ``files.apply`` writes).
"""

from __future__ import annotations

import importlib
from types import ModuleType

MODULES = {
    "claude-code": "claude_code",
    "codex": "codex",
    "gemini-cli": "gemini_cli",
    "opencode": "opencode",
    "cursor": "cursor",
}


def module(agent: str) -> ModuleType:
    return importlib.import_module(f"tenantry.agents.products.{MODULES[agent]}")
