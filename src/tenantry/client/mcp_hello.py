"""The first messages an MCP client sends over stdio: ``initialize``, the
``initialized`` notification and ``tools/list`` (used to warm, probe and time the
``tenantry mcp`` server). Standard library only."""

from __future__ import annotations

from typing import Any

PROTOCOL_VERSION = "2025-06-18"


def initialize(client: str, id: int = 1) -> dict[str, Any]:
    """The ``initialize`` request of a client named ``client``."""
    return {
        "jsonrpc": "2.0",
        "id": id,
        "method": "initialize",
        "params": {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": client, "version": "0"},
        },
    }


def after_initialize(list_id: int = 2) -> list[dict[str, Any]]:
    """What follows the answer to ``initialize``: the notification, then ``tools/list``."""
    return [
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": list_id, "method": "tools/list"},
    ]
