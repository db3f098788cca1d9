"""The index's MCP tools, forwarded to the ``index.*`` ops.

``add_tools(server, forwarder)`` has the shape of ``tenantry.gateway.mcp.EXTRA_TOOLS``
entries; tool names and descriptions are ``tenantry.index.ops.MCP_TOOLS``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations
from pydantic import Field

from tenantry.index.ops import ADD_DESCRIPTION, MCP_TOOLS

Path = Annotated[str, Field(description="absolute path inside an indexed workspace")]
Limit = Annotated[int, Field(ge=1, le=2000, description="items per page")]
Cursor = Annotated[str | None, Field(description="next_cursor of the previous page")]
Verify = Annotated[bool, Field(description="re-stat the returned paths first")]
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)


def _params(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v not in (None, False, [], "")}


def add_tools(server: MCPServer, fwd: Any) -> None:
    async def call(tool: str, params: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = await fwd.call(MCP_TOOLS[tool][0], params)
        return result

    @server.tool(description=MCP_TOOLS["find_files"][1], annotations=READ_ONLY)
    async def find_files(
        path: Path,
        name: Annotated[str | None, Field(description="glob on the file name, e.g. *.py")] = None,
        iname: str | None = None,
        path_glob: str | None = None,
        type: Literal["f", "d", "l"] | None = None,
        min_size: Annotated[int | None, Field(ge=0, description="bytes")] = None,
        max_size: Annotated[int | None, Field(ge=0, description="bytes")] = None,
        changed_within_s: Annotated[float | None, Field(gt=0)] = None,
        max_depth: Annotated[int | None, Field(ge=0)] = None,
        sort: Literal["path", "modified", "-modified"] = "path",
        limit: Limit = 200,
        cursor: Cursor = None,
        verify: Verify = False,
    ) -> dict[str, Any]:
        return await call(
            "find_files",
            _params(
                path=path,
                name=name,
                iname=iname,
                path_glob=path_glob,
                type=type,
                min_size=min_size,
                max_size=max_size,
                changed_within_s=changed_within_s,
                max_depth=max_depth,
                sort=sort,
                limit=limit,
                cursor=cursor,
                verify=verify,
            ),
        )

    @server.tool(description=MCP_TOOLS["grep_files"][1], annotations=READ_ONLY)
    async def grep_files(
        pattern: Annotated[str, Field(description="regular expression (Python re syntax)")],
        path: Path,
        ignore_case: bool = False,
        fixed: Annotated[bool, Field(description="pattern is a literal string")] = False,
        word: bool = False,
        globs: Annotated[list[str] | None, Field(description="e.g. ['*.py', '!tests/']")] = None,
        files_only: bool = False,
        count: bool = False,
        context: Annotated[int, Field(ge=0, le=20)] = 0,
        limit: Limit = 200,
        cursor: Cursor = None,
        verify: Verify = False,
    ) -> dict[str, Any]:
        return await call(
            "grep_files",
            _params(
                pattern=pattern,
                path=path,
                ignore_case=ignore_case,
                fixed=fixed,
                word=word,
                globs=globs,
                files_only=files_only,
                count=count,
                context=context,
                limit=limit,
                cursor=cursor,
                verify=verify,
            ),
        )

    @server.tool(description=MCP_TOOLS["list_dir"][1], annotations=READ_ONLY)
    async def list_dir(
        path: Path, limit: Limit = 200, cursor: Cursor = None, verify: Verify = False
    ) -> dict[str, Any]:
        return await call("list_dir", _params(path=path, limit=limit, cursor=cursor, verify=verify))

    @server.tool(description=MCP_TOOLS["stat_path"][1], annotations=READ_ONLY)
    async def stat_path(path: Path, verify: Verify = False) -> dict[str, Any]:
        return await call("stat_path", _params(path=path, verify=verify))

    @server.tool(description=MCP_TOOLS["disk_usage"][1], annotations=READ_ONLY)
    async def disk_usage(path: Path, limit: Limit = 50) -> dict[str, Any]:
        return await call("disk_usage", _params(path=path, limit=limit))

    @server.tool(description=MCP_TOOLS["tree"][1], annotations=READ_ONLY)
    async def tree(
        path: Path, max_depth: Annotated[int, Field(ge=1, le=20)] = 3, limit: Limit = 500
    ) -> dict[str, Any]:
        return await call("tree", _params(path=path, max_depth=max_depth, limit=limit))

    @server.tool(description=MCP_TOOLS["recent_files"][1], annotations=READ_ONLY)
    async def recent_files(
        path: Path,
        since_s: Annotated[float | None, Field(gt=0)] = None,
        limit: Limit = 50,
        cursor: Cursor = None,
    ) -> dict[str, Any]:
        return await call(
            "recent_files", _params(path=path, since_s=since_s, limit=limit, cursor=cursor)
        )

    @server.tool(description=ADD_DESCRIPTION)
    async def index_workspace(path: Path, wait: bool = True) -> dict[str, Any]:
        result: dict[str, Any] = await fwd.call("index.add", {"path": path, "wait": wait})
        return result
