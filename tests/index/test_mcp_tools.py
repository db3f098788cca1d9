"""The index MCP tools forward to the index ops with the agent's arguments."""

from __future__ import annotations

from typing import Any

from mcp import Client as McpClient
from mcp.server.mcpserver import MCPServer

from tenantry.index.mcp_tools import add_tools
from tenantry.index.ops import MCP_TOOLS
from tenantry.service.ops import REGISTRY


class Forwarder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def call(self, op: str, params: dict[str, Any]) -> Any:
        self.calls.append((op, params))
        return {"items": [], "next_cursor": None}


async def test_tools_forward_to_ops() -> None:
    server = MCPServer("t")
    fwd = Forwarder()
    add_tools(server, fwd)
    async with McpClient(server) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(MCP_TOOLS) | {"index_workspace"} == set(tools)
        res = await client.call_tool(
            "grep_files", {"pattern": "TODO", "path": "/w", "globs": ["*.py"], "files_only": True}
        )
        assert not res.is_error, res.content
        await client.call_tool("find_files", {"path": "/w", "name": "*.md", "sort": "-modified"})
        bad = await client.call_tool("find_files", {"path": "/w", "type": "x"})
        assert bad.is_error
    assert fwd.calls[0] == (
        "index.grep",
        {"pattern": "TODO", "path": "/w", "globs": ["*.py"], "files_only": True, "limit": 200},
    )
    assert fwd.calls[1] == (
        "index.find",
        {"path": "/w", "name": "*.md", "sort": "-modified", "limit": 200},
    )
    for op_name, _ in MCP_TOOLS.values():
        assert op_name in REGISTRY
