"""Plug Tenantry into coding agents: installers, the hook, and the hook ops.

- ``tenantry install/uninstall --agent NAME`` (``installer`` and ``agents.*``)
  write each agent's MCP entry, hook and site rules in its own format.
- ``tenantry hook --agent NAME`` (``hook``) implements each agent's hook
  protocol over one decision core (``steer`` + the daemon's policy).
- ``ops`` defines ``telemetry.session`` and ``telemetry.hook``.
- ``metrics`` is the Prometheus component fed from the event bus.

Importing this package imports nothing heavy.
"""

__all__ = ["AGENTS"]

AGENTS = ("claude-code", "codex", "gemini-cli", "opencode", "cursor")
