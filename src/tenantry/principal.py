"""Detect which coding agent (if any) runs the current process.

The client sends what it sees in its environment; the daemon adds the uid
from the socket and never trusts a uid from the client. Standard library only.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping

from tenantry.models import AgentProduct

# (marker, product, session-id variable) in priority order. A marker ending in
# "*" matches any variable with that prefix.
MARKERS: tuple[tuple[str, AgentProduct, str], ...] = (
    ("CLAUDECODE", AgentProduct.CLAUDE_CODE, "CLAUDE_CODE_SESSION_ID"),
    ("CLAUDE_CODE_SESSION_ID", AgentProduct.CLAUDE_CODE, "CLAUDE_CODE_SESSION_ID"),
    ("CLAUDE_CODE_ENTRYPOINT", AgentProduct.CLAUDE_CODE, "CLAUDE_CODE_SESSION_ID"),
    ("CODEX_THREAD_ID", AgentProduct.CODEX, "CODEX_THREAD_ID"),
    ("CODEX_SANDBOX*", AgentProduct.CODEX, "CODEX_THREAD_ID"),
    ("GEMINI_CLI", AgentProduct.GEMINI_CLI, "GEMINI_SESSION_ID"),
    ("OPENCODE*", AgentProduct.OPENCODE, "OPENCODE_SESSION_ID"),
    ("CURSOR_AGENT", AgentProduct.CURSOR, "CURSOR_SESSION_ID"),
    ("OPENHANDS_SESSION_ID", AgentProduct.OPENHANDS, "OPENHANDS_SESSION_ID"),
)

PROJECT_VARS = ("TENANTRY_PROJECT", "SLURM_ACCOUNT", "SBATCH_ACCOUNT")


def _has(env: Mapping[str, str], marker: str) -> bool:
    if marker.endswith("*"):
        prefix = marker[:-1]
        return any(k.startswith(prefix) and env[k] for k in env)
    return bool(env.get(marker))


def detect_agent(env: Mapping[str, str]) -> tuple[AgentProduct, str]:
    """The agent product and its session id (``""`` when none is set)."""
    forced = env.get("TENANTRY_AGENT")
    if forced:
        try:
            product = AgentProduct(forced)
        except ValueError:
            product = AgentProduct.OTHER_AGENT
        return product, env.get("TENANTRY_SESSION", "")
    for marker, product, session_var in MARKERS:
        if _has(env, marker):
            return product, env.get("TENANTRY_SESSION") or env.get(session_var, "")
    return AgentProduct.HUMAN, env.get("TENANTRY_SESSION", "")


def client_claims(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """What the client tells the daemon about itself (no uid: that comes from the socket)."""
    env = os.environ if env is None else env
    product, session = detect_agent(env)
    project = next((env[v] for v in PROJECT_VARS if env.get(v)), "")
    return {
        "agent": product.value,
        "session": session,
        "host": socket.gethostname(),
        "project": project,
    }
