"""What every agent module shares: the install target, the commands, hook entries."""

from __future__ import annotations

import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SERVER = "tenantry"  # the MCP server's name in every agent's config
HOOK_MARK = " hook --agent "  # how our hook entries are recognised
HOOK_PATH = "/v1/hook/"  # ... and our http hook entries (gateway.hookserve)


@dataclass(frozen=True, slots=True)
class Target:
    scope: str  # project | user | system
    home: Path
    project: Path
    root: Path = Path("/")  # prefix for --system paths (packaging, tests)
    exe: tuple[str, ...] = ()  # how to run tenantry; default: resolved at plan time
    hook_http: str = ""  # the daemon's hook listener (setting hook_http); "" = command hooks

    def system(self, path: str) -> Path:
        return self.root / path.lstrip("/")

    @property
    def argv0(self) -> list[str]:
        if self.exe:
            return list(self.exe)
        if self.scope == "project" and shutil.which("tenantry"):
            return ["tenantry"]  # project files are shared: no machine-specific path
        return default_exe()


def default_exe() -> list[str]:
    found = shutil.which("tenantry")
    if found:
        return [found]
    return [sys.executable, "-m", "tenantry"]


# the command hook as a script for a lean start (``python -I -S``: agents/hook_entry.py)
HOOK_ENTRY = str(Path(__file__).resolve().parents[1] / "hook_entry.py")


def hook_argv(target: Target, agent: str) -> list[str]:
    """How the agent runs the command hook.

    A project's files name ``tenantry`` (they are shared) and an explicit
    ``exe`` is kept; otherwise the interpreter running this install starts the
    hook script without ``site`` (``agents/hook_entry.py``): about half of an
    interpreter start, on every shell command of the agent.
    """
    argv0 = target.argv0
    if target.exe or argv0 == ["tenantry"]:
        return [*argv0, "hook", "--agent", agent]
    return [sys.executable, "-I", "-S", HOOK_ENTRY, "hook", "--agent", agent]


def hook_command(target: Target, agent: str) -> str:
    return shlex.join(hook_argv(target, agent))


def hook_url(target: Target, agent: str) -> str:
    """The URL of the daemon's hook listener for ``agent`` (``target.hook_http`` set)."""
    host, _, port = target.hook_http.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}{HOOK_PATH}{agent}"


def is_ours(entry: Any) -> bool:
    """A hook handler (or a group holding one) that runs ``tenantry hook``."""
    if isinstance(entry, dict):
        cmd = entry.get("command")
        if isinstance(cmd, str) and HOOK_MARK in cmd and "tenantry" in cmd:
            return True
        url = entry.get("url")
        if entry.get("type") == "http" and isinstance(url, str) and HOOK_PATH in url:
            return True
        return any(is_ours(h) for h in entry.get("hooks", []) if isinstance(h, dict))
    return False


def set_grouped_hooks(data: dict[str, Any], groups: dict[str, dict[str, Any]] | None) -> None:
    """Claude-style ``hooks: {Event: [{matcher, hooks: [...]}]}``: replace our groups.

    ``groups=None`` only removes ours. Other groups are kept in their order.
    """
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        hooks = {}
    for event in list(hooks):
        entries = hooks[event]
        if isinstance(entries, list):
            kept = [e for e in entries if not is_ours(e)]
            if kept:
                hooks[event] = kept
            else:
                del hooks[event]
    for event, group in (groups or {}).items():
        hooks.setdefault(event, []).append(group)
    if hooks:
        data["hooks"] = hooks
    else:
        data.pop("hooks", None)


def set_server(data: dict[str, Any], key: str, entry: dict[str, Any] | None) -> None:
    """Set (or remove) ``data[key]["tenantry"]``, dropping an emptied section."""
    section = data.get(key)
    if not isinstance(section, dict):
        section = {}
    if entry is None:
        section.pop(SERVER, None)
    else:
        section[SERVER] = entry
    if section:
        data[key] = section
    else:
        data.pop(key, None)
