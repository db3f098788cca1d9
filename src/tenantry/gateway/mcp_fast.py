"""The MCP shim's hot path: ``run_command`` answered without the SDK's per-call machinery.

Every agent command through MCP is a ``tools/call`` of ``run_command``. The
SDK validates its arguments with a pydantic model, runs them through its
request middleware and worker hops, and serializes the result with pydantic
again: milliseconds per call. The stdio loop (``gateway.mcp_stdio``) hands
each ``tools/call`` line to ``FastRunCommand.take`` first. A call whose
arguments are plainly valid (the checks below mirror the tool's input
schema) is answered here: the same daemon request, the same result shape
(``content`` text + ``structuredContent``), the same error texts. Anything
unusual -- another tool, a wrong type, an unknown argument -- goes to the SDK
unchanged, so its validation messages stay the only ones.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable
from typing import Any

import pydantic_core
from mcp.server.mcpserver.exceptions import ToolError

from tenantry.core.errors import TenantryError
from tenantry.core.units import parse_mem_mb
from tenantry.gateway.mcp import ORIGIN, Forwarder, message_of

WHERE = ("auto", "local", "lease")
ARGUMENTS = frozenset({"argv", "cwd", "timeout_s", "cpus", "mem", "where", "idempotent"})
Write = Callable[[str], Awaitable[None]]


def _number(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def run_params(args: object, env: dict[str, str] | None = None) -> dict[str, Any] | None:
    """The daemon's ``commands.run`` params for valid arguments; None for the SDK to judge.

    ``env`` is the environment to forward (default: a copy of ``os.environ``).

    Raises ``TenantryError`` for a memory size that does not parse (the SDK
    path reports it the same way).
    """
    if not isinstance(args, dict) or not ARGUMENTS.issuperset(args):
        return None
    argv = args.get("argv")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        return None
    cwd = args.get("cwd")
    timeout = args.get("timeout_s")
    cpus = args.get("cpus", 1)
    mem = args.get("mem")
    where = args.get("where", "auto")
    idempotent = args.get("idempotent", False)
    if cwd is not None and not isinstance(cwd, str):
        return None
    if timeout is not None and not (_number(timeout) and timeout > 0):
        return None
    if not (isinstance(cpus, int) and not isinstance(cpus, bool) and 1 <= cpus <= 1024):
        return None
    if (mem is not None and not isinstance(mem, str)) or where not in WHERE:
        return None
    if not isinstance(idempotent, bool):
        return None
    resources: dict[str, Any] = {"cpus": cpus}
    if mem:
        resources["mem_mb"] = parse_mem_mb(mem)
    return {
        "argv": argv,
        "cwd": cwd or os.getcwd(),
        "env": dict(os.environ) if env is None else env,
        "timeout_s": float(timeout) if timeout is not None else None,
        "resources": resources,
        "where": where,
        "idempotent": idempotent,
    }


def tool_result(result: dict[str, Any]) -> dict[str, Any]:
    """A tool's structured result as the SDK sends it (text and structured content).

    The text is serialized as the SDK does it (``pydantic_core.to_json``, indented),
    which also keeps it off the pure-Python path of ``json.dumps(indent=...)``.
    """
    text = pydantic_core.to_json(result, fallback=str, indent=2).decode()
    return {
        "content": [{"type": "text", "text": text}],
        "isError": False,
        "structuredContent": result,
    }


def tool_error(text: str) -> dict[str, Any]:
    """A failed call as the SDK reports a ``ToolError`` of ``run_command``."""
    text = f"Error executing tool run_command: {text}"
    return {"content": [{"type": "text", "text": text}], "isError": True}


class FastRunCommand:
    """Answers plainly valid ``run_command`` calls; tracks them for cancellation."""

    def __init__(self, fwd: Forwarder, write: Write) -> None:
        self.fwd = fwd
        self.write = write
        self.calls: dict[str, asyncio.Task[None]] = {}
        self.answered = 0

    def take(self, msg: object) -> bool:
        """Start answering ``msg`` if it is a plainly valid ``run_command`` call."""
        if not isinstance(msg, dict):
            return False
        if msg.get("method") == "notifications/cancelled":
            params = msg.get("params")
            rid = params.get("requestId") if isinstance(params, dict) else None
            task = self.calls.get(json.dumps(rid))
            if task is not None:
                task.cancel()
                return True
            return False
        if msg.get("method") != "tools/call" or "id" not in msg:
            return False
        params = msg.get("params")
        if not isinstance(params, dict) or params.get("name") != "run_command":
            return False
        try:
            run = run_params(params.get("arguments"), self.fwd.environ())
        except TenantryError as err:
            run, early = None, message_of(err)
        else:
            early = ""
        if run is None and not early:
            return False
        key = json.dumps(msg["id"])
        task = asyncio.get_running_loop().create_task(self._answer(msg["id"], run, early))
        self.calls[key] = task
        task.add_done_callback(lambda _t: self.calls.pop(key, None))
        return True

    async def _answer(self, rid: object, run: dict[str, Any] | None, early: str) -> None:
        if run is None:
            result = tool_error(early)
        else:
            try:
                out = await self.fwd.stream("commands.run", run, _ignore)
                out["origin"] = ORIGIN
                result = tool_result(out)
            except ToolError as exc:
                result = tool_error(str(exc))
            except asyncio.CancelledError:
                return  # the client cancelled: no answer (as the SDK does)
        self.answered += 1
        await self.write(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}) + "\n")

    async def drain(self) -> None:
        """Wait for the calls still running (stdin closed: answer them before leaving)."""
        if self.calls:
            await asyncio.gather(*self.calls.values(), return_exceptions=True)


async def _ignore(_chunk: dict[str, Any]) -> None:
    return None
