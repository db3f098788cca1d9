"""The stdio loop of ``tenantry mcp``: the SDK's transport, fed by the fast start.

``run_stdio`` serves the server from ``gateway.mcp`` on stdin/stdout. What the
fast start (``gateway.mcp_start``) already read is replayed first; answers it
already gave are dropped; a line that is not JSON gets a JSON-RPC parse error.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from tenantry.core.settings import Settings
from tenantry.gateway.mcp import Forwarder, build_server
from tenantry.gateway.mcp_fast import FastRunCommand


class _ReplayIn:
    """Stdin for the SDK: the lines the fast start already read, then the rest.

    A line that is not JSON gets a JSON-RPC parse error (-32700) right away
    instead of vanishing.
    """

    def __init__(
        self, replay: str, rest: Any, out: _FilterOut, fast: FastRunCommand | None = None
    ) -> None:
        self.replay, self.rest, self.out = replay, rest, out
        self.fast = fast

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        pending = self.replay
        while True:
            while "\n" in pending:
                line, pending = pending.split("\n", 1)
                if await self._ok(line):
                    yield line + "\n"
            chunk = await self.rest.readline()
            if not chunk:
                if pending and await self._ok(pending):
                    yield pending
                if self.fast is not None:
                    await self.fast.drain()
                return
            pending += chunk

    async def _ok(self, line: str) -> bool:
        if not line.strip():
            return False
        try:
            msg = json.loads(line)
        except ValueError:
            await self.out.write(PARSE_ERROR)
            await self.out.flush()
            return False
        # run_command calls with plainly valid arguments skip the SDK (gateway.mcp_fast)
        return not (self.fast is not None and self.fast.take(msg))


PARSE_ERROR = (
    json.dumps(
        {
            "jsonrpc": "2.0",
            "id": None,
            "error": {
                "code": -32700,
                "message": "Parse error: a line that is not JSON; send one JSON-RPC message"
                " per line",
            },
        }
    )
    + "\n"
)


class _FilterOut:
    """Stdout for the SDK: drops its answers to requests the fast start answered.

    It also keeps the SDK's first complete ``tools/list`` answer for the next
    fast start (``mcp_start.save_tools``).
    """

    def __init__(self, out: Any, drop_ids: list[object], tools_cache: str) -> None:
        # an asyncio lock takes no trip round the loop when it is free (anyio's does)
        self.out, self.lock = out, asyncio.Lock()
        self.drop_ids = [json.dumps(i) for i in drop_ids]
        self.tools_cache = tools_cache

    async def write(self, text: str) -> None:
        if self.drop_ids or self.tools_cache:
            try:
                msg = json.loads(text)
            except ValueError:
                msg = None
            result = msg.get("result") if isinstance(msg, dict) else None
            if isinstance(msg, dict) and isinstance(result, dict):
                rid = json.dumps(msg.get("id"))
                if self.tools_cache and "tools" in result and "nextCursor" not in result:
                    from tenantry.gateway.mcp_start import save_tools

                    save_tools(self.tools_cache, result)
                    self.tools_cache = ""
                if rid in self.drop_ids:
                    self.drop_ids.remove(rid)
                    return
        await self.write_own(text)

    async def write_own(self, text: str) -> None:
        """Write an answer of ours (the fast path's): never one to drop, nor ``tools/list``."""
        async with self.lock:
            await self.out.write(text)

    async def flush(self) -> None:
        await self.out.flush()


class _PipeIn:
    """Stdin as an asyncio stream: a line costs no worker-thread hop (anyio's file does)."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader

    async def readline(self) -> str:
        return (await self.reader.readline()).decode("utf-8", errors="replace")


class _PipeOut:
    """Stdout as an asyncio stream: written without a thread, flushed by ``drain``."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer

    async def write(self, text: str) -> None:
        self.writer.write(text.encode())

    async def flush(self) -> None:
        await self.writer.drain()


LINE_LIMIT = 1 << 26  # one JSON-RPC message per line; the SDK's own reader has no limit


async def _stdio() -> tuple[Any, Any]:
    """Stdin and stdout for the loop: asyncio pipes when both are pipes or sockets.

    Anything else (a terminal, a file) gets anyio's thread-backed files: an
    asyncio pipe sets its descriptor non-blocking, which a terminal shares with
    the shell that started us.
    """
    import os
    import stat
    import sys

    import anyio

    def streamable(fd: int) -> bool:
        try:
            mode = os.fstat(fd).st_mode
        except OSError:
            return False
        return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)

    if streamable(0) and streamable(1):
        loop = asyncio.get_running_loop()
        try:
            reader = asyncio.StreamReader(limit=LINE_LIMIT)
            await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
            transport, protocol = await loop.connect_write_pipe(
                asyncio.streams.FlowControlMixin, sys.stdout
            )
        except (OSError, ValueError):
            pass
        else:
            writer = asyncio.StreamWriter(transport, protocol, None, loop)
            return _PipeIn(reader), _PipeOut(writer)
    return anyio.wrap_file(sys.stdin), anyio.wrap_file(sys.stdout)


def run_stdio(
    settings: Settings,
    replay: str = "",
    drop_ids: list[object] | None = None,
    tools_cache: str = "",
) -> int:
    """Serve MCP on stdin/stdout; ``replay`` holds what was read already (fast start)."""
    import logging

    from mcp.server.stdio import stdio_server

    # request lines of the HTTP client would clutter the agent's MCP log
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("httpcore").setLevel(logging.WARNING)
    fwd = Forwarder(settings)
    server = build_server(settings, fwd)

    async def serve() -> None:
        stdin_file, stdout_file = await _stdio()
        out = _FilterOut(stdout_file, drop_ids or [], tools_cache)

        async def answer(text: str) -> None:
            await out.write_own(text)
            await out.flush()

        stdin = _ReplayIn(replay, stdin_file, out, FastRunCommand(fwd, answer))
        async with stdio_server(stdin=stdin, stdout=out) as (read, write):  # type: ignore[arg-type]
            low = server._lowlevel_server
            await low.run(read, write, low.create_initialization_options())

    asyncio.run(serve())
    return 0
