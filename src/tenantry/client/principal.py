"""Detect which coding agent (if any) runs the current process.

The client sends what it sees in its environment; the daemon adds the uid
from the socket and never trusts a uid from the client. Standard library only.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # the client path avoids importing typing (and collections)
if TYPE_CHECKING:
    from collections.abc import Mapping

# (marker, product, session-id variable) in priority order. A marker ending in
# "*" matches any variable with that prefix.
# Product names are the values of ``tenantry.core.models.AgentProduct`` (kept as plain
# strings here so the client does not import the models).
MARKERS: tuple[tuple[str, str, str], ...] = (
    ("CLAUDECODE", "claude-code", "CLAUDE_CODE_SESSION_ID"),
    ("CLAUDE_CODE_SESSION_ID", "claude-code", "CLAUDE_CODE_SESSION_ID"),
    ("CLAUDE_CODE_ENTRYPOINT", "claude-code", "CLAUDE_CODE_SESSION_ID"),
    ("CODEX_THREAD_ID", "codex", "CODEX_THREAD_ID"),
    ("CODEX_SANDBOX*", "codex", "CODEX_THREAD_ID"),
    ("GEMINI_CLI", "gemini-cli", "GEMINI_SESSION_ID"),
    ("OPENCODE*", "opencode", "OPENCODE_SESSION_ID"),
    ("CURSOR_AGENT", "cursor", "CURSOR_SESSION_ID"),
    ("OPENHANDS_SESSION_ID", "openhands", "OPENHANDS_SESSION_ID"),
)
PRODUCTS = frozenset(
    {"claude-code", "codex", "gemini-cli", "opencode", "cursor", "openhands", "agent", "human"}
)

PROJECT_VARS = ("TENANTRY_PROJECT", "SLURM_ACCOUNT", "SBATCH_ACCOUNT")


def _has(env: Mapping[str, str], marker: str) -> bool:
    if marker.endswith("*"):
        prefix = marker[:-1]
        return any(k.startswith(prefix) and env[k] for k in env)
    return bool(env.get(marker))


def detect_agent(env: Mapping[str, str]) -> tuple[str, str]:
    """The agent product (an ``AgentProduct`` value) and its session id (or ``""``)."""
    forced = env.get("TENANTRY_AGENT")
    if forced:
        product = forced if forced in PRODUCTS else "agent"
        return product, env.get("TENANTRY_SESSION", "")
    for marker, product, session_var in MARKERS:
        if _has(env, marker):
            return product, env.get("TENANTRY_SESSION") or env.get(session_var, "")
    return "human", env.get("TENANTRY_SESSION", "")


def client_claims(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """What the client tells the daemon about itself (no uid: that comes from the socket)."""
    env = os.environ if env is None else env
    product, session = detect_agent(env)
    project = next((env[v] for v in PROJECT_VARS if env.get(v)), "")
    return {
        "agent": product,
        "session": session,
        "host": os.uname().nodename,  # no `socket` import: PATH shims start on this
        "project": project,
    }
