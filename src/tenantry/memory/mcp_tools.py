"""The MCP tools ``recall`` and ``remember``, forwarded to the memory ops.

``add_tools(server, forwarder)`` has the shape of
``tenantry.gateway.mcp.EXTRA_TOOLS`` entries. Results are the ops' results:
lessons as data with provenance and a note saying so.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations
from pydantic import Field

from tenantry.memory.ops import RECALL_DESCRIPTION, REMEMBER_DESCRIPTION

KindName = Literal["fact", "recipe", "failure-fix", "limit", "warning"]
ScopeName = Literal["session", "user", "project", "facility"]


def add_tools(server: MCPServer, fwd: Any) -> None:
    @server.tool(description=RECALL_DESCRIPTION, annotations=ToolAnnotations(read_only_hint=True))
    async def recall(
        query: Annotated[str, Field(description="error text pasted as is, or the task at hand")],
        limit: Annotated[int, Field(ge=1, le=50)] = 5,
        kinds: list[KindName] | None = None,
        subject: Annotated[
            dict[str, str] | None,
            Field(description="e.g. {'module': 'gcc/12.2.0'} or {'partition': 'gpu'}"),
        ] = None,
        include_history: bool = False,
    ) -> dict[str, Any]:
        params: dict[str, Any] = {"query": query, "limit": limit}
        if kinds:
            params["kinds"] = list(kinds)
        if subject:
            params["subject"] = subject
        if include_history:
            params["include_history"] = True
        result: dict[str, Any] = await fwd.call("memory.recall", params)
        return result

    @server.tool(description=REMEMBER_DESCRIPTION)
    async def remember(
        title: Annotated[str, Field(description="one line: what the lesson is about")],
        body: Annotated[str, Field(description="the facts, the fix, and how you know")],
        kind: KindName = "fact",
        scope: ScopeName = "user",
        subject: Annotated[
            dict[str, str] | None,
            Field(description="keys: module, package, partition, error, tool, path"),
        ] = None,
        error_signature: Annotated[
            str, Field(description="the key error line, verbatim (for failure-fix)")
        ] = "",
        evidence: list[str] | None = None,
        derived_from: Annotated[
            list[Literal["output", "agent", "human"]] | None,
            Field(description="'output' when the text came from command, job or file output"),
        ] = None,
        claim: Annotated[
            dict[str, Any] | None,
            Field(
                description="checkable claim, e.g. {'probe': 'partition_limit', 'partition':"
                " 'gpu', 'max_time_s': 86400}"
            ),
        ] = None,
    ) -> dict[str, Any]:
        params: dict[str, Any] = {"title": title, "body": body, "kind": kind, "scope": scope}
        for name, value in (
            ("subject", subject),
            ("error_signature", error_signature),
            ("evidence", evidence),
            ("derived_from", derived_from),
            ("claim", claim),
        ):
            if value:
                params[name] = value
        result: dict[str, Any] = await fwd.call("memory.remember", params)
        return result
